// SPDX-License-Identifier: Apache-2.0
// index: own block hash -> worker bitmaps per tier; per worker engine hash -> own hash.
// Both tables are open addressing with linear probing and backward-shift deletion (no
// tombstones), so lookups stay short however many blocks come and go.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/mix.h"
#include "kv/blockhash.h"
#include "kv/index.h"

/* Initial slots of the global table and of each worker table (powers of two). */
#define G_MIN_CAP 1024
#define W_MIN_CAP 64
#ifndef TABLE_HUGE_MIN
#define TABLE_HUGE_MIN (4u << 20)
#endif
/* Blocks of one event hashed and prefetched together on ingest. */
#define BATCH 16
/* How many chain hashes ahead index_query prefetches the home slot of. */
#ifndef QUERY_PREFETCH
#define QUERY_PREFETCH 8
#endif

_Static_assert(INDEX_POS_MAX >= 2 && INDEX_POS_MAX <= 256, "positions are kept in a byte");

/* A worker's blocks: engine hash -> own hash (own == 0 marks an empty slot), tier bits and chain
 * position (saturated at INDEX_POS_MAX - 1). */
struct wslot {
	uint64_t key;
	uint64_t own;
};

struct wtab {
	struct wslot *s;
	uint8_t *tier;
	uint8_t *pos;
	uint32_t *at; /* GPU-tier blocks per chain position (INDEX_POS_MAX counts) */
	size_t cap, n;
	size_t cursor; /* clock hand for max_entries eviction */
	uint64_t n_gpu, n_cpu;
};

/* Entry i of t enters (+1) or leaves (-1) the GPU tier. */
static inline void gpu_count(struct wtab *t, size_t i, int d)
{
	t->n_gpu += (uint64_t)(int64_t)d;
	t->at[t->pos[i]] += (uint32_t)d;
}

struct index {
	pthread_rwlock_t lock;
	uint32_t max_workers, words, stride, bs;
	uint64_t seed;
	size_t max_entries; /* 0: no bound */
	/* global table: cap slots of stride u64: [own hash][gpu bitmap words][cpu bitmap words] */
	uint64_t *g;
	size_t gcap, gn;
	struct wtab *w;
	uint64_t *stale;	     /* bitmap of stale workers */
	uint32_t gat[INDEX_POS_MAX]; /* distinct blocks some worker holds in GPU tier, per chain
					position (saturated like a worker's) */
	struct index_stats st;
};

/* Zeroed table memory. Large tables ask for transparent huge pages: lookups probe at random
 * across tens of MB, and with 4 KiB pages nearly every probe is also a TLB miss. */
static void *table_alloc(size_t n, size_t size)
{
	const size_t huge = 2u << 20;
	size_t bytes = n * size;
	void *p;

	if (size && bytes / size != n)
		return NULL;
	if (bytes < TABLE_HUGE_MIN)
		return calloc(n, size);
	bytes = (bytes + huge - 1) & ~(huge - 1);
	p = aligned_alloc(huge, bytes);
	if (!p)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	memset(p, 0, bytes);
	return p;
}

/* ---- global table ---------------------------------------------------------------------- */

static inline uint64_t *g_slot(const struct index *idx, size_t i)
{
	return idx->g + i * idx->stride;
}

static uint64_t *g_find(const struct index *idx, uint64_t h)
{
	size_t mask = idx->gcap - 1, i = h & mask;

	for (;;) {
		uint64_t *s = g_slot(idx, i);
		if (s[0] == h)
			return s;
		if (!s[0])
			return NULL;
		i = (i + 1) & mask;
	}
}

static int g_resize(struct index *idx, size_t ncap)
{
	uint64_t *ng = table_alloc(ncap, (size_t)idx->stride * 8), *old = idx->g;
	size_t ocap = idx->gcap, i, mask = ncap - 1;

	if (!ng)
		return -ENOMEM;
	for (i = 0; i < ocap; i++) {
		uint64_t *s = old + i * idx->stride;
		size_t j;
		if (!s[0])
			continue;
		for (j = s[0] & mask; ng[j * idx->stride]; j = (j + 1) & mask)
			;
		memcpy(ng + j * idx->stride, s, (size_t)idx->stride * 8);
	}
	free(old);
	idx->g = ng;
	idx->gcap = ncap;
	return 0;
}

