// SPDX-License-Identifier: Apache-2.0
// approx: refused configurations and arguments, a table of {inserts, query, expected depths}
// (first missing block, expiry at exactly ttl, refresh), approx_blocks_at through every mutation,
// a worker's capacity (its cache's eviction), the max_entries bound, 4096 workers, and two long
// random runs against a naive reference model (per worker and block: expiry and position), one of
// them under eviction.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv/approx.h"
#include "tap.h"

#define LONG_N 300

/* Chains of the table tests: A, B sharing A's first 5 blocks, H = A with block 2 replaced. */
static uint64_t A[LONG_N], B[LONG_N], H[5], L[LONG_N], M[LONG_N];

static void make_chains(void)
{
	for (uint64_t i = 0; i < LONG_N; i++) {
		A[i] = 0xa0000 + i;
		B[i] = i < 5 ? A[i] : 0xb0000 + i;
		L[i] = 0x1c0000 + i;
		M[i] = 0x3d0000 + i;
	}
	memcpy(H, A, sizeof(H));
	H[2] = 0xdead;
}

/* Sum of approx_blocks_at(w, pos) over every position of worker w. */
static uint64_t blocks_of(const struct approx *a, uint32_t w)
{
	uint64_t s = 0;

	for (uint32_t p = 0; p < APPROX_POS_MAX; p++)
		s += approx_blocks_at(a, w, p);
	return s;
}

/* Enough approx_expire calls for the clock hand to pass every slot (approx.h: 256 per lap). */
static void expire_all(struct approx *a, double now)
{
	for (int i = 0; i < 300; i++)
		approx_expire(a, now);
}

/* ---- refused configurations and arguments ------------------------------------------------ */

/* One field of the defaults changed. */
enum cfg_field { CF_WORKERS, CF_TTL, CF_ENTRIES };
struct cfg_case {
	enum cfg_field field;
	double v;
	int ok;
	const char *desc;
};

static const struct cfg_case cfg_cases[] = {
    {CF_WORKERS, 4096, 1, "4096 workers accepted"},
    {CF_WORKERS, 4097, 0, "4097 workers refused"},
    {CF_WORKERS, 0, 0, "0 workers refused"},
    {CF_TTL, -1, 0, "negative ttl refused"},
    {CF_TTL, NAN, 0, "NaN ttl refused"},
    {CF_TTL, 0, 0, "0 ttl refused"},
    {CF_TTL, 2e6, 0, "ttl above APPROX_MAX_TTL_S refused"},
    {CF_TTL, APPROX_MAX_TTL_S, 1, "ttl of APPROX_MAX_TTL_S accepted"},
    {CF_TTL, 0.25, 1, "short ttl accepted"},
    {CF_ENTRIES, 1, 1, "a bound of 1 accepted"},
    {CF_ENTRIES, 0, 1, "0 entries: no bound"},
};

static void test_refusals(void)
{
	uint32_t depth[300];
	uint64_t bad[4] = {A[0], A[1], 0, A[3]};
	struct approx *a;

	for (size_t i = 0; i < sizeof(cfg_cases) / sizeof(cfg_cases[0]); i++) {
		struct approx_cfg c;
		int rc;

		approx_cfg_default(&c);
		if (cfg_cases[i].field == CF_WORKERS)
			c.max_workers = (uint32_t)cfg_cases[i].v;
		else if (cfg_cases[i].field == CF_TTL)
			c.ttl_s = cfg_cases[i].v;
		else
			c.max_entries = (size_t)cfg_cases[i].v;
		rc = approx_new(&c, &a);

		CHECK(cfg_cases[i].ok ? rc == 0 && a : rc == -EINVAL && !a, "%s",
		      cfg_cases[i].desc);
		approx_free(a);
	}
	approx_free(NULL);
	CHECK(approx_new(NULL, &a) == 0 && a != NULL, "NULL cfg: defaults");
	CHECK_EQ(approx_insert(a, 255, A, 3, 1), 0, "default 256 workers: worker 255 accepted");
	CHECK_EQ(approx_insert(a, 256, A, 3, 1), -EINVAL, "worker 256 refused");
	CHECK_EQ(approx_query(a, A, 3, 1, depth, 257), -EINVAL, "257 workers queried refused");
	CHECK_EQ(approx_insert(a, 7, bad, 4, 1), -EINVAL, "a hash of 0 refused");
	CHECK(approx_query(a, A, 4, 1, depth, 256) == 3 && depth[7] == 2 && depth[255] == 3,
	      "blocks before the 0 recorded, none after");
	CHECK(approx_query(a, bad, 4, 1, depth, 256) == 2 && depth[255] == 2,
	      "a 0 in a queried chain is never held");
	CHECK_EQ(approx_blocks_at(a, 256, 0), 0, "blocks_at of an unknown worker: 0");
	approx_worker_clear(a, 256); /* no-op */
	CHECK_EQ(approx_query(a, A, 0, 1, depth, 256), 0, "empty chain: 0");
	CHECK_EQ(approx_query(a, A, 3, 1, depth, 0), 0, "no workers: 0");
	CHECK_EQ(approx_insert(a, 3, A, 0, 1), 0, "empty insert: 0");
	approx_free(a);
}

