// SPDX-License-Identifier: Apache-2.0
/* request: see request.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/answer.h"
#include "proxy/conn.h"
#include "proxy/limits.h"
#include "proxy/request.h"

/* Not HTTP/1.x: the bytes go to one endpoint as they are. */
static void start_passthrough(struct conn *c)
{
	metrics_inc(c->p->st.passthrough);
	conn_set(c, CF_PASSTHROUGH);
	c->t_req = clock_ns();
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
 * proxy serves and its limits, and prepares the forwarded head. Returns STEP_BODY to go on with
 * the body, or the outcome of answering it (or STEP_GONE). */
static enum step request_head(struct conn *c, const struct http_msg *m, int rc)
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
		return answer_error(c, 405, "CONNECT is not supported", true);
	}
	if (need > p->o.max_body)
		return answer_error(c, 413, "request body is larger than the proxy's limit", true);
	if (limits_buffered_over(p, need + (size_t)rc)) {
		/* without the body read, the connection cannot go on with another request */
		bool close = m->body != HTTP_BODY_NONE || !m->keep_alive;

		if (!close)
			buf_consume(&c->in, (size_t)rc);
		return answer_shed(
		    c, p->st.shed_buffered,
		    "kvsplice is buffering too many request bytes (--max-buffered); retry later",
		    close);
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
	limits_account(c);
	if (m->expect_continue && m->minor_version == 1 && m->body != HTTP_BODY_NONE &&
	    buf_unread(&c->in) == (size_t)rc) {
		if (buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
			goto nomem;
		c->rq.expect_sent = true;
	}
	buf_consume(&c->in, (size_t)rc);
	c->head_scan = 0;
	return STEP_BODY;
nomem:
	conn_close(c);
	return STEP_GONE;
}

enum step request_read(struct conn *c)
{
	struct proxy *p = c->p;
	struct http_msg m;
	enum step body =
	    STEP_WAIT; /* what an incomplete body returns: STEP_BODY after a new head */
	int rc = 0;

	if (c->state == C_HEAD) {
		size_t n = buf_unread(&c->in);
		const char *d = buf_rptr(&c->in), *end;
		size_t from;

		if (!n)
			return STEP_WAIT;
		if (!c->t_req)
			c->t_req = clock_ns();
		from = c->head_scan > 3 ? c->head_scan - 3 : 0;
		if (!conn_has(c, CF_SNIFFED)) {
			/* Is this HTTP/1.x at all? Decided on the request line (its first 512
			 * bytes at most). */
			size_t k = n < 512 ? n : 512;

			if (!http_sniff_request(d, k)) {
				start_passthrough(c);
				return STEP_ROUTE;
			}
			if (n >= 512 || memchr(d + c->head_scan, '\n', n - c->head_scan)) {
				conn_set(c, CF_SNIFFED);
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
			return STEP_WAIT;
		rc = http_parse_request(d, n, p->o.max_head, &m);
		if (rc == 0)
			return STEP_WAIT;
		if (rc < 0)
			goto bad;
		body = request_head(c, &m, rc);
		if (body != STEP_BODY)
			return body;
	}
	/* the body: in C_BODY, or right after its head */
	{
		size_t n = buf_unread(&c->in);

		if (c->rq.framing == HTTP_BODY_LENGTH) {
			size_t take = n < c->rq.body_left ? n : (size_t)c->rq.body_left;

			if (buf_append(&c->body, buf_rptr(&c->in), take) < 0)
				goto nomem;
			buf_consume(&c->in, take);
			c->rq.body_left -= take;
			if (c->rq.body_left)
				return body;
		} else if (c->rq.framing == HTTP_BODY_CHUNKED) {
			bool done = false;
			ssize_t used =
			    http_chunked_feed(&c->rq.chunk, buf_rptr(&c->in), n, &c->body, &done);

			if (used < 0)
				return answer_error(c, 400, "malformed chunked request body", true);
			buf_consume(&c->in, (size_t)used);
			c->rq.body_raw += (uint64_t)used;
			if (c->rq.chunk.total > p->o.max_body ||
			    c->rq.body_raw > 2 * (uint64_t)p->o.max_body + (64 << 10))
				return answer_error(
				    c, 413, "request body is larger than the proxy's limit", true);
			limits_account(c);
			if (limits_buffered_over(p, 0))
				return answer_shed(c, p->st.shed_buffered,
						   "kvsplice is buffering too many request bytes "
						   "(--max-buffered); retry later",
						   true);
			if (!done)
				return body;
			if (buf_printf(&c->fwd, "Content-Length: %zu\r\n\r\n", c->body.len) < 0)
				goto nomem;
		}
		return STEP_ROUTE;
	}
bad:
	switch (rc) {
	case -431:
		return answer_error(c, 431, "request head is larger than the proxy's limit", true);
	case -501:
		return answer_error(c, 501, "unsupported transfer coding", true);
	case -505:
		return answer_error(c, 505, "unsupported HTTP version", true);
	default:
		return answer_error(c, 400, "malformed HTTP request", true);
	}
nomem:
	conn_close(c);
	return STEP_GONE;
}
