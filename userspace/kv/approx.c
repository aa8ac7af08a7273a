// SPDX-License-Identifier: Apache-2.0
// approx: what each worker probably holds, from the requests routed to it (see approx.h).
//
// Layout. One open-addressing table of (worker, block) pairs, 24 bytes each: chain hash, expiry,
// worker, chain position, the worker's count of new blocks at the pair's last use. A pair's home
// slot depends on its chain hash only, and the table is kept in Robin Hood order (along a run,
// pairs sorted by home slot; backward-shift deletion, no tombstones), so every holder of one block
// sits in one contiguous stretch. A query then reads one short run per chain block (one likely
// cache miss, prefetched ahead) whatever the number of workers; per-worker tables, as index.c keeps
// them, would cost one lookup per worker per block (64 workers x 150 blocks). Load stays at most
// 1/2: the table doubles on insert and halves in approx_expire once below 1/8.
//
// Time. Expiries are 32-bit milliseconds since a base taken at the first insert: a pair used at
// `now` is live while floor(now' * 1000) < floor(now * 1000) + ttl in ms, so it expires exactly
// ttl later, to the millisecond (at most 1 ms early for times that are not whole milliseconds).
// Before a new expiry would pass 2^32 ms (~49 days after the base) one pass over the table moves
// the base forward.
//
// Expiry. approx_expire moves a clock hand over max(APPROX_EXPIRE_MIN_SCAN, slots /
// APPROX_EXPIRE_LAP) slots per call, dropping expired pairs: every pair is looked at once per
// APPROX_EXPIRE_LAP calls. Queries compare expiries themselves, so a pair not yet dropped is
// already absent for them; only approx_blocks_at and stats.entries lag, by at most one lap.
//
// Capacity. Each worker counts the new pairs recorded on it (clk); every pair of one insert, new or
// used again, takes the count from before that insert (use). vLLM evicts the least recently
// freed blocks when new ones need room, and frees a request's blocks together, so once more than
// the worker's capacity of new blocks came after a request's, its blocks are gone: a pair is live
// while clk - use <= capacity (a chain counts its own new blocks, so one larger than the cache
// is never held). Queries check it as they check expiry; approx_expire drops such pairs
// ("displaced") with the expired ones. Capacity 0 (unknown) bounds nothing: ttl alone decides.
//
// Bound. A new pair past max_entries first evicts one (Redis-style sampled LRU, since expiry =
// last use + ttl): the same hand samples the next APPROX_EVICT_SAMPLE candidate pairs and drops
// the one closest to expiry, ties going to the deepest chain position so chains lose their tails
// first. Candidates are all pairs but those of the inserting worker that expire no earlier than
// the new one (the chain being inserted). When no candidate is left in the whole table, the rest
// of the chain is not recorded (counted as evicted): a chain longer than the bound keeps its
// leading blocks, and the hand searches the table at most once per call.
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kv/approx.h"

/* Smallest table, slots (a power of two). */
#define MIN_CAP 1024
/* approx_expire calls per full sweep of the table by the clock hand. */
#ifndef APPROX_EXPIRE_LAP
#define APPROX_EXPIRE_LAP 256
#endif
/* Slots approx_expire looks at per call at least. */
#ifndef APPROX_EXPIRE_MIN_SCAN
#define APPROX_EXPIRE_MIN_SCAN 1024
#endif
/* Candidate pairs compared to choose one to evict. */
#ifndef APPROX_EVICT_SAMPLE
#define APPROX_EVICT_SAMPLE 8
#endif
/* Chain blocks ahead whose home slots insert and query prefetch (two cache lines each: a run
 * that crosses a line would otherwise stall on the second). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 16
#endif
/* Tables of at least this many bytes ask for transparent huge pages. */
#define HUGE_MIN (4u << 20)
#define HUGE_PAGE (2u << 20)
/* Fibonacci hashing multiplier: home = (h * FIB) >> shift takes the product's top bits. */
#define FIB 0x9e3779b97f4a7c15ULL

_Static_assert(APPROX_POS_MAX >= 1 && APPROX_POS_MAX <= 65536, "positions are stored in 16 bits");
_Static_assert(APPROX_MAX_WORKERS <= 65536, "worker ids are stored in 16 bits");
_Static_assert(APPROX_MAX_TTL_S * 1000LL < 4294967295LL, "a ttl must fit 32-bit milliseconds");

