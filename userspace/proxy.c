// SPDX-License-Identifier: Apache-2.0
/* proxy: see proxy.h. One client connection is a struct conn moving through these states:
 *
 *   HEAD ──head parsed──▶ BODY ──body complete──▶ route ─▶ CONNECT ─▶ SEND ─▶ RESP ──done──▶ HEAD
 *     │  (keep-alive; pipelined bytes are parsed right away)                       │
 *     └─ first bytes not HTTP/1.x, or Upgrade/CONNECT ─▶ (CONNECT, SEND) ─▶ TUNNEL  └─▶ CLOSING
 *
 * A request is fully read before the endpoint is chosen (the router may read the body), and is
 * kept until the first response byte arrives, so a failed connect, or a pooled connection the
 * server closed meanwhile, can be retried without the client noticing. Upstream connections return
 * to a per-endpoint idle pool when the response ended cleanly and both sides allow keep-alive.
 *
 * Memory: conns and upstreams are recycled through free lists and keep their buffers (up to
 * CONN_KEEP_BUF bytes), so a request costs no allocation once the proxy is warm. Objects closed
 * inside a loop batch are freed only after the batch (see loop.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "bpfctl.h"
#include "http.h"
#include "log.h"
#include "openai.h"
#include "proxy.h"

/* Room made before a read(2) of the upstream, bytes (the buffer then holds 64 KiB: below glibc's
 * mmap threshold, so a new buffer is not an mmap per connection). */
#ifndef PROXY_READ_CHUNK
#define PROXY_READ_CHUNK (32 << 10)
#endif
/* Stop reading a source while this many bytes wait for the other side, bytes. */
#ifndef PROXY_HIGH_WATER
#define PROXY_HIGH_WATER (256 << 10)
#endif
/* Buffers larger than this are freed when a connection is recycled, bytes. */
#ifndef CONN_KEEP_BUF
#define CONN_KEEP_BUF (256 << 10)
#endif
/* Bytes moved per wake-up of one connection before yielding to the others. */
#ifndef PROXY_BURST
#define PROXY_BURST (4 << 20)
#endif
/* Smallest rest of a Content-Length body worth a splice (below it a read/write pair is cheaper
 * than the three splice calls), bytes. */
#ifndef PROXY_SPLICE_MIN
#define PROXY_SPLICE_MIN (64 << 10)
#endif
/* After an error answer, how long the client's unread bytes are drained before closing (so the
 * close does not turn into a reset that destroys the answer in flight), ms. */
#ifndef PROXY_LINGER_MS
#define PROXY_LINGER_MS 2000
#endif
/* Accepts pause this long when the process is out of file descriptors, ms. */
#ifndef PROXY_ACCEPT_PAUSE_MS
#define PROXY_ACCEPT_PAUSE_MS 100
#endif
/* Pipe size for splice relays, bytes. */
#ifndef PROXY_PIPE_SIZE
#define PROXY_PIPE_SIZE (1 << 20)
#endif

enum cstate { C_HEAD, C_BODY, C_CONNECT, C_SEND, C_RESP, C_TUNNEL, C_CLOSING };

struct upstream {
	struct loop_ev ev;
	struct proxy *p;
	struct conn *c; /* owner, NULL while idle in the pool */
	struct sockaddr_in addr;
	int ep_index;
	bool connecting, reused;
	uint64_t idle_deadline;
	struct upstream *next, *prev; /* idle pool list, or the free list */
};

/* The request a connection is on, from its first byte to its response's end. */
struct conn_req {
	char method[16];
	bool keep_alive;	/* the client allows another request after it */
	bool tunnel;		/* Upgrade / CONNECT: bytes both ways once it is sent */
	bool expect_sent;	/* "100 Continue" answered for it */
	enum http_body framing; /* how its body is delimited */
	uint64_t body_left;	/* Content-Length bytes still to read */
	uint64_t body_raw;	/* raw chunked bytes read */
	struct http_chunked chunk;
	size_t target_off, target_len; /* its target in the forwarded head */
	uint64_t tried;		       /* endpoints tried: bit (index % 64) */
	int attempts;
	bool fresh_retry; /* a reused connection failed: retried once on a new one */
};

/* The response to the current request, as it is relayed. */
struct conn_resp {
	bool usage_on; /* its usage is read as it streams past */
	struct openai_usage usage;
	bool head_done, started, keep_alive;
	bool extra; /* bytes after its end: the upstream connection is not reused */
	enum http_body framing;
	uint64_t left; /* Content-Length bytes still to relay */
	struct http_chunked chunk;
	int status;
};

struct conn {
	struct loop_ev ev;
	struct proxy *p;
	struct conn *next, *prev; /* live list, zombie list or free list */
	enum cstate state;
	struct sockaddr_in peer;
	int lidx;			   /* listener index */
	char svc_name[DISCOVERY_NAME_MAX]; /* the Service of this connection ("" = none) */
	uint64_t deadline;		   /* ms, monotonic */
	uint64_t t_req;			   /* ns, first byte of the current request */
	int requests;			   /* on this connection */

	struct buf in;	 /* from the client, not yet consumed */
	struct buf out;	 /* to the client */
	size_t out_hold; /* tail bytes of out not yet releasable (response head being parsed) */
	struct buf fwd;	 /* request head as forwarded */
	struct buf body; /* request body (decoded) */
	size_t fwd_sent; /* bytes of fwd then body written upstream */
	size_t head_scan;

	bool passthrough;	     /* not HTTP/1.x: bytes relayed as they are, to one endpoint */
	bool sniffed;		     /* the first request line was seen to be HTTP/1.x */
	struct router_ticket ticket; /* the router's accounting of the current request */
	char ep_name[DISCOVERY_NAME_MAX]; /* of the last endpoint tried */
	struct upstream *up;
	struct conn_req rq;  /* the current request: reset as a whole when it is done */
	struct conn_resp rs; /* its response: likewise */