/* ---- depth table ------------------------------------------------------------------------- */

/* ops: inserts "w:Xn@t" (worker w records the first n blocks of chain X at t seconds); query:
 * "Xn@t"; want: the depths of workers 0..3. Chains: A; B = A's first 5 blocks, then its own;
 * H = A with block 2 replaced. ttl 10 s. */
struct depth_case {
	const char *ops, *query, *want, *desc;
};

static const struct depth_case depth_cases[] = {
    {"", "A10@0", "0 0 0 0", "empty view: depth 0 everywhere"},
    {"0:A10@0", "A200@1", "10 0 0 0", "one worker holds 10 blocks of A"},
    {"0:A10@0", "A4@1", "4 0 0 0", "a query shorter than the held chain"},
    {"1:B8@0", "A200@1", "0 5 0 0", "a diverging chain: the shared prefix"},
    {"2:H5@0", "A200@1", "0 0 2 0",
     "the first missing block ends the depth though later blocks are held"},
    {"0:A10@100", "A200@109.999", "10 0 0 0", "live 1 ms before ttl"},
    {"0:A10@100", "A200@110", "0 0 0 0", "expired at exactly ttl"},
    {"0:A10@0 0:A4@8", "A200@12", "4 0 0 0", "a refresh of a prefix extends only that prefix"},
    {"0:A10@0 0:A10@5", "A200@14.5", "10 0 0 0", "a refresh extends to last use + ttl"},
    {"0:A10@0 0:A10@5", "A200@15", "0 0 0 0", "expired at exactly last use + ttl"},
    {"0:A10@0 0:A10@5 0:A10@3", "A200@14", "10 0 0 0", "an older time does not shorten an expiry"},
    {"0:A3@0 1:A7@0 3:B20@0", "A200@1", "3 7 0 5", "several workers: the best depth returned"},
    {"0:A10@0 1:A10@5", "A200@12", "0 10 0 0", "an expired worker beside a live one"},
    {"0:A10@0 0:B8@9", "A200@12", "5 0 0 0",
     "a refresh through another chain keeps the shared prefix"},
    {"0:A10@0 0:A10@20", "A200@25", "10 0 0 0", "used again after expiry: held anew"},
    {"0:B8@0", "B200@1", "8 0 0 0", "B is held whole"},
};

static uint64_t *chain_named(char c)
{
	return c == 'A' ? A : c == 'B' ? B : H;
}