struct slot {
	uint64_t h;   /* chain hash; 0: empty slot */
	uint32_t exp; /* expiry, ms since base_ms; live while exp > now */
	uint16_t w;   /* worker */
	uint16_t pos; /* chain position, min(i, APPROX_POS_MAX - 1) */
	uint32_t use; /* the worker's clk before the insert that last used the pair */
};

struct approx {
	struct slot *t;
	size_t cap;	/* slots, a power of two */
	unsigned shift; /* 64 - log2(cap) */
	size_t hand;	/* clock hand of expiry and eviction */
	uint32_t max_workers;
	uint32_t ttl_ms;
	size_t max_entries;
	int64_t base_ms;	/* the ms count (floor(now * 1000)) of expiry 0 */
	bool based;		/* base_ms is set (at the first insert) */
	uint32_t *wn;		/* pairs per worker */
	uint32_t *clk;		/* new pairs recorded per worker (wraps) */
	uint32_t *capw;		/* capacity per worker, blocks (0: unbounded) */
	uint32_t *at;		/* pairs per worker and position: at[w * APPROX_POS_MAX + pos] */
	struct approx_stats st; /* entries and bytes are filled in by approx_stats */
	size_t n;		/* pairs held */
};

/* ---- time ------------------------------------------------------------------------------ */

/* floor(now * 1000), clamped far inside int64 so garbage times (inf, NaN) stay defined. */
static int64_t ms_of(double now)
{
	double ms = floor(now * 1000.0);

	if (!(ms > -9e15))
		return (int64_t)-9e15;
	if (ms > 9e15)
		return (int64_t)9e15;
	return (int64_t)ms;
}

/* now in expiry units (ms since base). Negative before the base: everything is live then. */
static int64_t tick_of(const struct approx *a, double now)
{
	return ms_of(now) - a->base_ms;
}

/* Has worker w received no more than its capacity of new blocks since the pair's last use? */
static inline bool within_capacity(const struct approx *a, const struct slot *s)
{
	uint32_t cap = a->capw[s->w];

	return !cap || a->clk[s->w] - s->use <= cap;
}

/* ---- table ----------------------------------------------------------------------------- */

/* Zeroed slots. Large tables ask for transparent huge pages: queries probe at random across
 * megabytes, and with 4 KiB pages nearly every probe would also miss the TLB. */
static struct slot *slots_alloc(size_t n)
{
	size_t bytes = n * sizeof(struct slot);
	void *p;

	if (bytes / sizeof(struct slot) != n)
		return NULL;
	if (bytes < HUGE_MIN)
		return calloc(n, sizeof(struct slot));
	bytes = (bytes + HUGE_PAGE - 1) & ~((size_t)HUGE_PAGE - 1);
	p = aligned_alloc(HUGE_PAGE, bytes);
	if (!p)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	memset(p, 0, bytes);
	return p;
}

static inline size_t home_of(const struct approx *a, uint64_t h)
{
	return (size_t)((h * FIB) >> a->shift);
}

/* Starts loading the run of h: its home slot's cache line and the next one. always_inline: GCC
 * finds a helper that only prefetches free of side effects and deletes its calls otherwise. */
static inline __attribute__((always_inline)) void prefetch_run(const struct approx *a, uint64_t h)
{
	size_t j = home_of(a, h);

	__builtin_prefetch(&a->t[j]);
	__builtin_prefetch(&a->t[(j + 4) & (a->cap - 1)]);
}

/* How far the (occupied) slot j lies from its pair's home. */
static inline size_t dist_at(const struct approx *a, size_t j)
{
	return (j - home_of(a, a->t[j].h)) & (a->cap - 1);
}

/* Slot of worker w's pair for h (not 0), or -1. Holders of h sit together after the pairs
 * displaced from earlier homes; a pair from a later home ends the search. */
static long pair_find(const struct approx *a, uint64_t h, uint32_t w)
{
	size_t mask = a->cap - 1, j = home_of(a, h), d = 0;

	for (;; j = (j + 1) & mask, d++) {
		const struct slot *s = &a->t[j];
		if (s->h == h) {
			if (s->w == w)
				return (long)j;
			continue;
		}
		if (!s->h || dist_at(a, j) < d)
			return -1;
	}
}

/* Robin Hood insertion of s (absent; the table has a free slot): s passes pairs from earlier or
 * the same home and takes the place of the first from a later home, which moves on in turn. */
