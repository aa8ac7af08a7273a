// SPDX-License-Identifier: Apache-2.0
/* kvsim's vLLM v1 KV cache and scheduler model on small exact cases. The model lives in
 * tools/kvsim (only kvsim uses it), so this test compiles those files in. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/kvsim/kvcache.c"
#include "../../tools/kvsim/sched.c"
#include "tap.h"

#define BS 4

static const uint8_t SEED[] = "test-seed";

static struct kvcache *mk(uint32_t nblocks)
{
	return kvc_new(nblocks, BS, SEED, sizeof(SEED));
}

static void fill(uint32_t *t, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = base + (uint32_t)i;
}

/* Looks up, allocates everything (prefill of the whole prompt) like a first schedule. */
static int admit(struct kvcache *c, struct kvc_seq *s, const uint32_t *t, size_t n, size_t *hit)
{
	uint32_t comp[64];
	size_t nc;

	kvc_seq_hash(c, s, t, n);
	nc = kvc_lookup(c, s, n, comp, 64);
	if (hit)
		*hit = nc * BS;
	return kvc_allocate(c, s, comp, nc, 0, n - nc * BS, t, n);
}

static void test_last_token_recomputed(void)
{
	int rc;
	struct kvcache *c = mk(10);
	struct kvc_seq a = {0}, b = {0}, d = {0};
	uint32_t t[16];
	size_t hit;

	fill(t, 16, 100);
	rc = admit(c, &a, t, 8, &hit);
	CHECK_EQ(rc, 0, "8-token request admitted");
	CHECK_EQ(hit, 0, "cold cache: no hit");
	kvc_release(c, &a);
	rc = admit(c, &b, t, 8, &hit);
	CHECK_EQ(rc, 0, "same 8 tokens again");
	CHECK_EQ(hit, 4, "an exact repeat hits (8-1)/4 = 1 block: the last token is recomputed");
	kvc_release(c, &b);
	rc = admit(c, &d, t, 9, &hit);
	CHECK_EQ(rc, 0, "9 tokens sharing those 8");
	CHECK_EQ(hit, 8, "a longer request hits both full blocks");
	kvc_release(c, &d);
	kvc_seq_free(&a);
	kvc_seq_free(&b);
	kvc_seq_free(&d);
	kvc_free(c);
}

static void test_reverse_free_and_eviction(void)
{
	int rc;
	struct kvcache *c = mk(10); /* 9 usable blocks: 1..9 */
	struct kvc_seq a = {0}, b = {0}, a2 = {0};
	struct kvc_events ev = {0};
	uint32_t ta[13], tb[28];
	size_t hit;
	uint8_t a_h2[KVC_HASH_LEN];

	fill(ta, 13, 1000);
	fill(tb, 28, 5000);
	CHECK_EQ(kvc_usable_blocks(c), 9, "block 0 is the reserved null block");
	rc = admit(c, &a, ta, 12, NULL);
	CHECK_EQ(rc, 0, "A: 12 tokens, 3 blocks");
	CHECK(a.blocks[0] == 1 && a.blocks[1] == 2 && a.blocks[2] == 3,
	      "A got blocks 1,2,3 from the head of the free queue");
	memcpy(a_h2, a.hashes[2], KVC_HASH_LEN);
	kvc_release(c, &a);
	uint32_t want[] = {4, 5, 6, 7, 8, 9, 3, 2, 1};
	int same = 1;
	for (uint32_t i = 0; i < 9; i++)
		same &= kvc_free_at(c, i) == want[i];
	CHECK(same,
	      "freed in reverse order: queue is 4..9, 3, 2, 1 (A's last block evicted first)");
	CHECK_EQ(kvc_num_cached(c), 3, "A's blocks stay cached while free (lazy eviction)");
	kvc_take_events(c, &ev);
	kvc_events_clear(&ev);
	rc = admit(c, &b, tb, 28, NULL);
	CHECK_EQ(rc, 0, "B: 7 blocks of other tokens");
	CHECK_EQ(b.blocks[6], 3,
		 "B's 7th block is A's last block (first cached block in the queue)");
	kvc_take_events(c, &ev);
	size_t removed = 0, stored = 0;
	for (size_t i = 0; i < ev.n; i++) {
		if (ev.v[i].type == KVC_EV_REMOVED) {
			removed++;
			CHECK(memcmp(ev.v[i].hashes[0], a_h2, KVC_HASH_LEN) == 0,
			      "BlockRemoved carries A's block-2 hash");
		} else if (ev.v[i].type == KVC_EV_STORED) {
			stored += ev.v[i].nhashes;
		}
	}
	CHECK_EQ(removed, 1, "exactly one eviction, when the cached block was taken");
	CHECK_EQ(stored, 7, "B's 7 full blocks stored");
	kvc_events_clear(&ev);
	rc = admit(c, &a2, ta, 13, &hit);
	CHECK_EQ(rc, -ENOSPC, "A again while B runs: 2 cached free blocks + 2 new > 2 free: waits");
	kvc_release(c, &b);
	rc = admit(c, &a2, ta, 13, &hit);
	CHECK_EQ(rc, 0, "A again with 13 tokens once B is done");
	CHECK_EQ(hit, 8, "A's first two blocks survived (block 0 survives longest)");
	kvc_release(c, &a2);
	kvc_seq_free(&a);
	kvc_seq_free(&b);
	kvc_seq_free(&a2);
	free(ev.v);
	kvc_free(c);
}

