// SPDX-License-Identifier: Apache-2.0
/* kvbench's generated conversations (tools/kvbench/convo.c, built in here with trace.c: unit
 * tests link only libkvs.a): determinism by seed, each turn's prompt the turn before's + its
 * answer + a new message (a growing prefix of one id stream), the order and the links between
 * turns, the distributions' means against their options, the agents' shared system and task
 * blocks, the ideal reuse against a hand count, and the refusals. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

#include "../../tools/kvbench/convo.c"
#include "../../tools/kvbench/trace.c"

#define BT 16

static const uint64_t *row_ids(const struct trace *t, size_t k)
{
	return t->ids + t->rows[k].ids_off;
}

static uint64_t row_len(const struct trace *t, size_t k)
{
	return trace_prompt_len(&t->rows[k], BT, NULL);
}

static uint64_t row_out(const struct trace *t, size_t k)
{
	return trace_max_tokens(&t->rows[k], BT, 0);
}

static void test_determinism(void)
{
	struct convo_opts o;
	struct trace a, b, c;
	struct convo_dep *da, *db, *dc;
	char err[128];
	bool same;

	convo_defaults(&o, CONVO_SESSIONS);
	o.count = 300;
	CHECK(convo_build(&o, BT, &a, &da, err, sizeof(err)) == 0, "sessions build (%s)", err);
	CHECK(convo_build(&o, BT, &b, &db, err, sizeof(err)) == 0, "again");
	same = a.n == b.n && a.nids == b.nids && !memcmp(a.ids, b.ids, a.nids * sizeof(*a.ids)) &&
	       !memcmp(da, db, a.n * sizeof(*da));
	for (size_t k = 0; same && k < a.n; k++)
		same = a.rows[k].t_ms == b.rows[k].t_ms &&
		       a.rows[k].input_length == b.rows[k].input_length &&
		       a.rows[k].output_length == b.rows[k].output_length;
	CHECK(same, "the same options give the same rows (%zu rows)", a.n);
	o.seed = 2;
	CHECK(convo_build(&o, BT, &c, &dc, err, sizeof(err)) == 0, "another seed");
	CHECK(c.n != a.n || memcmp(a.ids, c.ids, (a.nids < c.nids ? a.nids : c.nids) * 8) != 0,
	      "another seed gives other rows");
	trace_free(&a);
	trace_free(&b);
	trace_free(&c);
	free(da);
	free(db);
	free(dc);
}

/* Every link and every prefix: returns the number of violations, *checked the rows with a turn
 * before. */
static size_t check_growth(const struct trace *t, const struct convo_dep *d, size_t *checked)
{
	size_t bad = 0;

	*checked = 0;
	for (size_t k = 0; k < t->n; k++) {
		size_t p = d[k].prev;

		if (k && t->rows[k].t_ms < t->rows[k - 1].t_ms)
			bad++; /* rows in nominal time order */
		if (p == SIZE_MAX) {
			bad += d[k].turn != 0;
			continue;
		}
		++*checked;
		/* the turn before: earlier, same conversation, the turn number before, its nominal
		 * time a think time earlier */
		bad += p >= k || d[p].conv != d[k].conv || d[p].turn + 1 != d[k].turn ||
		       fabs(t->rows[p].t_ms + d[k].gap_ms - t->rows[k].t_ms) > 1e-6 ||
		       d[k].gap_ms < 0;
		/* its prompt + its answer + at least one new token, on the same id stream */
		bad += row_len(t, k) < row_len(t, p) + row_out(t, p) + 1;
		bad +=
		    t->rows[k].nids < t->rows[p].nids ||
		    memcmp(row_ids(t, k), row_ids(t, p), t->rows[p].nids * sizeof(uint64_t)) != 0;
	}
	return bad;
}

static void test_sessions_shape(void)
{
	struct convo_opts o;
	struct trace t;
	struct convo_dep *d;
	char err[128];
	size_t checked = 0, bad, first = 0, later = 0, convs = 0;
	double sum_user0 = 0, sum_out = 0, sum_gap = 0, last_arrival = 0;

	convo_defaults(&o, CONVO_SESSIONS);
	o.count = 20000;
	o.rate = 10;
	if (!CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == 0, "20,000 sessions (%s)", err))
		return;
	bad = check_growth(&t, d, &checked);
	CHECK(bad == 0 && checked > 0,
	      "each turn: the turn before's prompt + answer + a new message, on one id stream, "
	      "after it (%zu turns checked, %zu wrong)",
	      checked, bad);
	for (size_t k = 0; k < t.n; k++) {
		sum_out += (double)row_out(&t, k);
		if (d[k].prev == SIZE_MAX) {
			first++;
			sum_user0 += (double)row_len(&t, k);
			last_arrival =
			    t.rows[k].t_ms > last_arrival ? t.rows[k].t_ms : last_arrival;
		} else {
			later++;
			sum_gap += d[k].gap_ms;
		}
		convs = d[k].conv + 1 > convs ? d[k].conv + 1 : convs;
	}
	CHECK(first == 20000 && convs == 20000, "one first turn per session (%zu)", first);
	/* means within 5 % of the options (lognormal and geometric draws of 20,000) */
	CHECK(fabs((double)t.n / first - o.turns) < 0.05 * o.turns, "turns per session %.3f ~ %g",
	      (double)t.n / first, o.turns);
	CHECK(fabs(sum_user0 / first - o.user_tokens) < 0.05 * o.user_tokens,
	      "tokens of a first message %.1f ~ %g", sum_user0 / first, o.user_tokens);
	CHECK(fabs(sum_out / t.n - o.answer_tokens) < 0.05 * o.answer_tokens,
	      "tokens of an answer %.1f ~ %g", sum_out / t.n, o.answer_tokens);
	CHECK(fabs(sum_gap / later - o.think_ms) < 0.05 * o.think_ms, "think time %.0f ~ %g ms",
	      sum_gap / later, o.think_ms);
	/* arrivals: 20,000 sessions at 10 a second span about 2,000 s */
	CHECK(fabs(last_arrival / 1000 - 2000) < 100, "sessions arrive at the rate (%.0f s)",
	      last_arrival / 1000);
	trace_free(&t);
	free(d);
}

