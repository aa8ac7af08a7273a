/* SPDX-License-Identifier: Apache-2.0 */
/* events: vLLM KV-cache events from every worker into the index (the wire format: events_decode.h
 * and tools/kvsim/kvevents.h).
 *
 * Per worker: a ZMQ SUB connected to its publisher (tcp://IP:PORT, topic filter) and, if it has
 * one, a DEALER to its replay endpoint; batch payloads are decoded by events_decode.h and applied
 * to the index. This module is the runtime around the decoder: sockets, sequence rules, replay,
 * the sync with discovery, counters.
 *
 * The contract, in short: each worker's batches are applied in seq order exactly once; a gap is
 * filled from the replay endpoint (the worker stale meanwhile) or the worker's blocks are dropped;
 * a restart, a lost publisher, a failed replay drop its blocks, never keep blocks that may be
 * wrong; joining (and a publisher back) syncs from seq 0. Nothing blocks or aborts: input that
 * does not decode is counted and skipped. Memory: no message is copied before its size is checked
 * (max_payload per frame), and the live queue kept during a replay is bounded (max_pending,
 * max_pending_bytes per worker, max_pending_total_bytes over all). Each worker's place in these
 * rules is one enum events_state (events_state.h). The rules in full, with why:
 * docs/internals/events.md.
 *
 * Threading: one thread owns a struct events and calls every function on it; it is the index's
 * writer thread (index.h). Drive it from an epoll loop: add events_fd() for EPOLLIN and call
 * events_poll() when it is readable (it is an epoll fd over the ZMQ_FDs and a timerfd for replay
 * and reconnect deadlines), and again at once while events_poll() returns 1. */
#ifndef KVS_EVENTS_H
#define KVS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "kv/events_decode.h" /* the decoder; EVENTS_DEFAULT_MAX_PAYLOAD */
#include "kv/events_state.h"
#include "kv/index.h"

/* Replay answer deadline, ms. */
#ifndef EVENTS_DEFAULT_REPLAY_TIMEOUT_MS
#define EVENTS_DEFAULT_REPLAY_TIMEOUT_MS 2000
#endif
/* Live batches queued per worker while its replay runs. */
#ifndef EVENTS_DEFAULT_MAX_PENDING
#define EVENTS_DEFAULT_MAX_PENDING 10000
#endif
/* Payload bytes of the live batches queued per worker while its replay runs. */
#ifndef EVENTS_DEFAULT_MAX_PENDING_BYTES
#define EVENTS_DEFAULT_MAX_PENDING_BYTES (128u << 20)
#endif
/* Payload bytes of the live batches queued over all workers while their replays run. */
#ifndef EVENTS_DEFAULT_MAX_PENDING_TOTAL_BYTES
#define EVENTS_DEFAULT_MAX_PENDING_TOTAL_BYTES (512u << 20)
#endif
/* SUB receive high-water mark: messages libzmq holds per worker before events_poll reads them
 * (vLLM's PUB uses 100000). */
#ifndef EVENTS_DEFAULT_RCVHWM
#define EVENTS_DEFAULT_RCVHWM 100000
#endif
/* Messages handled per events_poll() call when the caller passes budget 0. */
#ifndef EVENTS_DEFAULT_BUDGET
#define EVENTS_DEFAULT_BUDGET 1024
#endif

struct events;

/* What events_cfg_default gives (the EVENTS_DEFAULT_* above); a 0 is off: no bound, no timeout
 * (rcvhwm 0: libzmq's, none). */
struct events_cfg {
	struct index *index;		/* required; events is its writer */
	int replay_timeout_ms;		/* a replay or initial sync not done by then is given up */
	size_t max_pending;		/* batches held per worker while its replay runs */
	size_t max_pending_bytes;	/* their payload bytes per worker */
	size_t max_pending_total_bytes; /* the same over all workers */
	int rcvhwm;			/* ZMQ receive high-water mark, messages */
	size_t max_payload;		/* largest message read; a larger one is dropped, counted */
	bool no_initial_replay; /* do not replay from 0 when first joining a running worker */
};

/* Fills c with the defaults (index NULL: the caller sets it). */
void events_cfg_default(struct events_cfg *c);

/* Creates the runtime (a ZMQ context, an epoll fd, a timerfd) in *out. Returns 0, -EINVAL (no
 * cfg or no cfg->index), or -errno of what failed (errno set too; -ENOMEM when none was set);
 * *out is then NULL. */
