// SPDX-License-Identifier: Apache-2.0
/* conn: see conn.h. */
#include <arpa/inet.h>
#include <stdio.h>
#include <unistd.h>

#include "proxy/conn.h"
#include "proxy/limits.h"
#include "proxy/pool.h"

void conn_route_end(struct conn *c, int status)
{
	struct router_outcome o = {
	    .status = status,
	    .cached_tokens = c->rs.usage_on ? c->rs.usage.cached_tokens : -1,
	    .prompt_tokens = c->rs.usage_on ? c->rs.usage.prompt_tokens : -1,
	    .attempts = c->rq.attempts,
	    .ms = c->t_req ? (double)(clock_ns() - c->t_req) / 1e6 : 0,
	};

	router_done(c->p->router, &c->ticket, &o);
	c->rs.usage_on = false;
}

void conn_forget_request(struct conn *c)
{
	buf_reset(&c->fwd);
	buf_reset(&c->body);
	c->fwd_sent = 0;
	c->head_scan = 0;
	c->rq = (struct conn_req){0};
	c->rs = (struct conn_resp){0};
	limits_trim(c, PROXY_KEEP_BUF);
}

void conn_pipe_close(struct conn *c)
{
	for (int i = 0; i < 2; i++)
		if (c->pipe[i] >= 0)
			close(c->pipe[i]);
	c->pipe[0] = c->pipe[1] = -1;
	c->pipe_bytes = 0;
}

void conn_close(struct conn *c)
{
	struct proxy *p = c->p;

	if (c->ev.fd < 0)
		return;
	conn_route_end(c, c->rs.head_done ? c->rs.status : 0);
	if (c->up)
		pool_close(c->up);
	c->up = NULL;
	conn_pipe_close(c);
	loop_forget(&c->ev);
	close(c->ev.fd);
	c->ev.fd = -1;
	conn_list_unlink(&p->live, c);
	conn_list_push(&p->zombies, c);
	p->nlive--;
	metrics_gauge_add(p->st.active, -1);
	if (p->o.max_conns_per_ip)
		limits_ip_del(&p->ips, c->peer.sin_addr.s_addr);
	/* its buffers are freed at the reap; they no longer count */
	p->buffered -= c->acct;
	metrics_gauge_add(p->st.buffer_bytes, -(int64_t)c->acct);
	c->acct = 0;
}

const char *conn_show(const struct conn *c, char *out, size_t n)
{
	static const char *const states[] = {"HEAD", "BODY",   "CONNECT", "SEND",
					     "RESP", "TUNNEL", "CLOSING"};
	static const char *const names[] = CONN_FLAG_NAMES;
	char a[INET_ADDRSTRLEN] = "?";
	size_t at;
	int k;

	_Static_assert(sizeof(states) / sizeof(states[0]) == C_CLOSING + 1, "a name per state");
	_Static_assert(sizeof(names) / sizeof(names[0]) == 10, "a name per flag bit");
	if (!n)
		return out;
	inet_ntop(AF_INET, &c->peer.sin_addr, a, sizeof(a));
	k = snprintf(out, n, "conn %s:%u %s flags=", a, ntohs(c->peer.sin_port),
		     (unsigned)c->state <= C_CLOSING ? states[c->state] : "?");
	at = k < 0 ? 0 : (size_t)k;
	for (unsigned i = 0, first = 1; i < sizeof(names) / sizeof(names[0]) && at < n; i++) {
		if (!(c->flags & (1u << i)))
			continue;
		k = snprintf(out + at, n - at, "%s%s", first ? "" : "|", names[i]);
		at += k < 0 ? 0 : (size_t)k;
		first = 0;
	}
	if (at < n && !c->flags) {
		k = snprintf(out + at, n - at, "-");
		at += k < 0 ? 0 : (size_t)k;
	}
	if (at < n)
		snprintf(out + at, n - at,
			 " requests=%d service=%s endpoint=%s in=%zu out=%zu pipe=%zu upstream=%s",
			 c->requests, c->svc_name[0] ? c->svc_name : "-",
			 c->ep_name[0] ? c->ep_name : "-", buf_unread(&c->in), buf_unread(&c->out),
			 c->pipe_bytes,
			 !c->up		     ? "none"
			 : c->up->connecting ? "connecting"
					     : "open");
	return out;
}
