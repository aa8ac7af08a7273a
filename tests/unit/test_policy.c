// SPDX-License-Identifier: Apache-2.0
/* policy: each routing policy on small exact cases, {view, loads, request} -> {worker, reason}.
 * Rendezvous order depends on hashes, so rows name candidates by their rank in the key's
 * rendezvous order (R0 = the key's first choice), which the test resolves with policy_hrw: the
 * expectation stays exact and readable whatever the hash values are. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "route/policy.h"
#include "tap.h"

#define MAXC 6
#define U (-1.0) /* unknown */

/* A candidate as a row gives it: rank in rendezvous order, depth, keys, capacity, local and
 * remote load, waiting, free blocks, active, fresh, prefill backlog. */
struct rc {
	int rank;
	uint32_t depth, keys;
	double cap, local, remote, waiting, free_blocks;
	uint32_t active, fresh, prefill;
	uint32_t flight;  /* leading blocks its requests in flight compute */
	double decode_ms; /* their decoding time, summed */
};

struct row {
	const char *policy;
	uint32_t nblocks, key_pos;
	int n;
	struct rc c[MAXC];
	int want_rank; /* the chosen candidate, by rank */
	enum policy_reason want;
	const char *what;
	uint32_t prefixes; /* the cluster's distinct blocks at key_pos (0: unknown; left out) */
};

/* Candidates default to: no depth, no keys, unknown capacity, queue and free blocks, idle,
 * fresh = nblocks; a row overrides what it sets (hence -Woverride-init off for the table). */
#define C(rk, ...)                                                                                 \
	{                                                                                          \
		.rank = rk, .waiting = U, .free_blocks = U, __VA_ARGS__                            \
	}
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers" /* prefixes, where left out */