static void test_depth_table(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.ttl_s = 10;

	for (size_t c = 0; c < sizeof(depth_cases) / sizeof(depth_cases[0]); c++) {
		const struct depth_case *dc = &depth_cases[c];
		struct approx *a;
		approx_new(&cfg, &a);
		uint32_t depth[4], want[4], w, best = 0;
		const char *p = dc->ops;
		size_t n;
		double t;
		char x;
		int used, r;

		while (sscanf(p, " %u:%c%zu@%lf%n", &w, &x, &n, &t, &used) == 4) {
			approx_insert(a, w, chain_named(x), n, t);
			p += used;
		}
		sscanf(dc->want, "%u %u %u %u", &want[0], &want[1], &want[2], &want[3]);
		for (int k = 0; k < 4; k++)
			best = want[k] > best ? want[k] : best;
		sscanf(dc->query, "%c%zu@%lf", &x, &n, &t);
		r = approx_query(a, chain_named(x), n, t, depth, 4);
		CHECK(r == (int)best && !memcmp(depth, want, sizeof(depth)),
		      "%s (got %d: %u %u %u %u)", dc->desc, r, depth[0], depth[1], depth[2],
		      depth[3]);
		approx_free(a);
	}
	{
		struct approx *a;
		approx_new(&cfg, &a);
		uint32_t depth[4] = {0, 0, 77, 77};
		approx_insert(a, 2, A, 10, 0);
		approx_insert(a, 1, A, 6, 0);
		CHECK(approx_query(a, A, 10, 1, depth, 2) == 6 && depth[1] == 6 && depth[2] == 77 &&
			  depth[3] == 77,
		      "workers at or above nworkers are neither reported nor written");
		approx_free(a);
	}
}

/* ---- capacity: a worker's cache evicts what came before its capacity of new blocks -------- */

static void test_capacity(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.ttl_s = 1000;
	struct approx *a;
	struct approx_stats st;
	uint32_t depth[4];

	approx_new(&cfg, &a);
	approx_set_capacity(a, 0, 20);
	approx_set_capacity(a, 2, 5);
	approx_set_capacity(a, 9, 5); /* out of range: no-op */
	approx_insert(a, 0, A, 10, 1);
	approx_insert(a, 0, L, 10, 2);
	CHECK(approx_query(a, A, 10, 3, depth, 1) == 10 &&
		  approx_query(a, L, 10, 3, depth, 1) == 10,
	      "capacity 20: 10 + 10 new blocks are all held");
	approx_insert(a, 0, M, 1, 4);
	CHECK(approx_query(a, A, 10, 5, depth, 1) == 0 && approx_query(a, L, 10, 5, depth, 1) == 10,
	      "one more new block: the oldest request's blocks are gone, the next one's held");
	approx_stats(a, &st);
	CHECK(st.inserted == 21 && st.displaced == 0, "displaced only when dropped or used again");
	expire_all(a, 6);
	approx_stats(a, &st);
	CHECK(st.displaced == 10 && st.entries == 11 && blocks_of(a, 0) == 11 &&
		  approx_blocks_at(a, 0, 0) == 2,
	      "approx_expire drops the displaced pairs and their counts (%llu, %llu)",
	      (unsigned long long)st.displaced, (unsigned long long)st.entries);
	approx_insert(a, 0, L, 10, 7); /* a hit: nothing new */
	approx_insert(a, 0, M, 10, 8); /* 9 new: 30 since A, 19 since L's first use */
	CHECK(approx_query(a, L, 10, 9, depth, 1) == 10 &&
		  approx_query(a, M, 10, 9, depth, 1) == 10,
	      "a hit renews a request's blocks without counting as new ones");
	approx_insert(a, 0, A, 10, 10); /* 10 new again: 19 since L's hit, 10 since M */
	CHECK(approx_query(a, A, 10, 11, depth, 1) == 10 &&
		  approx_query(a, L, 10, 11, depth, 1) == 10,
	      "a chain used again after its displacement is held anew");
	approx_insert(a, 0, B, 8, 12); /* B shares A's first 5 blocks: 3 new, 22 since L's hit */
	CHECK(approx_query(a, L, 10, 13, depth, 1) == 0 &&
		  approx_query(a, A, 10, 13, depth, 1) == 10,
	      "the shared prefix renewed by another chain stays, the older request goes");
	approx_insert(a, 2, A, 10, 1);
	CHECK(approx_query(a, A, 10, 2, depth, 3) == 10 && depth[2] == 0,
	      "a request larger than the worker's cache is not held there");
	approx_insert(a, 1, A, 10, 1);
	for (int i = 0; i < 10; i++)
		approx_insert(a, 1, i % 2 ? L : M, LONG_N, 1 + i);
	CHECK(approx_query(a, A, 10, 20, depth, 2) == 10 && depth[1] == 10,
	      "capacity unknown (0): ttl alone decides");
	approx_set_capacity(a, 1, 100);
	CHECK(approx_query(a, A, 10, 20, depth, 2) == 10 && depth[1] == 0,
	      "a capacity set later judges the pairs already recorded");
	approx_free(a);
}

