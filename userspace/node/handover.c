// SPDX-License-Identifier: Apache-2.0
/* handover: see handover.h. The old process's side is a unix listener and at most one successor's
 * connection on the loop; the new process's side is a few blocking calls at start-up. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/clock.h"
#include "node/handover.h"
#include "core/log.h"

/* Time between two attempts to bind a name still held by the process this one took over from,
 * ms. */
#define HANDOVER_REBIND_MS 200
/* Listen backlog of the handover socket (one successor at a time takes over). */
#define HANDOVER_BACKLOG 4

#define MSG_TAKE "TAKE1"
#define MSG_READY "READY"
#define MSG_MAGIC "KVSHAND1"

/* What the old process passes besides the fds (fixed layout, native byte order: both ends run on
 * the same node; the magic carries the version). */
struct handover_msg {
	char magic[8];
	uint32_t n;
	struct {
		uint32_t kind;
		uint32_t ip;   /* network order */
		uint16_t port; /* network order */
		uint16_t pad;
	} fd[HANDOVER_MAX_FDS];
};

struct handover {
	struct loop *loop;
	const struct handover_ops *ops;
	void *arg;
	struct sockaddr_un sun;
	socklen_t sun_len;
	struct loop_ev lev; /* the unix listener, fd -1 until bound */
	struct loop_ev cev; /* the successor's connection, fd -1 when none */
	bool offered;	    /* the sockets were sent on cev */
	bool done;
	pid_t peer;
	uint64_t next_bind_ms;
};

int handover_name(const struct sockaddr_in *key, char *out, size_t n)
{
	char ip[INET_ADDRSTRLEN];

	if (!key->sin_port)
		return -EINVAL;
	inet_ntop(AF_INET, &key->sin_addr, ip, sizeof(ip));
	snprintf(out, n, "kvsplice-handover-%s:%u", ip, ntohs(key->sin_port));
	return 0;
}

/* The abstract address of key's handover socket. */
static int abstract_addr(const struct sockaddr_in *key, struct sockaddr_un *sun, socklen_t *len)
{
	char name[64];
	int rc = handover_name(key, name, sizeof(name));

	if (rc)
		return rc;
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path + 1, name, strlen(name)); /* sun_path[0] = 0: abstract */
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	return 0;
}

/* The peer of unix socket fd, if its uid is ours: its pid, else -EPERM. */
static pid_t peer_check(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
		return -errno;
	return cr.uid == geteuid() ? cr.pid : -EPERM;
}

/* --- the new process -------------------------------------------------------------------------- */

/* Is fd a listening TCP/IPv4 socket bound to addr? */
static bool fd_is_listener(int fd, const struct sockaddr_in *addr)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int v = 0;
	socklen_t vl = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) < 0 || !v ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0 || a.sin_family != AF_INET)
		return false;
	return a.sin_addr.s_addr == addr->sin_addr.s_addr && a.sin_port == addr->sin_port;
}

