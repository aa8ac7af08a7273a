/* SPDX-License-Identifier: Apache-2.0 */
/* kvevents: kvsim's KV event publisher, on the wire exactly as vLLM's ZmqEventPublisher
 * (vllm/distributed/kv_events.py):
 * - PUB socket, one message per engine step that produced events:
 *   [topic][seq u64 big-endian, from 0][msgpack batch];
 * - batch: array [ts float64, [events...], data_parallel_rank 0] (format ARRAY, older vLLM) or
 *   map {"ts","events","data_parallel_rank"} (format MAP, vLLM PR 42892);
 * - events: array form ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
 *   lora_id, medium, lora_name], ["BlockRemoved", block_hashes, medium], ["AllBlocksCleared"];
 *   map form {"type": "BlockStored", "block_hashes", "parent_block_hash", "token_ids",
 *   "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx",
 *   "kv_cache_spec_kind"}, {"type": "BlockRemoved", "block_hashes", "medium", "group_idx"},
 *   {"type": "AllBlocksCleared"}; lora_id and lora_name are the adapter's (null for the base
 *   model); extra_keys (map form only: the array form is older than the field) has one element
 *   per block, null or the array of its keys: [lora_name] for an adapter's blocks, with the
 *   cache_salt after it on block 0 ([salt] alone for the base model), as vLLM's
 *   generate_block_hash_extra_keys orders them;
 * - block hashes as unsigned 64-bit ints (last 8 digest bytes, big-endian) or as the raw
 *   32 digest bytes (bin);
 * - optional ROUTER replay socket: a DEALER sends [empty][start seq u64 BE] and gets, for each
 *   buffered batch with seq >= start, [empty][seq u64 BE][payload], then [empty][0xFF x 8][empty].
 * Single-threaded: call kvev_poll() when kvev_fd() is readable (and after every publish). */
#ifndef KVS_KVEVENTS_H
#define KVS_KVEVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"

enum kvev_format { KVEV_ARRAY, KVEV_MAP };

struct kvev_opts {
	const char *endpoint;	     /* PUB bind, e.g. tcp://127.0.0.1:5557; NULL: no publishing */
	const char *replay_endpoint; /* ROUTER bind, or NULL */
	const char *topic;	     /* may be "" */
	enum kvev_format format;
	bool int_hashes; /* true: u64 ints; false: 32 raw bytes */
	uint32_t block_size;
	size_t buffer_steps; /* replay ring size (batches) */
};

struct kvev;

/* Binds the sockets. Returns NULL with a message in err on failure. */
struct kvev *kvev_open(const struct kvev_opts *o, char *err, size_t errlen);
void kvev_close(struct kvev *p);

/* Encodes the events as one batch with time ts, sends it with the next seq and keeps it for
 * replay. Does nothing for an empty list. Returns 0 or a negative errno. */
int kvev_publish(struct kvev *p, const struct kvc_events *ev, double ts);

/* The replay socket's notification fd (for epoll, readable = maybe work), or -1. */
int kvev_fd(struct kvev *p);
/* Serves pending replay requests. */
void kvev_poll(struct kvev *p);

/* The endpoints actually bound (a "tcp://127.0.0.1:*" bind gets its port here); "" when none.
 * Returns 0 or a negative errno. */
int kvev_endpoints(struct kvev *p, char *pub, size_t publen, char *replay, size_t replaylen);

/* Next sequence number to be sent. */
uint64_t kvev_next_seq(const struct kvev *p);

/* Test hook: the next n batches are numbered and kept for replay as usual but not sent on the PUB
 * socket, as a PUB past its high-water mark loses them (a subscriber sees a gap). */
void kvev_drop_next(struct kvev *p, uint64_t n);

/* Test hook: while mute, replay requests are read and never answered, as from a replay endpoint
 * that is gone (a subscriber's replay times out). */
void kvev_replay_mute(struct kvev *p, bool mute);

/* Encodes one batch (for tests and the publisher). Returns 0 or -ENOMEM; *out is malloc'ed. */
int kvev_encode(const struct kvev_opts *o, const struct kvc_events *ev, double ts, char **out,
		size_t *outlen);

#endif