static void test_ref_counts(void)
{
	int rc;
	struct kvcache *c = mk(10);
	struct kvc_seq a = {0}, b = {0};
	struct kvc_block_info info;
	uint32_t t[13];
	size_t hit;

	fill(t, 13, 7);
	rc = admit(c, &a, t, 12, NULL);
	CHECK_EQ(rc, 0, "A admitted");
	CHECK_EQ(kvc_num_free(c), 6, "6 free blocks while A runs");
	rc = admit(c, &b, t, 13, &hit);
	CHECK_EQ(rc, 0, "B shares A's 3 blocks while A runs");
	CHECK_EQ(hit, 12, "B hits 12 tokens");
	kvc_block_info(c, a.blocks[0], &info);
	CHECK_EQ(info.ref_cnt, 2, "shared block has ref count 2");
	CHECK_EQ(kvc_num_free(c), 5, "B took only one new block");
	kvc_release(c, &a);
	kvc_block_info(c, b.blocks[0], &info);
	CHECK(info.ref_cnt == 1 && info.free_pos == -1,
	      "after A ends the shared block stays in use");
	CHECK_EQ(kvc_num_free(c), 5, "no block freed while B holds them");
	kvc_release(c, &b);
	CHECK_EQ(kvc_num_free(c), 9, "all free after B ends");
	kvc_block_info(c, b.blocks[0], &info);
	kvc_seq_free(&a);
	kvc_seq_free(&b);
	kvc_free(c);
}

static void test_cached_free_block_leaves_queue(void)
{
	int rc;
	struct kvcache *c = mk(6); /* 5 usable */
	struct kvc_seq a = {0}, b = {0}, d = {0};
	uint32_t t[13], u[20];
	size_t hit;

	fill(t, 13, 40);
	fill(u, 20, 900);
	admit(c, &a, t, 12, NULL);
	kvc_release(c, &a); /* queue: 4 5 3 2 1, with 1..3 cached */
	rc = admit(c, &b, t, 13, &hit);
	CHECK_EQ(rc, 0, "B reuses A's cached free blocks");
	CHECK_EQ(hit, 12, "3 blocks hit");
	CHECK_EQ(kvc_num_free(c), 1, "3 cached blocks left the queue and 1 new one was taken");
	rc = admit(c, &d, u, 8, NULL);
	CHECK_EQ(rc, -ENOSPC, "a 2-block request does not fit in 1 free block");
	CHECK_EQ(kvc_num_free(c), 1, "a refused allocation changes nothing");
	CHECK_EQ(d.nblocks, 0, "and gives the refused request nothing");
	kvc_release(c, &b);
	rc = admit(c, &d, u, 8, NULL);
	CHECK_EQ(rc, 0, "it fits once B is done");
	kvc_release(c, &d);
	kvc_seq_free(&a);
	kvc_seq_free(&b);
	kvc_seq_free(&d);
	kvc_free(c);
}

