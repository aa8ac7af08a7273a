/* SPDX-License-Identifier: Apache-2.0 */
/* events: vLLM KV-cache events from every worker into the index (FACTS.md §1).
 *
 * Per worker: a ZMQ SUB connected to its publisher (tcp://IP:PORT, topic filter) and, if it has
 * one, a DEALER to its replay endpoint. A message is [topic][seq u64 BE][msgpack batch]. Batches
 * are decoded (a bounds-checked cursor over the payload bytes for the common shapes, msgpack-c
 * for the rest) in both encodings (array-tagged and map-tagged events, batch as array
 * or map, optional trailing fields omitted, unknown fields and trailing elements ignored); engine
 * block hashes may be unsigned ints, signed ints or raw bytes and are normalised to u64 (see
 * events_hash_u64). BlockStored token ids are re-hashed with blockhash (own hash), so the index
 * never depends on the engine's hashing.
 *
 * Sequence rules, per worker:
 *   - on joining (events_worker_add, events_worker_resync) with a replay endpoint: replay from 0
 *     at once (initial sync), so an idle worker's cache is known before its next batch; live
 *     batches arriving meanwhile are queued. An empty answer or a dead replay endpoint: the live
 *     stream is taken as it comes;
 *   - first batch seen with seq > 0 and a replay endpoint (the initial sync failed): replay from 0;
 *   - seq == expected: applied;
 *   - seq >  expected (a gap: PUB dropped batches): the worker is marked stale (queries see it
 *     with depth 0), live batches are queued, and the missing ones are asked from the replay
 *     endpoint (DEALER: empty frame + start seq 8 B BE; replies [seq][payload] ..., terminator
 *     seq 0xFFFFFFFFFFFFFFFF). Replay complete: stale mark lifted, queue applied. No replay
 *     endpoint, a replay that does not reach back to the gap, a timeout or a full queue: the
 *     worker's blocks are dropped (never trusted) and ingest goes on from the live stream;
 *   - seq <  expected: the worker restarted: its blocks are dropped, then as a first batch.
 * A removed worker's blocks are dropped and its sockets closed. Whatever does not decode (frames,
 * batch, single events) is counted and skipped; nothing here blocks or aborts.
 *
 * Threading: one thread owns a struct events and calls every function on it; it is the index's
 * writer thread (index.h). Drive it from an epoll loop: add events_fd() for EPOLLIN and call
 * events_poll() when it is readable (it is an epoll fd over the ZMQ_FDs and a timerfd for replay
 * deadlines), and again at once while events_poll() returns 1. */
#ifndef KVS_EVENTS_H
#define KVS_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "index.h"

/* Replay answer deadline, ms. */
#ifndef EVENTS_DEFAULT_REPLAY_TIMEOUT_MS
#define EVENTS_DEFAULT_REPLAY_TIMEOUT_MS 2000
#endif
/* Live batches queued per worker while its replay runs. */
#ifndef EVENTS_DEFAULT_MAX_PENDING
#define EVENTS_DEFAULT_MAX_PENDING 10000
#endif
/* SUB receive high-water mark, messages (vLLM's PUB uses 100000). */
#ifndef EVENTS_DEFAULT_RCVHWM
#define EVENTS_DEFAULT_RCVHWM 100000
#endif
/* Largest batch payload accepted, bytes. */
#ifndef EVENTS_MAX_PAYLOAD
#define EVENTS_MAX_PAYLOAD (64u << 20)
#endif
/* Messages handled per events_poll() call when the caller passes budget 0. */
#ifndef EVENTS_DEFAULT_BUDGET
#define EVENTS_DEFAULT_BUDGET 1024
#endif

/* ---- decoder (no sockets; used by the runtime, the golden tests and the fuzzer) ---------- */

enum events_type { EVENTS_BLOCK_STORED, EVENTS_BLOCK_REMOVED, EVENTS_ALL_CLEARED };

/* One decoded event. Pointers are valid during the callback only. */
struct events_event {
	enum events_type type;
	const uint64_t *hashes; /* engine block hashes, normalised to u64 */
	size_t n_hashes;
	bool has_parent; /* BlockStored: parent_block_hash not null */
	uint64_t parent;
	const uint32_t *tokens; /* BlockStored: token ids, n_hashes * block_size of them */
	size_t n_tokens;
	uint32_t block_size;
	unsigned tier;	       /* INDEX_TIER_GPU (medium null or "GPU") or INDEX_TIER_CPU */
	const char *lora_name; /* NULL when null/absent; not NUL-terminated */
	size_t lora_len;
	bool has_lora_id;
	int64_t lora_id;
	bool has_group;
	int64_t group_idx;
	bool other_kind; /* kv_cache_spec_kind present and not "full_attention" */
	/* BlockStored: per block, the msgpack bytes of its extra keys other than the LoRA name
	 * (NULL/0 when none); NULL when the event carries no extra keys at all. */
	const void *const *extra;
	const size_t *extra_len;
};

