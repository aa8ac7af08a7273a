// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched.h"

struct sched {
	struct sched_cfg cfg;
	struct kvcache *kv;
	struct sreq **running; /* in scheduling order */
	size_t nrunning, rcap;
	struct sreq *whead, *wtail; /* waiting queue */
	size_t nwaiting;
	struct sreq **step; /* requests in the planned step */
	size_t nstep, scap;
	uint32_t *computed; /* lookup scratch */
	size_t ccap;
	struct sched_stats st;
};

struct sched *sched_new(const struct sched_cfg *cfg, struct kvcache *kv)
{
	struct sched *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->kv = kv;
	s->ccap = kvc_usable_blocks(kv) + 1;
	s->computed = malloc(s->ccap * sizeof(uint32_t));
	if (!s->computed) {
		free(s);
		return NULL;
	}
	return s;
}

void sched_free(struct sched *s)
{
	if (!s)
		return;
	free(s->running);
	free(s->step);
	free(s->computed);
	free(s);
}

static void wq_unlink(struct sched *s, struct sreq *r)
{
	if (r->qprev)
		r->qprev->qnext = r->qnext;
	else
		s->whead = r->qnext;
	if (r->qnext)
		r->qnext->qprev = r->qprev;
	else
		s->wtail = r->qprev;
	r->qnext = r->qprev = NULL;
	s->nwaiting--;
}

static void wq_push_tail(struct sched *s, struct sreq *r)
{
	r->qnext = NULL;
	r->qprev = s->wtail;
	if (s->wtail)
		s->wtail->qnext = r;
	else
		s->whead = r;
	s->wtail = r;
	s->nwaiting++;
	r->state = SREQ_WAITING;
}

