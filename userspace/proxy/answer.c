// SPDX-License-Identifier: Apache-2.0
/* answer: see answer.h. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/answer.h"
#include "proxy/conn.h"
#include "proxy/pool.h"

/* Queues the answer and tells the driver where c goes: closing (lingering) or to the next
 * request. */
static enum step answer(struct conn *c, int status, const char *message, bool close,
			int retry_after)
{
	const char *type = status >= 500 ? "server_error" : "invalid_request_error";

	metrics_inc(c->p->st.resp[status / 100]);
	conn_route_end(c, status);
	if (c->up) {
		pool_close(c->up);
		c->up = NULL;
	}
	if (c->p->draining)
		close = true;
	c->out_hold = 0;
	if (http_write_error_retry(&c->out, status, type, message, close, retry_after) < 0) {
		conn_close(c);
		return STEP_GONE;
	}
	if (close) {
		conn_set(c, CF_LINGER);
		return STEP_CLOSE;
	}
	/* the request was read whole: the connection can go on with the next one */
	conn_forget_request(c);
	c->t_req = 0;
	c->t_idle = clock_ms();
	c->deadline = c->t_idle + (uint64_t)c->p->o.idle_timeout_ms;
	return STEP_NEXT;
}

enum step answer_error(struct conn *c, int status, const char *message, bool close)
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
	return answer(c, status, message, close, 0);
}

enum step answer_shed(struct conn *c, uint64_t *counter, const char *message, bool close)
{
	metrics_inc(counter);
	return answer(c, 503, message, close, PROXY_RETRY_AFTER_S);
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
