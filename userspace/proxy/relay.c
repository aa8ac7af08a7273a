// SPDX-License-Identifier: Apache-2.0
/* relay: see relay.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "proxy/answer.h"
#include "proxy/conn.h"
#include "proxy/pool.h"
#include "proxy/relay.h"

enum step relay_flush(struct conn *c)
{
	struct proxy *p = c->p;
	bool relay = c->state == C_SEND || c->state == C_RESP || c->state == C_TUNNEL;
	size_t moved = 0;

	/* Invariant: bytes enter the pipe only while out is empty, so pipe bytes always precede
	 * out bytes. */
	while (c->pipe_bytes) {
		ssize_t n = splice(c->pipe[0], NULL, c->ev.fd, NULL, c->pipe_bytes,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				goto out;
			metrics_inc(p->st.client_aborts);
			conn_close(c);
			return STEP_GONE;
		}
		c->pipe_bytes -= (size_t)n;
		moved += (size_t)n;
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
	while (conn_out_sendable(c)) {
		ssize_t n = write(c->ev.fd, buf_rptr(&c->out), conn_out_sendable(c));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				goto out;
			metrics_inc(p->st.client_aborts);
			conn_close(c);
			return STEP_GONE;
		}
		buf_consume(&c->out, (size_t)n);
		moved += (size_t)n;
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
out:
	if (moved && relay)
		conn_touch(c); /* a client reading the relay keeps it alive */
	return STEP_WAIT;
}

/* The response is over: booked, its upstream connection pooled or closed, the request
 * forgotten. Returns STEP_NEXT (keep-alive) or STEP_CLOSE. */
static enum step response_done(struct conn *c)
{
	struct proxy *p = c->p;
	bool keep;

	metrics_observe(p->st.duration, (double)(clock_ns() - c->t_req) / 1e9);
	conn_route_end(c, c->rs.status);
	if (c->rs.status >= 100 && c->rs.status < 600)
		metrics_inc(p->st.resp[c->rs.status / 100]);
	if (c->up) {
		if (c->rs.keep_alive && !c->rs.extra)
			pool_release(c->up);
		else
			pool_close(c->up);
		c->up = NULL;
	}
	/* a client that half-closed after pipelining requests gets them all answered; while
	 * draining, a connection stays only if its response announced keep-alive (its client may
	 * send again at once: it is answered, with "Connection: close") */
	keep = c->rq.keep_alive && c->rs.keep_alive && !conn_has(c, CF_CLOSE_AFTER) &&
	       !c->rs.close_announced &&
	       (!conn_has(c, CF_CLI_RDHUP) || (conn_has(c, CF_CLI_DONE) && buf_unread(&c->in)));
	conn_forget_request(c);
	c->t_req = 0;
	if (!keep)
		return STEP_CLOSE;
	conn_set(c, CF_SNIFFED); /* later requests must be HTTP: no pass-through mid-connection */
	c->t_idle = clock_ms();
	c->deadline = c->t_idle + (uint64_t)p->o.idle_timeout_ms;
	return STEP_NEXT;
}

/* The response's last bytes go to the client first, then its end is booked (response_done: the
 * router may finish a prompt's tokens there, router_done). Returns response_done's outcome, or
 * STEP_GONE when the client was lost (the connection is closed). */
static enum step end_flushed(struct conn *c)
{
	if (relay_flush(c) == STEP_GONE)
		return STEP_GONE;
	return response_done(c);
}

/* Replaces the response head m (rc bytes, the first of the out_hold bytes held at the tail of out)
 * by the same head saying "Connection: close" (draining). Returns the new head's length, or -1
 * out of memory (the connection was closed). */
static int head_close(struct conn *c, const struct http_msg *m, size_t rc)
{
	struct buf h = {0};
	size_t hold = c->out_hold, at, rest = c->out_hold - rc, n;

	if (http_write_response_head_close(&h, m) < 0 ||
	    (h.len > rc && buf_reserve(&c->out, h.len - rc) < 0)) {
		buf_free(&h);
		conn_close(c);
		return -1;
	}
	at = c->out.len - hold; /* after buf_reserve, which may have moved the bytes */
	memmove(c->out.data + at + h.len, c->out.data + at + rc, rest);
	memcpy(c->out.data + at, h.data, h.len);
	c->out.len = at + h.len + rest;
	c->out.data[c->out.len] = '\0';
	c->out_hold = h.len + rest;
	c->rs.close_announced = true;
	n = h.len;
	buf_free(&h);
	return (int)n;
}

/* Frames the response bytes held at the tail of out, and ends the response once it is complete
 * (end_flushed's outcome). Returns STEP_WAIT when more is needed, STEP_TUNNEL after a 101, or when
 * the response is broken the outcome of answering (or cutting) it. */
static enum step response_frame(struct conn *c)
{
	struct proxy *p = c->p;

