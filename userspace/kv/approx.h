/* SPDX-License-Identifier: Apache-2.0 */
/* approx: what each worker probably holds when no KV event says so. Every routed request's block
 * chain is assumed cached on the worker it was sent to for ttl seconds from its last use (NVIDIA
 * Dynamo's "approximate mode"). The router keeps one for the `approx` policy (no
 * event ports reachable) and for requests that cannot be tokenized exactly (chains over raw text
 * chunks: blockhash_bytes_chain). It never sees evictions, so it over-estimates a busy worker's
 * cache and under-estimates nothing it routed itself: a view, not the truth.
 *
 * Model: per worker, chain hash -> (expiry, chain position). Queries walk the chain from block 0
 * and stop at the first block absent or expired, as the real cache lookup does. A worker whose
 * capacity is known (approx_set_capacity: its KV blocks, from its metrics) is also assumed to
 * evict as vLLM does: a request's blocks count as held only until more than the capacity of new
 * blocks have been routed to that worker after them (approx.c, "Capacity"), so a busy worker's
 * cache is not over-estimated for the whole ttl. The count of live
 * blocks per worker and chain position (approx_blocks_at) serves the kv policy's bounded load,
 * as index_worker_blocks_at does for the event-fed index.
 *
 * Memory: cfg.max_entries bounds the (worker, block) pairs; past it the entries closest to expiry
 * go first (counted). Pairs are 24-byte slots of a table kept between 1/8 and 1/2 full: 48 MiB
 * at the default bound, plus 1 KiB per worker for the counts (approx_stats reports the bytes).
 * Not thread-safe: the loop thread owns it. */
#ifndef KVS_APPROX_H
#define KVS_APPROX_H

#include <stddef.h>
#include <stdint.h>

/* Seconds a routed request's blocks are assumed cached (Dynamo's default). */
#ifndef APPROX_DEFAULT_TTL_S
#define APPROX_DEFAULT_TTL_S 120.0
#endif
/* Default bound on (worker, block) pairs held. */
#ifndef APPROX_DEFAULT_MAX_ENTRIES
#define APPROX_DEFAULT_MAX_ENTRIES (1u << 20)
#endif
/* Chain positions counted separately by approx_blocks_at; deeper ones share the last count. */
#ifndef APPROX_POS_MAX
#define APPROX_POS_MAX 256
#endif
/* Largest max_workers accepted. */
#define APPROX_MAX_WORKERS 4096
/* Longest ttl accepted, seconds (expiries are kept in 32-bit milliseconds). */
#define APPROX_MAX_TTL_S 1000000

struct approx;

/* What approx_cfg_default gives; max_entries 0 is off (no bound), the others must be set. */
struct approx_cfg {
	uint32_t
	    max_workers; /* worker ids are 0..max_workers-1 (1..APPROX_MAX_WORKERS; default 256) */
	double ttl_s; /* how long a routed block counts as cached (0 < ttl <= APPROX_MAX_TTL_S) */
	size_t max_entries; /* (worker, block) pairs held at most; 0: no bound */
};

/* Fills c with the defaults: 256 workers, APPROX_DEFAULT_TTL_S, APPROX_DEFAULT_MAX_ENTRIES. */
void approx_cfg_default(struct approx_cfg *c);

struct approx_stats {
	uint64_t entries;   /* (worker, block) pairs held, expired ones not yet dropped included */
	uint64_t inserted;  /* pairs added (a pair used again after its expiry counts again) */
	uint64_t refreshed; /* live pairs used again (their expiry pushed back) */
	uint64_t expired;   /* pairs dropped at or after their expiry */
	uint64_t displaced; /* pairs dropped because their worker's capacity of newer blocks came */
	uint64_t evicted;   /* pairs dropped, or not recorded, by the max_entries bound */
	uint64_t bytes;	    /* heap bytes held */
};

/* Creates an empty view (cfg NULL: all defaults) in *out. Returns 0, -EINVAL for a bad cfg
 * (max_workers above APPROX_MAX_WORKERS, ttl_s negative, NaN or above APPROX_MAX_TTL_S), -ENOMEM
 * (*out is then NULL). Times are seconds on any clock that does not go back, kept to the
 * millisecond. */
int approx_new(const struct approx_cfg *cfg, struct approx **out);
/* Frees the view (NULL is fine). */
void approx_free(struct approx *a);

/* Records that worker w now holds chain[0..n) (chain position i for chain[i]) until now + ttl:
 * a pair already held takes the later expiry and the new position. Past max_entries the pairs
 * closest to expiry are evicted; when none is left but w's as fresh as these (a chain longer
 * than the bound), the remaining blocks are not recorded (counted as evicted). Returns 0; -EINVAL
 * for w out of range or a hash of 0 (the blocks before it are recorded); -ENOMEM (fewer blocks
 * recorded). */
int approx_insert(struct approx *a, uint32_t w, const uint64_t *chain, size_t n, double now);

/* Worker w's KV cache capacity in blocks (0: unknown, the default: ttl alone decides). Pairs
 * already recorded are judged by the new capacity from now on. No-op for w out of range. */
void approx_set_capacity(struct approx *a, uint32_t w, uint32_t blocks);

/* For each w < nworkers: depth[w] = leading blocks of chain[0..n) that w holds and that have not
 * expired at now (a pair used at t expires at t + ttl exactly) nor been displaced by the
 * worker's capacity of newer blocks. A hash of 0 is never held.
 * Returns the largest depth, or -EINVAL when nworkers exceeds max_workers. Allocates nothing. */
int approx_query(struct approx *a, const uint64_t *chain, size_t n, double now, uint32_t *depth,
		 size_t nworkers);

/* Live blocks worker w holds at chain position pos (positions >= APPROX_POS_MAX - 1 share one
 * count). Expired entries not yet dropped by approx_expire may still be counted. 0 for w out of
 * range. */
uint32_t approx_blocks_at(const struct approx *a, uint32_t w, uint32_t pos);

/* Drops every block of worker w (no-op for w out of range). One pass over the table: for a
 * removed or restarted worker, not for the request path. */
void approx_worker_clear(struct approx *a, uint32_t w);

/* Drops entries expired at now; bounded work per call (amortised), so call it often (the
 * router calls it from its tick): a clock hand visits a fixed share of the table per call, so an
 * expired entry is dropped within APPROX_EXPIRE_LAP (approx.c, 256) calls. Also shrinks a table
 * that emptied. */
void approx_expire(struct approx *a, double now);

/* Counters and sizes. */
void approx_stats(const struct approx *a, struct approx_stats *st);

#endif
