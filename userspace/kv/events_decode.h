/* SPDX-License-Identifier: Apache-2.0 */
/* events_decode: one vLLM KV-event batch payload (msgpack; the wire format below and in
 * tools/kvsim/kvevents.h) into events, no sockets.
 * Used by the events runtime (events.h), the golden tests, the fuzzer and tools/kvevents.
 *
 * Shapes: the batch as an array [ts, events, rank?] or a map {ts, events}; events array-tagged
 * (["BlockStored", ...]) or map-tagged ({"type": "BlockStored", ...}); optional trailing fields
 * omitted, unknown fields and trailing elements ignored. Engine block hashes may be unsigned
 * ints, signed ints or raw bytes and are normalised to u64 (events_hash_u64).
 *
 * How: every payload is first prescanned (each container count and byte length must fit in the
 * bytes left, nesting as deep as msgpack-c accepts), so nothing is allocated from a count the
 * payload cannot back. Then a bounds-checked cursor reads the common shapes straight from the
 * bytes (the hot path: no object per token id); an event with non-null extra_keys, or a batch
 * given as a map, goes to msgpack-c's unpacker (the reference decoder, public as
 * events_decode_msgpackc so tests and the fuzzer can check both give the same events).
 *
 * Memory: a decoder's scratch (hashes, tokens, extra keys, the msgpack-c zone) grows to the
 * largest batch seen and is reused; payloads above the decoder's bound (EVENTS_DEFAULT_MAX_PAYLOAD
 * bytes unless events_decoder_set_max_payload says otherwise) are refused whole.
 * Threading: a decoder is used by one thread at a time; the functions keep no other state. */
#ifndef KVS_EVENTS_DECODE_H
#define KVS_EVENTS_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "kv/index.h"

/* Default largest batch payload accepted, bytes (kvsplice --kv-event-max-bytes). */
#ifndef EVENTS_DEFAULT_MAX_PAYLOAD
#define EVENTS_DEFAULT_MAX_PAYLOAD (64u << 20)
#endif

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

/* A decoder with its scratch memory (reused across batches) in *out. 0 or -ENOMEM (*out is then
 * NULL). */
int events_decoder_new(struct events_decoder **out);
void events_decoder_free(struct events_decoder *d);
/* Payloads above max bytes are refused whole from now on (0: no bound; a new decoder's bound is
 * EVENTS_DEFAULT_MAX_PAYLOAD). */
void events_decoder_set_max_payload(struct events_decoder *d, size_t max);

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

/* The extra bytes the index hashes into a block whose extra_keys, once the LoRA name is left
 * out, are the n strings keys[i] (lens[i] bytes each): a msgpack array of them, packed by
 * msgpack-c exactly as decode_extra re-packs a decoded event's keys. The router hashes block 0
 * of a request with cache_salt S with the bytes of [S] (vLLM's block 0 keys are
 * [lora_name?, S]), so that it meets the hash the index made from that block's BlockStored.
 * Appends to out; returns 0 or -ENOMEM. */
int events_extra_strings(const char *const *keys, const size_t *lens, size_t n, struct buf *out);

/* Applies one decoded event to worker w of idx (caller holds the index write lock). Events of a
 * non-full-attention KV group are skipped. BlockStored token ids are re-hashed with blockhash (own
 * hash), so the index never depends on the engine's hashing. Returns index_block_stored/removed/
 * clear's result. */
int events_apply_event(struct index *idx, uint32_t w, const struct events_event *ev);

#endif