static void pair_place(struct approx *a, struct slot s)
{
	size_t mask = a->cap - 1, j = home_of(a, s.h), d = 0;

	for (;; j = (j + 1) & mask, d++) {
		struct slot *o = &a->t[j];
		size_t od;
		if (!o->h) {
			*o = s;
			return;
		}
		od = dist_at(a, j);
		if (od < d) {
			struct slot tmp = *o;
			*o = s;
			s = tmp;
			d = od;
		}
	}
}

/* Empties slot j, shifting the following displaced pairs back by one (the order stays sorted). */
static void pair_delete(struct approx *a, size_t j)
{
	size_t mask = a->cap - 1, k = (j + 1) & mask;

	while (a->t[k].h && dist_at(a, k)) {
		a->t[j] = a->t[k];
		j = k;
		k = (k + 1) & mask;
	}
	memset(&a->t[j], 0, sizeof(a->t[j]));
}

/* Drops the pair in slot j with its counts; slot j then holds the next pair of the run, if any.
 * The caller counts why (expired, evicted). */
static void pair_drop(struct approx *a, size_t j)
{
	const struct slot *s = &a->t[j];

	a->wn[s->w]--;
	a->at[(size_t)s->w * APPROX_POS_MAX + s->pos]--;
	a->n--;
	pair_delete(a, j);
}

/* Rehashes into ncap slots (a power of two holding n at load <= 1/2). 0 or -ENOMEM, when the
 * table is left as it was. */
static int table_resize(struct approx *a, size_t ncap)
{
	struct slot *old = a->t, *nt = slots_alloc(ncap);
	size_t ocap = a->cap;

	if (!nt)
		return -ENOMEM;
	a->t = nt;
	a->cap = ncap;
	a->shift = 64 - (unsigned)__builtin_ctzll(ncap);
	a->hand = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].h)
			pair_place(a, old[i]);
	free(old);
	return 0;
}

/* Moves the time base forward by d ms (0 <= d): expiries already passed become 0. */
static void rebase(struct approx *a, int64_t d)
{
	for (size_t i = 0; i < a->cap; i++)
		if (a->t[i].h)
			a->t[i].exp = (int64_t)a->t[i].exp > d ? (uint32_t)(a->t[i].exp - d) : 0;
	a->base_ms += d;
}

/* Makes room for a pair of worker w expiring at exp, t being now: drops the candidate closest to
 * expiry (ties: the deepest position) among the next APPROX_EVICT_SAMPLE candidates at the hand.
 * Returns false, dropping nothing, when the whole table holds no candidate. The scan has no
 * branch per slot: occupancy is random, and with branches (mispredicted) it took 40% longer. */
static bool evict_one(struct approx *a, uint32_t w, uint32_t exp, int64_t t)
{
	size_t mask = a->cap - 1, j = a->hand & mask, seen = 0, best = 0;
	uint64_t best_key = UINT64_MAX;

	for (size_t k = 0; k < a->cap && seen < APPROX_EVICT_SAMPLE; k++, j = (j + 1) & mask) {
		const struct slot *s = &a->t[j];
		uint64_t cand = (s->h != 0) & ((s->w != w) | (s->exp < exp));
		/* ordered by expiry, then deepest position first; UINT64_MAX if not a candidate */
		uint64_t key = ((uint64_t)s->exp << 16 | (uint16_t)~s->pos) | (cand - 1);
		uint64_t lt = -(uint64_t)(key < best_key);
		best = (j & lt) | (best & ~lt);
		best_key = (key & lt) | (best_key & ~lt);
		seen += cand;
	}
	a->hand = j;
	if (best_key == UINT64_MAX)
		return false;
	if ((int64_t)a->t[best].exp <= t)
		a->st.expired++;
	else
		a->st.evicted++;
	pair_drop(a, best);
	return true;
}

/* ---- public ---------------------------------------------------------------------------- */

void approx_cfg_default(struct approx_cfg *c)
{
	c->max_workers = 256;
	c->ttl_s = APPROX_DEFAULT_TTL_S;
	c->max_entries = APPROX_DEFAULT_MAX_ENTRIES;
}