static void test_evictable_hits_count_against_free(void)
{
	struct kvcache *c = mk(6); /* 5 usable */
	struct kvc_seq a = {0}, x = {0}, b = {0};
	uint32_t t[13], u[8];
	size_t hit;

	fill(t, 13, 40);
	fill(u, 8, 700);
	admit(c, &a, t, 12, NULL);
	kvc_release(c, &a);
	admit(c, &x, u, 8, NULL); /* takes blocks 4 and 5: queue = 3 2 1, all cached */
	CHECK_EQ(admit(c, &b, t, 13, &hit), -ENOSPC,
		 "3 cached free blocks + 1 new one need 4 free blocks: refused with 3");
	CHECK_EQ(kvc_num_cached(c), 5, "refusal evicted nothing");
	kvc_seq_free(&a);
	kvc_release(c, &x);
	kvc_seq_free(&x);
	kvc_seq_free(&b);
	kvc_free(c);
}

static void test_unhashed_to_head(void)
{
	struct kvcache *c = mk(10);
	struct kvc_seq a = {0};
	uint32_t t[6];

	fill(t, 6, 3);
	admit(c, &a, t, 6, NULL); /* block 1 full (hashed), block 2 partial */
	kvc_release(c, &a);
	CHECK_EQ(kvc_free_at(c, 0), 2, "the partial (unhashed) block goes to the head");
	CHECK_EQ(kvc_free_at(c, 8), 1, "the hashed block goes to the tail");
	kvc_seq_free(&a);
	kvc_free(c);
}

static void test_events_and_reset(void)
{
	int rc;
	struct kvcache *c = mk(10);
	struct kvc_seq a = {0}, b = {0};
	struct kvc_events ev = {0};
	uint32_t t[13];
	size_t hit;

	fill(t, 13, 11);
	admit(c, &a, t, 6, NULL);
	kvc_take_events(c, &ev);
	CHECK(ev.n == 1 && ev.v[0].type == KVC_EV_STORED && ev.v[0].nhashes == 1 &&
		  !ev.v[0].has_parent,
	      "one full block: BlockStored of 1 hash, no parent");
	CHECK(memcmp(ev.v[0].tokens, t, 4 * sizeof(uint32_t)) == 0, "its 4 token ids");
	kvc_events_clear(&ev);
	/* Decode fills the next block: registering it stores it with block 0 as parent. */
	kvc_allocate(c, &a, NULL, 0, 6, 2, t, 8);
	kvc_seq_hash(c, &a, t, 8);
	kvc_allocate(c, &a, NULL, 0, 8, 1, t, 9);
	kvc_take_events(c, &ev);
	CHECK(ev.n == 1 && ev.v[0].type == KVC_EV_STORED && ev.v[0].has_parent &&
		  memcmp(ev.v[0].parent, a.hashes[0], KVC_HASH_LEN) == 0 &&
		  memcmp(ev.v[0].hashes[0], a.hashes[1], KVC_HASH_LEN) == 0,
	      "the second block is stored when it fills, parent = block 0's hash");
	kvc_events_clear(&ev);
	rc = kvc_reset(c);
	CHECK_EQ(rc, -EBUSY, "reset refused while blocks are in use");
	kvc_release(c, &a);
	rc = kvc_reset(c);
	CHECK_EQ(rc, 0, "reset when idle");
	kvc_take_events(c, &ev);
	CHECK(ev.n == 1 && ev.v[0].type == KVC_EV_CLEARED, "AllBlocksCleared queued");
	kvc_events_clear(&ev);
	rc = admit(c, &b, t, 13, &hit);
	CHECK_EQ(rc, 0, "after reset");
	CHECK_EQ(hit, 0, "nothing hits after a reset");
	kvc_release(c, &b);
	kvc_seq_free(&a);
	kvc_seq_free(&b);
	free(ev.v);
	kvc_free(c);
}

