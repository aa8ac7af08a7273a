/* SPDX-License-Identifier: Apache-2.0 */
/* keeper: fail-open across a crash of the daemon (SIGKILL, OOM kill, abort), with nothing reset.
 *
 * Why: BPF intercepts connects while the proxy's listening socket is in the one-entry sockmap,
 * and the kernel takes it out only when the socket is destroyed. A process killed with SIGKILL
 * frees its memory before its files are closed, so for that while (milliseconds, longer with a
 * large heap) connects are still rewritten to a listener nobody accepts on; when the files close,
 * what was queued in its backlog is reset and SYNs in flight are refused. The clients see errors
 * although the Service itself is fine.
 *
 * What: once the listener is registered, the daemon starts a keeper: a small separate process
 * (this binary run again as `kvsplice --keeper ...`: a fresh image, none of the daemon's memory or
 * threads) that holds a second reference to the same listening socket and the read end of a pipe
 * whose write end only the daemon has. While the daemon lives, the keeper only waits.
 *   - The daemon exits in order (drained, or handed over): it writes "q" first and the keeper
 *     leaves quietly (keeper_release).
 *   - The pipe ends without "q" (the daemon died): the listener is still open (the keeper's
 *     reference), so nothing queued is lost. If a successor is expected at once (queue_ms: by
 *     default when the daemon runs under the PID 1 supervisor, supervisor.h, which starts it again
 *     after 200 ms) the listener stays registered for that long: connects keep queueing and the
 *     successor routes them as before, with no spell of random DNAT routing that would evict
 *     prefixes on every worker. Then (or at once) the keeper falls open: it takes the listener
 *     out of the sockmap (only if it is still this socket: new connects go the Service's DNAT
 *     way from now on), accepts what was
 *     queued or is still arriving, and relays each connection byte for byte to its original
 *     destination (the ClusterIP:port BPF recorded by client address, as the daemon reads it), so
 *     kube-proxy serves it as if kvsplice had never been there. It offers the listener to a
 *     restarted kvsplice through the handover socket (handover.h: the keeper answers as the old
 *     process would), so the restart binds nothing and resets nothing; if none comes within the
 *     hold time it closes the listener (nothing can be queued any more) and exits once its relays
 *     end (both sides closed, or silent for the idle timeout).
 * A kill of the keeper itself, or of both at once (a pod's whole PID namespace), is the old
 * window again: the keeper is small and does nothing while the daemon lives, so it is not what the
 * OOM killer picks.
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
