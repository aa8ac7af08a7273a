// SPDX-License-Identifier: Apache-2.0
/* upstream: see upstream.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/answer.h"
#include "proxy/conn.h"
#include "proxy/pool.h"
#include "proxy/upstream.h"

/* Opens a new upstream connection for c to endpoint idx at a: c is to wait for it to connect
 * (STEP_CONNECT), up to --connect-timeout. Returns false when the connect could not even start. */
static bool connect_upstream(struct conn *c, const struct sockaddr_in *a, int idx)
{
	c->up = pool_connect(c->p, a);
	if (!c->up)
		return false;
	c->up->c = c;
	c->up->ep_index = idx;
	c->deadline = clock_ms() + (uint64_t)c->p->o.connect_timeout_ms;
	return true;
}

enum step upstream_route(struct conn *c)
{
	struct proxy *p = c->p;
	const struct service *svc = services_find_name(p->svcs, c->svc_name);
	struct router_request rq = {0};
	int idx;

	for (;;) {
		if (!conn_has(c, CF_PASSTHROUGH)) {
			rq.method = c->rq.method;
			rq.method_len = strlen(c->rq.method);
			rq.target = c->fwd.data + c->rq.target_off;
			rq.target_len = c->rq.target_len;
			rq.head = c->fwd.data;
			rq.head_len = c->fwd.len;
			rq.body = c->body.data;
			rq.body_len = c->body.len;
		}
		rq.tried = c->rq.tried;
		rq.client = &c->peer;
		idx = svc ? router_pick(p->router, svc, &rq, &c->ticket) : -ENOENT;
		if (idx < 0) {
			if (conn_has(c, CF_PASSTHROUGH)) {
				conn_close(c);
				return STEP_GONE;
			}
			if (c->rq.attempts == 0)
				return answer_error(c, 503,
						    svc ? "the service has no endpoint"
							: "no service for this connection",
						    !c->rq.keep_alive);
			return answer_error(c, 502, "could not connect to any endpoint",
					    !c->rq.keep_alive);
		}
		c->rq.tried |= 1ULL << (idx % 64);
		c->rq.attempts++;
		if (c->rq.attempts == 1 && router_wants_usage(p->router, &c->ticket)) {
			c->rs.usage_on = true;
			openai_usage_init(&c->rs.usage);
		}
		snprintf(c->ep_name, sizeof(c->ep_name), "%s", svc->endpoints[idx].name);
		if (c->rq.attempts > 1)
			metrics_inc(p->st.up_retries);
		/* pass-through bytes (a TLS or HTTP/2 preface) must open a connection of their own
		 */
		c->up = conn_has(c, CF_PASSTHROUGH) ? NULL
						    : pool_take_idle(p, &svc->endpoints[idx].addr);
		if (c->up) {
			metrics_inc(p->st.up_reused);
			c->up->c = c;
			c->up->ep_index = idx;
			conn_touch(c);
			return STEP_SEND;
		}
		if (connect_upstream(c, &svc->endpoints[idx].addr, idx))
			return STEP_CONNECT;
		metrics_inc(p->st.up_connect_fail);
		log_debug("proxy", "connect to endpoint %s failed: %s", svc->endpoints[idx].name,
			  strerror(errno));
		router_connect_failed(p->router, &c->ticket);
	}
}

enum step upstream_send(struct conn *c)
{
	while (c->fwd_sent < c->fwd.len + c->body.len) {
		struct iovec iov[2];
		int niov = 0;
		ssize_t n;

		if (c->fwd_sent < c->fwd.len) {
			iov[niov].iov_base = c->fwd.data + c->fwd_sent;
			iov[niov++].iov_len = c->fwd.len - c->fwd_sent;
			if (c->body.len) {
				iov[niov].iov_base = c->body.data;
				iov[niov++].iov_len = c->body.len;
			}
		} else {
			iov[niov].iov_base = c->body.data + (c->fwd_sent - c->fwd.len);
			iov[niov++].iov_len = c->body.len - (c->fwd_sent - c->fwd.len);
		}
		n = writev(c->up->ev.fd, iov, niov);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return STEP_WAIT;
			return upstream_failed(c, false);
		}
		c->fwd_sent += (size_t)n;
		metrics_add(c->p->st.bytes_up, (uint64_t)n);
		conn_touch(c);
	}
	return STEP_SENT;
}

enum step upstream_failed(struct conn *c, bool connect_failed)
{
	struct proxy *p = c->p;
	struct sockaddr_in a = c->up->addr;
	bool reused = c->up->reused;
	int idx = c->up->ep_index;
	size_t sent = c->fwd_sent;

	pool_close(c->up);
	c->up = NULL;
	c->fwd_sent = 0;
	if (connect_failed) {
		metrics_inc(p->st.up_connect_fail);
		router_connect_failed(p->router, &c->ticket);
		return upstream_route(c);
	}
	/* The server closed a pooled connection as we reused it (its keep-alive timeout): same
	 * endpoint, new connection, once; but a POST that may have reached the worker is not
	 * sent twice (only when not one byte of it was written), unless it is retry-safe. */
	if (reused && !c->rq.fresh_retry && (sent == 0 || c->rq.retry_safe)) {
		c->rq.fresh_retry = true;
		metrics_inc(p->st.up_retries);
		if (connect_upstream(c, &a, idx))
			return STEP_CONNECT;
		metrics_inc(p->st.up_connect_fail);
		return upstream_route(c);
	}
	metrics_inc(p->st.up_reset);
	if (conn_has(c, CF_PASSTHROUGH)) {
		conn_close(c);
		return STEP_GONE;
	}
	if (sent == 0 || (c->rq.retry_safe && !c->rq.lost_retry)) {
		/* the worker went away with the request (killed, restarted) and nothing of its
		 * answer reached the client: another endpoint (once only when it was sent: a
		 * request that kills the workers it reaches must not take them all down) */
		c->rq.lost_retry = sent > 0;
		return upstream_route(c);
	}
	return answer_error(c, 502, "the endpoint closed the connection without a response", true);
}

enum step upstream_abandon(struct conn *c)
{
	struct proxy *p = c->p;
	char show[CONN_SHOW_MAX];

	if (conn_has(c, CF_PASSTHROUGH) || !c->up)
		return STEP_WAIT;
	if (!c->rs.started) {
		if (!c->rq.retry_safe)
			return STEP_WAIT;
		log_info("proxy",
			 "endpoint %s stopped answering: its request retried elsewhere (%s)",
			 c->ep_name, conn_show(c, show, sizeof(show)));
		metrics_inc(p->st.up_abandoned_retried);
		pool_close(c->up);
		c->up = NULL;
		c->fwd_sent = 0;
		return upstream_route(c);
	}
	if (clock_ms() < c->t_moved + PROXY_HUNG_SILENCE_MS)
		return STEP_WAIT;
	log_info("proxy", "endpoint %s stopped answering mid-response: the response is cut (%s)",
		 c->ep_name, conn_show(c, show, sizeof(show)));
	metrics_inc(p->st.up_abandoned_cut);
	pool_close(c->up);
	c->up = NULL;
	c->out_hold = 0;
	return STEP_CLOSE;
}
