// SPDX-License-Identifier: Apache-2.0
/* handover: the running side (handover_listen on a loop, on its own thread here) and the new
 * side (handover_take, handover_ready) in one process: the listening socket taken is the very
 * socket offered (a connection queued on it is accepted through the taken fd), the old side
 * hears READY and lets go of the name; no one there, and port 0, take nothing; a successor that
 * goes away before READY leaves the sockets where they were. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "node/handover.h"
#include "core/loop.h"
#include "tap.h"

struct old {
	struct loop *loop;
	struct handover *h;
	int lfd;
	atomic_int done;
	pid_t successor;
	atomic_int stop;
};

static int offer(void *arg, struct handover_fd *out, int max)
{
	struct old *o = arg;
	socklen_t l = sizeof(out[0].addr);

	if (max < 1)
		return 0;
	out[0].fd = o->lfd;
	out[0].kind = HANDOVER_PROXY;
	getsockname(o->lfd, (struct sockaddr *)&out[0].addr, &l);
	return 1;
}

static void done(void *arg, pid_t successor)
{
	struct old *o = arg;

	o->successor = successor;
	atomic_store(&o->done, 1);
}

static const struct handover_ops ops = {offer, done};

static void *run(void *arg)
{
	struct old *o = arg;

	while (!atomic_load(&o->stop)) {
		loop_run(o->loop, 20);
		handover_tick(o->h);
	}
	return NULL;
}

static int listener(struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t l = sizeof(*a);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)a, &l) < 0)
		return -1;
	return fd;
}

int main(void)
{
	struct old o = {0};
	struct sockaddr_in key, zero = {.sin_family = AF_INET};
	struct handover_fd got[HANDOVER_MAX_FDS];
	char name[64];
	pthread_t th;
	pid_t pid;
	int conn, n, c, a;

	CHECK_EQ(handover_name(&zero, name, sizeof(name)), -EINVAL, "port 0: no handover name");
	o.lfd = listener(&key);
	if (!CHECK(o.lfd >= 0 && loop_new(&o.loop) == 0, "a listener and a loop"))
		return tap_done();
	handover_name(&key, name, sizeof(name));
	CHECK(strncmp(name, "kvsplice-handover-127.0.0.1:", 28) == 0, "the name: %s", name);
	CHECK_EQ(handover_take(&key, got, HANDOVER_MAX_FDS, &conn, &pid), 0,
		 "nobody offers yet: nothing taken");
	if (!CHECK(handover_listen(o.loop, &key, &ops, &o, &o.h) == 0, "offered"))
		return tap_done();
	pthread_create(&th, NULL, run, &o);

	/* a successor that goes away before READY */
	n = handover_take(&key, got, HANDOVER_MAX_FDS, &conn, &pid);
	CHECK_EQ(n, 1, "one socket taken");
	if (n == 1) {
		close(got[0].fd);
		close(conn);
	}
	usleep(100 * 1000);
	CHECK(!atomic_load(&o.done) && !handover_done(o.h),
	      "a successor gone before READY: the sockets stay with the old process");

	/* the real one */
	n = handover_take(&key, got, HANDOVER_MAX_FDS, &conn, &pid);
	CHECK(n == 1 && got[0].kind == HANDOVER_PROXY && pid == getpid() &&
		  got[0].addr.sin_port == key.sin_port,
	      "taken again: the proxy listener, its address, the old process's pid");
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(connect(c, (struct sockaddr *)&key, sizeof(key)) == 0, "a client connects");
	a = n == 1 ? accept(got[0].fd, NULL, NULL) : -1;
	CHECK(a >= 0, "and is accepted through the taken fd: the same socket");
	close(a);
	close(c);
	CHECK_EQ(handover_ready(conn), 0, "READY sent");
	for (int i = 0; i < 100 && !atomic_load(&o.done); i++)
		usleep(20 * 1000);
	CHECK(atomic_load(&o.done) && o.successor == getpid(), "the old process heard READY");
	CHECK_EQ(handover_take(&key, got, HANDOVER_MAX_FDS, &conn, &pid), 0,
		 "after READY the old process lets go of the name: nothing more to take");

	atomic_store(&o.stop, 1);
	pthread_join(th, NULL);
	if (n == 1)
		close(got[0].fd);
	handover_free(o.h);
	loop_free(o.loop);
	close(o.lfd);
	return tap_done();
}