	/* splice */
	int pipe[2];
	size_t pipe_bytes;

	/* tunnel */
	bool cli_eof, up_eof, cli_shut, up_shut;
	bool close_after; /* close once the current response is out */
	bool linger;	  /* after an error: half-close, drain the client, then close */
	bool rdhup_seen;
};

struct stats {
	uint64_t *accepted, *requests, *passthrough, *resp[6], *err_bad, *err_431, *err_413,
	    *err_501, *err_503, *err_502, *err_504, *err_408, *idle_timeouts, *client_aborts,
	    *up_connects, *up_connect_fail, *up_reused, *up_retries, *up_reset, *up_bad_resp,
	    *bytes_up, *bytes_down, *upgrades;
	int64_t *active, *idle_pool, *draining;
	struct metrics_hist *duration;
};

struct proxy {
	struct proxy_opts o;
	struct loop *loop;
	struct router *router;
	struct bpfctl *bpf;
	struct services *svcs;
	struct listener {
		struct loop_ev ev;
		struct proxy *p;
		int idx;
		struct sockaddr_in addr;
	} l[PROXY_MAX_LISTEN];
	int nl;
	struct conn *live, *zombies, *free_conns;
	struct upstream *idle, *free_ups, *zombie_ups;
	int nlive;
	bool draining;
	uint64_t drain_deadline;
	uint64_t accept_resume; /* ms; accepts paused until then (0: not paused) */
	struct stats st;
	struct buf scratch; /* de-chunked response bytes read for their usage */
};

/* The current request of c ended with status (0: no response, pass-through): the router
 * releases its accounting and records the outcome. Idempotent. */
static void route_end(struct conn *c, int status)
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

void proxy_opts_default(struct proxy_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backlog = 4096;
	o->max_head = 64 << 10;
	o->max_body = 32 << 20;
	o->header_timeout_ms = 30000;
	o->idle_timeout_ms = 300000;
	o->connect_timeout_ms = 3000;
	o->drain_timeout_ms = 30000;
	o->pool_idle_timeout_ms = 4000; /* below uvicorn's (vLLM's) 5 s keep-alive timeout */
	o->pool_max = 64;
	o->mark = 0;
	o->relay = PROXY_RELAY_SPLICE;
}

int proxy_relay_parse(const char *s)
{
	if (strcmp(s, "copy") == 0)
		return PROXY_RELAY_COPY;
	if (strcmp(s, "splice") == 0)
		return PROXY_RELAY_SPLICE;
	return -1;
}

const char *proxy_relay_name(enum proxy_relay r)
{
	return r == PROXY_RELAY_COPY ? "copy" : "splice";
}

/* --- lists ------------------------------------------------------------------------------------ */