static const struct row rows[] = {
    /* kv: what in-flight requests compute counts as held; rich caches */
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 2), C(1, .flight = 8, .local = 1), C(2, .local = 0)},
     1,
     POLICY_REPLICA,
     "a worker computing the prefix for a request in flight holds it by the time this one is "
     "scheduled: the balanced holder, not the busy home"},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .flight = 8, .local = 2, .cap = 100, .keys = 2),
      C(1, .local = 1, .cap = 100, .keys = 1), C(2, .local = 2, .cap = 100, .keys = 1)},
     1,
     POLICY_SPILL,
     "rich caches (2 prefixes x 10 <= 0.6 x 100), the key in demand (requests in flight compute "
     "it): a worker 1 request lighter than the holder takes a replica",
     2},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 2, .cap = 100, .keys = 2), C(1, .local = 1, .cap = 100, .keys = 1),
      C(2, .local = 2, .cap = 100, .keys = 1)},
     0,
     POLICY_HOME,
     "the same, no request of the key in flight (a conversation's next turn: a copy would serve "
     "no one else): its holder",
     2},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 2, .cap = 100, .keys = 2), C(1, .local = 1, .cap = 100, .keys = 1),
      C(2, .local = 2, .cap = 100, .keys = 1)},
     0,
     POLICY_HOME,
     "the same, 7 prefixes in the cluster (70 > 60): a replica needs the gap of 4: stay home",
     7},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 1, .cap = 100, .decode_ms = 100),
      C(1, .depth = 8, .local = 1, .cap = 100, .decode_ms = 500),
      C(2, .depth = 8, .local = 2, .cap = 100)},
     1,
     POLICY_REPLICA,
     "rich caches: of two balanced holders with a request each, the one whose request has "
     "decoded longer (less work left)",
     2},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 1, .cap = 100, .decode_ms = 100),
      C(1, .depth = 8, .local = 1, .cap = 100, .decode_ms = 500),
      C(2, .depth = 8, .local = 2, .cap = 100)},
     0,
     POLICY_HOME,
     "the same with caches not rich (prefixes unknown): the first balanced holder in rendezvous "
     "order"},
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .flight = 8, .local = 2, .cap = 100, .keys = 2),
      C(1, .local = 1, .cap = 100, .keys = 1), C(2, .local = 3, .cap = 100, .keys = 1)},
     1,
     POLICY_SPILL,
     "rich caches: a worker 1 request below the holder takes a replica even while the holder is "
     "balanced (2 <= the average 2): a copy evicts nothing",
     2},
    /* kv: a holder much busier than a worker, where a copy would evict */
    {"kv",
     10,
     0,
     3,
     {C(0, .depth = 8, .local = 5, .cap = 30, .keys = 3), C(1, .local = 1, .cap = 30, .keys = 3),
      C(2, .local = 3, .cap = 30, .keys = 3)},
     0,
     POLICY_HOME,
     "full caches (no room for a replica), the only holder 4 requests busier than a worker but "
     "not pressed: stay home (a copy there is a miss that evicts another prefix; measured: "
     "docs/journal/routing.md, a load gap tried and not kept)",
     7},
    /* kv: a new prefix */
    {"kv",
     10,
     0,
     3,
     {C(0), C(1), C(2)},
     0,
     POLICY_HOME,
     "new prefix, empty workers: the key's first rendezvous choice"},
    {"kv",
     10,
     0,
     3,
     {C(0, .keys = 2), C(1), C(2)},
     1,
     POLICY_HOME,
     "new prefix: the first choice holds more than its share (2 >= ceil(3/3)): the next"},
    {"kv",
     10,
     0,
     3,
     {C(0, .keys = 1), C(1, .keys = 1), C(2, .keys = 1)},
     0,
     POLICY_HOME,
     "new prefix: equal shares (1 < ceil(4/3)): the first choice"},
    {"kv",
     10,
     0,
     3,
     {C(0, .keys = 4), C(1, .keys = 4), C(2, .keys = 4)},
     0,
     POLICY_HOME,
     "new prefix: every worker at its share: the first choice all the same"},
    {"kv",
     10,
     0,
     3,
     {C(0, .keys = 2, .cap = 100), C(1, .keys = 2, .cap = 400), C(2, .keys = 0, .cap = 100)},
     1,
     POLICY_HOME,
     "new prefix by capacity: shares 5x100/600, 5x400/600, 5x100/600: R1 (2 < 4) before R2"},
    {"kv",
     10,
     0,
     3,
     {C(0, .waiting = 2), C(1, .local = 1), C(2)},
     2,
     POLICY_SPILL,
     "new prefix, home queueing: spill to the least loaded not under pressure"},
    {"kv",
     10,
     0,
     3,
     {C(0, .free_blocks = 5, .fresh = 10), C(1, .local = 1), C(2, .local = 2)},
     1,
     POLICY_SPILL,
     "new prefix, home without free blocks for it (5 < 10): spill to the least loaded"},
    {"kv",
     10,
     0,
     3,
     {C(0, .free_blocks = 50, .fresh = 10), C(1), C(2)},
     0,
     POLICY_HOME,
     "free blocks enough for the request: home"},
    /* kv: a held prefix */
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 8), C(2)},
     1,
     POLICY_HOME,
     "held by R1 only: R1 (the first holder in rendezvous order)"},
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 8), C(2, .depth = 8)},
     1,
     POLICY_HOME,
     "held by R1 and R2 alike: the first holder in rendezvous order"},
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 8, .waiting = 1), C(2, .depth = 8)},
     2,
     POLICY_REPLICA,
     "first holder queueing: the other holder (replica)"},
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 4), C(2, .depth = 9)},
     2,
     POLICY_HOME,
     "a clearly deeper match beats rendezvous order (9 vs 4): it is the prefix's home now"},
    {"kv",
     32,
     0,
     3,
     {C(0), C(1, .depth = 31), C(2, .depth = 32)},
     1,
     POLICY_HOME,
     "depths within 1/16 count as equal: rendezvous order keeps one copy hot"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 1), C(1, .depth = 8, .waiting = 1), C(2, .depth = 8, .waiting = 3)},
     0,
     POLICY_SPILL,
     "every holder queueing: spill to the least loaded other worker"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 2, .cap = 40, .keys = 4),
      C(1, .depth = 8, .local = 3, .free_blocks = 2, .fresh = 4),
      C(2, .local = 2, .cap = 40, .keys = 4)},
     1,
     POLICY_HOME,
     "holder short of free blocks, the others about as busy, no cache with room: wait at home"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 0, .cap = 40, .keys = 4),
      C(1, .depth = 8, .local = 3, .free_blocks = 2, .fresh = 4),
      C(2, .local = 2, .cap = 40, .keys = 4)},
     0,
     POLICY_SPILL,
     "holder short of free blocks, another 3 requests lighter: spill there"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 0, .cap = 40, .keys = 4),
      C(1, .depth = 8, .local = 1, .remote = 2, .free_blocks = 2, .fresh = 4),
      C(2, .local = 0, .remote = 2, .cap = 40, .keys = 4)},
     1,
     POLICY_HOME,
     "the same 3 lighter, but 4 of the 5 requests are others' (seen a scrape late): the gap is "
     "2 + 2 x 4/5 = 3.6, so wait at home"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 0, .cap = 40, .keys = 4),
      C(1, .depth = 8, .local = 2, .remote = 2, .free_blocks = 2, .fresh = 4),
      C(2, .local = 1, .cap = 40, .keys = 4)},
     0,
     POLICY_SPILL,
     "others' 2 of 5 requests: gap 2 + 2 x 2/5 = 2.8, and one is 4 lighter: spill there"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 2, .cap = 400, .keys = 1),
      C(1, .depth = 8, .local = 3, .free_blocks = 2, .fresh = 4),
      C(2, .local = 2, .cap = 40, .keys = 4)},
     0,
     POLICY_SPILL,
     "holder short of free blocks, a cache with room elsewhere: a new replica there"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 1, .cap = 100),
      C(1, .depth = 8, .flight = 8, .local = 2, .cap = 100, .keys = 1),
      C(2, .local = 0, .cap = 100)},
     2,
     POLICY_SPILL,
     "caches nearly empty of prefixes ((1 + 1) x 10 <= 0.35 x 300), the key in demand: a replica "
     "on the idle worker, only 1 request lighter than the busy holder"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 1, .cap = 100), C(1, .depth = 8, .local = 2, .cap = 100, .keys = 1),
      C(2, .local = 0, .cap = 100)},
     1,
     POLICY_HOME,
     "the same with no request of the key in flight: the busy holder keeps it (a copy is a miss "
     "of all it holds and serves no one else)"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 1, .cap = 100), C(1, .depth = 8, .local = 2, .cap = 100, .keys = 1),
      C(2, .local = 1, .cap = 100)},
     1,
     POLICY_HOME,
     "caches nearly empty, but no worker idle (1 request each): a replica needs the gap of 4"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 1, .cap = 100, .keys = 4), C(1, .depth = 8, .local = 2, .cap = 100, .keys = 4),
      C(2, .local = 0, .cap = 100, .keys = 3)},
     1,
     POLICY_HOME,
     "the same loads, caches fuller ((11 + 1) x 10 > 0.35 x 300): a replica needs the gap of 4: "
     "stay home"},
    {"kv",
     10,
     0,
     4,
     {C(0, .local = 3), C(1, .depth = 8, .local = 9), C(2, .local = 0), C(3, .local = 0)},
     2,
     POLICY_SPILL,
     "holder past max(2 x avg 3, avg + 2) requests: spill to the least loaded (tie: rendezvous)"},
    {"kv",
     10,
     0,
     3,
     {C(0, .local = 2), C(1, .depth = 8, .local = 3), C(2, .local = 1)},
     1,
     POLICY_HOME,
     "holder busier than the others but below the limit: stays home (no spill)"},
    {"kv",
     10,
     0,
     2,
     {C(0, .remote = 5, .local = 1), C(1, .depth = 8, .local = 0)},
     1,
     POLICY_HOME,
     "remote load counts: R0's 6 requests do not draw the prefix away from R1"},
    /* kv: a shared system prompt every worker holds: the key is past it */
    {"kv",
     20,
     5,
     3,
     {C(0, .depth = 5), C(1, .depth = 5), C(2, .depth = 5)},
     0,
     POLICY_HOME,
     "common prefix held by all (key_pos 5): a new key, its first choice"},
    {"kv",
     20,
     5,
     3,
     {C(0, .depth = 5), C(1, .depth = 12), C(2, .depth = 5)},
     1,
     POLICY_HOME,
     "common prefix held by all, R1 holds more of this request: R1"},
    /* kv: everything under pressure */
    {"kv",
     10,
     0,
     3,
     {C(0, .waiting = 1, .active = 30), C(1, .depth = 10, .waiting = 1, .active = 30, .fresh = 0),
      C(2, .waiting = 1, .active = 25)},
     1,
     POLICY_SPILL,
     "all queueing: Dynamo's cost keeps the hit (0 + 30 + 0 beats 10 + 25 + 10)"},
    {"kv",
     10,
     0,
     3,
     {C(0, .waiting = 1, .active = 30), C(1, .depth = 10, .waiting = 1, .active = 30, .fresh = 0),
      C(2, .waiting = 1, .active = 5)},
     2,
     POLICY_SPILL,
     "all queueing: ... but not at any price (10 + 5 + 10 beats 0 + 30 + 0)"},
    /* kv: prefill backlog (default 0.25: a worker owing more than a quarter of this request's
     * prefill beyond the best place counts as pressed) */
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 10, .prefill = 25), C(2)},
     0,
     POLICY_SPILL,
     "held, but 25 + 0 blocks owed before its first token vs 0 + 10 elsewhere: spilled, "
     "though no cache has room and no worker is lighter"},
    {"kv",
     10,
     0,
     3,
     {C(0), C(1, .depth = 10, .prefill = 12), C(2)},
     1,
     POLICY_HOME,
     "held, 12 + 0 blocks owed vs 0 + 10: within a quarter prefill of the best, the holder"},
    {"kv",
     10,
     0,
     3,
     {C(0, .prefill = 3), C(1), C(2)},
     1,
     POLICY_SPILL,
     "new prefix whose home owes 3 + 10 vs 0 + 10: the next in rendezvous order"},
    /* kv: nothing to place */
    {"kv",
     0,
     0,
     3,
     {C(0, .local = 2), C(1, .local = 1), C(2, .local = 3)},
     -2,
     POLICY_BALANCE,
     "no full block: the least loaded (the second candidate)"},
    /* approx: kv's placement */
    {"approx",
     10,
     0,
     3,
     {C(0), C(1, .depth = 8), C(2)},
     1,
     POLICY_HOME,
     "approx places like kv: the holder"},
};
#pragma GCC diagnostic pop