struct events_decode_counts {
	uint64_t batches;	 /* batch payloads that decoded */
	uint64_t bad_batches;	 /* payloads that did not (nothing delivered) */
	uint64_t events;	 /* events delivered to the callback */
	uint64_t bad_events;	 /* events skipped: wrong shape or types */
	uint64_t unknown_events; /* events of a type this decoder does not know (skipped) */
};

struct events_decoder;

/* A decoder with its scratch memory (reused across batches). NULL on ENOMEM. */
struct events_decoder *events_decoder_new(void);
void events_decoder_free(struct events_decoder *d);

/* Decodes one batch payload p[0..n) and calls fn(arg, ev) for every event that decodes, in order;
 * a non-zero return from fn stops the batch and is returned. Returns the number of events
 * delivered, or -EBADMSG when the payload is not a batch (c->bad_batches counted). c may be NULL.
 * batch_ts (may be NULL) receives the batch timestamp. */
int events_decode(struct events_decoder *d, const void *p, size_t n,
		  int (*fn)(void *arg, const struct events_event *ev), void *arg,
		  struct events_decode_counts *c, double *batch_ts);

/* The same contract as events_decode, decoded entirely by msgpack-c's unpacker (one object per
 * value). events_decode reads the common shapes straight from the bytes and uses this path for the
 * rest; kept public so tests and the fuzzer can check that both give the same events. */
int events_decode_msgpackc(struct events_decoder *d, const void *p, size_t n,
			   int (*fn)(void *arg, const struct events_event *ev), void *arg,
			   struct events_decode_counts *c, double *batch_ts);

/* An engine hash given as raw bytes, as u64: the last 8 bytes read big-endian (what vLLM sends
 * as the int form), or all of them when fewer than 8. */
uint64_t events_hash_u64(const void *bytes, size_t len);

/* The own-hash root (blockhash_root) of a decoded BlockStored: from lora_name, else lora_id, else
 * the base model's 0. */
uint64_t events_event_root(const struct events_event *ev, uint64_t seed);

/* Applies one decoded event to worker w of idx (caller holds the index write lock). Events of a
 * non-full-attention KV group are skipped. Returns index_block_stored/removed/clear's result. */
int events_apply_event(struct index *idx, uint32_t w, const struct events_event *ev);

/* ---- runtime ---------------------------------------------------------------------------- */

struct events;

struct events_cfg {
	struct index *index;	/* required; events is its writer */
	int replay_timeout_ms;	/* 0: EVENTS_DEFAULT_REPLAY_TIMEOUT_MS */
	size_t max_pending;	/* 0: EVENTS_DEFAULT_MAX_PENDING */
	int rcvhwm;		/* 0: EVENTS_DEFAULT_RCVHWM */
	bool no_initial_replay; /* do not replay from 0 when first joining a running worker */
};

/* Creates the runtime (a ZMQ context, an epoll fd, a timerfd). NULL on failure (errno set). */
struct events *events_create(const struct events_cfg *cfg);
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
int events_fd(const struct events *ev);
/* Handles up to budget messages (0 = EVENTS_DEFAULT_BUDGET) and expired replay deadlines,
 * without blocking. Returns 1 when input is left (call again), 0 when drained. */
int events_poll(struct events *ev, int budget);
/* Milliseconds until the next replay deadline, or -1 when none (for a poll() based loop). */
int events_timeout_ms(const struct events *ev);

/* Per-worker counters. */
struct events_worker_stats {
	uint64_t batches, events, stored, removed, cleared;
	uint64_t gaps, replays_ok, replays_failed, restarts, drops;
	uint64_t bad_frames, bad_batches, bad_events, unknown_events, other_group_events;
	uint64_t next_seq, last_seq_seen;
	bool have_seq, replaying;
	size_t pending;
};
/* Counters of worker id. 0 or -ENOENT. */
int events_worker_stats(const struct events *ev, uint32_t id, struct events_worker_stats *st);

/* Appends Prometheus text: kvsplice_kv_* per worker, then the index's kvsplice_index_*. */
int events_metrics(const struct events *ev, struct buf *out);
/* Appends the /debug/index JSON: {"workers":[...],"index":{...}}. */
int events_debug_json(const struct events *ev, struct buf *out);

#endif