static void conn_unlink(struct conn **head, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void conn_push(struct conn **head, struct conn *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

static void up_unlink(struct upstream **head, struct upstream *u)
{
	if (u->prev)
		u->prev->next = u->next;
	else
		*head = u->next;
	if (u->next)
		u->next->prev = u->prev;
	u->next = u->prev = NULL;
}

static void up_push(struct upstream **head, struct upstream *u)
{
	u->prev = NULL;
	u->next = *head;
	if (*head)
		(*head)->prev = u;
	*head = u;
}

/* --- upstream connections --------------------------------------------------------------------- */

static void upstream_cb(struct loop_ev *ev, uint32_t events);
static void conn_cb(struct loop_ev *ev, uint32_t events);
static void conn_close(struct conn *c);
static void conn_progress(struct conn *c);
static void conn_update(struct conn *c);
static void request_route(struct conn *c);

static void up_close(struct upstream *u)
{
	struct proxy *p = u->p;

	if (u->ev.fd < 0)
		return;
	if (!u->c) { /* idle in the pool */
		up_unlink(&p->idle, u);
		metrics_gauge_add(p->st.idle_pool, -1);
	}
	loop_forget(&u->ev); /* close() takes it out of epoll: the fd is ours alone */
	close(u->ev.fd);
	u->ev.fd = -1;
	u->c = NULL;
	up_push(&p->zombie_ups, u);
}

/* Returns u to the idle pool, or closes it when the endpoint's pool is full or draining. */
static void up_release(struct upstream *u)
{
	struct proxy *p = u->p;
	int n = 0;

	if (p->draining) {
		up_close(u);
		return;
	}
	for (struct upstream *x = p->idle; x; x = x->next)
		if (x->addr.sin_addr.s_addr == u->addr.sin_addr.s_addr &&
		    x->addr.sin_port == u->addr.sin_port)
			n++;
	if (n >= p->o.pool_max) {
		up_close(u);
		return;
	}
	u->c = NULL;
	u->reused = false;
	u->idle_deadline = clock_ms() + (uint64_t)p->o.pool_idle_timeout_ms;
	/* while idle, any readable event means the server closed it (or misbehaved): drop it */
	if (loop_set(p->loop, &u->ev, EPOLLIN | EPOLLRDHUP) < 0) {
		up_close(u);
		return;
	}
	up_push(&p->idle, u);
	metrics_gauge_add(p->st.idle_pool, 1);
}

static struct upstream *up_take_idle(struct proxy *p, const struct sockaddr_in *a)
{
	for (struct upstream *u = p->idle; u; u = u->next) {
		if (u->addr.sin_addr.s_addr != a->sin_addr.s_addr ||
		    u->addr.sin_port != a->sin_port)
			continue;
		up_unlink(&p->idle, u);
		metrics_gauge_add(p->st.idle_pool, -1);
		u->reused = true;
		return u;
	}
	return NULL;
}

/* Starts a non-blocking connect. Returns the upstream, or NULL with errno set. */
static struct upstream *up_connect(struct proxy *p, const struct sockaddr_in *a)
{
	struct upstream *u;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (p->o.mark && setsockopt(fd, SOL_SOCKET, SO_MARK, &p->o.mark, sizeof(p->o.mark)) < 0) {
		/* without the mark, BPF could hand our own connect back to us: refuse */
		int e = errno;

		close(fd);
		errno = e;
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	metrics_inc(p->st.up_connects);
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return NULL;
	}
	u = p->free_ups;
	if (u)
		up_unlink(&p->free_ups, u);
	else
		u = calloc(1, sizeof(*u));
	if (!u) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	memset(u, 0, sizeof(*u));
	u->p = p;
	u->ev.fd = fd;
	u->ev.cb = upstream_cb;
	u->addr = *a;
	u->connecting = true;
	return u;
}

/* --- client connections ----------------------------------------------------------------------- */

static void conn_free_bufs(struct buf *b)
{
	if (b->cap > CONN_KEEP_BUF)
		buf_free(b);
	else
		buf_reset(b);
}

static struct conn *conn_alloc(struct proxy *p)
{
	struct conn *c = p->free_conns;
	struct buf in, out, fwd, body;

	if (c) {
		conn_unlink(&p->free_conns, c);
		in = c->in, out = c->out, fwd = c->fwd, body = c->body;
		memset(c, 0, sizeof(*c));
		c->in = in, c->out = out, c->fwd = fwd, c->body = body;
	} else {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
	}
	c->p = p;
	c->pipe[0] = c->pipe[1] = -1;
	c->ev.cb = conn_cb;
	return c;
}

static void request_reset(struct conn *c)
{
	buf_reset(&c->fwd);
	buf_reset(&c->body);
	c->fwd_sent = 0;
	c->head_scan = 0;
	c->rq = (struct conn_req){0};
	c->rs = (struct conn_resp){0};
}

static void conn_close(struct conn *c)
{
	struct proxy *p = c->p;

	if (c->ev.fd < 0)
		return;
	route_end(c, c->rs.head_done ? c->rs.status : 0);
	if (c->up)
		up_close(c->up);
	c->up = NULL;
	for (int i = 0; i < 2; i++)
		if (c->pipe[i] >= 0)
			close(c->pipe[i]);
	c->pipe[0] = c->pipe[1] = -1;
	loop_forget(&c->ev);
	close(c->ev.fd);
	c->ev.fd = -1;
	conn_unlink(&p->live, c);
	conn_push(&p->zombies, c);
	p->nlive--;
	metrics_gauge_add(p->st.active, -1);
}

/* Queues an error response. close: the connection closes once it is written. */
static void conn_error(struct conn *c, int status, const char *message, bool close)
{
	struct stats *st = &c->p->st;
	const char *type = status >= 500 ? "server_error" : "invalid_request_error";

	switch (status) {
	case 400:
		metrics_inc(st->err_bad);
		break;
	case 408:
		metrics_inc(st->err_408);
		break;
	case 413:
		metrics_inc(st->err_413);
		break;
	case 431:
		metrics_inc(st->err_431);
		break;
	case 501:
	case 505:
		metrics_inc(st->err_501);
		break;
	case 502:
		metrics_inc(st->err_502);
		break;
	case 503:
		metrics_inc(st->err_503);
		break;
	case 504:
		metrics_inc(st->err_504);
		break;
	}
	metrics_inc(st->resp[status / 100]);
	route_end(c, status);
	if (c->up) {
		up_close(c->up);
		c->up = NULL;
	}
	if (c->p->draining)
		close = true;
	c->out_hold = 0;
	if (http_write_error(&c->out, status, type, message, close) < 0) {
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
	c->deadline = clock_ms() + (uint64_t)c->p->o.idle_timeout_ms;
}

/* Which Service is this connection for? BPF's original destination, else the listener's port,
 * else the only Service. */
static void conn_find_service(struct conn *c)
{
	struct proxy *p = c->p;
	const struct service *svc = NULL;
	struct sockaddr_in orig;

	if (p->bpf && bpfctl_origdst_take(p->bpf, &c->peer, &orig) == 0) {
		svc = services_find_vip(p->svcs, orig.sin_addr.s_addr, orig.sin_port);
		if (!svc) {
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &orig.sin_addr, a, sizeof(a));
			log_warn("proxy", "intercepted connection for %s:%u matches no Service", a,
				 ntohs(orig.sin_port));
		}
	}
	for (size_t i = 0; !svc && p->svcs && i < p->svcs->n; i++)
		if (p->svcs->v[i].vip.sin_port == p->l[c->lidx].addr.sin_port)
			svc = &p->svcs->v[i];
	if (!svc && p->svcs && p->svcs->n == 1)
		svc = &p->svcs->v[0];
	if (svc)
		snprintf(c->svc_name, sizeof(c->svc_name), "%s", svc->name);
}

static void accept_cb(struct loop_ev *ev, uint32_t events)
{
	struct listener *l = container_of(ev, struct listener, ev);
	struct proxy *p = l->p;

	for (int n = 0; n < 64; n++) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd =
		    accept4(ev->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* out of descriptors or memory: stop accepting for a moment instead
				 * of spinning on a listener that stays readable */
				log_warn("proxy", "accept: %s: pausing accepts for %d ms",
					 strerror(errno), PROXY_ACCEPT_PAUSE_MS);
				loop_set(p->loop, ev, 0);
				p->accept_resume = clock_ms() + PROXY_ACCEPT_PAUSE_MS;
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_warn("proxy", "accept: %s", strerror(errno));
			}
			return;
		}
		c = conn_alloc(p);
		if (!c) {
			close(fd);
			continue;
		}
		c->ev.fd = fd; /* TCP_NODELAY is inherited from the listener */
		c->peer = peer;
		c->lidx = l->idx;
		c->state = C_HEAD;
		c->deadline = clock_ms() + (uint64_t)p->o.header_timeout_ms;
		conn_push(&p->live, c);
		p->nlive++;
		metrics_inc(p->st.accepted);
		metrics_gauge_add(p->st.active, 1);
		conn_find_service(c);
		conn_update(c);
	}
}