static void test_hash_seed(void)
{
	struct kvcache *c1 = mk(4), *c2 = mk(4), *c3 = kvc_new(4, BS, "other", 5);
	struct kvc_seq s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0};
	uint32_t t[8], u[8];

	fill(t, 8, 1);
	fill(u, 8, 1);
	u[7] = 99;
	kvc_seq_hash(c1, &s1, t, 8);
	kvc_seq_hash(c2, &s2, t, 8);
	kvc_seq_hash(c3, &s3, t, 8);
	kvc_seq_hash(c1, &s4, u, 8);
	CHECK(memcmp(s1.hashes, s2.hashes, 2 * KVC_HASH_LEN) == 0, "same seed, same chain");
	CHECK(memcmp(s1.hashes[0], s3.hashes[0], KVC_HASH_LEN) != 0, "another seed, another chain");
	CHECK(memcmp(s1.hashes[0], s4.hashes[0], KVC_HASH_LEN) == 0 &&
		  memcmp(s1.hashes[1], s4.hashes[1], KVC_HASH_LEN) != 0,
	      "a token change alters its block's hash only from there on");
	uint8_t h[KVC_HASH_LEN] = {0};
	h[24] = 0x80;
	h[31] = 0x01;
	CHECK(kvc_hash_u64(h) == 0x8000000000000001ull, "int hash = last 8 bytes big-endian");
	kvc_seq_free(&s1);
	kvc_seq_free(&s2);
	kvc_seq_free(&s3);
	kvc_seq_free(&s4);
	kvc_free(c1);
	kvc_free(c2);
	kvc_free(c3);
}

/* --- scheduler ---------------------------------------------------------------------------- */

struct rec {
	int first, done;
	uint32_t last;
};

static void on_tok(void *ctx, struct sreq *r, uint32_t tok, bool first, bool finished)
{
	struct rec *rec = r->user;

	(void)ctx;
	rec->first += first;
	rec->done += finished;
	rec->last = tok;
}

static void mkreq(struct sreq *r, uint32_t *buf, size_t prompt, uint32_t base, const uint32_t *out,
		  size_t max_tokens, struct rec *rec)
{
	memset(r, 0, sizeof(*r));
	fill(buf, prompt, base);
	r->tokens = buf;
	r->prompt_len = prompt;
	r->out = out;
	r->max_tokens = max_tokens;
	r->user = rec;
}