static void wq_push_head(struct sched *s, struct sreq *r)
{
	r->qprev = NULL;
	r->qnext = s->whead;
	if (s->whead)
		s->whead->qprev = r;
	else
		s->wtail = r;
	s->whead = r;
	s->nwaiting++;
	r->state = SREQ_WAITING;
}

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	p = realloc(*v, c * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

int sched_add(struct sched *s, struct sreq *r)
{
	int err;

	r->ntokens = r->prompt_len;
	r->num_output = r->num_computed = 0;
	r->cached_tokens = -1;
	r->num_preemptions = 0;
	err = kvc_seq_hash(s->kv, &r->seq, r->tokens, r->ntokens);
	if (err)
		return err;
	if ((err = grow((void **)&s->running, &s->rcap, s->nrunning + s->nwaiting + 1,
			sizeof(*s->running))))
		return err;
	wq_push_tail(s, r);
	return 0;
}

static void running_remove(struct sched *s, struct sreq *r)
{
	for (size_t i = 0; i < s->nrunning; i++) {
		if (s->running[i] != r)
			continue;
		memmove(&s->running[i], &s->running[i + 1],
			(s->nrunning - i - 1) * sizeof(*s->running));
		s->nrunning--;
		return;
	}
}

void sched_abort(struct sched *s, struct sreq *r)
{
	if (r->state == SREQ_WAITING)
		wq_unlink(s, r);
	else if (r->state == SREQ_RUNNING)
		running_remove(s, r);
	else
		return;
	kvc_release(s->kv, &r->seq);
	for (size_t i = 0; i < s->nstep; i++)
		if (s->step[i] == r)
			s->step[i] = NULL;
	r->state = SREQ_FINISHED;
}

static void preempt(struct sched *s, struct sreq *r)
{
	kvc_release(s->kv, &r->seq);
	r->num_computed = 0;
	r->num_preemptions++;
	s->st.preemptions++;
	wq_push_head(s, r);
}

static size_t is_decode(const struct sreq *r, size_t n)
{
	return r->num_output > 0 && n == 1 && r->num_computed + 1 == r->ntokens;
}

/* Adds request r's n tokens of this step to the step's work: a decode (one token after the
 * prompt, attending to its whole context) or a prefill chunk of n new tokens after the
 * num_computed already in the cache, whose token i attends to num_computed + i + 1 tokens
 * (causal attention): n * (num_computed + (n + 1) / 2) pairs. */
static void account(const struct sreq *r, size_t n, size_t *prefill, size_t *decodes,
		    double *prefill_pairs, double *decode_ctx)
{
	if (is_decode(r, n)) {
		(*decodes)++;
		*decode_ctx += (double)r->ntokens;
	} else {
		*prefill += n;
		*prefill_pairs += (double)n * ((double)r->num_computed + (double)(n + 1) / 2.0);
	}
}

double sched_plan(struct sched *s)
{
	size_t budget = s->cfg.max_num_batched_tokens, prefill = 0, decodes = 0;
	double prefill_pairs = 0, decode_ctx = 0; /* attention work, in token pairs */
	bool preempted = false;
	int err;

	s->nstep = 0;
	if ((err = grow((void **)&s->step, &s->scap, s->nrunning + s->nwaiting + 1,
			sizeof(*s->step))))
		return err;
	for (size_t i = 0; i < s->nrunning && budget > 0;) {
		struct sreq *r = s->running[i];
		size_t n = r->ntokens - r->num_computed;
		bool ok = false;

		if (n > budget)
			n = budget;
		for (;;) {
			err = kvc_allocate(s->kv, &r->seq, NULL, 0, r->num_computed, n, r->tokens,
					   r->ntokens);
			if (err == 0) {
				ok = true;
				break;
			}
			if (err != -ENOSPC)
				return err;
			/* Out of blocks: preempt the lowest-priority (last) running request. */
			struct sreq *victim = s->running[--s->nrunning];

			preempt(s, victim);
			preempted = true;
			if (victim == r)
				break;
		}
		if (!ok)
			break;
		r->step_new = n;
		s->step[s->nstep++] = r;
		account(r, n, &prefill, &decodes, &prefill_pairs, &decode_ctx);
		budget -= n;
		i++;
	}
	while (!preempted && s->whead && budget > 0 && s->nrunning < s->cfg.max_num_seqs) {
		struct sreq *r = s->whead;
		size_t nc = kvc_lookup(s->kv, &r->seq, r->ntokens, s->computed, s->ccap);
		size_t hit = nc * kvc_block_size(s->kv), n = r->ntokens - hit;

		if (n > budget)
			n = budget;
		err = kvc_allocate(s->kv, &r->seq, s->computed, nc, 0, n, r->tokens, r->ntokens);
		if (err == -ENOSPC)
			break; /* the head of the queue waits for blocks; FCFS: nobody passes it */
		if (err)
			return err;
		wq_unlink(s, r);
		if (r->cached_tokens < 0) {
			r->cached_tokens = (int64_t)hit;
			s->st.requests++;
			s->st.queries_tokens += r->ntokens;
			s->st.hit_tokens += hit;
			s->st.prompt_tokens += r->prompt_len;
		}
		r->num_computed = hit;
		r->state = SREQ_RUNNING;
		s->running[s->nrunning++] = r;
		r->step_new = n;
		s->step[s->nstep++] = r;
		account(r, n, &prefill, &decodes, &prefill_pairs, &decode_ctx);
		budget -= n;
	}
	if (s->nstep == 0)
		return 0;
	s->st.steps++;
	return s->cfg.step_fixed_ms + (prefill ? s->cfg.step_prefill_fixed_ms : 0) +
	       (s->cfg.prefill_us_per_token * (double)prefill +
		s->cfg.prefill_attn_us * prefill_pairs / 1000.0 +
		s->cfg.decode_us_per_seq * (double)decodes +
		s->cfg.decode_attn_us * decode_ctx / 1000.0) /
		   1000.0;
}

void sched_finish(struct sched *s, sched_token_fn fn, void *ctx)
{
	for (size_t i = 0; i < s->nstep; i++) {
		struct sreq *r = s->step[i];
		bool first, finished;
		uint32_t tok;

		if (!r || r->state != SREQ_RUNNING)
			continue;
		r->num_computed += r->step_new;
		if (r->num_computed < r->ntokens)
			continue; /* a prefill chunk that did not reach the end */
		first = r->num_output == 0;
		tok = r->out[r->num_output++];
		r->tokens[r->ntokens++] = tok;
		s->st.generation_tokens++;
		/* vLLM appends the token's block hash as soon as a block fills. */
		kvc_seq_hash(s->kv, &r->seq, r->tokens, r->ntokens);
		finished = r->num_output >= r->max_tokens;
		if (finished) {
			running_remove(s, r);
			kvc_release(s->kv, &r->seq);
			r->state = SREQ_FINISHED;
		}
		fn(ctx, r, tok, first, finished);
	}
	s->nstep = 0;
}

size_t sched_num_running(const struct sched *s)
{
	return s->nrunning;
}

size_t sched_num_waiting(const struct sched *s)
{
	return s->nwaiting;
}

const struct sched_stats *sched_stats(const struct sched *s)
{
	return &s->st;
}

struct kvcache *sched_kv(const struct sched *s)
{
	return s->kv;
}
