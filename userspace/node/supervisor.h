/* SPDX-License-Identifier: Apache-2.0 */
/* supervisor: kvsplice as a container's PID 1.
 *
 * Why: the keeper (keeper.h) makes a crash of the daemon reset nothing only if the keeper outlives
 * the daemon. In a container the daemon is PID 1, and when a PID namespace's init dies the kernel
 * kills every other process in it, the keeper too, and the container is restarted from scratch:
 * the crash window is back. So when kvsplice finds itself PID 1 it stays a tiny init and runs the
 * daemon as its child: the daemon is what grows (tokenizers, index, buffers) and what the OOM
 * killer picks; the init only reaps and restarts.
 *
 * What PID 1 does:
 *   - forks the daemon at once (before anything is parsed or loaded: both run the same main());
 *   - forwards SIGTERM, SIGINT and SIGHUP to it (kubelet's stop, the preStop hook's kill -TERM 1);
 *   - reaps every child, the daemon's keeper too once its daemon is gone;
 *   - the daemon exits with a status (a stop in order, bad flags, a fatal error): PID 1 exits with
 *     that status, so Kubernetes sees what happened, as without the supervisor;
 *   - the daemon is killed by a signal (SIGKILL, OOM kill, SIGSEGV, abort) and no stop was asked:
 *     it is started again after a backoff (SUPERVISOR_BACKOFF_MIN_MS, doubled per crash up to
 *     SUPERVISOR_BACKOFF_MAX_MS, reset once a daemon has run SUPERVISOR_STABLE_MS). The new daemon
 *     takes the listener from the keeper, which meanwhile relayed what the crash left queued.
 * Outside PID 1 (a process manager, the testbed) nothing changes: kvsplice is the daemon. */
#ifndef KVS_SUPERVISOR_H
#define KVS_SUPERVISOR_H

#include <stdbool.h>

#define SUPERVISOR_BACKOFF_MIN_MS 200
#define SUPERVISOR_BACKOFF_MAX_MS 10000
#define SUPERVISOR_STABLE_MS 60000

/* Call first thing in main(). Returns -1 in the daemon (go on as usual), or, in PID 1, the exit
 * code to return once the daemon is done. */
int supervisor_run(void);
/* Whether this process is the daemon a PID 1 supervisor runs (and starts again if it dies). */
bool supervisor_child(void);

#endif
