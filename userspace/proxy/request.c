// SPDX-License-Identifier: Apache-2.0
/* proxy_request: a request's way to an endpoint (see proxy_int.h): its head and whole body read
 * and checked against the limits, an endpoint chosen by the router, the request written over a
 * pooled or new upstream connection, and the retry decision when that connection fails before
 * any response byte. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/types.h"

void request_reset(struct conn *c)
{
	buf_reset(&c->fwd);
	buf_reset(&c->body);
	c->fwd_sent = 0;
	c->head_scan = 0;
	c->rq = (struct conn_req){0};
	c->rs = (struct conn_resp){0};
	limits_trim(c, PROXY_KEEP_BUF);
}

static void start_passthrough(struct conn *c)
{
	metrics_inc(c->p->st.passthrough);
	c->passthrough = true;
	c->t_req = clock_ns();
	request_route(c);
}

/* May a request be sent again after its connection failed without a response? RFC 9110 9.2.2
 * lets a client retry idempotent methods; anything else may have been acted on (but see
 * conn_req.retry_safe for OpenAI completions). */
static bool method_idempotent(const char *m)
{
	static const char *const ok[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(m, ok[i]) == 0)
			return true;
	return false;
}

/* The head of the request is in m (pointing into c->in, rc bytes): checks it against what the
 * proxy serves and its limits, and prepares the forwarded head. Returns 0 to go on with the body,
 * -1 when the request was answered (or the connection closed). */