/* ---- blocks_at through insert, refresh, expire, clear -------------------------------------- */

static void test_blocks_at(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.ttl_s = 10;
	struct approx *a;
	struct approx_stats st;
	uint64_t one = A[3];

	approx_new(&cfg, &a);
	approx_insert(a, 0, A, 5, 0);
	CHECK(approx_blocks_at(a, 0, 0) == 1 && approx_blocks_at(a, 0, 4) == 1 &&
		  approx_blocks_at(a, 0, 5) == 0 && approx_blocks_at(a, 1, 0) == 0,
	      "insert: one block at each position 0..4 of worker 0");
	approx_insert(a, 0, B, 8, 1);
	CHECK(approx_blocks_at(a, 0, 4) == 1 && approx_blocks_at(a, 0, 5) == 1 &&
		  approx_blocks_at(a, 0, 7) == 1 && blocks_of(a, 0) == 8,
	      "a chain sharing 5 blocks adds 3");
	approx_insert(a, 0, H, 5, 2);
	CHECK(approx_blocks_at(a, 0, 2) == 2 && blocks_of(a, 0) == 9,
	      "a chain differing at block 2 adds a second block at position 2");
	approx_insert(a, 0, &one, 1, 3);
	CHECK(approx_blocks_at(a, 0, 0) == 2 && approx_blocks_at(a, 0, 3) == 0 &&
		  blocks_of(a, 0) == 9,
	      "a block used again at another position moves its count");
	approx_insert(a, 1, L, LONG_N, 4);
	CHECK(approx_blocks_at(a, 1, APPROX_POS_MAX - 2) == 1 &&
		  approx_blocks_at(a, 1, APPROX_POS_MAX - 1) == LONG_N - (APPROX_POS_MAX - 1) &&
		  approx_blocks_at(a, 1, 100000) == LONG_N - (APPROX_POS_MAX - 1),
	      "positions from APPROX_POS_MAX - 1 on share one count (%u)",
	      approx_blocks_at(a, 1, APPROX_POS_MAX - 1));
	approx_stats(a, &st);
	CHECK(st.entries == 9 + LONG_N && st.inserted == 9 + LONG_N && st.refreshed == 5 + 4 + 1,
	      "stats: %llu entries, %llu inserted, %llu refreshed", (unsigned long long)st.entries,
	      (unsigned long long)st.inserted, (unsigned long long)st.refreshed);

	approx_expire(a, 9.5);
	CHECK_EQ(blocks_of(a, 0), 9, "nothing expired yet at 9.5 s");
	expire_all(a, 13.5); /* worker 0's blocks, last used at 1..3 s, are gone; not worker 1's */
	CHECK(blocks_of(a, 0) == 0 && blocks_of(a, 1) == LONG_N,
	      "expire drops expired blocks only");
	approx_stats(a, &st);
	CHECK(st.entries == LONG_N && st.expired == 9, "expired counted (%llu)",
	      (unsigned long long)st.expired);
	approx_insert(a, 0, A, 5, 13.5);
	approx_worker_clear(a, 1);
	CHECK(blocks_of(a, 1) == 0 && approx_blocks_at(a, 1, APPROX_POS_MAX - 1) == 0 &&
		  blocks_of(a, 0) == 5,
	      "clear drops one worker's blocks, others stay");
	approx_stats(a, &st);
	CHECK_EQ(st.entries, 5, "entries after clear");
	approx_free(a);
}

