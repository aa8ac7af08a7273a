// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "daemon/admin.h"
#include "core/http.h"
#include "core/log.h"

/* Accepts pause this long when out of descriptors and no admin connection can be closed, ms. */
#ifndef ADMIN_ACCEPT_PAUSE_MS
#define ADMIN_ACCEPT_PAUSE_MS 100
#endif
#define ADMIN_MAX_PATHS 16

struct admin_conn {
	struct loop_ev ev;
	struct admin *a;
	struct buf in, out;
	uint64_t deadline;
	struct admin_conn *next;
};

struct admin {
	struct loop_ev lev;
	struct loop *loop;
	struct metrics *m;
	struct sockaddr_in addr;
	struct admin_opts o; /* every bound set (the defaults filled in) */
	bool ready;
	char not_ready_why[256];	 /* said by /readyz while not ready ("" : nothing) */
	struct admin_conn *conns, *dead; /* conns: newest first */
	int nconns;
	uint64_t accept_resume; /* ms; accepts paused until then (0: not paused) */
	struct {
		char *path;
		admin_handler_fn fn;
		void *arg;
	} h[ADMIN_MAX_PATHS];
	int nh;
	void (*before)(void *arg); /* admin_before_read */
	void *before_arg;
};

static void ac_close(struct admin_conn *c)
{
	struct admin *a = c->a;

	if (c->ev.fd < 0)
		return;
	loop_del(a->loop, &c->ev);
	close(c->ev.fd);
	c->ev.fd = -1;
	for (struct admin_conn **pp = &a->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	a->nconns--;
	c->next = a->dead;
	a->dead = c;
}

/* Closes the oldest admin connection. Returns false when there is none. */
static bool ac_evict_oldest(struct admin *a)
{
	struct admin_conn *c = a->conns;

	if (!c)
		return false;
	while (c->next)
		c = c->next;
	ac_close(c);
	return true;
}

/* Queues the whole response, head only when head_only. Returns 0, or -ENOMEM with nothing
 * queued. */
static int respond(struct admin_conn *c, int status, const char *ctype, const struct buf *body,
		   bool head_only)
{
	size_t len0 = c->out.len;

	if (buf_printf(&c->out,
		       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		       "Connection: close\r\n\r\n",
		       status, http_reason(status), ctype, body->len) < 0 ||
	    (!head_only && buf_append(&c->out, body->data ? body->data : "", body->len) < 0)) {
		if (c->out.data) {
			c->out.len = len0;
			c->out.data[len0] = '\0';
		}
		return -ENOMEM;
	}
	return 0;
}

/* Answers request m. Returns 0, or -ENOMEM when no answer could be queued. */
static int route(struct admin_conn *c, const struct http_msg *m)
{
	struct admin *a = c->a;
	struct buf body = {0};
	char path[256], *q;
	const char *ctype = "text/plain; charset=utf-8", *query = "";
	int status = 200, rc;

	snprintf(path, sizeof(path), "%.*s", (int)m->target_len, m->target);
	q = strchr(path, '?');
	if (q) {
		*q = '\0';
		query = q + 1;
	}
	if (!(m->method_len == 3 && memcmp(m->method, "GET", 3) == 0) &&
	    !(m->method_len == 4 && memcmp(m->method, "HEAD", 4) == 0)) {
		status = 405;
		buf_puts(&body, "method not allowed\n");
	} else if (strcmp(path, "/healthz") == 0) {
		buf_puts(&body, "ok\n");
	} else if (strcmp(path, "/readyz") == 0) {
		status = a->ready ? 200 : 503;
		if (a->ready)
			buf_puts(&body, "ready\n");
		else if (a->not_ready_why[0])
			buf_printf(&body, "not ready: %s\n", a->not_ready_why);
		else
			buf_puts(&body, "not ready\n");
	} else if (strcmp(path, "/metrics") == 0) {
		ctype = "text/plain; version=0.0.4; charset=utf-8";
		if (a->before)
			a->before(a->before_arg);
		if (metrics_render(a->m, &body) < 0)
			status = 500;
	} else {
		status = 404;
		for (int i = 0; i < a->nh; i++)
			if (strcmp(a->h[i].path, path) == 0) {
				if (a->before)
					a->before(a->before_arg);
				buf_reset(&body);
				status = a->h[i].fn(&body, query, &ctype, a->h[i].arg);
				break;
			}
		if (status == 404 && !body.len)
			buf_puts(&body, "not found\n");
	}
	/* a handler out of memory may leave a partial body: its status says so (500), not the
	 * bytes; HEAD gets no body */
	rc = respond(c, status, ctype, &body, m->method_len == 4);
	buf_free(&body);
	return rc;
}

static void ac_flush(struct admin_conn *c)
{
	while (buf_unread(&c->out)) {
		ssize_t n = write(c->ev.fd, buf_rptr(&c->out), buf_unread(&c->out));

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				if (loop_set(c->a->loop, &c->ev, EPOLLOUT) < 0)
					ac_close(c);
				return;
			}
			break;
		}
		buf_consume(&c->out, (size_t)n);
	}
	ac_close(c);
}