static void test_sched_waiting_and_chunks(void)
{
	struct kvcache *c = mk(8); /* 7 usable blocks of 4 */
	struct sched_cfg cfg = {.max_num_batched_tokens = 8,
				.max_num_seqs = 16,
				.step_fixed_ms = 10,
				.step_prefill_fixed_ms = 5,
				.prefill_us_per_token = 1000,
				.decode_us_per_seq = 500};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], bb[32], out[4] = {1, 2, 3, 4};
	struct sreq a, b;
	struct rec ra = {0}, rb = {0};
	double ms;

	mkreq(&a, ba, 12, 100, out, 2, &ra);
	mkreq(&b, bb, 12, 500, out, 2, &rb);
	sched_add(s, &a);
	sched_add(s, &b);
	ms = sched_plan(s);
	CHECK(ms == 10 + 5 + 8, "step 1: a prefill chunk of 8 tokens (budget), cost 10+5+8 ms");
	CHECK(sched_num_running(s) == 1 && sched_num_waiting(s) == 1,
	      "the budget is spent: B waits");
	sched_finish(s, on_tok, NULL);
	CHECK_EQ(ra.first, 0, "no token after a partial prefill chunk");
	ms = sched_plan(s);
	CHECK_EQ(sched_num_running(s), 2, "step 2: A's last 4 tokens and B's first 4");
	sched_finish(s, on_tok, NULL);
	CHECK_EQ(ra.first, 1, "A's first token after its prefill completes");
	CHECK_EQ(b.cached_tokens, 0, "B hit nothing");
	/* A holds 3 blocks (+1 for decode), B needs 3: 7 blocks in all. */
	while (!ra.done || !rb.done) {
		ms = sched_plan(s);
		if (ms <= 0)
			break;
		sched_finish(s, on_tok, NULL);
	}
	CHECK(ra.done && rb.done, "both finish");
	CHECK_EQ(ra.last, 2, "A sampled its given tokens in order");
	CHECK_EQ(sched_stats(s)->queries_tokens, 24, "queries counted in tokens");
	CHECK_EQ(kvc_num_free(c), 7, "every block freed");
	kvc_seq_free(&a.seq);
	kvc_seq_free(&b.seq);
	sched_free(s);
	kvc_free(c);
}

/* The step cost's attention parts: a prefill chunk of n new tokens after c computed ones has
 * n * (c + (n + 1) / 2) pairs, a decode attends to its whole context. */
static void test_sched_step_cost_grows_with_context(void)
{
	struct kvcache *c = mk(64);
	struct sched_cfg cfg = {.max_num_batched_tokens = 8,
				.max_num_seqs = 16,
				.step_fixed_ms = 1,
				.step_prefill_fixed_ms = 2,
				.prefill_us_per_token = 100,
				.prefill_attn_us = 1000,
				.decode_us_per_seq = 300,
				.decode_attn_us = 2000};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], out[4] = {1, 2, 3, 4};
	struct sreq a;
	struct rec ra = {0};
	double ms, want;

	mkreq(&a, ba, 12, 100, out, 3, &ra);
	sched_add(s, &a);
	ms = sched_plan(s);
	/* 8 tokens from 0: 8 * (0 + 4.5) = 36 pairs = 0.036 K * 1000 us = 36 us */
	want = 1 + 2 + (100.0 * 8 + 1000.0 * 36 / 1000) / 1000;
	CHECK(fabs(ms - want) < 1e-9, "first chunk: fixed + prefill + 36 pairs (%g ms)", ms);
	sched_finish(s, on_tok, NULL);
	ms = sched_plan(s);
	/* 4 tokens after 8 computed: 4 * (8 + 2.5) = 42 pairs */
	want = 1 + 2 + (100.0 * 4 + 1000.0 * 42 / 1000) / 1000;
	CHECK(fabs(ms - want) < 1e-9,
	      "second chunk attends to the 8 tokens before it too: 42 pairs (%g ms)", ms);
	sched_finish(s, on_tok, NULL);
	ms = sched_plan(s);
	/* a decode with 13 tokens of context (12 prompt + 1 sampled) */
	want = 1 + (300.0 + 2000.0 * 13 / 1000) / 1000;
	CHECK(fabs(ms - want) < 1e-9,
	      "a decode: fixed + per sequence + 13 tokens of context (%g ms)", ms);
	sched_finish(s, on_tok, NULL);
	ms = sched_plan(s);
	want = 1 + (300.0 + 2000.0 * 14 / 1000) / 1000;
	CHECK(fabs(ms - want) < 1e-9, "the next decode costs one token more of context");
	sched_finish(s, on_tok, NULL);
	CHECK(ra.done, "A finished");
	kvc_seq_free(&a.seq);
	sched_free(s);
	kvc_free(c);
}