/* ---- the max_entries bound --------------------------------------------------------------- */

static void test_bound(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.ttl_s = 100;
	cfg.max_entries = 100;
	struct approx *a;
	struct approx_stats st;
	uint32_t depth[4];

	approx_new(&cfg, &a);
	approx_insert(a, 0, A, 60, 0);
	approx_insert(a, 1, L, 60, 1);
	approx_stats(a, &st);
	CHECK(st.entries == 100 && st.evicted == 20 && blocks_of(a, 0) == 40,
	      "at the bound the older worker's blocks go (%llu entries, %llu evicted)",
	      (unsigned long long)st.entries, (unsigned long long)st.evicted);
	CHECK(approx_query(a, L, 60, 1, depth, 4) == 60 && depth[1] == 60,
	      "the new chain is recorded whole");
	approx_insert(a, 2, M, 60, 1);
	approx_stats(a, &st);
	CHECK(st.entries == 100 && st.evicted == 80 && approx_query(a, M, 60, 1, depth, 4) == 60,
	      "another worker's chain of the same age makes room too");
	approx_insert(a, 3, A, 150, 2);
	approx_stats(a, &st);
	CHECK(st.entries == 100 && st.evicted == 230 && st.inserted == 280 &&
		  blocks_of(a, 3) == 100,
	      "a chain longer than the bound keeps its leading 100 blocks (%llu evicted)",
	      (unsigned long long)st.evicted);
	CHECK(approx_query(a, A, 150, 2, depth, 4) == 100 && depth[0] == 0 && depth[3] == 100,
	      "... and is found from block 0");
	approx_free(a);

	approx_new(&cfg, &a);
	approx_insert(a, 0, A, 60, 0);
	approx_insert(a, 1, L, 30, 1);
	approx_insert(a, 2, M, 20, 2);
	approx_stats(a, &st);
	CHECK(st.entries == 100 && st.evicted == 10 && blocks_of(a, 0) == 50 &&
		  approx_query(a, L, 30, 2, depth, 4) == 30,
	      "the entries closest to expiry go first");
	approx_free(a);

	cfg.ttl_s = 10;
	approx_new(&cfg, &a);
	approx_insert(a, 0, A, 60, 0);
	approx_insert(a, 1, L, 20, 5);
	approx_insert(a, 2, M, 40, 12);
	approx_stats(a, &st);
	CHECK(st.entries == 100 && st.expired == 20 && st.evicted == 0,
	      "expired entries make room first, counted as expired");
	CHECK(approx_query(a, L, 20, 12, depth, 4) == 20 &&
		  approx_query(a, M, 40, 12, depth, 4) == 40,
	      "the live chains stay whole");
	approx_free(a);

	approx_cfg_default(&cfg);
	cfg.max_workers = 2;
	cfg.max_entries = 1;
	approx_new(&cfg, &a);
	approx_insert(a, 0, A, 3, 0);
	approx_insert(a, 1, L, 3, 1);
	approx_stats(a, &st);
	CHECK(st.entries == 1 && approx_query(a, L, 3, 1, depth, 2) == 1 && depth[0] == 0,
	      "a bound of 1 holds the newest chain's block 0");
	approx_free(a);
}

/* ---- 4096 workers ------------------------------------------------------------------------ */

static void test_many_workers(void)
{
	static uint32_t depth[APPROX_MAX_WORKERS];
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = APPROX_MAX_WORKERS;
	struct approx *a;
	int good = 1;

	approx_new(&cfg, &a);
	CHECK_EQ(approx_insert(a, 4096, A, 10, 0), -EINVAL, "worker 4096 refused");
	approx_insert(a, 4095, A, 10, 0);
	approx_insert(a, 64, A, 3, 0);
	approx_insert(a, 0, A, 1, 0);
	CHECK_EQ(approx_query(a, A, 10, 1, depth, 4096), 10, "4096 workers queried");
	for (uint32_t w = 0; w < 4096; w++)
		good &= depth[w] == (w == 4095 ? 10 : w == 64 ? 3 : w == 0 ? 1 : 0);
	CHECK(good, "every one of 4096 depths right");
	CHECK(approx_query(a, A, 10, 1, depth, 65) == 3 && depth[64] == 3 && depth[63] == 0,
	      "65 workers: the partial last word");
	CHECK_EQ(approx_blocks_at(a, 4095, 9), 1, "blocks_at of worker 4095");
	CHECK_EQ(approx_query(a, A, 10, 1, depth, 4097), -EINVAL, "4097 workers queried refused");
	approx_free(a);
}