/* Candidate ids whose rendezvous order for key is known: ids[r] has rank r. */
static void ids_by_rank(uint64_t key, int n, uint64_t *ids)
{
	uint64_t cand[64], score[64];

	for (int i = 0; i < 64; i++) {
		cand[i] = 1000 + (uint64_t)i;
		score[i] = policy_hrw(key, cand[i]);
	}
	for (int r = 0; r < n; r++) {
		int best = -1;

		for (int i = 0; i < 64; i++)
			if (cand[i] && (best < 0 || score[i] > score[best]))
				best = i;
		ids[r] = cand[best];
		cand[best] = 0;
	}
}

static int run_row(const struct row *w, size_t *got_cand, enum policy_reason *got_reason,
		   int *got_rank)
{
	const struct policy_ops *ops = policy_find(w->policy);
	struct policy_cand c[MAXC];
	struct policy_view v = {.service = "svc",
				.nendpoints = (size_t)w->n,
				.c = c,
				.n = (size_t)w->n,
				.nblocks = w->nblocks,
				.key_pos = w->key_pos,
				.prefixes = w->prefixes,
				.key = 0xabcdef12345ULL,
				.rnd = 42};
	struct policy_choice ch;
	uint64_t ids[MAXC];
	void *st = NULL;
	int rc;

	ids_by_rank(v.key, w->n, ids);
	for (int i = 0; i < w->n; i++) {
		const struct rc *x = &w->c[i];

		c[i] =
		    (struct policy_cand){.ep = (uint32_t)i,
					 .id = ids[x->rank],
					 .depth = x->depth,
					 .keys = x->keys,
					 .capacity = x->cap,
					 .local = (uint32_t)x->local,
					 .remote = x->remote,
					 .waiting = x->waiting,
					 .free_blocks = x->free_blocks,
					 .active = x->active,
					 .prefill = x->prefill,
					 .flight = x->flight,
					 .decode_ms = x->decode_ms,
					 .fresh = x->fresh		   ? x->fresh
						  : x->depth >= w->nblocks ? 0
									   : w->nblocks - x->depth};
	}
	if (ops->create && ops->create(NULL, &st))
		return -1;
	rc = ops->pick(st, &v, &ch);
	if (ops->destroy)
		ops->destroy(st);
	*got_cand = ch.cand;
	*got_reason = ch.reason;
	*got_rank = ch.cand < (size_t)w->n ? w->c[ch.cand].rank : -1;
	return rc;
}