/* --- interest --------------------------------------------------------------------------------- */

static size_t out_sendable(const struct conn *c)
{
	return buf_unread(&c->out) - c->out_hold;
}

static bool up_has_request_bytes(const struct conn *c)
{
	return c->fwd_sent < c->fwd.len + c->body.len;
}

static void conn_update(struct conn *c)
{
	struct proxy *p = c->p;
	uint32_t ce = 0, ue = 0;

	if (c->ev.fd < 0)
		return;
	if (out_sendable(c) || c->pipe_bytes)
		ce |= EPOLLOUT;
	switch (c->state) {
	case C_HEAD:
	case C_BODY:
		if (buf_unread(&c->out) < PROXY_HIGH_WATER)
			ce |= EPOLLIN;
		break;
	/* While a request is with the upstream the client stays readable (pipelined bytes are
	 * buffered, an EOF is noticed) and the upstream keeps the pool's IN|RDHUP mask: in the
	 * common case a request then costs no epoll_ctl at all. */
	case C_CONNECT:
		ue |= EPOLLOUT;
		goto client_in;
	case C_SEND:
		ue |= EPOLLOUT | EPOLLIN | EPOLLRDHUP;
		goto client_in;
	case C_RESP:
		if (buf_unread(&c->out) < PROXY_HIGH_WATER && !c->pipe_bytes)
			ue |= EPOLLIN | EPOLLRDHUP;
	client_in:
		if (!c->rdhup_seen && buf_unread(&c->in) < PROXY_HIGH_WATER)
			ce |= EPOLLIN;
		break;
	case C_TUNNEL:
		if (!c->cli_eof && buf_unread(&c->in) < PROXY_HIGH_WATER)
			ce |= EPOLLIN;
		if (!c->up_eof && buf_unread(&c->out) < PROXY_HIGH_WATER && !c->pipe_bytes)
			ue |= EPOLLIN;
		if (buf_unread(&c->in))
			ue |= EPOLLOUT;
		break;
	case C_CLOSING:
		if (!out_sendable(c) && !c->pipe_bytes) {
			if (!c->linger || c->rdhup_seen) {
				conn_close(c);
				return;
			}
			/* lingering close: our side is done, read and drop until the client closes
			 */
			if (!c->cli_shut) {
				shutdown(c->ev.fd, SHUT_WR);
				c->cli_shut = true;
				c->deadline = clock_ms() + PROXY_LINGER_MS;
			}
			ce |= EPOLLIN;
		}
		break;
	}
	/* a client that goes away while we wait for the upstream is noticed (once) */
	if (!c->rdhup_seen && c->state != C_TUNNEL)
		ce |= EPOLLRDHUP;
	if (loop_set(p->loop, &c->ev, ce) < 0) {
		conn_close(c);
		return;
	}
	if (c->up && c->up->ev.fd >= 0 && loop_set(p->loop, &c->up->ev, ue) < 0)
		conn_close(c);
}

/* --- writing to the client -------------------------------------------------------------------- */

/* Writes what can be written to the client. Returns 0, or -1 when the connection was closed. */
static int client_flush(struct conn *c)
{
	struct proxy *p = c->p;

	/* Invariant: bytes enter the pipe only while out is empty, so pipe bytes always precede
	 * out bytes. */
	while (c->pipe_bytes) {
		ssize_t n = splice(c->pipe[0], NULL, c->ev.fd, NULL, c->pipe_bytes,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			metrics_inc(p->st.client_aborts);
			conn_close(c);
			return -1;
		}
		c->pipe_bytes -= (size_t)n;
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
	while (out_sendable(c)) {
		ssize_t n = write(c->ev.fd, buf_rptr(&c->out), out_sendable(c));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			metrics_inc(p->st.client_aborts);
			conn_close(c);
			return -1;
		}
		buf_consume(&c->out, (size_t)n);
		metrics_add(p->st.bytes_down, (uint64_t)n);
	}
	return 0;
}

/* --- reading the request ---------------------------------------------------------------------- */

static void start_passthrough(struct conn *c)
{
	metrics_inc(c->p->st.passthrough);
	c->passthrough = true;
	c->rq.tunnel = true;
	c->t_req = clock_ns();
	request_route(c);
}

/* Parses what the client sent so far. Returns 1 when a request is complete and routed, 0 when
 * more bytes are needed, -1 when the connection was closed or answered with an error. */