/* ---- the time base moves near 2^32 ms ---------------------------------------------------- */

static void test_rebase(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 2;
	cfg.ttl_s = APPROX_MAX_TTL_S;
	struct approx *a;
	approx_new(&cfg, &a);
	uint32_t depth[2];

	/* base at 0 s; expiries are 32-bit ms, so 3.5e6 s + a 1e6 s ttl needs a new base */
	approx_insert(a, 0, A, 4, 0);
	approx_insert(a, 0, L, 4, 3.0e6);
	approx_insert(a, 1, M, 4, 3.5e6);
	CHECK(approx_query(a, A, 4, 3.5e6, depth, 2) == 0,
	      "a chain expired before the base moved stays expired");
	CHECK(approx_query(a, L, 4, 3.999e6, depth, 2) == 4 && depth[0] == 4,
	      "a chain live across the move keeps its expiry (live just before)");
	CHECK(approx_query(a, L, 4, 4.0e6, depth, 2) == 0, "... and expires exactly at it");
	CHECK(approx_query(a, M, 4, 4.4e6, depth, 2) == 4 && depth[1] == 4,
	      "the chain that moved the base is live until its own expiry");
	CHECK(approx_query(a, M, 4, 4.5e6, depth, 2) == 0, "... and expires exactly at it");
	approx_free(a);
}

/* ---- size, growth and shrink ------------------------------------------------------------- */

static void test_memory(void)
{
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = 64;
	cfg.ttl_s = 10;
	struct approx *a;
	struct approx_stats st;
	uint64_t small, chain[150];
	uint32_t depth[64];
	int good = 1;

	approx_new(&cfg, &a);
	approx_stats(a, &st);
	small = st.bytes;
	CHECK(small > 0, "bytes reported when empty (%llu)", (unsigned long long)small);
	for (uint32_t r = 0; r < 2000; r++) {
		for (uint64_t i = 0; i < 150; i++)
			chain[i] = i < 30 ? 0x5151 + i : ((uint64_t)r << 20) + i + 1;
		approx_insert(a, r % 64, chain, 150, 1);
	}
	approx_stats(a, &st);
	CHECK(st.entries == 64 * 30 + 2000 * 120 && st.bytes > small + st.entries * 16,
	      "%llu entries in %llu bytes", (unsigned long long)st.entries,
	      (unsigned long long)st.bytes);
	for (uint32_t r = 0; r < 2000; r += 97) {
		for (uint64_t i = 0; i < 150; i++)
			chain[i] = i < 30 ? 0x5151 + i : ((uint64_t)r << 20) + i + 1;
		good &= approx_query(a, chain, 150, 2, depth, 64) == 150 && depth[r % 64] == 150 &&
			depth[(r + 1) % 64] == 30;
	}
	CHECK(good, "after growth every sampled chain is found whole");
	for (int i = 0; i < 20; i++)
		expire_all(a, 11);
	approx_stats(a, &st);
	CHECK(st.entries == 0 && st.bytes == small, "all expired: the table shrank back (%llu)",
	      (unsigned long long)st.bytes);
	approx_free(a);
}

/* ---- random runs against a reference model ----------------------------------------------- */

enum { W = 5, SEQS = 12, LEN = 40, NH = SEQS * LEN };

struct model {
	int64_t exp[W][NH]; /* ms; 0: not held (never stored, or dropped) */
	uint32_t pos[W][NH];
	uint64_t inserted, refreshed;
};

