/* SPDX-License-Identifier: Apache-2.0 */
/* convo: generated conversation workloads (--workload sessions | agent), laid out as trace rows
 * (trace.h) that kvbench replays like a trace, plus what a trace file cannot say: a row that is a
 * conversation's next turn is sent only after the turn before it has been answered, a think time
 * later (a user reads the answer; an agent runs its tool).
 *
 * A conversation is one stream of hash ids (B tokens each, trace_token): a shared part (a system
 * prompt, an agent's tool definitions, a task several agents share: whole blocks, the same ids in
 * every conversation that shares it), then ids of its own. Turn j's prompt is the stream's first
 * L_j tokens, L_j = L_{j-1} + the answer of turn j-1 + the new message, so a turn's prefix is the
 * whole conversation so far, and the previous prompt's tail block grows into the next (its ids
 * do not change, so its tokens do not either).
 *
 * - sessions (multi-turn chat): sessions arrive at --convo-rate a second (Poisson, model time);
 *   turns per session geometric with mean --turns (at least 1); tokens per user message and per
 *   answer lognormal (--user-tokens, --answer-tokens: means, sigma 1); think time between an
 *   answer and the next turn exponential (--think-ms mean); a system prompt of --system-tokens
 *   shared by every session (0: none).
 * - agent: agents arrive at --convo-rate a second; each prompt starts with --system-tokens of
 *   system prompt and tool definitions shared by all, then with probability --task-share the
 *   task prefix of the agent before it (--task-tokens), else a task of its own; then its own
 *   request; every step appends the model's tool call (--call-tokens, its answer) and the tool's
 *   output (--output-tokens); steps per agent geometric with mean --turns; --think-ms between an
 *   answer and the next step.
 * A conversation ends early when its next prompt would pass --convo-max-tokens.
 *
 * Deterministic: the same options give the same rows. Rows are in the order of their nominal send
 * time (each turn's think time after its previous turn's nominal time, no service time), which
 * puts every turn after the turn before it, so trace_ideal counts the conversation's reuse. */
#ifndef KVS_CONVO_H
#define KVS_CONVO_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

enum convo_kind { CONVO_NONE = 0, CONVO_SESSIONS, CONVO_AGENT };

struct convo_opts {
	int kind;	      /* enum convo_kind */
	uint64_t seed;	      /* the workload seed */
	uint32_t count;	      /* sessions or agents */
	double rate;	      /* conversations arriving a second, model time (> 0) */
	double turns;	      /* mean turns (sessions) or steps (agent), >= 1 */
	double user_tokens;   /* sessions: mean tokens of a user message */
	double answer_tokens; /* sessions: mean tokens of an answer (max_tokens) */
	double call_tokens;   /* agent: mean tokens of a tool call (the answer, max_tokens) */
	double output_tokens; /* agent: mean tokens of a tool's output */
	double think_ms;      /* mean pause after an answer before the next turn, model ms */
	uint32_t
	    system_tokens;    /* the shared system prompt (and tools), rounded up to whole blocks */
	uint32_t task_tokens; /* agent: a task prefix, rounded up to whole blocks */
	double task_share;    /* agent: probability an agent takes the previous agent's task */
	uint64_t max_tokens;  /* no prompt longer than this */
};

/* The defaults of kind (sessions or agent), with their sources in convo.c. */
void convo_defaults(struct convo_opts *o, int kind);

/* What a row needs besides its trace row: the row whose answer it waits for (SIZE_MAX: none, it
 * is sent at its t_ms) and how long after that answer. */
struct convo_dep {
	size_t prev;
	double gap_ms;
	uint32_t conv;	/* its conversation */
	uint32_t turn;	/* 0 for the first */
	uint32_t group; /* agent: its task (agents of one task share it); sessions: 0 */
	uint64_t fresh; /* tokens new in this turn: the first message, or the new message (the
			 * answer before it is the turn before's max_tokens) */
};

/* Builds the rows of o with bt tokens per hash id (a divisor of 512) into *t (zeroed here; free
 * with trace_free) and *deps (t->n entries, malloc'ed; free it). Returns 0, -ENOMEM, or -EINVAL
 * with err for options out of range. */
int convo_build(const struct convo_opts *o, uint32_t bt, struct trace *t, struct convo_dep **deps,
		char *err, size_t errlen);

/* "sessions", "agent" or "" */
const char *convo_name(int kind);

#endif
