// SPDX-License-Identifier: Apache-2.0
/* proxy_relay: bytes towards the client (see proxy_int.h): the response is framed as it streams
 * past (so the upstream connection can be pooled at its end and the usage read), moved by
 * read/write or splice(2), and tunnels (pass-through, or after a 101) move bytes both ways. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "proxy/types.h"

int client_flush(struct conn *c)
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
			return -1;
		}
		c->pipe_bytes -= (size_t)n;
		moved += (size_t)n;
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
	while (out_sendable(c)) {
		ssize_t n = write(c->ev.fd, buf_rptr(&c->out), out_sendable(c));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				goto out;
			metrics_inc(p->st.client_aborts);
			conn_close(c);
			return -1;
		}
		buf_consume(&c->out, (size_t)n);
		moved += (size_t)n;
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
out:
	if (moved && relay)
		conn_touch(c); /* a client reading the relay keeps it alive */
	return 0;
}

static void response_done(struct conn *c)
{
	struct proxy *p = c->p;
	bool keep;

	metrics_observe(p->st.duration, (double)(clock_ns() - c->t_req) / 1e9);
	route_end(c, c->rs.status);
	if (c->rs.status >= 100 && c->rs.status < 600)
		metrics_inc(p->st.resp[c->rs.status / 100]);
	if (c->up) {
		if (c->rs.keep_alive && !c->rs.extra)
			up_release(c->up);
		else
			up_close(c->up);
		c->up = NULL;
	}
	/* a client that half-closed after pipelining requests gets them all answered; while
	 * draining, a connection stays only if its response announced keep-alive (its client may
	 * send again at once: it is answered, with "Connection: close") */
	keep = c->rq.keep_alive && c->rs.keep_alive && !c->close_after && !c->rs.close_announced &&
	       (!c->rdhup_seen || (c->cli_done && buf_unread(&c->in)));
	request_reset(c);
	c->t_req = 0;
	if (!keep) {
		c->state = C_CLOSING;
		return;
	}
	c->state = C_HEAD;
	c->sniffed = true; /* later requests must be HTTP: no pass-through mid-connection */
	c->t_idle = clock_ms();
	c->deadline = c->t_idle + (uint64_t)p->o.idle_timeout_ms;
}

/* The response's last bytes go to the client first, then its end is booked (response_done: the
 * router may finish a prompt's tokens there, router_done). Returns 0, or -1 when the client was
 * lost (the connection is closed). */
static int end_flushed(struct conn *c)
{
	if (client_flush(c) < 0)
		return -1;
	response_done(c);
	return 0;
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

/* Frames the response bytes held at the tail of out. Returns 1 when the response is complete, 0
 * when more is needed, -1 when it is broken (the connection was handled). */
static int response_frame(struct conn *c)
{
	struct proxy *p = c->p;

	while (!c->rs.head_done && c->out_hold) {
		const char *d = c->out.data + c->out.len - c->out_hold;
		struct http_msg m;
		int rc = http_parse_response(d, c->out_hold, p->o.max_head, c->rq.method, &m);

		if (rc == 0)
			return 0;
		if (rc < 0 || (m.status == 101 && !c->rq.upgrade)) {
			metrics_inc(p->st.up_bad_resp);
			/* nothing of this response reached the client yet */
			c->out.len -= c->out_hold;
			c->out_hold = 0;
			conn_error(c, 502, "malformed response from the endpoint", true);
			return -1;
		}
		c->rs.status = m.status;
		if (p->draining && m.status >= 200 && m.keep_alive) {
			/* this process is going away: the client must not send another request on
			 * this connection, so the response tells it (the body is unchanged) */
			rc = head_close(c, &m, (size_t)rc);
			if (rc < 0)
				return -1;
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
			c->state = C_TUNNEL;
			c->out_hold = 0;
			conn_touch(c);
			return 0;
		}
	}
	if (!c->rs.head_done)
		return 0;
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
			return 0;
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
			c->close_after = true;
			return 1;
		}
		c->out_hold -= (size_t)used;
		if (!done)
			return 0;
		break;
	}
	case HTTP_BODY_EOF:
		if (c->rs.usage_on)
			openai_usage_feed(&c->rs.usage, c->out.data + c->out.len - c->out_hold,
					  c->out_hold);
		c->out_hold = 0;
		return 0; /* ends when the upstream closes */
	}
	if (c->out_hold) {
		/* bytes after the end of the response: the server is out of step, drop them and
		 * the connection */
		c->out.len -= c->out_hold;
		c->out.data[c->out.len] = '\0';
		c->out_hold = 0;
		c->rs.extra = true;
	}
	return 1;
}

