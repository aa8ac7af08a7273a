/* SPDX-License-Identifier: Apache-2.0 */
/* kvcache: kvsim's model of vLLM v1's paged KV cache with prefix caching (block_pool.py and
 * kv_cache_manager.py), rule for rule (each rule has its test in tests/unit/test_kvcache.c):
 * - blocks of block_size tokens; block 0 is vLLM's reserved null block, never handed out;
 * - only full blocks are hashed, in a chain: h_i = sha256(h_{i-1} || le32 tokens || extra), with
 *   h_{-1} = sha256(seed bytes) (a random per-process seed unless one is given); extra is, in
 *   vLLM's order, sha256 of the LoRA name (every block of an adapter's request), then sha256 of
 *   the cache_salt (block 0 only);
 * - lookup walks the chain from block 0, stops at the first miss, and at most num_tokens - 1
 *   tokens may hit (the last prompt token is always recomputed), in whole blocks;
 * - free blocks sit in an LRU queue: allocation pops the head, a freed block goes to the tail, a
 *   request's blocks are freed in reverse order, a block without a hash goes to the head;
 * - a cached block reused by a request leaves the queue (ref count > 0);
 * - a cached free block keeps its hash until it is popped for a new allocation (lazy eviction,
 *   which is when BlockRemoved is emitted);
 * - blocks are registered (hashed, BlockStored) as soon as they are allocated for a full block's
 *   tokens, like vLLM's cache_blocks() in allocate_slots().
 * Events are queued in the cache until kvc_take_events(). Single-threaded. */
#ifndef KVS_KVCACHE_H
#define KVS_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVC_HASH_LEN 32

struct kvcache;

/* The cache state of one request (vLLM's req_to_blocks + block_hashes). Zero-initialise; the
 * token array stays owned by the caller and may grow (pass the current one to each call). */
struct kvc_seq {
	uint32_t *blocks; /* block ids, in order */
	size_t nblocks, bcap;
	uint8_t (*hashes)[KVC_HASH_LEN]; /* chain hashes of the full blocks of known tokens */
	size_t nhashes, hcap;
	size_t num_cached_blocks;   /* blocks of this request already registered in the cache */
	uint8_t salt[KVC_HASH_LEN]; /* extra key mixed into block 0 (cache_salt), when has_salt */
	bool has_salt;
	uint8_t lora[KVC_HASH_LEN]; /* extra key mixed into every block (the LoRA name), has_lora */
	bool has_lora;
	/* What the events tell of the keys (vLLM's extra_keys, lora_name, lora_id): strings owned
	 * by the caller, copied into each event; NULL: none. lora_id 0: none. */
	const char *lora_name;
	int64_t lora_id;
	const char *cache_salt;
};

enum kvc_event_type { KVC_EV_STORED, KVC_EV_REMOVED, KVC_EV_CLEARED };

/* One event as vLLM queues it: BlockStored(hashes, parent, tokens), BlockRemoved(hashes),
 * AllBlocksCleared. */
struct kvc_event {
	enum kvc_event_type type;
	size_t nhashes;
	uint8_t (*hashes)[KVC_HASH_LEN];
	bool has_parent;
	uint8_t parent[KVC_HASH_LEN];
	uint32_t *tokens; /* nhashes * block_size tokens (stored) */
	/* stored: the request's LoRA adapter (name and vLLM's integer id; NULL and 0: the base
	 * model) and its cache_salt when hashes[0] is its block 0 (else NULL); owned copies. Every
	 * block's extra keys are [lora_name] plus, for block 0, the salt (vLLM's
	 * generate_block_hash_extra_keys: LoRA keys, multimodal keys, then cache_salt). */
	char *lora_name;
	int64_t lora_id;
	char *salt;
};

struct kvc_events {
	struct kvc_event *v;
	size_t n, cap;
};

/* Creates a cache of num_blocks blocks (num_blocks - 1 usable) of block_size tokens. seed is
 * the hash seed (seed_len bytes; NULL for 32 random bytes). Returns NULL on bad sizes or memory. */