static void ac_cb(struct loop_ev *ev, uint32_t events)
{
	struct admin_conn *c = container_of(ev, struct admin_conn, ev);
	struct http_msg m;
	int rc;

	if (buf_unread(&c->out) || (events & EPOLLOUT)) {
		ac_flush(c);
		return;
	}
	if (buf_reserve(&c->in, 4096) < 0) {
		ac_close(c);
		return;
	}
	ssize_t n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		ac_close(c);
		return;
	}
	c->in.len += (size_t)n;
	c->in.data[c->in.len] = '\0';
	rc = http_parse_request(buf_rptr(&c->in), buf_unread(&c->in), c->a->o.max_head, &m);
	if (rc == 0)
		return;
	if (rc < 0)
		rc = http_write_error(&c->out, -rc, "invalid_request_error", "bad request", true);
	else
		rc = route(c, &m);
	if (rc < 0) { /* out of memory: nothing to say */
		ac_close(c);
		return;
	}
	ac_flush(c);
}

static void accept_cb(struct loop_ev *ev, uint32_t events)
{
	struct admin *a = container_of(ev, struct admin, lev);

	for (int i = 0; i < 16; i++) {
		int fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_conn *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && ac_evict_oldest(a))
			continue; /* a descriptor freed: the probe behind the flood gets its turn */
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* the listener stays readable (level-triggered): without a pause
				 * this would spin */
				log_warn("admin", "accept: %s: pausing accepts for %d ms",
					 strerror(errno), ADMIN_ACCEPT_PAUSE_MS);
				loop_set(a->loop, &a->lev, 0);
				a->accept_resume = clock_ms() + ADMIN_ACCEPT_PAUSE_MS;
			}
			return;
		}
		if (a->o.max_conns && a->nconns >= a->o.max_conns)
			ac_evict_oldest(a);
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			return;
		}
		c->a = a;
		c->ev.fd = fd;
		c->ev.cb = ac_cb;
		c->deadline = a->o.timeout_ms ? clock_ms() + (uint64_t)a->o.timeout_ms : UINT64_MAX;
		c->next = a->conns;
		a->conns = c;
		a->nconns++;
		if (loop_set(a->loop, &c->ev, EPOLLIN) < 0)
			ac_close(c);
	}
}

/* bind(2), retried while the address is in use for up to 2 s (a stopping process lets go of it
 * when it exits). 0, or -1 with errno set. */
static int bind_retry(int fd, const struct sockaddr_in *addr)
{
	for (int waited = 0;; waited += 50) {
		struct timespec ts = {0, 50 * 1000000L};

		if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0)
			return 0;
		if (errno != EADDRINUSE || waited >= 2000)
			return -1;
		nanosleep(&ts, NULL);
	}
}

void admin_opts_default(struct admin_opts *o)
{
	o->max_conns = ADMIN_DEFAULT_MAX_CONNS;
	o->max_head = ADMIN_DEFAULT_MAX_HEAD;
	o->timeout_ms = ADMIN_DEFAULT_TIMEOUT_MS;
}

int admin_new(struct loop *l, const struct sockaddr_in *addr, int listen_fd,
	      const struct admin_opts *o, struct metrics *m, struct admin **out)
{
	struct admin_opts dflt;
	struct admin *a;
	socklen_t alen;
	char s[INET_ADDRSTRLEN];
	int one = 1, rc;

	if (!o) {
		admin_opts_default(&dflt);
		o = &dflt;
	}
	if (o->max_conns < 0 || o->timeout_ms < 0 || !o->max_head)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	alen = sizeof(a->addr);
	a->o = *o;
	a->loop = l;
	a->m = m;
	a->lev.cb = accept_cb;
	if (listen_fd >= 0) {
		a->lev.fd = listen_fd;
		if (getsockname(a->lev.fd, (struct sockaddr *)&a->addr, &alen) < 0) {
			rc = -errno;
			goto fail;
		}
		goto listening;
	}
	a->lev.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->lev.fd < 0 || setsockopt(a->lev.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind_retry(a->lev.fd, addr) < 0 || listen(a->lev.fd, ADMIN_BACKLOG) < 0 ||
	    getsockname(a->lev.fd, (struct sockaddr *)&a->addr, &alen) < 0) {
		rc = -errno;
		inet_ntop(AF_INET, &addr->sin_addr, s, sizeof(s));
		log_error("admin", "listen on %s:%u: %s", s, ntohs(addr->sin_port),
			  strerror(errno));
		goto fail;
	}
listening:
	rc = loop_set(l, &a->lev, EPOLLIN);
	if (rc < 0)
		goto fail;
	*out = a;
	return 0;
fail:
	if (a->lev.fd >= 0)
		close(a->lev.fd);
	free(a);
	return rc;
}