static int request_head(struct conn *c, const struct http_msg *m, int rc)
{
	struct proxy *p = c->p;
	uint64_t need = m->body == HTTP_BODY_LENGTH ? m->content_length : 0;
	char client[INET_ADDRSTRLEN] = "";

	metrics_inc(p->st.requests);
	c->requests++;
	snprintf(c->rq.method, sizeof(c->rq.method), "%.*s", (int)m->method_len, m->method);
	c->rq.keep_alive = m->keep_alive;
	c->rq.upgrade = m->upgrade;
	c->rq.framing = m->body;
	c->rq.retry_safe =
	    method_idempotent(c->rq.method) ||
	    openai_endpoint_of(m->method, m->method_len, m->target, m->target_len) != OPENAI_NONE;
	if (strcmp(c->rq.method, "CONNECT") == 0) {
		/* a tunnel to anywhere is not what an OpenAI endpoint is for; its bytes after the
		 * head are not HTTP, so the connection closes */
		conn_error(c, 405, "CONNECT is not supported", true);
		return -1;
	}
	if (need > p->o.max_body) {
		conn_error(c, 413, "request body is larger than the proxy's limit", true);
		return -1;
	}
	if (limits_buffered_over(p, need + (size_t)rc)) {
		/* without the body read, the connection cannot go on with another request */
		bool close = m->body != HTTP_BODY_NONE || !m->keep_alive;

		if (!close)
			buf_consume(&c->in, (size_t)rc);
		conn_shed(
		    c, p->st.shed_buffered,
		    "kvsplice is buffering too many request bytes (--max-buffered); retry later",
		    close);
		return -1;
	}
	c->rq.body_left = m->content_length;
	if (p->o.forwarded_for && !inet_ntop(AF_INET, &c->peer.sin_addr, client, sizeof(client)))
		client[0] = '\0';
	if (http_write_request_head(&c->fwd, m, m->body == HTTP_BODY_LENGTH, m->content_length,
				    m->upgrade,
				    p->o.forwarded_for && client[0] ? client : NULL) < 0)
		goto nomem;
	c->rq.target_off = m->method_len + 1;
	c->rq.target_len = m->target_len;
	if (m->body == HTTP_BODY_CHUNKED) {
		/* the decoded length is known at the end: the head ends there */
		c->fwd.len -= 2;
		c->fwd.data[c->fwd.len] = '\0';
	}
	/* the whole body is held: exactly its size, counted at once against --max-buffered */
	if (need && limits_buf_exact(&c->body, (size_t)need) < 0)
		goto nomem;
	conn_account(c);
	if (m->expect_continue && m->minor_version == 1 && m->body != HTTP_BODY_NONE &&
	    buf_unread(&c->in) == (size_t)rc) {
		if (buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
			goto nomem;
		c->rq.expect_sent = true;
	}
	buf_consume(&c->in, (size_t)rc);
	c->head_scan = 0;
	c->state = C_BODY;
	return 0;
nomem:
	conn_close(c);
	return -1;
}

int request_read(struct conn *c)
{
	struct proxy *p = c->p;
	struct http_msg m;
	int rc = 0;

	if (c->state == C_HEAD) {
		size_t n = buf_unread(&c->in);
		const char *d = buf_rptr(&c->in), *end;
		size_t from;

		if (!n)
			return 0;
		if (!c->t_req)
			c->t_req = clock_ns();
		from = c->head_scan > 3 ? c->head_scan - 3 : 0;
		if (!c->sniffed) {
			/* Is this HTTP/1.x at all? Decided on the request line (its first 512
			 * bytes at most). */
			size_t k = n < 512 ? n : 512;

			if (!http_sniff_request(d, k)) {
				start_passthrough(c);
				return 1;
			}
			if (n >= 512 || memchr(d + c->head_scan, '\n', n - c->head_scan)) {
				c->sniffed = true;
				/* refuse a broken request line now, not at the blank line */
				rc = http_parse_request(d, n, p->o.max_head, &m);
				if (rc < 0)
					goto bad;
			}
		}
		/* Parse only when the blank line has arrived (or the limit is reached): a head
		 * trickling in byte by byte is scanned once, not re-parsed per byte. */
		end = n > from ? memmem(d + from, n - from, "\r\n\r\n", 4) : NULL;
		c->head_scan = n;
		if (!end && n < p->o.max_head)
			return 0;
		rc = http_parse_request(d, n, p->o.max_head, &m);
		if (rc == 0)
			return 0;
		if (rc < 0)
			goto bad;
		if (request_head(c, &m, rc) < 0)
			return -1;
	}
	if (c->state == C_BODY) {
		size_t n = buf_unread(&c->in);

		if (c->rq.framing == HTTP_BODY_LENGTH) {
			size_t take = n < c->rq.body_left ? n : (size_t)c->rq.body_left;

			if (buf_append(&c->body, buf_rptr(&c->in), take) < 0)
				goto nomem;
			buf_consume(&c->in, take);
			c->rq.body_left -= take;
			if (c->rq.body_left)
				return 0;
		} else if (c->rq.framing == HTTP_BODY_CHUNKED) {
			bool done = false;
			ssize_t used =
			    http_chunked_feed(&c->rq.chunk, buf_rptr(&c->in), n, &c->body, &done);

			if (used < 0) {
				conn_error(c, 400, "malformed chunked request body", true);
				return -1;
			}
			buf_consume(&c->in, (size_t)used);
			c->rq.body_raw += (uint64_t)used;
			if (c->rq.chunk.total > p->o.max_body ||
			    c->rq.body_raw > 2 * (uint64_t)p->o.max_body + (64 << 10)) {
				conn_error(c, 413, "request body is larger than the proxy's limit",
					   true);
				return -1;
			}
			conn_account(c);
			if (limits_buffered_over(p, 0)) {
				conn_shed(c, p->st.shed_buffered,
					  "kvsplice is buffering too many request bytes "
					  "(--max-buffered); retry later",
					  true);
				return -1;
			}
			if (!done)
				return 0;
			if (buf_printf(&c->fwd, "Content-Length: %zu\r\n\r\n", c->body.len) < 0)
				goto nomem;
		}
		request_route(c);
		return 1;
	}
	return 0;
bad:
	switch (rc) {
	case -431:
		conn_error(c, 431, "request head is larger than the proxy's limit", true);
		break;
	case -501:
		conn_error(c, 501, "unsupported transfer coding", true);
		break;
	case -505:
		conn_error(c, 505, "unsupported HTTP version", true);
		break;
	default:
		conn_error(c, 400, "malformed HTTP request", true);
		break;
	}
	return -1;
nomem:
	conn_close(c);
	return -1;
}

/* Opens a new upstream connection for c to endpoint idx at a: c waits for it to connect, up to
 * --connect-timeout. Returns false when the connect could not even start. */
static bool connect_upstream(struct conn *c, const struct sockaddr_in *a, int idx)
{
	c->up = up_connect(c->p, a);
	if (!c->up)
		return false;
	c->up->c = c;
	c->up->ep_index = idx;
	c->state = C_CONNECT;
	c->deadline = clock_ms() + (uint64_t)c->p->o.connect_timeout_ms;
	return true;
}

void request_route(struct conn *c)
{
	struct proxy *p = c->p;
	const struct service *svc = services_find_name(p->svcs, c->svc_name);
	struct router_request rq = {0};
	int idx;

	for (;;) {
		if (!c->passthrough) {
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
			if (c->passthrough) {
				conn_close(c);
			} else if (c->rq.attempts == 0) {
				conn_error(c, 503,
					   svc ? "the service has no endpoint"
					       : "no service for this connection",
					   !c->rq.keep_alive);
			} else {
				conn_error(c, 502, "could not connect to any endpoint",
					   !c->rq.keep_alive);
			}
			return;
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
		c->up = c->passthrough ? NULL : up_take_idle(p, &svc->endpoints[idx].addr);
		if (c->up) {
			metrics_inc(p->st.up_reused);
			c->up->c = c;
			c->up->ep_index = idx;
			c->state = C_SEND;
			conn_touch(c);
			return;
		}
		if (connect_upstream(c, &svc->endpoints[idx].addr, idx))
			return;
		metrics_inc(p->st.up_connect_fail);
		log_debug("proxy", "connect to endpoint %s failed: %s", svc->endpoints[idx].name,
			  strerror(errno));
		router_connect_failed(p->router, &c->ticket);
	}
}

int request_send(struct conn *c)
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
				return 0;
			upstream_failed(c, false);
			return -1;
		}
		c->fwd_sent += (size_t)n;
		metrics_add(c->p->st.bytes_up, (uint64_t)n);
		conn_touch(c);
	}
	return 1;
}