static uint64_t seqh[SEQS][LEN]; /* chain hashes: 3 families, prefixes shared up to a branch */
static int seqid[SEQS][LEN];	 /* index of each hash in hashes[] */
static uint64_t hashes[NH];
static int nhashes;

static void make_seqs(void)
{
	for (int s = 0; s < SEQS; s++) {
		int fam = s % 3, br = 5 + (s / 3) * 8;
		for (int i = 0; i < LEN; i++) {
			uint64_t h = i < br ? ((uint64_t)(fam + 1) << 40) + (uint64_t)i + 1
					    : ((uint64_t)(s + 1) << 48) + (uint64_t)i + 1;
			int k;
			for (k = 0; k < nhashes && hashes[k] != h; k++)
				;
			if (k == nhashes)
				hashes[nhashes++] = h;
			seqh[s][i] = h;
			seqid[s][i] = k;
		}
	}
}

static void model_insert(struct model *m, uint32_t w, const int *ids, size_t n, int64_t now,
			 int64_t ttl)
{
	for (size_t i = 0; i < n; i++) {
		int64_t *e = &m->exp[w][ids[i]];
		if (*e > now) {
			m->refreshed++;
			if (now + ttl > *e)
				*e = now + ttl;
		} else {
			m->inserted++;
			*e = now + ttl;
		}
		m->pos[w][ids[i]] = (uint32_t)(i < APPROX_POS_MAX - 1 ? i : APPROX_POS_MAX - 1);
	}
}

static uint32_t model_depth(const struct model *m, uint32_t w, const int *ids, size_t n,
			    int64_t now)
{
	uint32_t d = 0;

	while (d < n && m->exp[w][ids[d]] > now)
		d++;
	return d;
}

/* Pairs of worker w at position p the model holds: live only, or also expired-not-dropped. */
static uint32_t model_count(const struct model *m, uint32_t w, uint32_t p, int64_t now, int live)
{
	uint32_t c = 0;

	for (int k = 0; k < nhashes; k++)
		c += m->exp[w][k] && m->pos[w][k] == p && (!live || m->exp[w][k] > now);
	return c;
}

/* One long random run. bound 0: no eviction, so depths and counts must equal the model's.
 * bound > 0: the view may only hold less than the model (never more), and after a full
 * expiry sweep its blocks_at counts must equal a recount of the pairs queries still find. */
