/* SPDX-License-Identifier: Apache-2.0 */
/* daemon: the kvsplice daemon's life, from a parsed config (config.h) to its exit, in phases:
 *
 *   STARTING ──> LISTING ──> SYNCING ──> SERVING ──> HANDED_OVER
 *      │            │           │           │
 *      │            └───────────┴───────────┴──> DRAINING
 *      └──> DEGRADED
 *
 * STARTING loads the tokenizers, the Services source, the index and the KV events, takes the
 * listeners of a kvsplice running for the same address (handover.h), opens BPF and the admin
 * server. LISTING: the source has handed over no snapshot yet (Kubernetes' first lists): nothing
 * is intercepted, /readyz says no. SYNCING: the workers' initial KV syncs run, for --sync-wait
 * at most. SERVING: the listener is in BPF's sockmap (interception on), /readyz says yes, the
 * listeners are offered to a successor. DRAINING (SIGTERM/SIGINT): new connects fall open, what
 * is queued and in flight is served, then the process exits and takes its node setup off.
 * HANDED_OVER: a successor serves the listeners; this process drains and exits, leaving the
 * node setup to it. DEGRADED: the node lacks what interception needs (nodesetup.h): only the
 * admin server answers, /readyz says why, until SIGTERM. docs/internals/daemon.md tells the
 * restart and crash paths. */
#ifndef KVS_DAEMON_H
#define KVS_DAEMON_H

#include <stdbool.h>

#include "core/metrics.h"
#include "daemon/config.h"

enum daemon_phase {
	DAEMON_STARTING,
	DAEMON_DEGRADED,
	DAEMON_LISTING,
	DAEMON_SYNCING,
	DAEMON_SERVING,
	DAEMON_DRAINING,
	DAEMON_HANDED_OVER,
	DAEMON_NPHASES,
};

/* The phase's name ("serving"), for logs and /debug/daemon. */
const char *daemon_phase_name(enum daemon_phase p);
/* Whether the daemon may go from phase a to phase b (the arrows above). */
bool daemon_phase_allowed(enum daemon_phase a, enum daemon_phase b);

/* The daemon's own /metrics families (daemon/catalog.c lists them): always there, once serving,
 * with a --services file, with --kubernetes. */
extern const struct metrics_family daemon_always_families[], daemon_serving_families[],
    daemon_file_families[], daemon_k8s_families[];
extern const size_t daemon_always_nfamilies, daemon_serving_nfamilies, daemon_file_nfamilies,
    daemon_k8s_nfamilies;

/* Runs the daemon with cfg until it exits. Returns the process exit code: 0 after a drain (or a
 * handover), 1 on a failure, 2 when a file cfg names cannot be used (a tokenizer, --services). */
int daemon_run(const struct daemon_cfg *cfg);

#endif