static int request_read(struct conn *c)
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
		metrics_inc(p->st.requests);
		c->requests++;
		snprintf(c->rq.method, sizeof(c->rq.method), "%.*s", (int)m.method_len, m.method);
		c->rq.keep_alive = m.keep_alive;
		c->rq.tunnel = m.upgrade || strcmp(c->rq.method, "CONNECT") == 0;
		c->rq.framing = m.body;
		if (m.body == HTTP_BODY_LENGTH && m.content_length > p->o.max_body) {
			conn_error(c, 413, "request body is larger than the proxy's limit", true);
			return -1;
		}
		c->rq.body_left = m.content_length;
		if (http_write_request_head(&c->fwd, &m, m.body == HTTP_BODY_LENGTH,
					    m.content_length, c->rq.tunnel && m.upgrade) < 0)
			goto nomem;
		c->rq.target_off = m.method_len + 1;
		c->rq.target_len = m.target_len;
		if (m.body == HTTP_BODY_CHUNKED) {
			/* the decoded length is known at the end: the head ends there */
			c->fwd.len -= 2;
			c->fwd.data[c->fwd.len] = '\0';
		}
		if (m.expect_continue && m.minor_version == 1 && m.body != HTTP_BODY_NONE &&
		    buf_unread(&c->in) == (size_t)rc) {
			if (buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
				goto nomem;
			c->rq.expect_sent = true;
		}
		buf_consume(&c->in, (size_t)rc);
		c->head_scan = 0;
		c->state = C_BODY;
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

/* --- routing and connecting ------------------------------------------------------------------- */

/* Chooses an endpoint not tried yet and starts (or reuses) an upstream connection. On no endpoint
 * left: 503 when none was ever tried, 502 after failed attempts (pass-through: close). */
static void request_route(struct conn *c)
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
		c->up = up_take_idle(p, &svc->endpoints[idx].addr);
		if (c->up) {
			metrics_inc(p->st.up_reused);
			c->up->c = c;
			c->up->ep_index = idx;
			c->state = C_SEND;
			c->deadline = clock_ms() + (uint64_t)p->o.idle_timeout_ms;
			return;
		}
		c->up = up_connect(p, &svc->endpoints[idx].addr);
		if (c->up) {
			c->up->c = c;
			c->up->ep_index = idx;
			c->state = C_CONNECT;
			c->deadline = clock_ms() + (uint64_t)p->o.connect_timeout_ms;
			return;
		}
		metrics_inc(p->st.up_connect_fail);
		log_debug("proxy", "connect to endpoint %s failed: %s", svc->endpoints[idx].name,
			  strerror(errno));
	}
}

/* The upstream failed before any response byte. Retries where that is safe. */
static void upstream_failed(struct conn *c, bool connect_failed)
{
	struct proxy *p = c->p;
	struct sockaddr_in a = c->up->addr;
	bool reused = c->up->reused;
	int idx = c->up->ep_index;

	up_close(c->up);
	c->up = NULL;
	c->fwd_sent = 0;
	if (connect_failed) {
		metrics_inc(p->st.up_connect_fail);
		request_route(c);
		return;
	}
	if (reused && !c->rq.fresh_retry) {
		/* the server closed a pooled connection as we reused it: same endpoint, new
		 * connection, once */
		c->rq.fresh_retry = true;
		metrics_inc(p->st.up_retries);
		c->up = up_connect(p, &a);
		if (c->up) {
			c->up->c = c;
			c->up->ep_index = idx;
			c->state = C_CONNECT;
			c->deadline = clock_ms() + (uint64_t)p->o.connect_timeout_ms;
			return;
		}
		metrics_inc(p->st.up_connect_fail);
		request_route(c);
		return;
	}
	metrics_inc(p->st.up_reset);
	if (c->passthrough || c->rq.tunnel) {
		conn_close(c);
		return;
	}
	conn_error(c, 502, "the endpoint closed the connection without a response", true);
}

/* --- the response ----------------------------------------------------------------------------- */

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
	keep = c->rq.keep_alive && c->rs.keep_alive && !c->close_after && !p->draining &&
	       !c->rdhup_seen;
	request_reset(c);
	c->t_req = 0;
	if (!keep) {
		c->state = C_CLOSING;
		return;
	}
	c->state = C_HEAD;
	c->sniffed = true; /* later requests must be HTTP: no pass-through mid-connection */
	c->deadline = clock_ms() + (uint64_t)p->o.idle_timeout_ms;
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
		if (rc < 0 || (m.status == 101 && !c->rq.tunnel)) {
			metrics_inc(p->st.up_bad_resp);
			/* nothing of this response reached the client yet */
			c->out.len -= c->out_hold;
			c->out_hold = 0;
			conn_error(c, 502, "malformed response from the endpoint", true);
			return -1;
		}
		c->rs.status = m.status;
		c->out_hold -= (size_t)rc;
		if (m.status < 200 && m.status != 101)
			continue; /* 1xx: relayed, the real response follows */
		c->rs.head_done = true;
		c->rs.keep_alive = m.keep_alive;
		c->rs.framing = m.body;
		c->rs.left = m.content_length;
		if (m.status == 101) {
			/* switched protocols: bytes flow both ways from now on */
			c->rs.framing = HTTP_BODY_EOF;
			c->rs.keep_alive = false;
			c->state = C_TUNNEL;
			c->out_hold = 0;
			return 0;
		}
	}
	if (!c->rs.head_done)
		return 0;
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

/* Moves response bytes upstream → client. Returns 0, or -1 when the conn was closed or handed
 * over (retry, error). */
