/* SPDX-License-Identifier: Apache-2.0 */
/* supervisor: kvsplice as a container's PID 1, so that the keeper (keeper.h) outlives a crashed
 * daemon (why: docs/internals/keeper.md). When kvsplice finds itself PID 1 it stays a tiny init:
 *   - forks the daemon at once (before anything is parsed or loaded: both run the same main());
 *   - forwards SIGTERM, SIGINT and SIGHUP to it;
 *   - reaps every child, the daemon's keeper too once its daemon is gone;
 *   - the daemon exits with a status: PID 1 exits with that status;
 *   - the daemon is killed by a signal and no stop was asked: it is started again after a backoff
 *     (SUPERVISOR_BACKOFF_MIN_MS, doubled per crash up to SUPERVISOR_BACKOFF_MAX_MS, reset once a
 *     daemon has run SUPERVISOR_STABLE_MS); the new daemon takes the listener from the keeper.
 * Outside PID 1 nothing changes: kvsplice is the daemon. */
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
