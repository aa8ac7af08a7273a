/* SPDX-License-Identifier: Apache-2.0 */
/* index: which worker holds which KV block, answering "how many leading blocks of this request
 * does each worker hold?" in microseconds.
 *
 * Model. Blocks are identified by kvsplice's own chain hash (blockhash.h). A global table maps an
 * own hash to two worker bitmaps, one per tier (GPU, and CPU = any offload medium). Per worker, a
 * table maps the engine's opaque block hash (u64; see events.h for how wire hashes become u64)
 * to the own hash and the tiers that worker holds it in: that resolves parent_block_hash and
 * BlockRemoved, which only carry engine hashes. Worker ids are small dense ints below
 * cfg.max_workers (any value up to INDEX_MAX_WORKERS).
 *
 * OWNERSHIP RULE. One writer thread (the thread that ingests events) calls every mutating
 * function, holding the write lock: index_write_lock() .. index_write_unlock() around a batch.
 * index_query() may be called from any thread at any time: it takes the read lock itself. Stats,
 * dump and debug functions take the read lock themselves too. (With a single-threaded daemon
 * the locks are uncontended and cost a few ns.)
 *
 * Faithfulness. Storing the same block twice is a no-op (counted as a duplicate). A stored block
 * whose parent the worker is not known to hold cannot be hashed and is dropped (counted as an
 * orphan): the index may miss blocks, it never invents them. A worker marked stale is reported
 * with depth 0 by queries until it is unmarked or cleared.
 *
 * Memory. cfg.max_entries bounds the (worker, block) pairs held. Past it, one entry of the worker
 * holding most entries is evicted (clock order over its table; counted in `evictions`). This is a
 * safety bound for lost BlockRemoved events or a misbehaving worker, not a cache model: it can
 * only make the router under-estimate a worker's overlap. index_stats() reports the bytes held. */
#ifndef KVS_INDEX_H
#define KVS_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "kv/blockhash.h" /* BLOCKHASH_DEFAULT_BLOCK_SIZE, _MAX_BLOCK_SIZE, _DEFAULT_SEED */

/* Largest max_workers accepted. */
#ifndef INDEX_MAX_WORKERS
#define INDEX_MAX_WORKERS 4096
#endif
/* Default bound on (worker, block) pairs: 256 workers x 16 Ki blocks (about 200-330 MB). */
#ifndef INDEX_DEFAULT_MAX_ENTRIES
#define INDEX_DEFAULT_MAX_ENTRIES (4u << 20)
#endif

/* Chain positions counted apart by index_worker_blocks_at; deeper ones share the last count. */
#ifndef INDEX_POS_MAX
#define INDEX_POS_MAX 256
#endif

/* Tier bits (vLLM's `medium`): GPU memory, or any offload medium (CPU, disk, ...). */
#define INDEX_TIER_GPU 1u
#define INDEX_TIER_CPU 2u
#define INDEX_TIER_ALL 3u

struct index;

/* Workers followed by default (kvsplice --index-max-workers). */
#ifndef INDEX_DEFAULT_MAX_WORKERS
#define INDEX_DEFAULT_MAX_WORKERS 256
#endif

/* What index_cfg_default gives; a 0 is off (max_entries: no bound) or refused (the others). */
struct index_cfg {
	uint32_t max_workers; /* worker ids are 0..max_workers-1 (1..INDEX_MAX_WORKERS) */
	uint32_t block_size;  /* tokens per block, 1..BLOCKHASH_MAX_BLOCK_SIZE */
	uint64_t seed;	      /* own-hash seed (the router must use the same) */
	size_t max_entries;   /* (worker, block) pairs held at most; 0: no bound */
};

/* Fills c with the defaults: INDEX_DEFAULT_MAX_WORKERS, BLOCKHASH_DEFAULT_BLOCK_SIZE,
 * BLOCKHASH_DEFAULT_SEED, INDEX_DEFAULT_MAX_ENTRIES. */
void index_cfg_default(struct index_cfg *c);

/* One BlockStored event for one worker, after decoding (events.c fills it). */
struct index_stored {
	const uint64_t *engine; /* engine hashes of the new blocks, n of them */
	size_t n;
	bool has_parent;	/* false: the first block is block 0 of its sequence */
	uint64_t parent;	/* engine hash of the block before engine[0] */
	const uint32_t *tokens; /* n * block_size token ids */
	size_t n_tokens;
	uint32_t block_size;
	uint64_t root;		  /* blockhash_root() of the LoRA namespace (0 = base model) */
	const void *const *extra; /* per block extra-key bytes to hash in, or NULL */
	const size_t *extra_len;  /* their lengths (0 = none), or NULL */
	unsigned tier;		  /* INDEX_TIER_GPU or INDEX_TIER_CPU */
};