int approx_new(const struct approx_cfg *cfg, struct approx **out)
{
	struct approx_cfg dflt;
	uint32_t mw;
	double ttl;
	struct approx *a;

	*out = NULL;
	if (!cfg) {
		approx_cfg_default(&dflt);
		cfg = &dflt;
	}
	mw = cfg->max_workers;
	ttl = cfg->ttl_s;
	if (!mw || mw > APPROX_MAX_WORKERS || !(ttl > 0 && ttl <= APPROX_MAX_TTL_S))
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->max_workers = mw;
	a->ttl_ms = (uint32_t)llround(ttl * 1000.0);
	if (!a->ttl_ms)
		a->ttl_ms = 1;
	a->max_entries = cfg->max_entries ? cfg->max_entries : SIZE_MAX; /* 0: no bound */
	a->cap = MIN_CAP;
	a->shift = 64 - (unsigned)__builtin_ctzll(MIN_CAP);
	a->t = slots_alloc(MIN_CAP);
	a->wn = calloc(mw, sizeof(*a->wn));
	a->clk = calloc(mw, sizeof(*a->clk));
	a->capw = calloc(mw, sizeof(*a->capw));
	a->at = calloc((size_t)mw * APPROX_POS_MAX, sizeof(*a->at));
	if (!a->t || !a->wn || !a->clk || !a->capw || !a->at)
		goto cleanup;
	*out = a;
	return 0;
cleanup:
	approx_free(a);
	return -ENOMEM;
}

void approx_free(struct approx *a)
{
	if (!a)
		return;
	free(a->t);
	free(a->wn);
	free(a->clk);
	free(a->capw);
	free(a->at);
	free(a);
}

int approx_insert(struct approx *a, uint32_t w, const uint64_t *chain, size_t n, double now)
{
	int64_t ms = ms_of(now), t;
	uint32_t exp, use, added = 0;
	bool full = false;
	int rc = 0;

	if (w >= a->max_workers)
		return -EINVAL;
	if (!n)
		return 0;
	if (!a->based) {
		a->base_ms = ms;
		a->based = true;
	}
	t = ms - a->base_ms;
	if (t < 0)
		t = 0;
	if (t + a->ttl_ms > UINT32_MAX) {
		rebase(a, t);
		t = 0;
	}
	exp = (uint32_t)(t + a->ttl_ms);
	use = a->clk[w];
	for (size_t i = 0; i < n; i++) {
		uint64_t h = chain[i];
		uint16_t pos = (uint16_t)(i < APPROX_POS_MAX - 1 ? i : APPROX_POS_MAX - 1);
		long j;

		if (i + PREFETCH_AHEAD < n)
			prefetch_run(a, chain[i + PREFETCH_AHEAD]);
		if (!h) {
			rc = -EINVAL;
			break;
		}
		j = pair_find(a, h, w);
		if (j >= 0) {
			/* used again: a live pair is refreshed; an expired or displaced one not yet
			 * dropped counts as such and as inserted anew, as if approx_expire came
			 * first (a new block for the worker's cache) */
			struct slot *s = &a->t[j];
			if ((int64_t)s->exp <= t) {
				a->st.expired++;
				a->st.inserted++;
				added++;
			} else if (!within_capacity(a, s)) {
				a->st.displaced++;
				a->st.inserted++;
				added++;
			} else {
				a->st.refreshed++;
			}
			s->use = use;
			if (exp > s->exp)
				s->exp = exp;
			if (s->pos != pos) {
				a->at[(size_t)w * APPROX_POS_MAX + s->pos]--;
				a->at[(size_t)w * APPROX_POS_MAX + pos]++;
				s->pos = pos;
			}
			continue;
		}
		if (a->n >= a->max_entries && (full || !evict_one(a, w, exp, t))) {
			full = true;
			a->st.evicted++;
			continue;
		}
		if ((a->n + 1) * 2 > a->cap && table_resize(a, a->cap * 2)) {
			rc = -ENOMEM;
			break;
		}
		pair_place(
		    a, (struct slot){.h = h, .exp = exp, .w = (uint16_t)w, .pos = pos, .use = use});
		a->n++;
		a->wn[w]++;
		a->at[(size_t)w * APPROX_POS_MAX + pos]++;
		a->st.inserted++;
		added++;
	}
	a->clk[w] = use + added;
	return rc;
}

void approx_set_capacity(struct approx *a, uint32_t w, uint32_t blocks)
{
	if (w < a->max_workers)
		a->capw[w] = blocks;
}

/* Sets in hit (words of 64 workers, cleared by the caller) the workers w < nworkers whose pair
 * for h (not 0) is live at t. The holders of h sit together in the run from h's home slot; a hot
 * block has one per worker, hence no branch per holder. */