static void test_sched_blocks_run_out(void)
{
	struct kvcache *c = mk(6); /* 5 usable blocks */
	struct sched_cfg cfg = {
	    .max_num_batched_tokens = 64, .max_num_seqs = 16, .step_fixed_ms = 1};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], bb[32], out[8] = {9, 9, 9, 9, 9, 9, 9, 9};
	struct sreq a, b;
	struct rec ra = {0}, rb = {0};
	int steps = 0;

	mkreq(&a, ba, 12, 100, out, 1, &ra);
	mkreq(&b, bb, 12, 500, out, 1, &rb);
	sched_add(s, &a);
	sched_add(s, &b);
	sched_plan(s);
	CHECK(sched_num_running(s) == 1 && sched_num_waiting(s) == 1,
	      "B waits: 3 blocks needed, 2 free");
	sched_finish(s, on_tok, NULL);
	CHECK(ra.done == 1 && rb.done == 0, "A done after one step, B still waiting");
	while (!rb.done && steps++ < 10) {
		sched_plan(s);
		sched_finish(s, on_tok, NULL);
	}
	CHECK_EQ(rb.done, 1, "B runs once A's blocks are free");
	CHECK_EQ(b.cached_tokens, 0, "B's cached tokens: none");
	kvc_seq_free(&a.seq);
	kvc_seq_free(&b.seq);
	sched_free(s);
	kvc_free(c);
}

static void test_sched_preemption(void)
{
	struct kvcache *c = mk(5); /* 4 usable blocks */
	struct sched_cfg cfg = {
	    .max_num_batched_tokens = 64, .max_num_seqs = 16, .step_fixed_ms = 1};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], bb[32], out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
	struct sreq a, b;
	struct rec ra = {0}, rb = {0};
	int steps = 0;

	/* 7 tokens each = 2 blocks each; the 2nd decode token of each needs a 3rd block. */
	mkreq(&a, ba, 7, 100, out, 4, &ra);
	mkreq(&b, bb, 7, 500, out, 4, &rb);
	sched_add(s, &a);
	sched_add(s, &b);
	sched_plan(s);
	CHECK_EQ(sched_num_running(s), 2, "both fit: 4 blocks");
	sched_finish(s, on_tok, NULL);
	sched_plan(s); /* decode of token index 7 still fits block 2 */
	sched_finish(s, on_tok, NULL);
	sched_plan(s); /* token 8 needs a new block for each: B is preempted */
	CHECK(sched_stats(s)->preemptions >= 1 && b.state == SREQ_WAITING,
	      "out of blocks while decoding: the last running request is preempted");
	sched_finish(s, on_tok, NULL);
	while ((!ra.done || !rb.done) && steps++ < 50) {
		if (sched_plan(s) <= 0)
			break;
		sched_finish(s, on_tok, NULL);
	}
	CHECK(ra.done && rb.done, "both finish after the preemption");
	CHECK_EQ(b.cached_tokens, 0, "cached_tokens keeps its first-schedule value");
	kvc_seq_free(&a.seq);
	kvc_seq_free(&b.seq);
	sched_free(s);
	kvc_free(c);
}

/* vLLM registers a block's hash in allocate_slots() (cache_blocks), i.e. in the step that will
 * compute it, and looks up waiting requests after scheduling the running ones: a request admitted
 * in the step that computes another request's last prefix block already hits it. */
