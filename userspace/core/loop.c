// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/loop.h"

/* Events handled per epoll_wait. */
#ifndef LOOP_BATCH
#define LOOP_BATCH 128
#endif

struct loop {
	int epfd;
	struct epoll_event evs[LOOP_BATCH];
};

int loop_new(struct loop **out)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int err = -errno;

		free(l);
		return err;
	}
	*out = l;
	return 0;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l);
}

int loop_set(struct loop *l, struct loop_ev *ev, uint32_t events)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};

	if (ev->added && ev->events == events)
		return 0;
	if (epoll_ctl(l->epfd, ev->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, ev->fd, &e) < 0)
		return -errno;
	ev->added = 1;
	ev->events = events;
	return 0;
}

void loop_del(struct loop *l, struct loop_ev *ev)
{
	if (ev->added && ev->fd >= 0)
		epoll_ctl(l->epfd, EPOLL_CTL_DEL, ev->fd, NULL);
	ev->added = 0;
	ev->events = 0;
}

int loop_ready(struct loop *l)
{
	struct epoll_event e;

	return epoll_wait(l->epfd, &e, 1, 0) > 0;
}

int loop_run(struct loop *l, int timeout_ms)
{
	int n = epoll_wait(l->epfd, l->evs, LOOP_BATCH, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct loop_ev *ev = l->evs[i].data.ptr;

		if (ev->fd >= 0 && ev->cb)
			ev->cb(ev, l->evs[i].events);
	}
	return n;
}