	while (!c->rs.head_done && c->out_hold) {
		const char *d = c->out.data + c->out.len - c->out_hold;
		struct http_msg m;
		int rc = http_parse_response(d, c->out_hold, p->o.max_head, c->rq.method, &m);

		if (rc == 0)
			return STEP_WAIT;
		if (rc < 0 || (m.status == 101 && !c->rq.upgrade)) {
			metrics_inc(p->st.up_bad_resp);
			/* nothing of this response reached the client yet */
			c->out.len -= c->out_hold;
			c->out_hold = 0;
			return answer_error(c, 502, "malformed response from the endpoint", true);
		}
		c->rs.status = m.status;
		if (p->draining && m.status >= 200 && m.keep_alive) {
			/* this process is going away: the client must not send another request on
			 * this connection, so the response tells it (the body is unchanged) */
			rc = head_close(c, &m, (size_t)rc);
			if (rc < 0)
				return STEP_GONE;
		}
		c->out_hold -= (size_t)rc;
		if (m.status < 200 && m.status != 101)
			continue; /* 1xx: relayed, the real response follows */
		c->rs.head_done = true;
		c->rs.keep_alive = m.keep_alive;
		c->rs.framing = m.body;
		c->rs.left = m.content_length;
		if (m.status == 101) {
			/* switched protocols: only now do bytes flow both ways (the client's bytes
			 * sent meanwhile waited in c->in, unparsed and unforwarded) */
			metrics_inc(p->st.upgrades);
			c->rs.framing = HTTP_BODY_EOF;
			c->rs.keep_alive = false;
			c->out_hold = 0;
			conn_touch(c);
			return STEP_TUNNEL;
		}
	}
	if (!c->rs.head_done)
		return STEP_WAIT;
	if (c->out_hold || c->rs.framing == HTTP_BODY_NONE)
		router_first_byte(p->router, &c->ticket);
	switch (c->rs.framing) {
	case HTTP_BODY_NONE:
		break;
	case HTTP_BODY_LENGTH: {
		size_t take = c->out_hold < c->rs.left ? c->out_hold : (size_t)c->rs.left;

		if (c->rs.usage_on)
			openai_usage_feed(&c->rs.usage, c->out.data + c->out.len - c->out_hold,
					  take);
		c->rs.left -= take;
		c->out_hold -= take;
		if (c->rs.left)
			return STEP_WAIT;
		break;
	}
	case HTTP_BODY_CHUNKED: {
		bool done = false;
		struct buf *dec = c->rs.usage_on ? &p->scratch : NULL;
		ssize_t used = http_chunked_feed(
		    &c->rs.chunk, c->out.data + c->out.len - c->out_hold, c->out_hold, dec, &done);

		if (dec) {
			openai_usage_feed(&c->rs.usage, buf_rptr(dec), buf_unread(dec));
			buf_reset(dec);
		}
		if (used < 0) {
			/* part of the response is out already: all we can do is cut it */
			metrics_inc(p->st.up_bad_resp);
			c->out.len -= c->out_hold;
			c->out_hold = 0;
			c->rs.keep_alive = false;
			conn_set(c, CF_CLOSE_AFTER);
			return end_flushed(c);
		}
		c->out_hold -= (size_t)used;
		if (!done)
			return STEP_WAIT;
		break;
	}
	case HTTP_BODY_EOF:
		if (c->rs.usage_on)
			openai_usage_feed(&c->rs.usage, c->out.data + c->out.len - c->out_hold,
					  c->out_hold);
		c->out_hold = 0;
		return STEP_WAIT; /* ends when the upstream closes */
	}
	if (c->out_hold) {
		/* bytes after the end of the response: the server is out of step, drop them and
		 * the connection */
		c->out.len -= c->out_hold;
		c->out.data[c->out.len] = '\0';
		c->out_hold = 0;
		c->rs.extra = true;
	}
	return end_flushed(c);
}

/* Can the rest of this response body go by splice(2)? */
static bool splice_ok(const struct conn *c)
{
	return c->p->o.relay == PROXY_RELAY_SPLICE && c->rs.head_done &&
	       ((c->rs.framing == HTTP_BODY_LENGTH && c->rs.left >= PROXY_SPLICE_MIN) ||
		c->rs.framing == HTTP_BODY_EOF) &&
	       !conn_out_sendable(c) && !c->out_hold;
}

static int pipe_open(struct conn *c)
{
	if (c->pipe[0] >= 0)
		return 0;
	if (pipe2(c->pipe, O_NONBLOCK | O_CLOEXEC) < 0)
		return -1;
	fcntl(c->pipe[1], F_SETPIPE_SZ, PROXY_PIPE_SIZE);
	return 0;
}

enum step relay_response(struct conn *c)
{
	struct proxy *p = c->p;
	size_t moved = 0;