static void test_sched_hit_on_blocks_being_computed(void)
{
	struct kvcache *c = mk(16);
	struct sched_cfg cfg = {
	    .max_num_batched_tokens = 8, .max_num_seqs = 16, .step_fixed_ms = 1};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], bb[32], out[4] = {1, 2, 3, 4};
	struct sreq a, b;
	struct rec ra = {0}, rb = {0};

	mkreq(&a, ba, 12, 100, out, 2, &ra);
	mkreq(&b, bb, 13, 100, out, 2, &rb); /* A's 12 tokens + 1 of its own */
	bb[12] = 999;
	sched_add(s, &a);
	sched_add(s, &b);
	sched_plan(s);
	CHECK(sched_num_waiting(s) == 1 && kvc_num_cached(c) == 2,
	      "step 1: A's first chunk of 8 tokens registers 2 blocks; B waits for budget");
	sched_finish(s, on_tok, NULL);
	sched_plan(s);
	CHECK_EQ(sched_num_running(s), 2, "step 2: A's last 4 prompt tokens and B");
	CHECK_EQ(b.cached_tokens, 12,
		 "B hits all 3 of A's blocks, the 3rd computed in this very step");
	CHECK(b.seq.blocks[2] == a.seq.blocks[2], "B shares A's third block");
	while ((!ra.done || !rb.done) && sched_plan(s) > 0)
		sched_finish(s, on_tok, NULL);
	CHECK(ra.done && rb.done, "both finish");
	kvc_seq_free(&a.seq);
	kvc_seq_free(&b.seq);
	sched_free(s);
	kvc_free(c);
}

/* Blocks filled by decoded tokens are hashed and cached like prompt blocks (the request's block
 * hashes grow as tokens are appended); at the end the request's blocks are freed in reverse order,
 * the partial last block (no hash) to the head of the free queue. */
static void test_sched_decode_blocks_cached(void)
{
	struct kvcache *c = mk(16);
	struct sched_cfg cfg = {
	    .max_num_batched_tokens = 64, .max_num_seqs = 16, .step_fixed_ms = 1};
	struct sched *s = sched_new(&cfg, c);
	uint32_t ba[32], bb[32], out[4] = {50, 51, 52, 53};
	struct sreq a, b;
	struct rec ra = {0}, rb = {0};
	uint32_t ablk[3];

	mkreq(&a, ba, 6, 100, out, 4, &ra);
	sched_add(s, &a);
	while (!ra.done && sched_plan(s) > 0) {
		if (a.seq.nblocks == 3)
			memcpy(ablk, a.seq.blocks, sizeof(ablk));
		sched_finish(s, on_tok, NULL);
	}
	CHECK(ra.done && a.ntokens == 10, "A: 6 prompt + 4 output tokens, 9 of them computed");
	CHECK_EQ(kvc_num_cached(c), 2,
		 "2 full blocks cached: the prompt's and a decode-filled one");
	CHECK_EQ(kvc_free_at(c, 0), ablk[2], "A's partial 3rd block (no hash) is at the head");
	CHECK(kvc_free_at(c, kvc_num_free(c) - 1) == ablk[0] &&
		  kvc_free_at(c, kvc_num_free(c) - 2) == ablk[1],
	      "its hashed blocks at the tail, block 0 last (reverse order)");
	/* B = A's prompt + A's first 2 output tokens + 1 new token. */
	mkreq(&b, bb, 9, 100, out, 1, &rb);
	bb[6] = 50;
	bb[7] = 51;
	bb[8] = 777;
	sched_add(s, &b);
	sched_plan(s);
	CHECK_EQ(b.cached_tokens, 8, "B hits the prompt block and the decode-filled block");
	sched_finish(s, on_tok, NULL);
	kvc_seq_free(&a.seq);
	kvc_seq_free(&b.seq);
	sched_free(s);
	kvc_free(c);
}

int main(void)
{
	test_last_token_recomputed();
	test_reverse_free_and_eviction();
	test_ref_counts();
	test_cached_free_block_leaves_queue();
	test_evictable_hits_count_against_free();
	test_unhashed_to_head();
	test_events_and_reset();
	test_hash_seed();
	test_sched_waiting_and_chunks();
	test_sched_step_cost_grows_with_context();
	test_sched_blocks_run_out();
	test_sched_preemption();
	test_sched_hit_on_blocks_being_computed();
	test_sched_decode_blocks_cached();
	return tap_done();
}