enum { AF_CONNS, AF_HEAD, AF_TIMEOUT, AF_COUNT };

const struct metrics_family admin_families[] = {
    [AF_CONNS] = {"kvsplice_admin_limit_connections", METRICS_GAUGE,
		  "Admin connections open at once; a new one beyond closes the oldest "
		  "(--admin-max-conns).",
		  NULL},
    [AF_HEAD] = {"kvsplice_admin_limit_head_bytes", METRICS_GAUGE,
		 "Largest admin request head, larger: 431 (--admin-max-head).", NULL},
    [AF_TIMEOUT] = {"kvsplice_admin_limit_timeout_seconds", METRICS_GAUGE,
		    "An admin connection is closed after this long (--admin-timeout).", NULL},
};
const size_t admin_nfamilies = AF_COUNT;
_Static_assert(sizeof(admin_families) / sizeof(admin_families[0]) == AF_COUNT,
	       "a family per AF_ entry");

int admin_metrics(const struct admin *a, struct buf *out)
{
	int rc = 0;

	rc |= metrics_head(out, &admin_families[AF_CONNS]);
	rc |= buf_printf(out, "%s %d\n", admin_families[AF_CONNS].name, a->o.max_conns);
	rc |= metrics_head(out, &admin_families[AF_HEAD]);
	rc |= buf_printf(out, "%s %zu\n", admin_families[AF_HEAD].name, a->o.max_head);
	rc |= metrics_head(out, &admin_families[AF_TIMEOUT]);
	rc |= buf_printf(out, "%s %g\n", admin_families[AF_TIMEOUT].name, a->o.timeout_ms / 1000.0);
	return rc < 0 ? -ENOMEM : 0;
}

void admin_tick(struct admin *a)
{
	uint64_t now = clock_ms();
	struct admin_conn *c, *next;

	if (a->accept_resume && now >= a->accept_resume) {
		a->accept_resume = 0;
		loop_set(a->loop, &a->lev, EPOLLIN);
	}
	for (c = a->conns; c; c = next) {
		next = c->next;
		if (c->deadline <= now)
			ac_close(c);
	}
	while (a->dead) {
		c = a->dead;
		a->dead = c->next;
		buf_free(&c->in);
		buf_free(&c->out);
		free(c);
	}
}

void admin_free(struct admin *a)
{
	if (!a)
		return;
	while (a->conns)
		ac_close(a->conns);
	for (struct admin_conn *c = a->conns; c; c = c->next)
		c->deadline = 0;
	admin_tick(a);
	admin_release_listener(a);
	for (int i = 0; i < a->nh; i++)
		free(a->h[i].path);
	free(a);
}

int admin_listen_fd(const struct admin *a)
{
	return a->lev.fd;
}

void admin_release_listener(struct admin *a)
{
	if (a->lev.fd < 0)
		return;
	/* the socket may live on in a successor: out of this loop's epoll set first */
	loop_del(a->loop, &a->lev);
	close(a->lev.fd);
	a->lev.fd = -1;
	a->accept_resume = 0;
}

void admin_addr(const struct admin *a, struct sockaddr_in *out)
{
	*out = a->addr;
}

void admin_set_ready(struct admin *a, bool ready)
{
	a->ready = ready;
}

void admin_set_not_ready_reason(struct admin *a, const char *why)
{
	snprintf(a->not_ready_why, sizeof(a->not_ready_why), "%s", why ? why : "");
}

void admin_before_read(struct admin *a, void (*fn)(void *arg), void *arg)
{
	a->before = fn;
	a->before_arg = arg;
}

int admin_handle(struct admin *a, const char *path, admin_handler_fn fn, void *arg)
{
	for (int i = 0; i < a->nh; i++)
		if (strcmp(a->h[i].path, path) == 0)
			return -EEXIST;
	if (a->nh == ADMIN_MAX_PATHS || !(a->h[a->nh].path = strdup(path)))
		return -ENOMEM;
	a->h[a->nh].fn = fn;
	a->h[a->nh].arg = arg;
	a->nh++;
	return 0;
}
