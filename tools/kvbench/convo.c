// SPDX-License-Identifier: Apache-2.0
/* convo: see convo.h.
 *
 * Where the defaults come from:
 * - sessions: LMSYS-Chat-1M (Zheng et al., "LMSYS-Chat-1M: A Large-Scale Real-World LLM
 *   Conversation Dataset", ICLR 2024, arXiv 2309.11998), one million conversations with 25 LLMs:
 *   its Table 1 gives 2.0 turns per conversation, 69.5 tokens per user prompt and 214.5 per
 *   response on average. The same table's ShareGPT row (3.5 turns, 94 and 348 tokens) is the
 *   longer-conversation alternative: --turns 3.5 --user-tokens 94 --answer-tokens 348. Lengths
 *   are lognormal with sigma 1 (a heavy right tail, as such length histograms have); the dataset
 *   publishes means, not shapes.
 * - think time: no public dataset times its turns; 5 s (an assumption, --think-ms) is shorter than
 *   a reader takes, which only makes a conversation's context more likely to still be cached.
 * - agent: assumptions sized after coding and tool-use agents, not a dataset: a 4,096-token system
 *   prompt with tool schemas, a 256-token task, 10 steps, 64-token tool calls, 512-token tool
 *   outputs, 200 ms between an answer and the next step; half the agents share the previous
 *   agent's task (sub-agents of one job). Every default is a flag. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convo.h"

const char *convo_name(int kind)
{
	return kind == CONVO_SESSIONS ? "sessions" : kind == CONVO_AGENT ? "agent" : "";
}

void convo_defaults(struct convo_opts *o, int kind)
{
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->seed = 1;
	o->count = 200;
	o->rate = 2;
	o->think_ms = kind == CONVO_AGENT ? 200 : 5000;
	o->max_tokens = 32768;
	if (kind == CONVO_AGENT) {
		o->count = 40;
		o->rate = 0.5;
		o->turns = 10;
		o->user_tokens = 256;
		o->call_tokens = 64;
		o->output_tokens = 512;
		o->system_tokens = 4096;
		o->task_tokens = 256;
		o->task_share = 0.5;
	} else {
		o->turns = 2.0;
		o->user_tokens = 69.5;
		o->answer_tokens = 214.5;
	}
}

static uint64_t convo_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double unif(uint64_t *s) /* (0, 1) */
{
	*s = convo_mix(*s);
	return ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
}

static double expo(uint64_t *s, double mean)
{
	return mean > 0 ? -mean * log(unif(s)) : 0;
}

/* Tokens with the given mean: lognormal, sigma 1, at least 1. */
static uint64_t tokens(uint64_t *s, double mean)
{
	double u1 = unif(s), u2 = unif(s); /* in this order, whatever the compiler */
	double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
	double v = exp(log(mean) - 0.5 + z);

	return v < 1 ? 1 : (uint64_t)llround(v);
}

/* Turns, geometric with the given mean (>= 1). */
static uint32_t turns(uint64_t *s, double mean)
{
	double p = 1 / mean;
	uint32_t n = 1;

	while (n < 100000 && unif(s) > p)
		n++;
	return n;
}

/* The hash id of block i of a stream: the system prompt (tag 1), task g (tag 2), conversation
 * c's own blocks (tag 3). */
static uint64_t stream_id(uint64_t seed, unsigned tag, uint64_t owner, uint64_t i)
{
	return convo_mix(seed ^ convo_mix(((uint64_t)tag << 60) ^ (owner << 30) ^ i));
}

struct pend {
	double t_ms;
	uint32_t conv, turn;
	uint64_t len, out; /* prompt and answer tokens */
	uint64_t fresh;	   /* the new message's tokens */
	double gap_ms;	   /* after the turn before's answer */
};

struct conv {
	uint64_t shared_blocks; /* system then task blocks */
	uint64_t sys_blocks;
	uint64_t task;
};

static int cmp_pend(const void *a, const void *b)
{
	const struct pend *x = a, *y = b;

	if (x->t_ms != y->t_ms)
		return x->t_ms < y->t_ms ? -1 : 1;
	if (x->conv != y->conv)
		return x->conv < y->conv ? -1 : 1;
	return x->turn < y->turn ? -1 : x->turn > y->turn;
}