static int response_pump(struct conn *c)
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
				c->pipe_bytes += (size_t)n;
				moved += (size_t)n;
				if (c->rs.framing == HTTP_BODY_LENGTH) {
					c->rs.left -= (uint64_t)n;
					if (!c->rs.left)
						response_done(c);
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
				r = response_frame(c);
				if (r < 0)
					return -1;
				if (r == 1)
					response_done(c);
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

/* --- sending the request ---------------------------------------------------------------------- */

/* Writes the request (head, body) upstream. Returns 1 when all is sent, 0 when blocked, -1 when
 * the connection was handled (failure). */
static int request_send(struct conn *c)
{
	while (up_has_request_bytes(c)) {
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
	}
	return 1;
}

/* --- tunnel ----------------------------------------------------------------------------------- */

static int tunnel_pump(struct conn *c)
{
	struct proxy *p = c->p;

	for (int round = 0; round < 64; round++) {
		bool progress = false;
		ssize_t n;

		/* client → upstream */
		if (!c->cli_eof && buf_unread(&c->in) < PROXY_HIGH_WATER) {
			if (buf_reserve(&c->in, PROXY_READ_CHUNK) < 0)
				goto fail;
			n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
			if (n > 0) {
				c->in.len += (size_t)n;
				progress = true;
			} else if (n == 0) {
				c->cli_eof = true;
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
		if (c->cli_eof && !buf_unread(&c->in) && !c->up_shut) {
			shutdown(c->up->ev.fd, SHUT_WR);
			c->up_shut = true;
		}
		/* upstream → client */
		if (!c->up_eof && !c->pipe_bytes && buf_unread(&c->out) < PROXY_HIGH_WATER) {
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
				c->up_eof = true;
				progress = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				goto fail;
			}
		}
		if (client_flush(c) < 0)
			return -1;
		if (c->up_eof && !out_sendable(c) && !c->pipe_bytes && !c->cli_shut) {
			shutdown(c->ev.fd, SHUT_WR);
			c->cli_shut = true;
		}
		if (c->cli_shut && c->up_shut) {
			conn_close(c);
			return -1;
		}
		if (!progress)
			break;
		c->deadline = clock_ms() + (uint64_t)p->o.idle_timeout_ms;
	}
	return 0;
fail:
	conn_close(c);
	return -1;
}

/* --- driving a connection --------------------------------------------------------------------- */

/* Makes every step possible now, then sets the epoll interest. */
static void conn_progress(struct conn *c)
{
	struct proxy *p = c->p;

	for (int guard = 0; guard < 64 && c->ev.fd >= 0; guard++) {
		enum cstate s = c->state;

		switch (c->state) {
		case C_HEAD:
		case C_BODY:
			if (client_flush(c) < 0)
				return;
			if (p->draining && c->state == C_HEAD && !buf_unread(&c->in)) {
				c->state = C_CLOSING;
				break;
			}
			if (request_read(c) < 0)
				break;
			break;
		case C_CONNECT:
			break;
		case C_SEND: {
			int r = request_send(c);

			if (r < 0)
				break;
			if (r == 1) {
				if (c->rq.tunnel) {
					c->state = C_TUNNEL;
					c->deadline = clock_ms() + (uint64_t)p->o.idle_timeout_ms;
					if (!c->passthrough)
						metrics_inc(p->st.upgrades);
				} else {
					/* nothing to read before the upstream answers: wait for
					 * EPOLLIN instead of a read that would fail */
					c->state = C_RESP;
					conn_update(c);
					return;
				}
			}
			break;
		}
		case C_RESP:
			response_pump(c);
			break;
		case C_TUNNEL:
			tunnel_pump(c);
			break;
		case C_CLOSING:
			/* once flushed, conn_update closes (or lingers) */
			if (client_flush(c) < 0)
				return;
			break;
		}
		if (c->ev.fd < 0 || c->state == s)
			break;
	}
	conn_update(c);
}

static void conn_cb(struct loop_ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, ev);
	struct proxy *p = c->p;

	if (events & EPOLLERR) {
		metrics_inc(p->st.client_aborts);
		conn_close(c);
		return;
	}
	if ((events & EPOLLRDHUP) && c->state != C_TUNNEL && c->state != C_HEAD &&
	    c->state != C_BODY) {
		/* the client went away (or half-closed) while its response is pending: finish
		 * this response, then close */
		c->rdhup_seen = true;
		c->close_after = true;
	}
	if ((events & EPOLLIN) && c->state == C_CLOSING) {
		char junk[16384];
		ssize_t n = read(c->ev.fd, junk, sizeof(junk));

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	if ((events & EPOLLIN) && c->state != C_TUNNEL && c->state != C_CLOSING) {
		bool eof = false;

		for (int i = 0; i < 4; i++) {
			ssize_t n;

			if (buf_unread(&c->in) >= PROXY_HIGH_WATER && c->state != C_HEAD &&
			    c->state != C_BODY)
				break; /* pipelined bytes wait for the response to end */
			if (buf_reserve(&c->in, 16 << 10) < 0) {
				conn_close(c);
				return;
			}
			n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);
			if (n > 0) {
				c->in.len += (size_t)n;
				c->in.data[c->in.len] = '\0';
				if (c->requests > 0 && !c->t_req && c->state == C_HEAD)
					c->deadline = clock_ms() + (uint64_t)p->o.header_timeout_ms;
				if (c->in.len + 1 < c->in.cap)
					break;
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (n < 0) {
				conn_close(c);
				return;
			}
			/* EOF: serve what was sent (a complete request, or a pass-through
			 * stream), then close */
			eof = true;
			c->rdhup_seen = true;
			c->close_after = true;
			break;
		}
		if (eof && c->state == C_HEAD && !buf_unread(&c->in) && !out_sendable(c) &&
		    !c->pipe_bytes) {
			conn_close(c); /* the usual end of a keep-alive connection */
			return;
		}
		if (eof) {
			conn_progress(c);
			if (c->ev.fd >= 0 && (c->state == C_HEAD || c->state == C_BODY)) {
				if (buf_unread(&c->in) || c->state == C_BODY)
					metrics_inc(p->st.client_aborts);
				c->state = C_CLOSING;
				conn_update(c);
			}
			return;
		}
	}
	if ((events & EPOLLHUP) && c->state != C_TUNNEL) {
		conn_close(c);
		return;
	}
	conn_progress(c);
}

static void upstream_cb(struct loop_ev *ev, uint32_t events)
{
	struct upstream *u = container_of(ev, struct upstream, ev);
	struct conn *c = u->c;

	if (!c) { /* idle in the pool: the server closed it or sent junk */
		up_close(u);
		return;
	}
	if (c->state == C_CONNECT) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(u->ev.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			log_debug("proxy", "upstream connect: %s", strerror(err));
			upstream_failed(c, true);
			conn_progress(c);
			return;
		}
		u->connecting = false;
		c->state = C_SEND;
		c->deadline = clock_ms() + (uint64_t)c->p->o.idle_timeout_ms;
	} else if (c->state == C_SEND && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		/* the server answers (or closes) before taking the whole request */
		if (request_send(c) < 0) {
			conn_progress(c);
			return;
		}
		if (!c->rq.tunnel) {
			if (up_has_request_bytes(c)) {
				/* stop sending; the connection cannot be reused after this */
				c->fwd_sent = c->fwd.len + c->body.len;
				c->rs.extra = true;
			}
			c->state = C_RESP;
		}
	}
	if (c->state == C_RESP || c->state == C_SEND || c->state == C_TUNNEL)
		c->deadline = clock_ms() + (uint64_t)c->p->o.idle_timeout_ms;
	conn_progress(c);
}

/* --- housekeeping ----------------------------------------------------------------------------- */

static void reap(struct proxy *p)
{
	while (p->zombies) {
		struct conn *c = p->zombies;

		conn_unlink(&p->zombies, c);
		conn_free_bufs(&c->in);
		conn_free_bufs(&c->out);
		conn_free_bufs(&c->fwd);
		conn_free_bufs(&c->body);
		conn_push(&p->free_conns, c);
	}
	while (p->zombie_ups) {
		struct upstream *u = p->zombie_ups;

		up_unlink(&p->zombie_ups, u);
		up_push(&p->free_ups, u);
	}
}

void proxy_tick(struct proxy *p)
{
	uint64_t now = clock_ms();
	struct conn *c, *next;
	struct upstream *u, *un;

	reap(p);
	if (p->accept_resume && now >= p->accept_resume && !p->draining) {
		p->accept_resume = 0;
		for (int i = 0; i < p->nl; i++)
			if (p->l[i].ev.fd >= 0)
				loop_set(p->loop, &p->l[i].ev, EPOLLIN);
	}
	for (c = p->live; c; c = next) {
		next = c->next;
		if (c->deadline > now)
			continue;
		switch (c->state) {
		case C_HEAD:
			if (!buf_unread(&c->in) && !out_sendable(c)) {
				metrics_inc(p->st.idle_timeouts);
				conn_close(c);
				break;
			}
			/* fallthrough */
		case C_BODY:
			conn_error(c, 408, "timed out reading the request", true);
			conn_update(c);
			break;
		case C_CLOSING:
			conn_close(c); /* a slow reader of an error, or the end of a linger */
			break;
		case C_CONNECT:
			log_debug("proxy", "upstream connect timed out");
			upstream_failed(c, true);
			conn_progress(c);
			break;
		case C_SEND:
		case C_RESP:
			if (!c->rs.started) {
				/* the endpoint took the request but says nothing */
				conn_error(c, 504, "the endpoint did not answer in time", true);
				conn_update(c);
				break;
			}
			/* fallthrough */
		default:
			metrics_inc(p->st.idle_timeouts);
			conn_close(c);
			break;
		}
	}
	for (u = p->idle; u; u = un) {
		un = u->next;
		if (u->idle_deadline <= now)
			up_close(u);
	}
	if (p->draining && now >= p->drain_deadline)
		for (c = p->live; c; c = next) {
			next = c->next;
			conn_close(c);
		}
	reap(p);
}

void proxy_stop(struct proxy *p)
{
	struct conn *c, *next;

	if (p->draining)
		return;
	p->draining = true;
	p->drain_deadline = clock_ms() + (uint64_t)p->o.drain_timeout_ms;
	metrics_gauge_set(p->st.draining, 1);
	for (int i = 0; i < p->nl; i++) {
		if (p->l[i].ev.fd < 0)
			continue;
		loop_del(p->loop, &p->l[i].ev);
		close(p->l[i].ev.fd);
		p->l[i].ev.fd = -1;
	}
	while (p->idle)
		up_close(p->idle);
	for (c = p->live; c; c = next) {
		next = c->next;
		if (c->state == C_HEAD && !buf_unread(&c->in) && !out_sendable(c)) {
			/* a request may be in the socket already: take it if so */
			conn_cb(&c->ev, EPOLLIN);
		}
	}
	log_info("proxy", "draining %d connection(s)", p->nlive);
}

bool proxy_done(const struct proxy *p)
{
	return p->draining && p->nlive == 0;
}

bool proxy_draining(const struct proxy *p)
{
	return p->draining;
}

/* --- set-up ----------------------------------------------------------------------------------- */

static void stats_init(struct proxy *p, struct metrics *m)
{
	static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
					0.25,	0.5,   1,      2.5,   5,    10,	   30,	 60};
	static const char *const cls[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
	struct stats *s = &p->st;
	char lb[32];

	s->accepted = metrics_counter(m, "kvsplice_connections_accepted_total", NULL,
				      "Client connections accepted.");
	s->active =
	    metrics_gauge(m, "kvsplice_connections_active", NULL, "Client connections open now.");
	s->requests = metrics_counter(m, "kvsplice_requests_total", NULL,
				      "HTTP requests read from clients (complete heads).");
	for (int i = 1; i < 6; i++) {
		snprintf(lb, sizeof(lb), "class=\"%s\"", cls[i]);
		s->resp[i] = metrics_counter(m, "kvsplice_responses_total", lb,
					     "Responses sent to clients, by status class.");
	}
	s->resp[0] = s->resp[5];
#define ERR(field, reason)                                                                         \
	s->field = metrics_counter(m, "kvsplice_errors_total", "reason=\"" reason "\"",            \
				   "Requests answered by the proxy itself with an error.")
	ERR(err_bad, "bad_request");
	ERR(err_431, "head_too_large");
	ERR(err_413, "body_too_large");
	ERR(err_501, "unsupported");
	ERR(err_503, "no_endpoint");
	ERR(err_502, "bad_gateway");
	ERR(err_504, "gateway_timeout");
	ERR(err_408, "request_timeout");
#undef ERR
	s->idle_timeouts = metrics_counter(m, "kvsplice_idle_timeouts_total", NULL,
					   "Connections closed for idleness.");
	s->client_aborts = metrics_counter(m, "kvsplice_client_aborts_total", NULL,
					   "Client connections that failed or closed mid-request.");
	s->passthrough = metrics_counter(m, "kvsplice_passthrough_connections_total", NULL,
					 "Connections relayed as plain TCP (not HTTP/1.x).");
	s->upgrades = metrics_counter(m, "kvsplice_upgrades_total", NULL,
				      "Upgrade / CONNECT requests turned into tunnels.");
	s->up_connects = metrics_counter(m, "kvsplice_upstream_connects_total", NULL,
					 "New upstream connections started.");
	s->up_connect_fail = metrics_counter(m, "kvsplice_upstream_connect_failures_total", NULL,
					     "Upstream connects that failed or timed out.");
	s->up_reused = metrics_counter(m, "kvsplice_upstream_reused_total", NULL,
				       "Requests sent over a pooled upstream connection.");
	s->up_retries = metrics_counter(m, "kvsplice_upstream_retries_total", NULL,
					"Requests retried on another (or a fresh) connection.");
	s->up_reset = metrics_counter(m, "kvsplice_upstream_resets_total", NULL,
				      "Upstream connections lost mid-exchange.");
	s->up_bad_resp = metrics_counter(m, "kvsplice_upstream_bad_responses_total", NULL,
					 "Malformed responses from endpoints.");
	s->idle_pool = metrics_gauge(m, "kvsplice_upstream_idle_connections", NULL,
				     "Upstream connections idle in the pool.");
	s->bytes_up = metrics_counter(m, "kvsplice_relay_bytes_total", "direction=\"upstream\"",
				      "Bytes relayed, by direction.");
	s->bytes_down = metrics_counter(m, "kvsplice_relay_bytes_total", "direction=\"downstream\"",
					"Bytes relayed, by direction.");
	s->draining =
	    metrics_gauge(m, "kvsplice_draining", NULL, "1 while draining after SIGTERM.");
	s->duration = metrics_histogram(m, "kvsplice_request_duration_seconds", NULL,
					"From the first request byte to the last response byte.",
					bounds, (int)(sizeof(bounds) / sizeof(bounds[0])));
}

int proxy_new(const struct proxy_opts *o, struct loop *loop, struct metrics *m, struct router *r,
	      struct proxy **out)
{
	struct proxy *p = calloc(1, sizeof(*p));
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->o = *o;
	p->loop = loop;
	p->router = r;
	stats_init(p, m);
	if (metrics_failed(m))
		goto cleanup;
	for (int i = 0; i < o->nlisten; i++) {
		struct listener *l = &p->l[i];
		socklen_t alen = sizeof(l->addr);
		int one = 1, fd;
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &o->listen[i].sin_addr, a, sizeof(a));
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		l->ev.fd = fd;
		p->nl = i + 1;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
		    bind(fd, (const struct sockaddr *)&o->listen[i], sizeof(o->listen[i])) < 0 ||
		    listen(fd, o->backlog) < 0 ||
		    getsockname(fd, (struct sockaddr *)&l->addr, &alen) < 0) {
			rc = -errno;
			log_error("proxy", "listen on %s:%u: %s", a, ntohs(o->listen[i].sin_port),
				  strerror(errno));
			goto cleanup;
		}
		l->p = p;
		l->idx = i;
		l->ev.cb = accept_cb;
		rc = loop_set(loop, &l->ev, EPOLLIN);
		if (rc < 0)
			goto cleanup;
	}
	*out = p;
	return 0;