struct kvcache *kvc_new(uint32_t num_blocks, uint32_t block_size, const void *seed,
			size_t seed_len);
void kvc_free(struct kvcache *c);

uint32_t kvc_block_size(const struct kvcache *c);
/* Usable blocks (num_blocks - 1: the null block is reserved). */
uint32_t kvc_usable_blocks(const struct kvcache *c);
/* Blocks in the free queue (cached or not). */
uint32_t kvc_num_free(const struct kvcache *c);
/* vLLM's kv_cache_usage: 1 - free / usable. */
double kvc_usage(const struct kvcache *c);
/* The chain's root hash (h_{-1}). */
const uint8_t *kvc_root_hash(const struct kvcache *c);

/* Extends seq->hashes to cover every full block of tokens[0..ntokens). Returns 0 or -ENOMEM. */
int kvc_seq_hash(struct kvcache *c, struct kvc_seq *seq, const uint32_t *tokens, size_t ntokens);

/* Longest cached prefix of seq (hashes must be current) for a request of ntokens tokens: at most
 * (ntokens - 1) / block_size blocks, stopping at the first miss. Writes up to max block ids to
 * out and returns their count. Changes nothing. */
size_t kvc_lookup(const struct kvcache *c, const struct kvc_seq *seq, size_t ntokens, uint32_t *out,
		  size_t max);

/* vLLM's allocate_slots(): takes the ncomputed looked-up blocks (first schedule only, else 0),
 * then enough new blocks so that seq holds num_computed + num_new tokens, where num_computed is
 * the tokens the request already has computed (not counting the looked-up blocks). Registers the
 * full blocks among tokens[0..min(ntokens, total)) in the cache. Returns 0, -ENOSPC when not
 * enough free blocks (nothing changed), -ENOMEM. */
int kvc_allocate(struct kvcache *c, struct kvc_seq *seq, const uint32_t *computed, size_t ncomputed,
		 size_t num_computed, size_t num_new, const uint32_t *tokens, size_t ntokens);

/* Frees seq's blocks in reverse order (ref counts down; blocks reaching 0 join the free queue)
 * and empties seq->blocks (hashes are kept, for a preempted request). */
void kvc_release(struct kvcache *c, struct kvc_seq *seq);
/* Frees seq's memory (after kvc_release). */
void kvc_seq_free(struct kvc_seq *seq);

/* vLLM's reset_prefix_cache(): fails with -EBUSY while any block is in use; else drops every
 * hash and queues AllBlocksCleared. */
int kvc_reset(struct kvcache *c);

/* Moves the queued events to out (appending; out owns them afterwards). */
int kvc_take_events(struct kvcache *c, struct kvc_events *out);
void kvc_events_clear(struct kvc_events *ev);

/* Introspection, for tests and the debug endpoint. */
struct kvc_block_info {
	uint32_t id;
	uint32_t ref_cnt;
	bool has_hash;
	const uint8_t *hash; /* when has_hash */
	bool has_parent;
	const uint8_t *parent;	/* engine hash of the previous block of its chain */
	const uint32_t *tokens; /* block_size tokens, when has_hash */
	int64_t free_pos; /* position in the free queue from the head (next evicted = 0), or -1 */
};
/* Fills info for block id (1..num_blocks-1). Returns 0 or -EINVAL. */
int kvc_block_info(const struct kvcache *c, uint32_t id, struct kvc_block_info *info);
/* Id of the block at position pos of the free queue from the head, or 0 when out of range. */
uint32_t kvc_free_at(const struct kvcache *c, uint32_t pos);
/* Number of blocks holding a hash (cached), in use or free. */
uint32_t kvc_num_cached(const struct kvcache *c);

/* The wire form of an engine hash with int block hashes: the last 8 bytes, big-endian. */
uint64_t kvc_hash_u64(const uint8_t *hash);

#endif