/* Can the rest of this response body go by splice(2)? */
static bool splice_ok(const struct conn *c)
{
	return c->p->o.relay == PROXY_RELAY_SPLICE && c->rs.head_done &&
	       ((c->rs.framing == HTTP_BODY_LENGTH && c->rs.left >= PROXY_SPLICE_MIN) ||
		c->rs.framing == HTTP_BODY_EOF) &&
	       !out_sendable(c) && !c->out_hold;
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

int response_pump(struct conn *c)
{
	struct proxy *p = c->p;
	size_t moved = 0;

	while (c->state == C_RESP && moved < PROXY_BURST) {
		ssize_t n;

		if (client_flush(c) < 0)
			return -1;
		if (out_sendable(c) >= PROXY_HIGH_WATER || c->pipe_bytes)
			return 0; /* wait for the client */
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
					if (!c->rs.left && end_flushed(c) < 0)
						return -1;
				}
				continue;
			}
		} else {
			if (buf_reserve(&c->out, PROXY_READ_CHUNK) < 0) {
				conn_close(c);
				return -1;
			}
			n = read(c->up->ev.fd, c->out.data + c->out.len,
				 c->out.cap - c->out.len - 1);
			if (n > 0) {
				int r;

				c->rs.started = true;
				c->out.len += (size_t)n;
				c->out.data[c->out.len] = '\0';
				c->out_hold += (size_t)n;
				moved += (size_t)n;
				conn_touch(c);
				r = response_frame(c);
				if (r < 0)
					return -1;
				if (r == 1 && end_flushed(c) < 0)
					return -1;
				continue;
			}
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		/* EOF or error from the upstream */
		if (!c->rs.started) {
			upstream_failed(c, false);
			return -1;
		}
		up_close(c->up);
		c->up = NULL;
		if (n == 0 && c->rs.head_done && c->rs.framing == HTTP_BODY_EOF) {
			c->rs.keep_alive = false;
			response_done(c);
			return 0;
		}
		/* a truncated response: cut the client too */
		metrics_inc(p->st.up_reset);
		if (!c->rs.head_done && c->out_hold) {
			c->out.len -= c->out_hold;
			c->out.data[c->out.len] = '\0';
			c->out_hold = 0;
			conn_error(c, 502, "the endpoint closed the connection mid-response", true);
			return -1;
		}
		c->out_hold = 0;
		c->state = C_CLOSING;
		return 0;
	}
	return 0;
}

int tunnel_pump(struct conn *c)
{
	struct proxy *p = c->p;
	struct conn_tunnel *t = &c->tn;

	for (int round = 0; round < 64; round++) {
		bool progress = false;
		ssize_t n;

		/* client → upstream */
		if (!t->cli_eof && buf_unread(&c->in) < PROXY_HIGH_WATER) {
			if (buf_reserve(&c->in, PROXY_READ_CHUNK) < 0)
				goto fail;
			n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
			if (n > 0) {
				c->in.len += (size_t)n;
				progress = true;
			} else if (n == 0) {
				t->cli_eof = true;
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
		if (t->cli_eof && !buf_unread(&c->in) && !t->up_shut) {
			shutdown(c->up->ev.fd, SHUT_WR);
			t->up_shut = true;
		}
		/* upstream → client */
		if (!t->up_eof && !c->pipe_bytes && buf_unread(&c->out) < PROXY_HIGH_WATER) {
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
				t->up_eof = true;
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				goto fail;
			}
		}
		if (client_flush(c) < 0)
			return -1;
		if (t->up_eof && !out_sendable(c) && !c->pipe_bytes && !t->cli_shut) {
			shutdown(c->ev.fd, SHUT_WR);
			t->cli_shut = true;
		}
		if (t->cli_shut && t->up_shut) {
			conn_close(c);
			return -1;
		}
		if (!progress)
			break;
		conn_touch(c);
	}
	return 0;
fail:
	conn_close(c);
	return -1;
}