static void random_run(size_t bound, unsigned seed)
{
	static struct model m;
	const int64_t ttl = 30000;
	struct approx_cfg cfg;
	approx_cfg_default(&cfg);
	cfg.max_workers = W;
	cfg.ttl_s = 30;
	cfg.max_entries = bound;
	struct approx *a;
	struct approx_stats st;
	int64_t now = 0;
	int q_ok = 1, between_ok = 1, bound_ok = 1, sweep_ok = 1, stats_ok = 1, nq = 0, nq_deep = 0,
	    nsweeps = 0;
	uint32_t depth[W];

	approx_new(&cfg, &a);
	memset(&m, 0, sizeof(m));
	srand(seed);
	for (int op = 0; op < 20000; op++) {
		int k = rand() % 100, s = rand() % SEQS, off = rand() % 4 == 0 ? rand() % 10 : 0;
		uint32_t w = (uint32_t)rand() % W;
		size_t n = 1 + (size_t)rand() % (LEN - off);

		now += 125 * (rand() % 4);
		if (rand() % 500 == 0)
			now += 40000; /* everything expires */
		if (k < 45) {
			/* off > 0: a tail of the chain inserted from position 0, moving counts */
			approx_insert(a, w, seqh[s] + off, n, (double)now / 1000);
			model_insert(&m, w, seqid[s] + off, n, now, ttl);
		} else if (k < 90) {
			int r = approx_query(a, seqh[s], n, (double)now / 1000, depth, W);
			uint32_t best = 0;
			for (uint32_t x = 0; x < W; x++) {
				uint32_t d = model_depth(&m, x, seqid[s], n, now);
				q_ok &= bound ? depth[x] <= d : depth[x] == d;
				best = depth[x] > best ? depth[x] : best;
			}
			q_ok &= r == (int)best;
			nq++;
			nq_deep += best > 1;
		} else if (k < 99) {
			approx_expire(a, (double)now / 1000);
		} else {
			approx_worker_clear(a, w);
			memset(m.exp[w], 0, sizeof(m.exp[w]));
		}
		approx_stats(a, &st);
		bound_ok &= !bound || st.entries <= bound;
		if (op % 97 == 0 && !bound) {
			/* between sweeps: live pairs <= counted <= pairs not yet dropped */
			for (uint32_t x = 0; x < W; x++)
				for (uint32_t p = 0; p < LEN; p++) {
					uint32_t c = approx_blocks_at(a, x, p);
					between_ok &= model_count(&m, x, p, now, 1) <= c &&
						      c <= model_count(&m, x, p, now, 0);
				}
		}
		if (op % 1000 != 999)
			continue;
		/* full sweep: afterwards the view holds no expired pair, nor does the model */
		expire_all(a, (double)now / 1000);
		for (uint32_t x = 0; x < W; x++)
			for (int h = 0; h < nhashes; h++)
				if (m.exp[x][h] && m.exp[x][h] <= now)
					m.exp[x][h] = 0;
		{
			uint32_t cnt[W][LEN] = {{0}};
			uint64_t total = 0, sum = 0;
			if (bound) {
				/* recount what the view holds by asking it block by block */
				for (int h = 0; h < nhashes; h++) {
					approx_query(a, &hashes[h], 1, (double)now / 1000, depth,
						     W);
					for (uint32_t x = 0; x < W; x++)
						if (depth[x] && m.exp[x][h])
							cnt[x][m.pos[x][h]]++;
				}
			} else {
				for (uint32_t x = 0; x < W; x++)
					for (uint32_t p = 0; p < LEN; p++)
						cnt[x][p] = model_count(&m, x, p, now, 0);
			}
			for (uint32_t x = 0; x < W; x++) {
				for (uint32_t p = 0; p < LEN; p++) {
					sweep_ok &= approx_blocks_at(a, x, p) == cnt[x][p];
					total += cnt[x][p];
					sum += approx_blocks_at(a, x, p);
				}
				sweep_ok &= approx_blocks_at(a, x, APPROX_POS_MAX - 1) == 0;
			}
			approx_stats(a, &st);
			sweep_ok &= st.entries == total && sum == total;
			if (!bound)
				stats_ok &=
				    st.inserted == m.inserted && st.refreshed == m.refreshed;
			nsweeps++;
		}
	}
	CHECK(q_ok, "%s: %d queries (%d deeper than 1) %s the model's depths",
	      bound ? "bounded" : "unbounded", nq, nq_deep, bound ? "never above" : "equal");
	CHECK(sweep_ok, "%s: blocks_at equals a brute-force recount after each of %d sweeps",
	      bound ? "bounded" : "unbounded", nsweeps);
	if (bound) {
		CHECK(bound_ok, "bounded: entries never above %zu", bound);
		approx_stats(a, &st);
		CHECK(st.evicted > 0, "bounded: evictions happened (%llu)",
		      (unsigned long long)st.evicted);
	} else {
		CHECK(between_ok, "unbounded: between sweeps live <= blocks_at <= not dropped");
		CHECK(stats_ok, "unbounded: inserted and refreshed equal the model's");
	}
	for (uint32_t x = 0; x < W; x++)
		approx_worker_clear(a, x);
	approx_stats(a, &st);
	{
		uint64_t sum = 0;
		for (uint32_t x = 0; x < W; x++)
			sum += blocks_of(a, x);
		CHECK(st.entries == 0 && sum == 0, "%s: clearing every worker leaves no count",
		      bound ? "bounded" : "unbounded");
	}
	approx_free(a);
}

int main(void)
{
	make_chains();
	make_seqs();
	test_refusals();
	test_depth_table();
	test_blocks_at();
	test_capacity();
	test_bound();
	test_many_workers();
	test_rebase();
	test_memory();
	random_run(0, 12345);
	random_run(400, 777);
	return tap_done();
}