static inline void run_hits(const struct approx *a, uint64_t h, int64_t t, size_t nworkers,
			    uint64_t *hit)
{
	size_t mask = a->cap - 1, j = home_of(a, h), d = 0;

	for (;; j = (j + 1) & mask, d++) {
		const struct slot *s = &a->t[j];
		if (s->h == h) {
			uint64_t live =
			    ((int64_t)s->exp > t) & (s->w < nworkers) & within_capacity(a, s);
			hit[s->w >> 6] |= live << (s->w & 63);
			continue;
		}
		if (!s->h || dist_at(a, j) < d)
			break;
	}
}

/* Sets depth d for every worker whose bit is in bits (word k). */
static inline void set_depth(uint32_t *depth, size_t k, uint64_t bits, uint32_t d)
{
	for (; bits; bits &= bits - 1)
		depth[k * 64 + (size_t)__builtin_ctzll(bits)] = d;
}

int approx_query(struct approx *a, const uint64_t *chain, size_t n, double now, uint32_t *depth,
		 size_t nworkers)
{
	uint64_t act[APPROX_MAX_WORKERS / 64], hit[APPROX_MAX_WORKERS / 64];
	size_t words = (nworkers + 63) / 64, i, k;
	int64_t t = tick_of(a, now);
	uint32_t best = 0;

	if (nworkers > a->max_workers)
		return -EINVAL;
	if (!nworkers)
		return 0;
	for (k = 0; k < words; k++)
		act[k] = ~0ULL;
	if (nworkers % 64)
		act[words - 1] = (1ULL << (nworkers % 64)) - 1;
	for (i = 0; i < n && i < PREFETCH_AHEAD; i++)
		prefetch_run(a, chain[i]);
	for (i = 0; i < n; i++) {
		uint64_t h = chain[i], any = 0;

		if (i + PREFETCH_AHEAD < n)
			prefetch_run(a, chain[i + PREFETCH_AHEAD]);
		if (!h) /* never stored: would match empty slots */
			break;
		memset(hit, 0, words * sizeof(hit[0]));
		run_hits(a, h, t, nworkers, hit);
		for (k = 0; k < words; k++) {
			uint64_t keep = act[k] & hit[k];
			set_depth(depth, k, act[k] & ~keep, (uint32_t)i);
			act[k] = keep;
			any |= keep;
		}
		if (!any)
			break;
		best = (uint32_t)i + 1;
	}
	for (k = 0; k < words; k++)
		set_depth(depth, k, act[k], (uint32_t)i);
	return (int)best;
}

uint32_t approx_blocks_at(const struct approx *a, uint32_t w, uint32_t pos)
{
	if (w >= a->max_workers)
		return 0;
	if (pos > APPROX_POS_MAX - 1)
		pos = APPROX_POS_MAX - 1;
	return a->at[(size_t)w * APPROX_POS_MAX + pos];
}

/* One pass over the table. Deleting at slot j only pulls later pairs back (or, at the end of the
 * table, pairs from its start, which hold none of w's any more), so re-reading slot j after a
 * drop sees every pair once. */
void approx_worker_clear(struct approx *a, uint32_t w)
{
	size_t j = 0;

	if (w >= a->max_workers)
		return;
	while (a->wn[w] && j < a->cap) {
		if (a->t[j].h && a->t[j].w == w)
			pair_drop(a, j);
		else
			j++;
	}
}

void approx_expire(struct approx *a, double now)
{
	size_t mask = a->cap - 1, budget = a->cap / APPROX_EXPIRE_LAP;
	int64_t t = tick_of(a, now);

	if (budget < APPROX_EXPIRE_MIN_SCAN)
		budget = APPROX_EXPIRE_MIN_SCAN;
	for (; budget && a->n; budget--) {
		size_t j = a->hand & mask;
		if (a->t[j].h && (int64_t)a->t[j].exp <= t) {
			pair_drop(a, j); /* slot j now holds the next pair: look again */
			a->st.expired++;
			continue;
		}
		if (a->t[j].h && !within_capacity(a, &a->t[j])) {
			pair_drop(a, j);
			a->st.displaced++;
			continue;
		}
		a->hand = (j + 1) & mask;
	}
	if (a->cap > MIN_CAP && a->n * 8 < a->cap)
		(void)table_resize(a, a->cap / 2); /* on ENOMEM simply stay large */
}

void approx_stats(const struct approx *a, struct approx_stats *st)
{
	*st = a->st;
	st->entries = a->n;
	st->bytes = sizeof(*a) + (uint64_t)a->cap * sizeof(struct slot) +
		    (uint64_t)a->max_workers * (3 + APPROX_POS_MAX) * sizeof(uint32_t);
}