	while (moved < PROXY_BURST) {
		ssize_t n;

		if (relay_flush(c) == STEP_GONE)
			return STEP_GONE;
		if (conn_out_sendable(c) >= PROXY_HIGH_WATER || c->pipe_bytes)
			return STEP_WAIT; /* wait for the client */
		if (splice_ok(c) && pipe_open(c) == 0) {
			size_t want = c->rs.framing == HTTP_BODY_LENGTH ? (size_t)c->rs.left
									: PROXY_PIPE_SIZE;

			if (want > PROXY_PIPE_SIZE)
				want = PROXY_PIPE_SIZE;
			n = splice(c->up->ev.fd, NULL, c->pipe[1], NULL, want,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				c->rs.started = true;
				router_first_byte(p->router, &c->ticket);
				c->pipe_bytes += (size_t)n;
				moved += (size_t)n;
				conn_touch(c);
				if (c->rs.framing == HTTP_BODY_LENGTH) {
					c->rs.left -= (uint64_t)n;
					if (!c->rs.left)
						return end_flushed(c);
				}
				continue;
			}
		} else {
			if (buf_reserve(&c->out, PROXY_READ_CHUNK) < 0) {
				conn_close(c);
				return STEP_GONE;
			}
			n = read(c->up->ev.fd, c->out.data + c->out.len,
				 c->out.cap - c->out.len - 1);
			if (n > 0) {
				enum step s;

				c->rs.started = true;
				c->out.len += (size_t)n;
				c->out.data[c->out.len] = '\0';
				c->out_hold += (size_t)n;
				moved += (size_t)n;
				conn_touch(c);
				s = response_frame(c);
				if (s != STEP_WAIT)
					return s;
				continue;
			}
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return STEP_WAIT;
		/* EOF or error from the upstream */
		if (!c->rs.started)
			return STEP_UPSTREAM_LOST;
		pool_close(c->up);
		c->up = NULL;
		if (n == 0 && c->rs.head_done && c->rs.framing == HTTP_BODY_EOF) {
			c->rs.keep_alive = false;
			return response_done(c);
		}
		/* a truncated response: cut the client too */
		metrics_inc(p->st.up_reset);
		if (!c->rs.head_done && c->out_hold) {
			c->out.len -= c->out_hold;
			c->out.data[c->out.len] = '\0';
			c->out_hold = 0;
			return answer_error(
			    c, 502, "the endpoint closed the connection mid-response", true);
		}
		c->out_hold = 0;
		return STEP_CLOSE;
	}
	return STEP_WAIT;
}

enum step relay_tunnel(struct conn *c)
{
	struct proxy *p = c->p;

	for (int round = 0; round < 64; round++) {
		bool progress = false;
		ssize_t n;

		/* client → upstream */
		if (!conn_has(c, CF_CLI_EOF) && buf_unread(&c->in) < PROXY_HIGH_WATER) {
			if (buf_reserve(&c->in, PROXY_READ_CHUNK) < 0)
				goto fail;
			n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
			if (n > 0) {
				c->in.len += (size_t)n;
				progress = true;
			} else if (n == 0) {
				conn_set(c, CF_CLI_EOF);
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				goto fail;
			}
		}
		while (buf_unread(&c->in)) {
			n = write(c->up->ev.fd, buf_rptr(&c->in), buf_unread(&c->in));
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				goto fail;
			}
			buf_consume(&c->in, (size_t)n);
			metrics_add(p->st.bytes_up, (uint64_t)n);
			progress = true;
		}
		if (conn_has(c, CF_CLI_EOF) && !buf_unread(&c->in) && !conn_has(c, CF_UP_SHUT)) {
			shutdown(c->up->ev.fd, SHUT_WR);
			conn_set(c, CF_UP_SHUT);
		}
		/* upstream → client */
		if (!conn_has(c, CF_UP_EOF) && !c->pipe_bytes &&
		    buf_unread(&c->out) < PROXY_HIGH_WATER) {
			if (p->o.relay == PROXY_RELAY_SPLICE && !buf_unread(&c->out) &&
			    pipe_open(c) == 0) {
				n = splice(c->up->ev.fd, NULL, c->pipe[1], NULL, PROXY_PIPE_SIZE,
					   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
				if (n > 0)
					c->pipe_bytes += (size_t)n;
			} else {
				if (buf_reserve(&c->out, PROXY_READ_CHUNK) < 0)
					goto fail;
				n = read(c->up->ev.fd, c->out.data + c->out.len,
					 c->out.cap - c->out.len - 1);
				if (n > 0)
					c->out.len += (size_t)n;
			}
			if (n > 0) {
				progress = true;
			} else if (n == 0) {
				conn_set(c, CF_UP_EOF);
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				goto fail;
			}
		}
		if (relay_flush(c) == STEP_GONE)
			return STEP_GONE;
		if (conn_has(c, CF_UP_EOF) && !conn_out_sendable(c) && !c->pipe_bytes &&
		    !conn_has(c, CF_CLI_SHUT)) {
			shutdown(c->ev.fd, SHUT_WR);
			conn_set(c, CF_CLI_SHUT);
		}
		if (conn_has(c, CF_CLI_SHUT) && conn_has(c, CF_UP_SHUT)) {
			conn_close(c);
			return STEP_GONE;
		}
		if (!progress)
			break;
		conn_touch(c);
	}
	return STEP_WAIT;
fail:
	conn_close(c);
	return STEP_GONE;
}