int handover_take(const struct sockaddr_in *key, struct handover_fd *out, int max, int *conn,
		  pid_t *old_pid)
{
	struct sockaddr_un sun;
	socklen_t sl;
	struct timeval tv = {HANDOVER_TIMEOUT_MS / 1000, (HANDOVER_TIMEOUT_MS % 1000) * 1000};
	struct handover_msg msg;
	union {
		char buf[CMSG_SPACE(sizeof(int) * HANDOVER_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {&msg, sizeof(msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.buf,
			    .msg_controllen = sizeof(cbuf)};
	int fds[HANDOVER_MAX_FDS], nfds = 0, fd, rc;
	ssize_t n;

	*conn = -1;
	*old_pid = 0;
	if (abstract_addr(key, &sun, &sl))
		return 0;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sl) < 0) {
		rc = errno == ECONNREFUSED || errno == ENOENT ? 0 : -errno;
		close(fd);
		return rc; /* nobody there */
	}
	*old_pid = peer_check(fd);
	if (*old_pid < 0) {
		rc = *old_pid;
		log_warn("handover", "the process offering the listeners runs as another user: "
				     "not taken");
		goto fail;
	}
	if (send(fd, MSG_TAKE, strlen(MSG_TAKE), 0) < 0) {
		rc = -errno;
		goto fail;
	}
	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0) {
		rc = -errno;
		goto fail;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < k && nfds < HANDOVER_MAX_FDS; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	rc = -EPROTO;
	if ((size_t)n < offsetof(struct handover_msg, fd) || (mh.msg_flags & MSG_CTRUNC) ||
	    memcmp(msg.magic, MSG_MAGIC, 8) || msg.n > HANDOVER_MAX_FDS ||
	    msg.n != (uint32_t)nfds ||
	    (size_t)n < offsetof(struct handover_msg, fd) + msg.n * sizeof(msg.fd[0]) ||
	    (int)msg.n > max) {
		log_warn("handover", "malformed answer from pid %d: nothing taken", (int)*old_pid);
		goto fail;
	}
	for (int i = 0; i < nfds; i++) {
		out[i].fd = fds[i];
		out[i].kind = (enum handover_kind)msg.fd[i].kind;
		memset(&out[i].addr, 0, sizeof(out[i].addr));
		out[i].addr.sin_family = AF_INET;
		out[i].addr.sin_addr.s_addr = msg.fd[i].ip;
		out[i].addr.sin_port = msg.fd[i].port;
		if ((out[i].kind != HANDOVER_PROXY && out[i].kind != HANDOVER_ADMIN) ||
		    !fd_is_listener(fds[i], &out[i].addr)) {
			log_warn("handover",
				 "pid %d passed a socket that is not what it says: "
				 "nothing taken",
				 (int)*old_pid);
			goto fail;
		}
	}
	*conn = fd;
	return nfds;
fail:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(fd);
	return rc;
}

int handover_ready(int conn)
{
	int rc = 0;

	if (conn < 0)
		return -EBADF;
	if (send(conn, MSG_READY, strlen(MSG_READY), MSG_NOSIGNAL) < 0)
		rc = -errno;
	close(conn);
	return rc;
}

/* --- the running process ---------------------------------------------------------------------- */

static void conn_drop(struct handover *h)
{
	if (h->cev.fd < 0)
		return;
	loop_forget(&h->cev);
	close(h->cev.fd);
	h->cev.fd = -1;
	h->offered = false;
}

/* Sends what ops->offer gives to the successor. 0 or a negative errno. */
static int offer(struct handover *h)
{
	struct handover_fd hf[HANDOVER_MAX_FDS];
	struct handover_msg msg = {0};
	union {
		char buf[CMSG_SPACE(sizeof(int) * HANDOVER_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {&msg, sizeof(msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int n = h->ops->offer(h->arg, hf, HANDOVER_MAX_FDS);

	if (n < 0 || n > HANDOVER_MAX_FDS)
		return -EINVAL;
	memcpy(msg.magic, MSG_MAGIC, 8);
	msg.n = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		msg.fd[i].kind = hf[i].kind;
		msg.fd[i].ip = hf[i].addr.sin_addr.s_addr;
		msg.fd[i].port = hf[i].addr.sin_port;
	}
	if (n) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		for (int i = 0; i < n; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &hf[i].fd, sizeof(int));
	}
	if (sendmsg(h->cev.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return -errno;
	log_info("handover",
		 "pid %d asked for the listeners: %d passed, still accepting until it "
		 "serves them",
		 (int)h->peer, n);
	return 0;
}

static void client_cb(struct loop_ev *ev, uint32_t events)
{
	struct handover *h = container_of(ev, struct handover, cev);
	char m[16];
	ssize_t n = recv(ev->fd, m, sizeof(m), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (h->offered)
			log_warn("handover",
				 "pid %d went away before serving the listeners: kept "
				 "here",
				 (int)h->peer);
		conn_drop(h);
		return;
	}
	if (!h->offered && (size_t)n == strlen(MSG_TAKE) && !memcmp(m, MSG_TAKE, (size_t)n)) {
		int rc = offer(h);

		if (rc < 0) {
			log_warn("handover", "passing the listeners to pid %d: %s", (int)h->peer,
				 strerror(-rc));
			conn_drop(h);
			return;
		}
		h->offered = true;
		return;
	}
	if (h->offered && (size_t)n == strlen(MSG_READY) && !memcmp(m, MSG_READY, (size_t)n)) {
		pid_t peer = h->peer;

		log_info("handover", "pid %d serves the listeners now", (int)peer);
		conn_drop(h);
		h->done = true;
		/* let go of the name: the successor offers its own sockets under it */
		if (h->lev.fd >= 0) {
			loop_forget(&h->lev);
			close(h->lev.fd);
			h->lev.fd = -1;
		}
		h->ops->done(h->arg, peer);
		return;
	}
	log_warn("handover", "unexpected message from pid %d: connection closed", (int)h->peer);
	conn_drop(h);
}

static void accept_cb(struct loop_ev *ev, uint32_t events)
{
	struct handover *h = container_of(ev, struct handover, lev);
	int fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	pid_t peer;

	if (fd < 0)
		return;
	peer = peer_check(fd);
	if (peer < 0 || h->cev.fd >= 0 || h->done) {
		if (peer < 0)
			log_warn("handover", "a process of another user asked for the listeners: "
					     "refused");
		close(fd);
		return;
	}
	h->peer = peer;
	h->cev.fd = fd;
	h->cev.cb = client_cb;
	if (loop_set(h->loop, &h->cev, EPOLLIN) < 0)
		conn_drop(h);
}

/* Binds the name if it is free. */
static void try_bind(struct handover *h)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	h->next_bind_ms = clock_ms() + HANDOVER_REBIND_MS;
	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&h->sun, h->sun_len) < 0 ||
	    listen(fd, HANDOVER_BACKLOG) < 0) {
		if (errno != EADDRINUSE)
			log_warn("handover", "cannot offer the listeners: %s", strerror(errno));
		close(fd);
		return;
	}
	h->lev.fd = fd;
	h->lev.cb = accept_cb;
	if (loop_set(h->loop, &h->lev, EPOLLIN) < 0) {
		loop_forget(&h->lev);
		close(fd);
		h->lev.fd = -1;
	}
}

int handover_listen(struct loop *l, const struct sockaddr_in *key, const struct handover_ops *ops,
		    void *arg, struct handover **out)
{
	struct handover *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return -ENOMEM;
	rc = abstract_addr(key, &h->sun, &h->sun_len);
	if (rc) {
		free(h);
		return rc;
	}
	h->loop = l;
	h->ops = ops;
	h->arg = arg;
	h->lev.fd = h->cev.fd = -1;
	try_bind(h);
	*out = h;
	return 0;
}

void handover_tick(struct handover *h)
{
	if (h && h->lev.fd < 0 && !h->done && clock_ms() >= h->next_bind_ms)
		try_bind(h);
}

bool handover_done(const struct handover *h)
{
	return h && h->done;
}

bool handover_pending(const struct handover *h)
{
	return h && h->cev.fd >= 0 && h->offered;
}

void handover_free(struct handover *h)
{
	if (!h)
		return;
	conn_drop(h);
	if (h->lev.fd >= 0) {
		loop_forget(&h->lev);
		close(h->lev.fd);
	}
	free(h);
}