int convo_build(const struct convo_opts *o, uint32_t bt, struct trace *t, struct convo_dep **deps,
		char *err, size_t errlen)
{
	uint64_t rng = convo_mix(o->seed ^ 0xc0ffee), task = 0;
	struct pend *p = NULL;
	struct conv *cv = NULL;
	size_t np = 0, cap = 0, total_ids = 0, *where = NULL;
	uint64_t scale;
	double t_arr = 0;
	int rc = -ENOMEM;

	memset(t, 0, sizeof(*t));
	*deps = NULL;
	if (o->kind != CONVO_SESSIONS && o->kind != CONVO_AGENT) {
		snprintf(err, errlen, "unknown workload");
		return -EINVAL;
	}
	if (!bt || TRACE_FORMAT_BLOCK % bt) {
		snprintf(err, errlen, "--trace-block-tokens %u does not divide %u", bt,
			 TRACE_FORMAT_BLOCK);
		return -EINVAL;
	}
	if (!o->count || !(o->rate > 0) || !(o->turns >= 1) || !(o->user_tokens >= 1) ||
	    !(o->think_ms >= 0) || !(o->task_share >= 0 && o->task_share <= 1) ||
	    (o->kind == CONVO_SESSIONS && !(o->answer_tokens >= 1)) ||
	    (o->kind == CONVO_AGENT && (!(o->call_tokens >= 1) || !(o->output_tokens >= 1)))) {
		snprintf(err, errlen,
			 "workload options out of range (count >= 1, rate > 0, turns >= 1, token "
			 "means >= 1, think time >= 0, task share in [0, 1])");
		return -EINVAL;
	}
	scale = TRACE_FORMAT_BLOCK / bt;
	if (!(cv = calloc(o->count, sizeof(*cv))))
		goto out;
	for (uint32_t c = 0; c < o->count; c++) {
		uint64_t sys = ((uint64_t)o->system_tokens + bt - 1) / bt;
		uint64_t tb = o->kind == CONVO_AGENT ? ((uint64_t)o->task_tokens + bt - 1) / bt : 0;
		uint64_t len, out, fresh;
		uint32_t n;
		double t_ms;

		t_arr += expo(&rng, 1000.0 / o->rate);
		if (o->kind == CONVO_AGENT && !(c > 0 && unif(&rng) < o->task_share))
			task++;
		cv[c].sys_blocks = sys;
		cv[c].shared_blocks = sys + tb;
		cv[c].task = task;
		n = turns(&rng, o->turns);
		fresh = tokens(&rng, o->user_tokens);
		len = (sys + tb) * bt + fresh;
		t_ms = t_arr;
		for (uint32_t j = 0; j < n && len <= o->max_tokens; j++) {
			double gap = 0;

			out = tokens(&rng,
				     o->kind == CONVO_AGENT ? o->call_tokens : o->answer_tokens);
			if (np == cap) {
				size_t nc = cap ? cap * 2 : 1024;
				struct pend *q = realloc(p, nc * sizeof(*p));

				if (!q)
					goto out;
				p = q;
				cap = nc;
			}
			if (j)
				gap = expo(&rng, o->think_ms);
			t_ms += gap;
			p[np] = (struct pend){.t_ms = t_ms,
					      .conv = c,
					      .turn = j,
					      .len = len,
					      .out = out,
					      .fresh = fresh,
					      .gap_ms = gap};
			np++;
			total_ids += (len + bt - 1) / bt;
			fresh = tokens(&rng,
				       o->kind == CONVO_AGENT ? o->output_tokens : o->user_tokens);
			len += out + fresh;
		}
	}
	if (!np) {
		snprintf(err, errlen, "no request fits --convo-max-tokens %llu",
			 (unsigned long long)o->max_tokens);
		rc = -EINVAL;
		goto out;
	}
	qsort(p, np, sizeof(*p), cmp_pend);
	/* where[c] = the sorted index of conversation c's latest row seen so far; rows of one
	 * conversation are in turn order after the sort (each turn's time is after its
	 * predecessor's, ties broken by turn) */
	if (!(where = malloc(o->count * sizeof(*where))))
		goto out;
	for (uint32_t c = 0; c < o->count; c++)
		where[c] = SIZE_MAX;
	t->rows = calloc(np, sizeof(*t->rows));
	t->ids = malloc((total_ids ? total_ids : 1) * sizeof(*t->ids));
	*deps = calloc(np, sizeof(**deps));
	if (!t->rows || !t->ids || !*deps)
		goto out;
	for (size_t i = 0; i < np; i++) {
		struct trace_row *r = &t->rows[i];
		const struct conv *c = &cv[p[i].conv];
		uint64_t nb = (p[i].len + bt - 1) / bt;

		r->t_ms = p[i].t_ms;
		r->input_length = p[i].len * scale;
		r->output_length = p[i].out * scale;
		r->ids_off = t->nids;
		r->nids = nb;
		r->line = (uint32_t)(i + 1);
		for (uint64_t b = 0; b < nb; b++)
			t->ids[t->nids++] = b < c->sys_blocks ? stream_id(o->seed, 1, 0, b)
					    : b < c->shared_blocks
						? stream_id(o->seed, 2, c->task, b - c->sys_blocks)
						: stream_id(o->seed, 3, p[i].conv, b);
		(*deps)[i] =
		    (struct convo_dep){.prev = where[p[i].conv],
				       .gap_ms = p[i].gap_ms,
				       .conv = p[i].conv,
				       .turn = p[i].turn,
				       .group = o->kind == CONVO_AGENT ? (uint32_t)c->task : 0,
				       .fresh = p[i].fresh};
		where[p[i].conv] = i;
	}
	t->n = np;
	t->lines = (uint32_t)np;
	rc = 0;
out:
	if (rc) {
		trace_free(t);
		free(*deps);
		*deps = NULL;
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
	}
	free(where);
	free(p);
	free(cv);
	return rc;
}