int events_new(const struct events_cfg *cfg, struct events **out);
/* Closes every socket (linger 0) and frees. The index is left as it is. */
void events_free(struct events *ev);

/* Subscribes worker id (< index max_workers) named name to pub ("tcp://IP:PORT") with topic
 * filter topic (NULL or "" = all), replaying from replay (NULL = none). Returns 0, -EEXIST (id
 * in use), -ERANGE (id), -EINVAL (endpoint refused by ZMQ), -ENOMEM. */
int events_worker_add(struct events *ev, uint32_t id, const char *name, const char *pub,
		      const char *replay, const char *topic);
/* Unsubscribes worker id: closes its sockets and drops its blocks. 0 or -ENOENT. */
int events_worker_remove(struct events *ev, uint32_t id);
/* The id of the worker named name, or -ENOENT. */
int events_worker_find(const struct events *ev, const char *name);

/* Drops worker id's blocks and syncs it again from seq 0 through its replay endpoint (if any),
 * as on joining: for a restart noticed by other means (its metrics show a new process) while it
 * publishes nothing. 0 or -ENOENT. */
int events_worker_resync(struct events *ev, uint32_t id);

/* One worker as discovery sees it. */
struct events_spec {
	const char *name;   /* unique, e.g. "service/endpoint" */
	const char *pub;    /* "tcp://IP:PORT" */
	const char *replay; /* NULL: none */
};
/* Makes the subscribed set equal to specs[0..n): workers no longer listed, or listed with other
 * endpoints, are removed (blocks dropped, sockets closed); new ones are added at the lowest free
 * ids with topic filter topic. Returns the number of workers that failed to be added (logged),
 * or -ENOMEM. */
int events_sync(struct events *ev, const struct events_spec *specs, size_t n, const char *topic);

struct services;
/* events_sync for a Services snapshot: every endpoint with an events_port, named
 * "service/endpoint", publisher tcp://IP:events_port, replay tcp://IP:replay_port (when set).
 * Same returns as events_sync. */
int events_sync_services(struct events *ev, const struct services *s, const char *topic);

/* The fd to watch for EPOLLIN. */
/* Workers whose initial sync (the replay from 0 on joining) is still running: their caches are
 * not known yet. */
size_t events_initial_syncs(const struct events *ev);
int events_fd(const struct events *ev);
/* Handles up to budget messages (0 = EVENTS_DEFAULT_BUDGET) and expired replay and reconnect
 * deadlines, without blocking. Returns 1 when input is left (call again), 0 when drained. */
int events_poll(struct events *ev, int budget);
/* Milliseconds until the next replay or reconnect deadline, or -1 when none (for a poll() based
 * loop). */
int events_timeout_ms(const struct events *ev);

/* Per-worker counters. */
struct events_worker_stats {
	uint64_t batches, events, stored, removed, cleared;
	uint64_t gaps, replays_ok, replays_failed, restarts, drops;
	uint64_t bad_frames, bad_batches, bad_events, unknown_events, other_group_events;
	uint64_t next_seq, last_seq_seen;
	/* messages refused for size: a frame above max_payload (the connection libzmq
	 * closed for it, publisher or replay), or a payload above it caught before any copy */
	uint64_t oversized;
	/* replays given up because the live queue was full: by count (max_pending), by this
	 * worker's bytes (max_pending_bytes), by all workers' bytes (max_pending_total_bytes) */
	uint64_t overflow_batches, overflow_bytes, overflow_total;
	uint64_t dropped_queued;  /* live batches discarded with those queues */
	uint64_t disconnects;	  /* the publisher's connection lost (blocks dropped) */
	bool have_seq, replaying; /* read off state */
	enum events_state state;  /* events_state.h */
	unsigned flags;		  /* enum events_flags */
	size_t pending;		  /* live batches queued now */
	size_t pending_bytes;	  /* their payload bytes */
};
/* Counters of worker id. 0 or -ENOENT. */
int events_worker_stats(const struct events *ev, uint32_t id, struct events_worker_stats *st);

/* The series events_metrics writes before the index's (daemon/catalog.c lists them for
 * docs/reference/metrics.md). */
extern const struct metrics_family events_families[];
extern const size_t events_nfamilies;
/* Appends Prometheus text: kvsplice_kv_* per worker, then the index's kvsplice_index_*. */
int events_metrics(const struct events *ev, struct buf *out);
/* Appends the /debug/index JSON: {"workers":[...],"index":{...}}. */
int events_debug_json(const struct events *ev, struct buf *out);

#endif
