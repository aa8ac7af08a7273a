/* SPDX-License-Identifier: Apache-2.0 */
/* keeper: fail-open across a crash of the daemon (SIGKILL, OOM kill, abort), with nothing reset.
 * A small separate process (this binary run again as `kvsplice --keeper ...`) holds a second
 * reference to the registered proxy listener and the read end of a pipe only the daemon writes.
 *   - The daemon exits in order (drained, or handed over): it writes "q" and the keeper leaves
 *     (keeper_release).
 *   - The pipe ends without "q" (the daemon died): the keeper keeps the listener registered for
 *     queue_ms (connects queue for a successor), then falls open: it takes the listener out of
 *     the sockmap (only if it is still this socket), accepts what is queued or arriving and
 *     relays each connection byte for byte to its original destination (the ClusterIP:port BPF
 *     recorded), at most KEEPER_MAX_RELAYS at once. It offers the listener to the next kvsplice
 *     on the handover socket (handover.h); with no successor within hold_ms it closes the
 *     listener and exits once its relays end.
 * Why, and the whole crash path with supervisor.h and handover.h: docs/internals/keeper.md.
 *
 * Threads: the daemon calls keeper_spawn/keeper_release from its main thread. In the keeper, the
 * main thread runs a loop (the pipe, then the listener and the handover socket); each relayed
 * connection has a thread of its own (they are few: those of a crash's moment and of the hold). */
#ifndef KVS_KEEPER_H
#define KVS_KEEPER_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/types.h>

/* Default --keeper-hold: how long a keeper whose daemon died waits for a successor, ms. */
#define KEEPER_HOLD_MS 10000
/* Default --keeper-queue under the PID 1 supervisor (supervisor.h), ms; 0 otherwise. */
#define KEEPER_QUEUE_MS 1000
/* Relays at once at most; a connection beyond it is closed (the client retries by DNAT). */
#define KEEPER_MAX_RELAYS 1024
/* Connect timeout of a relay's upstream connection, ms. */
#define KEEPER_CONNECT_MS 5000

struct keeper_opts {
	int listen_fd;		 /* the proxy listener registered in the sockmap */
	struct sockaddr_in addr; /* its address: the handover socket's name */
	const char *pin_dir;	 /* where the sockmap and the origdst map are pinned */
	uint32_t own_mark;	 /* SO_MARK of the relays' upstream sockets (0: none) */
	int hold_ms;		 /* wait for a successor this long after a crash */
	int idle_ms;		 /* a relay silent this long is closed */
	int queue_ms; /* after a crash, connects keep queueing on the listener this long for a
			 successor before the keeper falls open (0: at once) */
};

struct keeper;

/* Starts the keeper for o->listen_fd. Returns 0 and *out, or a negative errno (logged; the daemon
 * runs on without, as before: a crash then resets what was queued). */
int keeper_spawn(const struct keeper_opts *o, struct keeper **out);
/* The daemon exits in order: tells the keeper to leave, reaps it, frees k. NULL is a no-op. */
void keeper_release(struct keeper *k);
pid_t keeper_pid(const struct keeper *k);

/* The keeper process: main() calls this when argv[1] is "--keeper". Returns the exit code. */
int keeper_main(int argc, char **argv);

#endif