void upstream_failed(struct conn *c, bool connect_failed)
{
	struct proxy *p = c->p;
	struct sockaddr_in a = c->up->addr;
	bool reused = c->up->reused;
	int idx = c->up->ep_index;
	size_t sent = c->fwd_sent;

	up_close(c->up);
	c->up = NULL;
	c->fwd_sent = 0;
	if (connect_failed) {
		metrics_inc(p->st.up_connect_fail);
		router_connect_failed(p->router, &c->ticket);
		request_route(c);
		return;
	}
	/* The server closed a pooled connection as we reused it (its keep-alive timeout): same
	 * endpoint, new connection, once; but a POST that may have reached the worker is not
	 * sent twice (only when not one byte of it was written), unless it is retry-safe. */
	if (reused && !c->rq.fresh_retry && (sent == 0 || c->rq.retry_safe)) {
		c->rq.fresh_retry = true;
		metrics_inc(p->st.up_retries);
		if (connect_upstream(c, &a, idx))
			return;
		metrics_inc(p->st.up_connect_fail);
		request_route(c);
		return;
	}
	metrics_inc(p->st.up_reset);
	if (c->passthrough) {
		conn_close(c);
		return;
	}
	if (sent == 0 || (c->rq.retry_safe && !c->rq.lost_retry)) {
		/* the worker went away with the request (killed, restarted) and nothing of its
		 * answer reached the client: another endpoint (once only when it was sent: a
		 * request that kills the workers it reaches must not take them all down) */
		c->rq.lost_retry = sent > 0;
		request_route(c);
		return;
	}
	conn_error(c, 502, "the endpoint closed the connection without a response", true);
}

void request_abandon(struct conn *c)
{
	struct proxy *p = c->p;

	if (c->passthrough || !c->up)
		return;
	if (!c->rs.started) {
		if (!c->rq.retry_safe)
			return;
		log_info("proxy", "endpoint %s stopped answering: its request retried elsewhere",
			 c->ep_name);
		metrics_inc(p->st.up_abandoned_retried);
		up_close(c->up);
		c->up = NULL;
		c->fwd_sent = 0;
		request_route(c);
		conn_progress(c);
		return;
	}
	if (clock_ms() < c->t_moved + PROXY_HUNG_SILENCE_MS)
		return;
	log_info("proxy", "endpoint %s stopped answering mid-response: the response is cut",
		 c->ep_name);
	metrics_inc(p->st.up_abandoned_cut);
	up_close(c->up);
	c->up = NULL;
	c->out_hold = 0;
	c->state = C_CLOSING;
	conn_progress(c);
}
