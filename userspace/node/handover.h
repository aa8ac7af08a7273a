/* SPDX-License-Identifier: Apache-2.0 */
/* handover: a restart of kvsplice that resets nothing. A running kvsplice offers its listening
 * sockets (the proxy's and the admin's) on a unix socket; a new one started for the same proxy
 * address takes them (fd passing, SCM_RIGHTS) instead of binding its own, serves on them,
 * registers the proxy listener in BPF's sockmap, and says so; only then does the old one stop
 * accepting, drain what it holds, and exit.
 *
 * Why the socket itself is passed (rather than an SO_REUSEPORT pair): docs/internals/keeper.md.
 *
 * The unix socket is in the abstract namespace (no file left behind by a crash, no volume to
 * mount; it is per network namespace, as kvsplice's own address is), named after the first proxy
 * address: "@kvsplice-handover-IP:PORT". Only a process of the same uid may take the sockets
 * (SO_PEERCRED). A proxy address with port 0 (tests on ephemeral ports) has no handover.
 *
 * Protocol, SOCK_SEQPACKET, one message each way in turn:
 *   new -> old   "TAKE1"
 *   old -> new   struct handover_msg (what is passed) + SCM_RIGHTS the fds
 *   new -> old   "READY" once it serves them
 * The old process keeps accepting until READY; a new one that goes away before READY leaves it
 * as it was. One successor at a time. Not thread-safe: the loop's thread. */
#ifndef KVS_HANDOVER_H
#define KVS_HANDOVER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/loop.h"

/* Listening sockets passed at most. */
#define HANDOVER_MAX_FDS 16
/* How long the new process waits for each answer of the old one, ms. */
#ifndef HANDOVER_TIMEOUT_MS
#define HANDOVER_TIMEOUT_MS 5000
#endif

enum handover_kind {
	HANDOVER_PROXY = 1, /* a proxy listener (proxy_listen_fd) */
	HANDOVER_ADMIN = 2, /* an admin listener: --admin or --metrics */
};

struct handover_fd {
	int fd;
	enum handover_kind kind;
	struct sockaddr_in addr; /* where it is bound */
};

/* The name of the handover socket for proxy address key, "kvsplice-handover-IP:PORT" (without
 * the abstract namespace's leading NUL), into out[n]. Returns 0, or -EINVAL for port 0. */
int handover_name(const struct sockaddr_in *key, char *out, size_t n);

/* --- the new process (at start-up, before its loop runs; blocking, bounded by
 * HANDOVER_TIMEOUT_MS per step) --- */

/* Asks a running kvsplice for proxy address key for its listening sockets. Returns how many were
 * received into out[max] (their fds close-on-exec), 0 when no kvsplice runs there (nothing to
 * take: bind your own), or a negative errno (it runs, but the handover failed: what it holds stays
 * with it). *conn is the connection to send handover_ready on (-1 unless the result is > 0) and
 * *old_pid the old process's pid. */
int handover_take(const struct sockaddr_in *key, struct handover_fd *out, int max, int *conn,
		  pid_t *old_pid);
/* Tells the old process that the sockets are served here now (the proxy listener registered in
 * BPF): it stops accepting and drains. Closes conn. Returns 0 or a negative errno (the old
 * process went away meanwhile: nothing lost, it no longer accepts either). */
int handover_ready(int conn);

/* --- the running process (on its loop) --- */

struct handover_ops {
	/* Fills out[max] with the listening sockets offered now (fd, kind, address); returns
	 * their number. The fds stay the caller's. */
	int (*offer)(void *arg, struct handover_fd *out, int max);
	/* The successor serves the sockets offered (READY): stop accepting on them, close this
	 * process's copies (loop_del first: the sockets live on), and drain. */
	void (*done)(void *arg, pid_t successor);
};

struct handover;

/* Offers this process's sockets under key's name. The name may still be held by the process this
 * one took over from (it lets go once it has read READY): binding is retried by handover_tick.
 * Returns 0 and *out, -EINVAL for port 0, -ENOMEM. */
int handover_listen(struct loop *l, const struct sockaddr_in *key, const struct handover_ops *ops,
		    void *arg, struct handover **out);
/* Retries a bind the name refused; call after every loop_run. */
void handover_tick(struct handover *h);
/* Whether a successor took over (done was called). */
bool handover_done(const struct handover *h);
/* Whether a successor holds the sockets offered and has not said READY yet (nor gone away). A
 * stop meanwhile waits for it: the listener it is about to register in BPF's sockmap is the very
 * socket a stop would take out. */
bool handover_pending(const struct handover *h);
void handover_free(struct handover *h);

#endif
