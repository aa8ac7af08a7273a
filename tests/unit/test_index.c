// SPDX-License-Identifier: Apache-2.0
// index: parent resolution, idempotence, removal, tiers, stale marks, clears, >= 256 workers,
// the memory bound, and a randomized comparison against a naive model of per-worker block sets.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv/blockhash.h"
#include "kv/index.h"
#include "tap.h"

#define BS 16

/* Stores blocks [from, to) of the token sequence toks for worker w, engine hash = f(salt, i). */
static int store(struct index *idx, uint32_t w, const uint32_t *toks, size_t from, size_t to,
		 uint64_t salt, unsigned tier)
{
	uint64_t eng[256];
	struct index_stored s = {0};

	for (size_t i = from; i < to; i++)
		eng[i - from] = salt * 1000003 + i;
	s.engine = eng;
	s.n = to - from;
	s.has_parent = from > 0;
	s.parent = salt * 1000003 + from - 1;
	s.tokens = toks + from * BS;
	s.n_tokens = (to - from) * BS;
	s.block_size = BS;
	s.tier = tier;
	return index_block_stored(idx, w, &s);
}

static void fill(uint32_t *t, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		t[i] = (uint32_t)((i + 1) * 2654435761u ^ seed);
}

int main(void)
{
	struct index_cfg cfg;
	index_cfg_default(&cfg);
	cfg.max_workers = 8;
	struct index *idx;
	static uint32_t a[BS * 200], b[BS * 200];
	uint64_t ca[200], cb[200], eng;
	uint32_t depth[512], gd[512];
	struct index_stats st;
	int r;

	index_new(&cfg, &idx);
	fill(a, BS * 200, 1);
	memcpy(b, a, sizeof(b));
	b[BS * 5 + 3] ^= 0xffff; /* b shares a's first 5 blocks */
	blockhash_chain(index_seed(idx), BS, 0, a, BS * 200, ca, 200);
	blockhash_chain(index_seed(idx), BS, 0, b, BS * 200, cb, 200);

	/* worker 0: a[0..10) in two events chained through the engine parent hash */
	CHECK_EQ(store(idx, 0, a, 0, 4, 1, INDEX_TIER_GPU), 4, "4 blocks stored");
	CHECK_EQ(store(idx, 0, a, 4, 10, 1, INDEX_TIER_GPU), 6, "6 more chained on engine parent");
	/* worker 1: b[0..8); worker 2: a[0..3) in CPU tier only */
	CHECK_EQ(store(idx, 1, b, 0, 8, 2, INDEX_TIER_GPU), 8, "worker 1 stores b");
	CHECK_EQ(store(idx, 2, a, 0, 3, 3, INDEX_TIER_CPU), 3, "worker 2 stores a in CPU");
	r = index_query(idx, ca, 200, depth, gd, 4);
	CHECK_EQ(r, 10, "query returns the best depth");
	CHECK(depth[0] == 10 && depth[1] == 5 && depth[2] == 3 && depth[3] == 0,
	      "depths 10/5/3/0 (got %u %u %u %u)", depth[0], depth[1], depth[2], depth[3]);
	CHECK(gd[0] == 10 && gd[1] == 5 && gd[2] == 0, "GPU depths 10/5/0");
	r = index_query(idx, cb, 200, depth, NULL, 4);
	CHECK(r == 8 && depth[0] == 5 && depth[1] == 8 && depth[2] == 3, "query of b: 5/8/3");
	CHECK_EQ(index_query(idx, ca, 0, depth, NULL, 4), 0, "empty chain: 0");
	CHECK_EQ(index_query(idx, ca, 3, depth, NULL, 9), -EINVAL, "nworkers > max refused");

	/* idempotent: the same BlockStored again adds nothing */
	index_stats(idx, &st);
	uint64_t entries = st.entries, uniq = st.unique_blocks;
	CHECK_EQ(store(idx, 0, a, 4, 10, 1, INDEX_TIER_GPU), 0, "duplicate store adds nothing");
	index_stats(idx, &st);
	CHECK(st.entries == entries && st.duplicates == 6 && st.unique_blocks == uniq,
	      "duplicates counted, entries unchanged");
	/* the same block in a second tier: tier bit added, no new entry */
	CHECK_EQ(store(idx, 2, a, 0, 3, 3, INDEX_TIER_GPU), 0, "CPU block now also in GPU");
	index_query(idx, ca, 200, depth, gd, 4);
	CHECK(gd[2] == 3 && depth[2] == 3, "worker 2 GPU depth 3");
	uint64_t g, c;
	index_worker_blocks(idx, 2, &g, &c);
	CHECK(g == 3 && c == 3, "worker 2 holds 3 GPU and 3 CPU");
	eng = 3 * 1000003 + 1;
	CHECK_EQ(index_block_removed(idx, 2, INDEX_TIER_CPU, &eng, 1), 0,
		 "remove CPU copy: block stays in GPU");
	index_query(idx, ca, 200, depth, gd, 4);
	CHECK(depth[2] == 3 && gd[2] == 3, "still depth 3");
	CHECK_EQ(index_block_removed(idx, 2, INDEX_TIER_GPU, &eng, 1), 1, "remove GPU copy");
	index_query(idx, ca, 200, depth, gd, 4);
	CHECK(depth[2] == 1, "worker 2 stops at the removed block 1 (got %u)", depth[2]);
	CHECK_EQ(index_block_removed(idx, 2, INDEX_TIER_GPU, &eng, 1), 0, "remove again: nothing");
	index_stats(idx, &st);
	CHECK(st.unknown_removes == 1, "unknown remove counted");

	/* orphan: parent unknown to that worker */
	CHECK_EQ(store(idx, 3, a, 5, 9, 4, INDEX_TIER_GPU), 0, "orphan event adds nothing");
	index_stats(idx, &st);
	CHECK_EQ(st.orphans, 4, "4 orphan blocks counted");

	/* conflict: a known engine hash re-stored with other tokens replaces the old mapping */
	CHECK_EQ(store(idx, 1, a, 0, 1, 2, INDEX_TIER_GPU), 0, "block 0 of a equals block 0 of b");
	{
		uint32_t other[BS];
		fill(other, BS, 99);
		uint64_t e0 = 2 * 1000003 + 7;
		struct index_stored s = {.engine = &e0,
					 .n = 1,
					 .has_parent = true,
					 .parent = 2 * 1000003 + 6,
					 .tokens = other,
					 .n_tokens = BS,
					 .block_size = BS,
					 .tier = INDEX_TIER_GPU};
		CHECK_EQ(index_block_stored(idx, 1, &s), 1, "conflicting re-store replaces");
		index_stats(idx, &st);
		CHECK_EQ(st.conflicts, 1, "conflict counted");
		index_query(idx, cb, 200, depth, NULL, 4);
		CHECK_EQ(depth[1], 7, "worker 1 now holds b up to block 7");
	}

	/* bad input */
	{
		struct index_stored s = {
		    .engine = &eng, .n = 1, .tokens = a, .n_tokens = 15, .block_size = BS};
		CHECK_EQ(index_block_stored(idx, 0, &s), -EINVAL, "token count mismatch refused");
		s.n_tokens = 8;
		s.block_size = 8;
		CHECK_EQ(index_block_stored(idx, 0, &s), -EINVAL, "other block size refused");
		s.block_size = BS;
		s.n_tokens = BS;
		CHECK_EQ(index_block_stored(idx, 8, &s), -EINVAL, "worker id out of range refused");
	}

	/* stale and clear */
	index_worker_set_stale(idx, 0, true);
	index_query(idx, ca, 200, depth, NULL, 4);
	CHECK(depth[0] == 0 && index_worker_stale(idx, 0), "stale worker reported at depth 0");
	index_worker_set_stale(idx, 0, false);
	index_query(idx, ca, 200, depth, NULL, 4);
	CHECK_EQ(depth[0], 10, "trusted again: depth 10");
	CHECK_EQ(index_worker_clear(idx, 0), 10, "clear drops 10 blocks");
	index_query(idx, ca, 200, depth, NULL, 4);
	CHECK(depth[0] == 0 && depth[1] == 5, "cleared worker at 0, others intact");
	index_worker_clear(idx, 1);
	index_worker_clear(idx, 2);
	index_stats(idx, &st);
	CHECK(st.entries == 0 && st.unique_blocks == 0, "all cleared: no entries, no blocks");
	{
		struct buf out = {0};
		CHECK(!index_metrics(idx, NULL, 0, &out) &&
			  strstr(out.data, "kvsplice_index_orphan_blocks_total 4"),
		      "metrics text has the orphan counter");
		buf_reset(&out);
		CHECK(!index_debug_json(idx, NULL, 0, &out) && out.data[0] == '{' &&
			  strstr(out.data, "\"orphans\":4"),
		      "debug JSON");
		buf_free(&out);
	}
	index_free(idx);

	/* 512 workers: ids above 255 work, bitmaps span words */
	index_cfg_default(&cfg);
	cfg.max_workers = 512;
	index_new(&cfg, &idx);
	blockhash_chain(index_seed(idx), BS, 0, a, BS * 200, ca, 200);
	for (uint32_t w = 0; w < 512; w += 37)
		store(idx, w, a, 0, 1 + w % 150, 10 + w, INDEX_TIER_GPU);
	index_query(idx, ca, 200, depth, NULL, 512);
	int okw = 1;
	for (uint32_t w = 0; w < 512; w++)
		okw &= depth[w] == (w % 37 ? 0 : 1 + w % 150);
	CHECK(okw, "512 workers: every depth right");
	index_free(idx);

	/* memory bound: entries never exceed max_entries; evictions counted; bytes reported */
	index_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.max_entries = 100;
	index_new(&cfg, &idx);
	for (uint32_t w = 0; w < 4; w++) {
		fill(a, BS * 200, w + 7);
		store(idx, w, a, 0, 60, 50 + w, INDEX_TIER_GPU);
	}
	index_stats(idx, &st);
	CHECK(st.entries == 100 && st.evictions == 140, "bounded at 100 entries, 140 evictions");
	CHECK(st.bytes > 0, "bytes reported (%llu)", (unsigned long long)st.bytes);
	index_free(idx);

	/* 0 is off: max_entries 0 holds all 240; a 0 block size or worker count is refused */
	index_cfg_default(&cfg);
	cfg.max_workers = 4;
	cfg.max_entries = 0;
	index_new(&cfg, &idx);
	for (uint32_t w = 0; w < 4; w++) {
		fill(a, BS * 200, w + 7);
		store(idx, w, a, 0, 60, 50 + w, INDEX_TIER_GPU);
	}
	index_stats(idx, &st);
	CHECK(st.entries == 240 && st.evictions == 0, "max_entries 0: no bound (240 held)");
	index_free(idx);
	cfg.block_size = 0;
	CHECK_EQ(index_new(&cfg, &idx), -EINVAL, "block_size 0 refused");
	index_cfg_default(&cfg);
	cfg.max_workers = 0;
	CHECK_EQ(index_new(&cfg, &idx), -EINVAL, "max_workers 0 refused");
	CHECK(index_new(NULL, &idx) == 0 && index_max_workers(idx) == INDEX_DEFAULT_MAX_WORKERS &&
		  index_seed(idx) == BLOCKHASH_DEFAULT_SEED,
	      "cfg NULL: the defaults");
	index_free(idx);

	/* blocks per chain position: what the kv policy counts to place a new prefix */
	{
		index_cfg_default(&cfg);
		cfg.max_workers = 4;
		index_new(&cfg, &idx);
		fill(a, BS * 200, 3);
		memcpy(b, a, sizeof(b));
		b[BS * 2] ^= 1; /* b branches off a at block 2 */
		CHECK_EQ(index_worker_blocks_at(idx, 0, 0), 0, "empty worker: 0 at position 0");
		store(idx, 0, a, 0, 4, 1, INDEX_TIER_GPU);
		{
			/* b's blocks 2.. follow a's block 1 (one engine hash per block, as vLLM's
			 * prefix cache gives) */
			uint64_t e2[1] = {777};
			struct index_stored bs = {.engine = e2,
						  .n = 1,
						  .has_parent = true,
						  .parent = 1 * 1000003 + 1,
						  .tokens = b + 2 * BS,
						  .n_tokens = BS,
						  .block_size = BS,
						  .tier = INDEX_TIER_GPU};
			CHECK_EQ(index_block_stored(idx, 0, &bs), 1, "b's own block 2 stored");
		}
		CHECK_EQ(index_worker_blocks_at(idx, 0, 0), 1, "shared block 0 counted once");
		CHECK_EQ(index_worker_blocks_at(idx, 0, 2), 2, "two blocks at the branch position");
		CHECK_EQ(index_worker_blocks_at(idx, 0, 3), 1, "one block at position 3");
		CHECK_EQ(index_blocks_at(idx, 2), 2, "cluster: two blocks at the branch position");
		CHECK_EQ(index_blocks_at(idx, 4), 0, "cluster: nothing at position 4 yet");
		store(idx, 0, a, 4, 6, 1, INDEX_TIER_GPU); /* continues a: positions 4, 5 */
		CHECK_EQ(index_worker_blocks_at(idx, 0, 5), 1, "a continued event keeps positions");
		store(idx, 1, a, 0, 2, 9, INDEX_TIER_CPU);
		CHECK_EQ(index_worker_blocks_at(idx, 1, 0), 0, "CPU-tier blocks are not counted");
		store(idx, 1, a, 0, 2, 9, INDEX_TIER_GPU);
		CHECK_EQ(index_worker_blocks_at(idx, 1, 1), 1, "counted once it reaches the GPU");
		CHECK_EQ(index_blocks_at(idx, 1), 1,
			 "cluster: a block two workers hold counts once");
		eng = 1 * 1000003 + 3;
		index_block_removed(idx, 0, INDEX_TIER_GPU, &eng, 1);
		CHECK_EQ(index_worker_blocks_at(idx, 0, 3), 0, "removed block leaves its count");
		CHECK_EQ(index_blocks_at(idx, 3), 0,
			 "cluster: a block only it held leaves the count");
		CHECK_EQ(index_worker_blocks_at(idx, 0, 400), 0,
			 "deep positions share the last count");
		{
			static uint32_t deep[BS * 300];
			fill(deep, BS * 300, 11);
			store(idx, 2, deep, 0, 200, 3, INDEX_TIER_GPU);
			store(idx, 2, deep, 200, 300, 3, INDEX_TIER_GPU);
			CHECK_EQ(index_worker_blocks_at(idx, 2, INDEX_POS_MAX - 1),
				 300 - (INDEX_POS_MAX - 1),
				 "positions from INDEX_POS_MAX-1 share one count");
			CHECK_EQ(index_worker_blocks_at(idx, 2, 1000), 300 - (INDEX_POS_MAX - 1),
				 "any deeper position reads that count");
		}
		CHECK_EQ(index_blocks_at(idx, INDEX_POS_MAX - 1), 300 - (INDEX_POS_MAX - 1),
			 "cluster: deep positions share one count");
		index_worker_clear(idx, 0);
		CHECK_EQ(index_worker_blocks_at(idx, 0, 2), 0, "a cleared worker counts nothing");
		CHECK_EQ(
		    index_blocks_at(idx, 0), 2,
		    "cluster: block 0 of a (worker 1 holds it too) and of worker 2's sequence");
		CHECK_EQ(index_blocks_at(idx, 2), 1,
			 "cluster: a's and b's blocks 2 only the cleared worker held go");
		CHECK_EQ(index_worker_blocks_at(idx, 9, 0), 0, "worker out of range: 0");
		index_free(idx);
	}

	/* randomized: index queries equal a naive model (per worker set of (engine, own)) */
	{
		enum { W = 6, SEQS = 12, LEN = 40 };
		static uint32_t toks[SEQS][LEN * BS];
		static uint64_t chain[SEQS][LEN];
		static unsigned char held[W][SEQS][LEN];
		uint64_t seed = 77;
		int good = 1, good_at = 1, good_gat = 1, nq = 0;

		index_cfg_default(&cfg);
		cfg.max_workers = W;
		cfg.seed = 5;
		index_new(&cfg, &idx);
		for (int s = 0; s < SEQS; s++) {
			fill(toks[s], LEN * BS, 1000 + (uint32_t)s / 3);
			toks[s][(s % 3 + 1) * 5 * BS] ^=
			    (uint32_t)s; /* families sharing prefixes */
			blockhash_chain(5, BS, 0, toks[s], LEN * BS, chain[s], LEN);
		}
		srand(12345);
		for (int op = 0; op < 20000; op++) {
			uint32_t w = (uint32_t)rand() % W;
			int s = rand() % SEQS, from = rand() % LEN, k = rand() % 5;
			int to = from + 1 + rand() % 6;
			if (to > LEN)
				to = LEN;
			/* engine hash: unique per (seq, block) within a worker; shared prefixes use
			 * different engine hashes in different seqs, like per-request hashes would
			 * not: use the own hash itself masked, as a deterministic engine id */
			if (k < 3) {
				if (from > 0 && !held[w][s][from - 1])
					from = 0;
				uint64_t eng2[LEN];
				for (int i = from; i < to; i++)
					eng2[i - from] = chain[s][i] ^ seed;
				struct index_stored st2 = {.engine = eng2,
							   .n = (size_t)(to - from),
							   .has_parent = from > 0,
							   .parent =
							       from ? chain[s][from - 1] ^ seed : 0,
							   .tokens = toks[s] + from * BS,
							   .n_tokens = (size_t)(to - from) * BS,
							   .block_size = BS,
							   .tier = INDEX_TIER_GPU};
				index_block_stored(idx, w, &st2);
				for (int i = from; i < to; i++)
					for (int s2 = 0; s2 < SEQS; s2++)
						for (int j = 0; j < LEN; j++)
							if (chain[s2][j] == chain[s][i])
								held[w][s2][j] = 1;
			} else if (k == 3) {
				uint64_t e = chain[s][from] ^ seed;
				index_block_removed(idx, w, INDEX_TIER_GPU, &e, 1);
				for (int s2 = 0; s2 < SEQS; s2++)
					for (int j = 0; j < LEN; j++)
						if (chain[s2][j] == chain[s][from])
							held[w][s2][j] = 0;
			} else if (rand() % 50 == 0) {
				index_worker_clear(idx, w);
				memset(held[w], 0, sizeof(held[w]));
			}
			if (op % 10 == 0) {
				int q = rand() % SEQS;
				index_query(idx, chain[q], LEN, depth, NULL, W);
				for (uint32_t x = 0; x < W; x++) {
					uint32_t d = 0;
					while (d < LEN && held[x][q][d])
						d++;
					good &= depth[x] == d;
				}
				/* blocks per chain position: distinct own hashes held there */
				for (uint32_t x = 0; x < W && op % 100 == 0; x++)
					for (int j = 0; j < LEN; j++) {
						uint32_t cnt = 0;
						for (int s2 = 0; s2 < SEQS; s2++) {
							int first = held[x][s2][j];
							for (int s3 = 0; s3 < s2 && first; s3++)
								if (held[x][s3][j] &&
								    chain[s3][j] == chain[s2][j])
									first = 0;
							cnt += (uint32_t)first;
						}
						good_at &= index_worker_blocks_at(
							       idx, x, (uint32_t)j) == cnt;
					}
				/* and over the cluster: distinct own hashes any worker holds there
				 */
				for (int j = 0; j < LEN && op % 100 == 0; j++) {
					uint32_t cnt = 0;
					for (int s2 = 0; s2 < SEQS; s2++) {
						int any = 0, first = 1;
						for (uint32_t x = 0; x < W; x++)
							any |= held[x][s2][j];
						for (int s3 = 0; s3 < s2 && any && first; s3++)
							for (uint32_t x = 0; x < W && first; x++)
								if (held[x][s3][j] &&
								    chain[s3][j] == chain[s2][j])
									first = 0;
						cnt += (uint32_t)(any && first);
					}
					good_gat &= index_blocks_at(idx, (uint32_t)j) == cnt;
				}
				nq++;
			}
		}
		CHECK(good, "randomized: %d queries equal the naive model", nq);
		CHECK(good_at, "randomized: blocks per chain position equal the naive model");
		CHECK(good_gat,
		      "randomized: the cluster's blocks per position equal the naive model");
		index_free(idx);
	}
	return tap_done();
}