int main(void)
{
	size_t nrows = sizeof(rows) / sizeof(rows[0]);

	CHECK(policy_find("kv") && policy_find("dynamo") && policy_find("round-robin") &&
		  policy_find("random") && policy_find("approx") && !policy_find("nope"),
	      "every policy is found by name, unknown names are not");
	CHECK_STREQ(policy_reason_name(POLICY_SPILL), "spill", "reason names");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];
		size_t cand = SIZE_MAX;
		enum policy_reason reason = POLICY_REASON_MAX;
		int rank = -1, rc = run_row(w, &cand, &reason, &rank);

		if (w->want_rank == -2) /* by position: the second candidate */
			CHECK(rc == 0 && cand == 1 && reason == w->want,
			      "%s: %s (got cand %zu, %s)", w->policy, w->what, cand,
			      policy_reason_name(reason));
		else
			CHECK(rc == 0 && rank == w->want_rank && reason == w->want,
			      "%s: %s (got R%d, %s)", w->policy, w->what, rank,
			      policy_reason_name(reason));
	}
	{
		/* dynamo: cost = (blocks - overlap) + active + fresh; lowest wins */
		const struct policy_ops *ops = policy_find("dynamo");
		struct policy_cand c[3] = {{.ep = 0, .fresh = 10},
					   {.ep = 1, .depth = 10, .active = 12, .fresh = 10},
					   {.ep = 2, .active = 3, .fresh = 10}};
		struct policy_view v = {.c = c, .n = 3, .nblocks = 10};
		struct policy_choice ch;

		ops->pick(NULL, &v, &ch);
		CHECK(ch.cand == 0 && ch.reason == POLICY_COST,
		      "dynamo: costs 20, 22, 23: the lowest (got cand %zu, %s)", ch.cand,
		      policy_reason_name(ch.reason));
	}
	{
		/* dynamo: ties broken at random (both tied workers are chosen over many draws), and
		 * a deep overlap beats an idle worker */
		const struct policy_ops *ops = policy_find("dynamo");
		struct policy_cand c[3] = {{.ep = 0, .fresh = 10},
					   {.ep = 1, .fresh = 10},
					   {.ep = 2, .fresh = 10, .active = 1}};
		struct policy_view v = {.c = c, .n = 3, .nblocks = 10};
		struct policy_choice ch;
		int seen[3] = {0};

		for (uint64_t k = 0; k < 200; k++) {
			v.rnd = k * 7919;
			ops->pick(NULL, &v, &ch);
			seen[ch.cand]++;
		}
		CHECK(seen[0] > 40 && seen[1] > 40 && seen[2] == 0,
		      "dynamo: a tie is broken at random (%d/%d), the costlier never chosen",
		      seen[0], seen[1]);
		c[2] = (struct policy_cand){.ep = 2, .depth = 10, .fresh = 10, .active = 9};
		ops->pick(NULL, &v, &ch);
		CHECK_EQ(ch.cand, 2, "dynamo: 0 + 9 + 10 = 19 beats 10 + 0 + 10 = 20");
		CHECK(fabs(c[0].score - 20) < 1e-9 && fabs(c[2].score - 19) < 1e-9,
		      "dynamo: scores are the costs");
	}
	{
		/* round-robin: endpoints in turn per Service; a missing (tried) endpoint skipped */
		const struct policy_ops *ops = policy_find("round-robin");
		struct policy_cand c[3] = {{.ep = 0}, {.ep = 1}, {.ep = 2}};
		struct policy_view v = {.service = "a", .nendpoints = 3, .c = c, .n = 3};
		struct policy_choice ch;
		void *st;
		int seq[6], ok = 1;

		ops->create(NULL, &st);
		for (int i = 0; i < 6; i++) {
			ops->pick(st, &v, &ch);
			seq[i] = (int)c[ch.cand].ep;
			ok &= ch.reason == POLICY_ROUND_ROBIN;
		}
		for (int i = 0; i < 6; i++)
			ok &= seq[i] == i % 3;
		CHECK(ok, "round-robin: 0 1 2 0 1 2");
		v.service = "b";
		ops->pick(st, &v, &ch);
		CHECK_EQ(c[ch.cand].ep, 0, "round-robin: another Service has its own position");
		v.service = "a";
		c[0] = (struct policy_cand){.ep = 1};
		c[1] = (struct policy_cand){.ep = 2};
		v.n = 2; /* endpoint 0 tried: position 0 falls to endpoint 1 */
		ops->pick(st, &v, &ch);
		CHECK_EQ(c[ch.cand].ep, 1, "round-robin: a tried endpoint is skipped");
		ops->destroy(st);
	}
	{
		/* random: every candidate drawn, about evenly */
		const struct policy_ops *ops = policy_find("random");
		struct policy_cand c[4] = {{.ep = 0}, {.ep = 1}, {.ep = 2}, {.ep = 3}};
		struct policy_view v = {.c = c, .n = 4};
		struct policy_choice ch;
		int seen[4] = {0}, ok = 1;
		uint64_t s = 1;

		for (int i = 0; i < 4000; i++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			v.rnd = s;
			ops->pick(NULL, &v, &ch);
			seen[ch.cand]++;
		}
		for (int i = 0; i < 4; i++)
			ok &= seen[i] > 850 && seen[i] < 1150;
		CHECK(ok, "random: 4000 draws over 4: %d %d %d %d", seen[0], seen[1], seen[2],
		      seen[3]);
	}
	{
		/* kv: rendezvous keeps keys in place when a worker leaves, and spreads new keys */
		int moved = 0, home_counts[6] = {0};

		for (uint64_t k = 1; k <= 600; k++) {
			uint64_t key = k * 0x9e3779b97f4a7c15ULL;
			int best6 = 0, best5 = 0;

			for (int i = 1; i < 6; i++)
				if (policy_hrw(key, 1000 + (uint64_t)i) >
				    policy_hrw(key, 1000 + (uint64_t)best6))
					best6 = i;
			for (int i = 1; i < 5; i++)
				if (policy_hrw(key, 1000 + (uint64_t)i) >
				    policy_hrw(key, 1000 + (uint64_t)best5))
					best5 = i;
			home_counts[best6]++;
			moved += best6 != 5 && best5 != best6;
		}
		CHECK_EQ(moved, 0, "rendezvous: removing a worker moves only its own keys");
		CHECK(home_counts[0] > 60 && home_counts[5] > 60,
		      "rendezvous: keys spread over the workers (%d .. %d of 600)", home_counts[0],
		      home_counts[5]);
	}
	return tap_done();
}
