// SPDX-License-Identifier: Apache-2.0
/* proxy_answer: the answers kvsplice gives itself instead of an endpoint's (see proxy_int.h), all
 * in the OpenAI error shape: request errors, no endpoint, load shed (503 + Retry-After), and
 * connections refused over a connection limit. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/types.h"

/* Queues the answer and moves c on: closing (lingering) or to the next request. */
static void answer(struct conn *c, int status, const char *message, bool close, int retry_after)
{
	const char *type = status >= 500 ? "server_error" : "invalid_request_error";

	metrics_inc(c->p->st.resp[status / 100]);
	route_end(c, status);
	if (c->up) {
		up_close(c->up);
		c->up = NULL;
	}
	if (c->p->draining)
		close = true;
	c->out_hold = 0;
	if (http_write_error_retry(&c->out, status, type, message, close, retry_after) < 0) {
		conn_close(c);
		return;
	}
	if (close) {
		c->state = C_CLOSING;
		c->linger = true;
		return;
	}
	/* the request was read whole: the connection can go on with the next one */
	request_reset(c);
	c->state = C_HEAD;
	c->t_req = 0;
	c->t_idle = clock_ms();
	c->deadline = c->t_idle + (uint64_t)c->p->o.idle_timeout_ms;
}

void conn_error(struct conn *c, int status, const char *message, bool close)
{
	struct stats *st = &c->p->st;
	uint64_t *counter = NULL;

	switch (status) {
	case 400:
		counter = st->err_bad;
		break;
	case 405:
		counter = st->err_405;
		break;
	case 408:
		counter = st->err_408;
		break;
	case 413:
		counter = st->err_413;
		break;
	case 431:
		counter = st->err_431;
		break;
	case 501:
	case 505:
		counter = st->err_501;
		break;
	case 502:
		counter = st->err_502;
		break;
	case 503:
		counter = st->err_503;
		break;
	case 504:
		counter = st->err_504;
		break;
	}
	if (counter)
		metrics_inc(counter);
	answer(c, status, message, close, 0);
}

void conn_shed(struct conn *c, uint64_t *counter, const char *message, bool close)
{
	metrics_inc(counter);
	answer(c, 503, message, close, PROXY_RETRY_AFTER_S);
}

void answer_refused(struct proxy *p, int fd, const char *message)
{
	struct buf b = {0};
	char junk[4096];

	metrics_inc(p->st.resp[5]);
	/* best effort: the answer fits the socket buffer of a new connection; what the client sent
	 * already is read first, so that the close is a FIN, not a reset that could destroy the
	 * answer */
	if (http_write_error_retry(&b, 503, "server_error", message, true, PROXY_RETRY_AFTER_S) ==
	    0) {
		ssize_t n = write(fd, b.data, b.len);

		(void)n;
	}
	for (int i = 0; i < 16 && read(fd, junk, sizeof(junk)) > 0; i++)
		;
	shutdown(fd, SHUT_WR);
	close(fd);
	buf_free(&b);
}
