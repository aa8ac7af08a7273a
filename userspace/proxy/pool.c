// SPDX-License-Identifier: Apache-2.0
/* pool: see pool.h. */
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "proxy/pool.h"

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

void pool_close(struct upstream *u)
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

void pool_release(struct upstream *u)
{
	struct proxy *p = u->p;
	int n = 0;

	if (p->draining) {
		pool_close(u);
		return;
	}
	for (struct upstream *x = p->idle; x; x = x->next)
		if (x->addr.sin_addr.s_addr == u->addr.sin_addr.s_addr &&
		    x->addr.sin_port == u->addr.sin_port)
			n++;
	if (n >= p->o.pool_max) {
		pool_close(u);
		return;
	}
	u->c = NULL;
	u->reused = false;
	u->idle_deadline = clock_ms() + (uint64_t)p->o.pool_idle_timeout_ms;
	/* while idle, any readable event means the server closed it (or misbehaved): drop it */
	if (loop_set(p->loop, &u->ev, EPOLLIN | EPOLLRDHUP) < 0) {
		pool_close(u);
		return;
	}
	up_push(&p->idle, u);
	metrics_gauge_add(p->st.idle_pool, 1);
}

/* Is an idle connection still clean? Its readable event may not have been dispatched yet (it can
 * sit later in the same batch as the request about to reuse it): a byte or an EOF waiting now
 * would be read as the next response (a desync), so peek. */
static bool up_clean(const struct upstream *u)
{
	char b;
	ssize_t n = recv(u->ev.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct upstream *pool_take_idle(struct proxy *p, const struct sockaddr_in *a)
{
	struct upstream *u, *next;

	for (u = p->idle; u; u = next) {
		next = u->next;
		if (u->addr.sin_addr.s_addr != a->sin_addr.s_addr ||
		    u->addr.sin_port != a->sin_port)
			continue;
		if (!up_clean(u)) {
			metrics_inc(p->st.up_stale);
			pool_close(u);
			continue;
		}
		up_unlink(&p->idle, u);
		metrics_gauge_add(p->st.idle_pool, -1);
		u->reused = true;
		return u;
	}
	return NULL;
}

struct upstream *pool_connect(struct proxy *p, const struct sockaddr_in *a)
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
	u->ev.cb = p->upstream_cb;
	u->addr = *a;
	u->connecting = true;
	return u;
}

void pool_expire(struct proxy *p, uint64_t now)
{
	struct upstream *u, *next;

	for (u = p->idle; u; u = next) {
		next = u->next;
		if (u->idle_deadline <= now)
			pool_close(u);
	}
}

void pool_reap(struct proxy *p, bool all)
{
	while (p->zombie_ups) {
		struct upstream *u = p->zombie_ups;

		up_unlink(&p->zombie_ups, u);
		up_push(&p->free_ups, u);
	}
	while (all && p->free_ups) {
		struct upstream *u = p->free_ups;

		up_unlink(&p->free_ups, u);
		free(u);
	}
}