struct index_stats {
	uint64_t unique_blocks;	  /* own hashes held by at least one worker */
	uint64_t entries;	  /* (worker, block) pairs */
	uint64_t bytes;		  /* heap bytes held by the index */
	uint64_t stored;	  /* blocks added */
	uint64_t duplicates;	  /* blocks stored again (idempotent no-ops) */
	uint64_t orphans;	  /* blocks dropped: parent unknown for that worker */
	uint64_t aliases;	  /* two engine hashes of one worker gave one own hash */
	uint64_t conflicts;	  /* an engine hash re-stored with different tokens (replaced) */
	uint64_t removed;	  /* blocks removed by BlockRemoved */
	uint64_t unknown_removes; /* BlockRemoved for a block the index did not hold */
	uint64_t cleared;	  /* whole-worker clears (AllBlocksCleared, restart, lost events) */
	uint64_t evictions;	  /* entries evicted by the max_entries bound */
	uint64_t rejected;	  /* events refused (bad worker id, block size, token count) */
};

/* Creates an empty index (cfg NULL: all defaults) in *out. Returns 0, -EINVAL for a bad cfg
 * (max_workers above INDEX_MAX_WORKERS, block size above BLOCKHASH_MAX_BLOCK_SIZE), -ENOMEM
 * (*out is then NULL). */
int index_new(const struct index_cfg *cfg, struct index **out);
/* Frees the index (NULL is fine). No other thread may use it any more. */
void index_free(struct index *idx);

/* The effective configuration values. */
uint32_t index_block_size(const struct index *idx);
uint64_t index_seed(const struct index *idx);
uint32_t index_max_workers(const struct index *idx);

/* Write lock for the writer thread, held around one or more mutating calls. */
void index_write_lock(struct index *idx);
void index_write_unlock(struct index *idx);

/* [write lock] Applies one BlockStored for worker w. Returns the number of blocks newly added,
 * -EINVAL (counted in `rejected`) for w out of range, a block size other than the index's, or a
 * token count other than n * block_size; -ENOMEM leaves the index consistent (fewer blocks). */
int index_block_stored(struct index *idx, uint32_t w, const struct index_stored *s);

/* [write lock] Applies one BlockRemoved for worker w: drops tier bits tier of the n engine
 * hashes. Returns the number of blocks the worker no longer holds in any tier, or -EINVAL. */
int index_block_removed(struct index *idx, uint32_t w, unsigned tier, const uint64_t *engine,
			size_t n);

/* [write lock] Drops every block of worker w (AllBlocksCleared, restart, lost events, removed
 * worker) and clears its stale mark. Returns the number of blocks dropped, or -EINVAL. */
int index_worker_clear(struct index *idx, uint32_t w);

/* [write lock] Marks worker w stale (queries report depth 0 for it) or trusted again. */
int index_worker_set_stale(struct index *idx, uint32_t w, bool stale);

/* Matched prefix depth per worker: for each w < nworkers (at most max_workers), depth[w] is the
 * number of leading hashes of chain[0..n) that worker w holds in any tier, stopping at its first
 * miss; gpu_depth (may be NULL) the same counting only GPU-resident blocks. Stale workers get 0.
 * Allocates nothing; takes the read lock. Returns the largest depth, or -EINVAL when nworkers
 * exceeds max_workers. */
int index_query(struct index *idx, const uint64_t *chain, size_t n, uint32_t *depth,
		uint32_t *gpu_depth, size_t nworkers);

/* Blocks worker w holds in GPU and in CPU tier (a block in both counts in both). */
int index_worker_blocks(struct index *idx, uint32_t w, uint64_t *gpu, uint64_t *cpu);

/* Distinct blocks at chain position pos that some worker holds in GPU tier (positions from
 * INDEX_POS_MAX - 1 on share one count): how many prefixes the cluster holds that branch off
 * there. Takes the read lock. */
uint32_t index_blocks_at(struct index *idx, uint32_t pos);
/* GPU-tier blocks worker w holds at chain position pos (0: block 0 of a sequence; positions from
 * INDEX_POS_MAX - 1 on share one count). The kv policy's measure of how many distinct prefixes
 * branch off at a position on a worker. 0 for w out of range. Takes the read lock. */
uint32_t index_worker_blocks_at(struct index *idx, uint32_t w, uint32_t pos);

/* Whether worker w is marked stale. */
bool index_worker_stale(struct index *idx, uint32_t w);

/* Calls fn(arg, engine, own, tiers) for every block worker w holds (read lock held meanwhile;
 * fn must not call back into the index). Returns the number of calls or -EINVAL. */
int index_worker_foreach(struct index *idx, uint32_t w,
			 void (*fn)(void *arg, uint64_t engine, uint64_t own, unsigned tiers),
			 void *arg);

/* Counters and sizes. */
void index_stats(struct index *idx, struct index_stats *st);

/* The series index_metrics writes (daemon/catalog.c lists them for docs/reference/metrics.md). */
extern const struct metrics_family index_families[];
extern const size_t index_nfamilies;

/* Appends Prometheus text for the index (index_families) to out. names[w] (may be NULL, or
 * NULL entries) labels worker w; only workers with blocks or a name are listed. 0 or -ENOMEM. */
int index_metrics(struct index *idx, const char *const *names, size_t nnames, struct buf *out);

/* Appends a JSON object summarising the index (config, stats, per-worker blocks) to out. */
int index_debug_json(struct index *idx, const char *const *names, size_t nnames, struct buf *out);

#endif
