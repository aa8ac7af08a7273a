/* SPDX-License-Identifier: Apache-2.0 */
/* sched: kvsim's model of vLLM v1's continuous-batching scheduler (v1/core/sched/scheduler.py,
 * FCFS) over a kvcache, plus the step-time model.
 * Each step: running requests first (a decode token, or the next prefill chunk), in order, within
 * the token budget; a running request that cannot get blocks preempts the last running request
 * (its blocks freed, back to the head of the waiting queue, its computed tokens dropped); then,
 * only if nothing was preempted, waiting requests in FCFS order: prefix-cache lookup, allocation,
 * and the first waiting request that cannot get its blocks stops the loop (it waits).
 * Step time (ms) = step_fixed + (any prefill ? step_prefill_fixed : 0)
 *   + (prefill_us_per_token * prefill tokens + prefill_attn_us * prefill pairs / 1000
 *      + decode_us_per_seq * decodes + decode_attn_us * decode context / 1000) / 1000,
 * where a prefill chunk of n new tokens after c cached or computed ones has n * (c + (n+1)/2)
 * attention pairs and a decode's context is its tokens so far: the attention parts grow with
 * context, the rest is flat in it. Single-threaded; the caller owns the requests' memory. */
#ifndef KVS_SCHED_H
#define KVS_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"

struct sched_cfg {
	uint32_t max_num_batched_tokens; /* token budget per step (chunked prefill) */
	uint32_t max_num_seqs;		 /* running requests at most */
	double step_fixed_ms;		 /* every step */
	double step_prefill_fixed_ms;	 /* extra for a step that runs any prefill */
	double prefill_us_per_token;	 /* per prefill token */
	double prefill_attn_us;		 /* per prefill token per 1,000 tokens it attends to */
	double decode_us_per_seq;	 /* per decoding sequence */
	double decode_attn_us;		 /* per decoding sequence per 1,000 tokens of context */
};

enum sreq_state { SREQ_NEW, SREQ_WAITING, SREQ_RUNNING, SREQ_FINISHED };

/* One request. The caller fills tokens[0..prompt_len), out[0..max_tokens) (the tokens it will
 * "sample", in order) and user, then sched_add()s it. */
struct sreq {
	uint32_t *tokens; /* prompt then generated tokens; capacity prompt_len + max_tokens */
	size_t ntokens;
	size_t prompt_len;
	const uint32_t *out;
	size_t max_tokens;
	size_t num_output;
	size_t num_computed;
	int64_t cached_tokens; /* tokens found in the cache at first schedule; -1 before */
	uint32_t num_preemptions;
	enum sreq_state state;
	struct kvc_seq seq;
	void *user;
	/* internal */
	size_t step_new;
	struct sreq *qnext, *qprev;
};

struct sched_stats {
	uint64_t queries_tokens; /* vllm:prefix_cache_queries_total */
	uint64_t hit_tokens;	 /* vllm:prefix_cache_hits_total */
	uint64_t requests;	 /* requests scheduled for the first time */
	uint64_t preemptions;
	uint64_t prompt_tokens, generation_tokens;
	uint64_t steps;
};

struct sched;

/* Called for every token a step produces: first tells whether it is the request's first token,
 * finished whether it was its last (the request has left the scheduler then). */
typedef void (*sched_token_fn)(void *ctx, struct sreq *r, uint32_t token, bool first,
			       bool finished);

struct sched *sched_new(const struct sched_cfg *cfg, struct kvcache *kv);
void sched_free(struct sched *s);

/* Hashes the prompt and queues r at the tail of the waiting queue. Returns 0 or -ENOMEM. */
int sched_add(struct sched *s, struct sreq *r);
/* Removes r wherever it is (client gone), freeing its blocks. Must not be called while a step
 * that includes r is in flight unless the caller then ignores r in sched_step_finish (it is
 * skipped: aborted requests are dropped from the step). */
void sched_abort(struct sched *s, struct sreq *r);

/* Plans the next step: schedules and allocates as vLLM does. Returns the step's model duration in
 * ms (> 0) when something was scheduled, 0 when idle, or a negative errno. */
double sched_plan(struct sched *s);
/* Completes the planned step: advances computed tokens, samples tokens (calling fn), frees the
 * finished requests' blocks. */
void sched_finish(struct sched *s, sched_token_fn fn, void *ctx);

size_t sched_num_running(const struct sched *s);
size_t sched_num_waiting(const struct sched *s);
const struct sched_stats *sched_stats(const struct sched *s);
struct kvcache *sched_kv(const struct sched *s);

#endif