/* The slot of h, created empty (no worker bits) when absent. NULL on ENOMEM. */
static uint64_t *g_get(struct index *idx, uint64_t h)
{
	size_t mask, i;
	uint64_t *s = g_find(idx, h);

	if (s)
		return s;
	if ((idx->gn + 1) * 8 > idx->gcap * 5 && g_resize(idx, idx->gcap * 2))
		return NULL;
	mask = idx->gcap - 1;
	for (i = h & mask; g_slot(idx, i)[0]; i = (i + 1) & mask)
		;
	s = g_slot(idx, i);
	s[0] = h;
	idx->gn++;
	return s;
}

static void g_delete(struct index *idx, uint64_t *s)
{
	size_t mask = idx->gcap - 1, i = (size_t)(s - idx->g) / idx->stride, j = i;

	for (;;) {
		uint64_t *sj;
		size_t k;
		j = (j + 1) & mask;
		sj = g_slot(idx, j);
		if (!sj[0])
			break;
		k = sj[0] & mask;
		/* move sj back to the hole at i unless its home lies cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		memcpy(g_slot(idx, i), sj, (size_t)idx->stride * 8);
		i = j;
	}
	memset(g_slot(idx, i), 0, (size_t)idx->stride * 8);
	idx->gn--;
	if (idx->gcap > G_MIN_CAP && idx->gn * 16 < idx->gcap)
		(void)g_resize(idx, idx->gcap / 2); /* on ENOMEM simply stay large */
}

static inline bool g_bits_empty(const struct index *idx, const uint64_t *s)
{
	for (uint32_t k = 1; k < idx->stride; k++)
		if (s[k])
			return false;
	return true;
}

static inline bool g_gpu_empty(const struct index *idx, const uint64_t *s)
{
	for (uint32_t k = 1; k <= idx->words; k++)
		if (s[k])
			return false;
	return true;
}

/* Sets worker w's GPU bit on global entry s of a block at chain position pos. */
static void g_gpu_set(struct index *idx, uint64_t *s, uint32_t w, uint8_t pos)
{
	if (g_gpu_empty(idx, s))
		idx->gat[pos]++;
	s[1 + (w >> 6)] |= 1ULL << (w & 63);
}

/* Clears worker w's tier bits on own hash h (a block at chain position pos); deletes the entry
 * when no bit is left. */
static void g_clear(struct index *idx, uint64_t h, uint32_t w, unsigned tiers, uint8_t pos)
{
	uint64_t *s = g_find(idx, h), bit = 1ULL << (w & 63);

	if (!s)
		return;
	if ((tiers & INDEX_TIER_GPU) && (s[1 + (w >> 6)] & bit)) {
		s[1 + (w >> 6)] &= ~bit;
		if (g_gpu_empty(idx, s) && idx->gat[pos])
			idx->gat[pos]--;
	}
	if (tiers & INDEX_TIER_CPU)
		s[1 + idx->words + (w >> 6)] &= ~bit;
	if (g_bits_empty(idx, s))
		g_delete(idx, s);
}

/* ---- worker tables --------------------------------------------------------------------- */

static long w_find(const struct wtab *t, uint64_t key)
{
	size_t mask, i;

	if (!t->cap)
		return -1;
	mask = t->cap - 1;
	for (i = mix64(key) & mask; t->s[i].own; i = (i + 1) & mask)
		if (t->s[i].key == key)
			return (long)i;
	return -1;
}

static int w_resize(struct wtab *t, size_t ncap)
{
	struct wslot *ns = table_alloc(ncap, sizeof(*ns));
	uint8_t *nt = table_alloc(ncap, 1), *np = table_alloc(ncap, 1);
	uint32_t *at = t->at ? t->at : calloc(INDEX_POS_MAX, sizeof(*at));
	size_t i, mask = ncap - 1;

	if (!ns || !nt || !np || !at) {
		free(ns);
		free(nt);
		free(np);
		if (at != t->at)
			free(at);
		return -ENOMEM;
	}
	for (i = 0; i < t->cap; i++) {
		size_t j;
		if (!t->s[i].own)
			continue;
		for (j = mix64(t->s[i].key) & mask; ns[j].own; j = (j + 1) & mask)
			;
		ns[j] = t->s[i];
		nt[j] = t->tier[i];
		np[j] = t->pos[i];
	}
	free(t->s);
	free(t->tier);
	free(t->pos);
	t->s = ns;
	t->tier = nt;
	t->pos = np;
	t->at = at;
	t->cap = ncap;
	t->cursor = 0;
	return 0;
}

/* Inserts key (absent) with own hash own at chain position pos; returns its slot or -ENOMEM. */
static long w_insert(struct wtab *t, uint64_t key, uint64_t own, uint8_t pos)
{
	size_t mask, i;

	if ((t->n + 1) * 4 > t->cap * 3 && w_resize(t, t->cap ? t->cap * 2 : W_MIN_CAP))
		return -ENOMEM;
	mask = t->cap - 1;
	for (i = mix64(key) & mask; t->s[i].own; i = (i + 1) & mask)
		;
	t->s[i].key = key;
	t->s[i].own = own;
	t->tier[i] = 0;
	t->pos[i] = pos;
	t->n++;
	return (long)i;
}

static void w_delete(struct wtab *t, size_t i)
{
	size_t mask = t->cap - 1, j = i;

	for (;;) {
		size_t k;
		j = (j + 1) & mask;
		if (!t->s[j].own)
			break;
		k = mix64(t->s[j].key) & mask;
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->s[i] = t->s[j];
		t->tier[i] = t->tier[j];
		t->pos[i] = t->pos[j];
		i = j;
	}
	t->s[i].own = 0;
	t->s[i].key = 0;
	t->tier[i] = 0;
	t->pos[i] = 0;
	t->n--;
}

static void w_free(struct wtab *t)
{
	free(t->s);
	free(t->tier);
	free(t->pos);
	free(t->at);
	memset(t, 0, sizeof(*t));
}

/* Drops entry i of worker w entirely (all its tiers), from both tables. */
static void drop_entry(struct index *idx, uint32_t w, size_t i)
{
	struct wtab *t = &idx->w[w];
	unsigned tiers = t->tier[i];

	g_clear(idx, t->s[i].own, w, tiers, t->pos[i]);
	if (tiers & INDEX_TIER_GPU)
		gpu_count(t, i, -1);
	if (tiers & INDEX_TIER_CPU)
		t->n_cpu--;
	w_delete(t, i);
	idx->st.entries--;
}

/* max_entries bound: one entry of the worker holding most, at its clock hand. */
static void evict_one(struct index *idx)
{
	uint32_t w, best = 0;
	struct wtab *t;

	for (w = 1; w < idx->max_workers; w++)
		if (idx->w[w].n > idx->w[best].n)
			best = w;
	t = &idx->w[best];
	if (!t->n)
		return;
	while (!t->s[t->cursor & (t->cap - 1)].own)
		t->cursor++;
	drop_entry(idx, best, t->cursor & (t->cap - 1));
	idx->st.evictions++;
}

/* ---- public ---------------------------------------------------------------------------- */

void index_cfg_default(struct index_cfg *c)
{
	c->max_workers = INDEX_DEFAULT_MAX_WORKERS;
	c->block_size = BLOCKHASH_DEFAULT_BLOCK_SIZE;
	c->seed = BLOCKHASH_DEFAULT_SEED;
	c->max_entries = INDEX_DEFAULT_MAX_ENTRIES;
}

int index_new(const struct index_cfg *cfg, struct index **out)
{
	struct index *idx = calloc(1, sizeof(*idx));
	struct index_cfg dflt;
	uint32_t mw, bs;
	int rc = -ENOMEM;

	*out = NULL;
	if (!idx)
		return -ENOMEM;
	if (!cfg) {
		index_cfg_default(&dflt);
		cfg = &dflt;
	}
	mw = cfg->max_workers;
	bs = cfg->block_size;
	if (!mw || mw > INDEX_MAX_WORKERS || !bs || bs > BLOCKHASH_MAX_BLOCK_SIZE) {
		rc = -EINVAL;
		goto cleanup;
	}
	idx->max_workers = mw;
	idx->words = (mw + 63) / 64;
	idx->stride = 1 + 2 * idx->words;
	idx->bs = bs;
	idx->seed = cfg->seed;
	idx->max_entries = cfg->max_entries;
	idx->gcap = G_MIN_CAP;
	idx->g = calloc(idx->gcap, (size_t)idx->stride * 8);
	idx->w = calloc(mw, sizeof(*idx->w));
	idx->stale = calloc(idx->words, 8);
	if (!idx->g || !idx->w || !idx->stale)
		goto cleanup;
	if ((rc = pthread_rwlock_init(&idx->lock, NULL))) {
		rc = -rc;
		goto cleanup;
	}
	*out = idx;
	return 0;
cleanup:
	free(idx->g);
	free(idx->w);
	free(idx->stale);
	free(idx);
	return rc;
}

void index_free(struct index *idx)
{
	if (!idx)
		return;
	for (uint32_t w = 0; w < idx->max_workers; w++)
		w_free(&idx->w[w]);
	pthread_rwlock_destroy(&idx->lock);
	free(idx->g);
	free(idx->w);
	free(idx->stale);
	free(idx);
}

uint32_t index_block_size(const struct index *idx)
{
	return idx->bs;
}

uint64_t index_seed(const struct index *idx)
{
	return idx->seed;
}

uint32_t index_max_workers(const struct index *idx)
{
	return idx->max_workers;
}

void index_write_lock(struct index *idx)
{
	pthread_rwlock_wrlock(&idx->lock);
}

void index_write_unlock(struct index *idx)
{
	pthread_rwlock_unlock(&idx->lock);
}

int index_block_stored(struct index *idx, uint32_t w, const struct index_stored *s)
{
	struct wtab *t;
	uint64_t parent, bit;
	unsigned tier = s->tier & INDEX_TIER_ALL ? s->tier & INDEX_TIER_ALL : INDEX_TIER_GPU;
	uint64_t owns[BATCH];
	unsigned pos0 = 0; /* chain position of the event's first block */
	int added = 0;

	if (w >= idx->max_workers || s->block_size != idx->bs || s->n_tokens / idx->bs != s->n ||
	    s->n_tokens % idx->bs) {
		idx->st.rejected++;
		return -EINVAL;
	}
	t = &idx->w[w];
	bit = 1ULL << (w & 63);
	if (s->has_parent) {
		long pi = w_find(t, s->parent);
		if (pi < 0) {
			idx->st.orphans += s->n;
			return 0;
		}
		parent = t->s[pi].own;
		pos0 = t->pos[pi] + 1u;
	} else {
		parent = s->root;
	}
	for (size_t k = 0; k < s->n; k++) {
		uint64_t *gs, own;
		uint8_t pos;
		long i;

		if (k % BATCH == 0) {
			/* Hash the next BATCH blocks, then prefetch their slots in both tables:
			 * each is a likely cache (and TLB) miss, and issuing them together overlaps
			 * them. */
			size_t m = s->n - k < BATCH ? s->n - k : BATCH;
			for (size_t j = 0; j < m; j++) {
				const void *ex = s->extra ? s->extra[k + j] : NULL;
				size_t exl = s->extra_len ? s->extra_len[k + j] : 0;
				parent = blockhash_block(idx->seed, parent,
							 s->tokens + (k + j) * idx->bs, idx->bs, ex,
							 ex ? exl : 0);
				owns[j] = parent;
				__builtin_prefetch(g_slot(idx, parent & (idx->gcap - 1)));
				if (t->cap) {
					size_t home = mix64(s->engine[k + j]) & (t->cap - 1);
					__builtin_prefetch(&t->s[home]);
					__builtin_prefetch(&t->tier[home]); /* a third miss */
				}
			}
		}
		own = owns[k % BATCH];
		pos = pos0 + k < INDEX_POS_MAX - 1 ? (uint8_t)(pos0 + k) : INDEX_POS_MAX - 1;
		i = w_find(t, s->engine[k]);
		if (i >= 0 && t->s[i].own == own) {
			unsigned add = tier & ~t->tier[i];
			if (!add) {
				idx->st.duplicates++;
				continue;
			}
			gs = g_find(idx, own);
			if (gs && (add & INDEX_TIER_GPU)) /* always present while the entry is */
				g_gpu_set(idx, gs, w, t->pos[i]);
			if (gs && (add & INDEX_TIER_CPU))
				gs[1 + idx->words + (w >> 6)] |= bit;
			t->tier[i] |= (uint8_t)add;
			if (add & INDEX_TIER_GPU)
				gpu_count(t, (size_t)i, 1);
			if (add & INDEX_TIER_CPU)
				t->n_cpu++;
			continue;
		}
		if (i >= 0) {
			/* same engine hash, other tokens: the engine's view changed; trust the news
			 */
			idx->st.conflicts++;
			drop_entry(idx, w, (size_t)i);
		}
		gs = g_get(idx, own);
		if (!gs)
			return -ENOMEM;
		if ((gs[1 + (w >> 6)] | gs[1 + idx->words + (w >> 6)]) & bit)
			idx->st.aliases++;
		i = w_insert(t, s->engine[k], own, pos);
		if (i < 0) {
			if (g_bits_empty(idx, gs))
				g_delete(idx, gs);
			return -ENOMEM;
		}
		gs = g_find(idx, own); /* w_insert does not move it, but stay obvious */
		if (tier & INDEX_TIER_GPU) {
			g_gpu_set(idx, gs, w, pos);
			gpu_count(t, (size_t)i, 1);
		}
		if (tier & INDEX_TIER_CPU) {
			gs[1 + idx->words + (w >> 6)] |= bit;
			t->n_cpu++;
		}
		t->tier[i] = (uint8_t)tier;
		idx->st.entries++;
		idx->st.stored++;
		added++;
		while (idx->max_entries && idx->st.entries > idx->max_entries)
			evict_one(idx);
	}
	return added;
}

int index_block_removed(struct index *idx, uint32_t w, unsigned tier, const uint64_t *engine,
			size_t n)
{
	struct wtab *t;
	int gone = 0;

	if (w >= idx->max_workers) {
		idx->st.rejected++;
		return -EINVAL;
	}
	t = &idx->w[w];
	tier &= INDEX_TIER_ALL;
	if (!tier)
		tier = INDEX_TIER_GPU;
	for (size_t k = 0; k < n; k++) {
		long i;
		unsigned drop;

		if (k % BATCH == 0 && t->cap) {
			/* prefetch the worker slots, then (once they are in) the global slots */
			size_t m = n - k < BATCH ? n - k : BATCH;
			for (size_t j = 0; j < m; j++)
				__builtin_prefetch(&t->s[mix64(engine[k + j]) & (t->cap - 1)]);
			for (size_t j = 0; j < m; j++) {
				long x = w_find(t, engine[k + j]);
				if (x >= 0) {
					__builtin_prefetch(
					    g_slot(idx, t->s[x].own & (idx->gcap - 1)));
					__builtin_prefetch(&t->tier[x]);
				}
			}
		}
		i = w_find(t, engine[k]);
		if (i < 0 || !(t->tier[i] & tier)) {
			idx->st.unknown_removes++;
			continue;
		}
		drop = t->tier[i] & tier;
		idx->st.removed++;
		if (drop == t->tier[i]) {
			drop_entry(idx, w, (size_t)i);
			gone++;
			continue;
		}
		g_clear(idx, t->s[i].own, w, drop, t->pos[i]);
		t->tier[i] &= (uint8_t)~drop;
		if (drop & INDEX_TIER_GPU)
			gpu_count(t, (size_t)i, -1);
		if (drop & INDEX_TIER_CPU)
			t->n_cpu--;
	}
	return gone;
}

int index_worker_clear(struct index *idx, uint32_t w)
{
	struct wtab *t;
	int n;

	if (w >= idx->max_workers)
		return -EINVAL;
	t = &idx->w[w];
	n = (int)t->n;
	for (size_t i = 0; i < t->cap; i++)
		if (t->s[i].own)
			g_clear(idx, t->s[i].own, w, t->tier[i], t->pos[i]);
	idx->st.entries -= t->n;
	w_free(t);
	idx->stale[w >> 6] &= ~(1ULL << (w & 63));
	idx->st.cleared++;
	return n;
}

int index_worker_set_stale(struct index *idx, uint32_t w, bool stale)
{
	if (w >= idx->max_workers)
		return -EINVAL;
	if (stale)
		idx->stale[w >> 6] |= 1ULL << (w & 63);
	else
		idx->stale[w >> 6] &= ~(1ULL << (w & 63));
	return 0;
}

bool index_worker_stale(struct index *idx, uint32_t w)
{
	bool r;

	if (w >= idx->max_workers)
		return false;
	pthread_rwlock_rdlock(&idx->lock);
	r = idx->stale[w >> 6] >> (w & 63) & 1;
	pthread_rwlock_unlock(&idx->lock);
	return r;
}

/* Sets depth d for every worker whose bit is in dropped (word k). */
static inline void set_depth(uint32_t *depth, size_t k, uint64_t dropped, uint32_t d)
{
	while (dropped) {
		depth[k * 64 + (size_t)__builtin_ctzll(dropped)] = d;
		dropped &= dropped - 1;
	}
}

int index_query(struct index *idx, const uint64_t *chain, size_t n, uint32_t *depth,
		uint32_t *gpu_depth, size_t nworkers)
{
	uint64_t act[INDEX_MAX_WORKERS / 64], gact[INDEX_MAX_WORKERS / 64];
	size_t words = (nworkers + 63) / 64, i, k, mask;
	uint32_t best = 0;

	if (nworkers > idx->max_workers)
		return -EINVAL;
	memset(depth, 0, nworkers * sizeof(*depth));
	if (gpu_depth)
		memset(gpu_depth, 0, nworkers * sizeof(*gpu_depth));
	if (!nworkers || !n)
		return 0;
	pthread_rwlock_rdlock(&idx->lock);
	mask = idx->gcap - 1;
	for (k = 0; k < words; k++) {
		act[k] = ~0ULL;
		if (k == words - 1 && nworkers % 64)
			act[k] = (1ULL << (nworkers % 64)) - 1;
		act[k] &= ~idx->stale[k];
		gact[k] = act[k];
	}
	for (i = 0; i < n && i < QUERY_PREFETCH; i++)
		__builtin_prefetch(g_slot(idx, chain[i] & mask));
	for (i = 0; i < n; i++) {
		const uint64_t *s;
		uint64_t any_act = 0;

		if (i + QUERY_PREFETCH < n)
			__builtin_prefetch(g_slot(idx, chain[i + QUERY_PREFETCH] & mask));
		s = g_find(idx, chain[i]);
		if (!s)
			break;
		for (k = 0; k < words; k++) {
			uint64_t g = s[1 + k], c = s[1 + idx->words + k];
			uint64_t na = act[k] & (g | c), ng = gact[k] & g;
			set_depth(depth, k, act[k] & ~na, (uint32_t)i);
			if (gpu_depth)
				set_depth(gpu_depth, k, gact[k] & ~ng, (uint32_t)i);
			act[k] = na;
			gact[k] = ng;
			any_act |= na;
		}
		if (!any_act) /* no GPU bit without a holder bit, so gact is empty too */
			break;
		best = (uint32_t)i + 1;
	}
	for (k = 0; k < words; k++) {
		set_depth(depth, k, act[k], (uint32_t)i);
		if (gpu_depth)
			set_depth(gpu_depth, k, gact[k], (uint32_t)i);
	}
	pthread_rwlock_unlock(&idx->lock);
	return (int)best;
}

int index_worker_blocks(struct index *idx, uint32_t w, uint64_t *gpu, uint64_t *cpu)
{
	if (w >= idx->max_workers)
		return -EINVAL;
	pthread_rwlock_rdlock(&idx->lock);
	if (gpu)
		*gpu = idx->w[w].n_gpu;
	if (cpu)
		*cpu = idx->w[w].n_cpu;
	pthread_rwlock_unlock(&idx->lock);
	return 0;
}

uint32_t index_blocks_at(struct index *idx, uint32_t pos)
{
	uint32_t n;

	pthread_rwlock_rdlock(&idx->lock);
	n = idx->gat[pos < INDEX_POS_MAX - 1 ? pos : INDEX_POS_MAX - 1];
	pthread_rwlock_unlock(&idx->lock);
	return n;
}

uint32_t index_worker_blocks_at(struct index *idx, uint32_t w, uint32_t pos)
{
	uint32_t n = 0;

	if (w >= idx->max_workers)
		return 0;
	pthread_rwlock_rdlock(&idx->lock);
	if (idx->w[w].at)
		n = idx->w[w].at[pos < INDEX_POS_MAX - 1 ? pos : INDEX_POS_MAX - 1];
	pthread_rwlock_unlock(&idx->lock);
	return n;
}

int index_worker_foreach(struct index *idx, uint32_t w,
			 void (*fn)(void *arg, uint64_t engine, uint64_t own, unsigned tiers),
			 void *arg)
{
	struct wtab *t;
	int n = 0;

	if (w >= idx->max_workers)
		return -EINVAL;
	pthread_rwlock_rdlock(&idx->lock);
	t = &idx->w[w];
	for (size_t i = 0; i < t->cap; i++)
		if (t->s[i].own) {
			fn(arg, t->s[i].key, t->s[i].own, t->tier[i]);
			n++;
		}
	pthread_rwlock_unlock(&idx->lock);
	return n;
}

static void stats_locked(struct index *idx, struct index_stats *st)
{
	uint64_t bytes = sizeof(*idx) + (uint64_t)idx->gcap * idx->stride * 8 +
			 (uint64_t)idx->max_workers * sizeof(struct wtab) + idx->words * 8;

	for (uint32_t w = 0; w < idx->max_workers; w++)
		bytes += idx->w[w].cap * (sizeof(struct wslot) + 2) +
			 (idx->w[w].at ? INDEX_POS_MAX * sizeof(uint32_t) : 0);
	*st = idx->st;
	st->unique_blocks = idx->gn;
	st->bytes = bytes;
}

void index_stats(struct index *idx, struct index_stats *st)
{
	pthread_rwlock_rdlock(&idx->lock);
	stats_locked(idx, st);
	pthread_rwlock_unlock(&idx->lock);
}

/* Appends a Prometheus label value / JSON-safe worker name (quotes, backslashes, newlines
 * escaped). */
static int put_label(struct buf *out, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		if (*s == '"' || *s == '\\')
			rc = buf_printf(out, "\\%c", *s);
		else if (*s == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_append(out, s, 1);
	}
	return rc;
}

static const char *wname(const char *const *names, size_t nnames, uint32_t w)
{
	return names && w < nnames ? names[w] : NULL;
}

/* index_metrics' families, in the order it writes them; the scalars first (IF_BLOCKS is last). */
enum {
	IF_BYTES,
	IF_UNIQUE,
	IF_ENTRIES,
	IF_STORED,
	IF_DUPLICATES,
	IF_ORPHANS,
	IF_ALIASES,
	IF_CONFLICTS,
	IF_REMOVED,
	IF_UNKNOWN_REMOVES,
	IF_CLEARED,
	IF_EVICTIONS,
	IF_REJECTED,
	IF_BLOCKS,
	IF_COUNT
};

const struct metrics_family index_families[] = {
    [IF_BYTES] = {"kvsplice_index_bytes", METRICS_GAUGE, "Heap bytes held by the block index.",
		  NULL},
    [IF_UNIQUE] = {"kvsplice_index_unique_blocks", METRICS_GAUGE,
		   "Distinct blocks held by any worker.", NULL},
    [IF_ENTRIES] = {"kvsplice_index_entries", METRICS_GAUGE, "(worker, block) pairs held.", NULL},
    [IF_STORED] = {"kvsplice_index_blocks_stored_total", METRICS_COUNTER,
		   "Blocks added to the index.", NULL},
    [IF_DUPLICATES] = {"kvsplice_index_duplicate_blocks_total", METRICS_COUNTER,
		       "Blocks stored again (no-ops).", NULL},
    [IF_ORPHANS] = {"kvsplice_index_orphan_blocks_total", METRICS_COUNTER,
		    "Stored blocks dropped because their parent was unknown.", NULL},
    [IF_ALIASES] = {"kvsplice_index_alias_blocks_total", METRICS_COUNTER,
		    "Engine hashes of one worker that gave an already held block.", NULL},
    [IF_CONFLICTS] = {"kvsplice_index_conflict_blocks_total", METRICS_COUNTER,
		      "Engine hashes re-stored with other tokens.", NULL},
    [IF_REMOVED] = {"kvsplice_index_blocks_removed_total", METRICS_COUNTER,
		    "Blocks removed by BlockRemoved.", NULL},
    [IF_UNKNOWN_REMOVES] = {"kvsplice_index_unknown_removes_total", METRICS_COUNTER,
			    "BlockRemoved for blocks the index did not hold.", NULL},
    [IF_CLEARED] = {"kvsplice_index_worker_clears_total", METRICS_COUNTER, "Whole-worker clears.",
		    NULL},
    [IF_EVICTIONS] = {"kvsplice_index_evictions_total", METRICS_COUNTER,
		      "Entries evicted by the memory bound.", NULL},
    [IF_REJECTED] = {"kvsplice_index_rejected_events_total", METRICS_COUNTER,
		     "Events refused (block size, token count, worker id).", NULL},
    [IF_BLOCKS] = {"kvsplice_index_blocks", METRICS_GAUGE, "Blocks a worker holds, per tier.",
		   "worker,tier"},
};
const size_t index_nfamilies = IF_COUNT;
_Static_assert(sizeof(index_families) / sizeof(index_families[0]) == IF_COUNT,
	       "a family per IF_ entry");

int index_metrics(struct index *idx, const char *const *names, size_t nnames, struct buf *out)
{
	struct index_stats st;
	uint64_t v[IF_BLOCKS];
	int rc = 0;

	pthread_rwlock_rdlock(&idx->lock);
	stats_locked(idx, &st);
	v[IF_BYTES] = st.bytes;
	v[IF_UNIQUE] = st.unique_blocks;
	v[IF_ENTRIES] = st.entries;
	v[IF_STORED] = st.stored;
	v[IF_DUPLICATES] = st.duplicates;
	v[IF_ORPHANS] = st.orphans;
	v[IF_ALIASES] = st.aliases;
	v[IF_CONFLICTS] = st.conflicts;
	v[IF_REMOVED] = st.removed;
	v[IF_UNKNOWN_REMOVES] = st.unknown_removes;
	v[IF_CLEARED] = st.cleared;
	v[IF_EVICTIONS] = st.evictions;
	v[IF_REJECTED] = st.rejected;
	for (int k = 0; k < IF_BLOCKS; k++) {
		rc |= metrics_head(out, &index_families[k]);
		rc |=
		    buf_printf(out, "%s %llu\n", index_families[k].name, (unsigned long long)v[k]);
	}
	rc |= metrics_head(out, &index_families[IF_BLOCKS]);
	for (uint32_t w = 0; w < idx->max_workers; w++) {
		const char *nm = wname(names, nnames, w);
		if (!nm && !idx->w[w].n)
			continue;
		for (int tier = 0; tier < 2; tier++) {
			rc |= buf_printf(out, "%s{worker=\"", index_families[IF_BLOCKS].name);
			rc |= nm ? put_label(out, nm) : buf_printf(out, "%u", w);
			rc |= buf_printf(
			    out, "\",tier=\"%s\"} %llu\n", tier ? "cpu" : "gpu",
			    (unsigned long long)(tier ? idx->w[w].n_cpu : idx->w[w].n_gpu));
		}
	}
	pthread_rwlock_unlock(&idx->lock);
	return rc ? -ENOMEM : 0;
}

int index_debug_json(struct index *idx, const char *const *names, size_t nnames, struct buf *out)
{
	struct index_stats st;
	int rc = 0, first = 1;

	pthread_rwlock_rdlock(&idx->lock);
	stats_locked(idx, &st);
	rc |= buf_printf(out,
			 "{\"block_size\":%u,\"seed\":%llu,\"max_workers\":%u,\"max_entries\":%zu,"
			 "\"bytes\":%llu,\"unique_blocks\":%llu,\"entries\":%llu,\"stored\":%llu,"
			 "\"duplicates\":%llu,\"orphans\":%llu,\"aliases\":%llu,\"conflicts\":%llu,"
			 "\"removed\":%llu,\"unknown_removes\":%llu,\"clears\":%llu,"
			 "\"evictions\":%llu,\"rejected\":%llu,\"workers\":[",
			 idx->bs, (unsigned long long)idx->seed, idx->max_workers, idx->max_entries,
			 (unsigned long long)st.bytes, (unsigned long long)st.unique_blocks,
			 (unsigned long long)st.entries, (unsigned long long)st.stored,
			 (unsigned long long)st.duplicates, (unsigned long long)st.orphans,
			 (unsigned long long)st.aliases, (unsigned long long)st.conflicts,
			 (unsigned long long)st.removed, (unsigned long long)st.unknown_removes,
			 (unsigned long long)st.cleared, (unsigned long long)st.evictions,
			 (unsigned long long)st.rejected);
	for (uint32_t w = 0; w < idx->max_workers; w++) {
		const char *nm = wname(names, nnames, w);
		if (!nm && !idx->w[w].n)
			continue;
		rc |= buf_printf(out, "%s{\"id\":%u,\"name\":", first ? "" : ",", w);
		rc |= nm ? buf_json_str(out, nm, strlen(nm)) : buf_puts(out, "null");
		rc |= buf_printf(out, ",\"blocks\":%zu,\"gpu\":%llu,\"cpu\":%llu,\"stale\":%s}",
				 idx->w[w].n, (unsigned long long)idx->w[w].n_gpu,
				 (unsigned long long)idx->w[w].n_cpu,
				 idx->stale[w >> 6] >> (w & 63) & 1 ? "true" : "false");
		first = 0;
	}
	rc |= buf_puts(out, "]}");
	pthread_rwlock_unlock(&idx->lock);
	return rc ? -ENOMEM : 0;
}