cleanup:
	proxy_free(p);
	return rc;
}

void proxy_free(struct proxy *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nl; i++)
		if (p->l[i].ev.fd >= 0) {
			loop_del(p->loop, &p->l[i].ev);
			close(p->l[i].ev.fd);
		}
	while (p->live)
		conn_close(p->live);
	while (p->idle)
		up_close(p->idle);
	reap(p);
	while (p->free_conns) {
		struct conn *c = p->free_conns;

		conn_unlink(&p->free_conns, c);
		buf_free(&c->in);
		buf_free(&c->out);
		buf_free(&c->fwd);
		buf_free(&c->body);
		free(c);
	}
	buf_free(&p->scratch);
	while (p->free_ups) {
		struct upstream *u = p->free_ups;

		up_unlink(&p->free_ups, u);
		free(u);
	}
	services_put(p->svcs);
	free(p);
}

int proxy_listen_fd(const struct proxy *p, int i)
{
	return i >= 0 && i < p->nl ? p->l[i].ev.fd : -1;
}

int proxy_listen_addr(const struct proxy *p, int i, struct sockaddr_in *out)
{
	if (i < 0 || i >= p->nl || p->l[i].ev.fd < 0)
		return -EINVAL;
	*out = p->l[i].addr;
	return 0;
}

void proxy_set_bpf(struct proxy *p, struct bpfctl *b)
{
	p->bpf = b;
}

void proxy_set_services(struct proxy *p, struct services *s)
{
	services_get(s);
	services_put(p->svcs);
	p->svcs = s;
}