static void test_ideal(void)
{
	struct convo_opts o;
	struct trace t;
	struct convo_dep *d;
	struct trace_reuse r = {0};
	char err[128];
	uint64_t want = 0, prompt = 0;
	int rc;

	convo_defaults(&o, CONVO_SESSIONS);
	o.count = 500;
	if (!CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == 0, "500 sessions"))
		return;
	/* no two sessions share a block: a turn reuses exactly its turn before's prompt, in whole
	 * 16-token blocks */
	for (size_t k = 0; k < t.n; k++) {
		prompt += row_len(&t, k);
		if (d[k].prev != SIZE_MAX)
			want += row_len(&t, d[k].prev) / 16 * 16;
	}
	rc = trace_ideal(&t, BT, 16, &r, NULL);
	CHECK(rc == 0 && r.cached_tokens == want && r.prompt_tokens == prompt,
	      "the ideal reuse is each turn's turn before (%llu of %llu tokens, ratio %.3f)",
	      (unsigned long long)r.cached_tokens, (unsigned long long)r.prompt_tokens, r.ratio);
	trace_free(&t);
	free(d);
}

static void test_agents(void)
{
	struct convo_opts o;
	struct trace t;
	struct convo_dep *d;
	char err[128];
	size_t checked = 0, bad, sys_blocks, task_blocks, shared_task = 0, firsts = 0;
	bool sys_same = true;
	const uint64_t *first_ids = NULL, *prev_task = NULL;

	convo_defaults(&o, CONVO_AGENT);
	o.count = 200;
	if (!CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == 0, "200 agents (%s)", err))
		return;
	bad = check_growth(&t, d, &checked);
	CHECK(bad == 0 && checked > 0,
	      "each step: the step before's prompt + tool call + tool output (%zu steps, %zu "
	      "wrong)",
	      checked, bad);
	sys_blocks = o.system_tokens / BT;
	task_blocks = o.task_tokens / BT;
	for (size_t k = 0; k < t.n; k++) {
		const uint64_t *ids = row_ids(&t, k);

		if (!first_ids)
			first_ids = ids;
		sys_same &= t.rows[k].nids > sys_blocks + task_blocks &&
			    !memcmp(ids, first_ids, sys_blocks * sizeof(*ids));
		if (d[k].turn == 0) {
			/* the first steps in order: does this agent's task equal the one before? */
			if (prev_task &&
			    !memcmp(ids + sys_blocks, prev_task, task_blocks * sizeof(*ids)))
				shared_task++;
			prev_task = ids + sys_blocks;
			firsts++;
		}
	}
	CHECK(sys_same, "every step starts with the same %zu system blocks", sys_blocks);
	/* task_share 0.5: about half the agents take the task of the agent before */
	CHECK(shared_task > firsts * 35 / 100 && shared_task < firsts * 65 / 100,
	      "%zu of %zu agents share the task of the agent before (share 0.5)", shared_task,
	      firsts);
	trace_free(&t);
	free(d);
	o.task_share = 0;
	o.max_tokens = 6000;
	if (CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == 0, "agents, no task shared")) {
		bool under = true;

		for (size_t k = 0; k < t.n; k++)
			under &= row_len(&t, k) <= 6000;
		CHECK(under, "--convo-max-tokens 6000: no prompt above it");
		trace_free(&t);
		free(d);
	}
}

static void test_refused(void)
{
	struct convo_opts o;
	struct trace t;
	struct convo_dep *d;
	char err[128];

	convo_defaults(&o, CONVO_SESSIONS);
	CHECK(convo_build(&o, 24, &t, &d, err, sizeof(err)) == -EINVAL && strstr(err, "divide"),
	      "24 tokens per hash id: refused (%s)", err);
	o.count = 0;
	CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == -EINVAL, "0 sessions: refused");
	convo_defaults(&o, CONVO_SESSIONS);
	o.turns = 0.5;
	CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == -EINVAL, "turns 0.5: refused");
	convo_defaults(&o, CONVO_SESSIONS);
	o.max_tokens = 1;
	CHECK(convo_build(&o, BT, &t, &d, err, sizeof(err)) == -EINVAL,
	      "no first message fits 1 token: refused (%s)", err);
}

int main(void)
{
	test_determinism();
	test_sessions_shape();
	test_ideal();
	test_agents();
	test_refused();
	return tap_done();
}
