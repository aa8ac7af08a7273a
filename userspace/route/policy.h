/* SPDX-License-Identifier: Apache-2.0 */
/* policy: the routing policies behind one small interface. The router (router.h) turns a request
 * into a view — its KV block chain, and for each candidate worker how many leading blocks it
 * holds and how loaded it is — and a policy picks one candidate and says why. Policies do no I/O
 * and read no clock or shared state: everything they use is in the view, so each one is tested on
 * small exact tables ({view, state} -> {worker, reason}), and the same code serves the daemon and
 * kvbench's client-side baselines.
 *
 *   kv           ours: capacity-aware prefix placement (policy_kv.c; docs/design.md)
 *   dynamo       NVIDIA Dynamo's default cost (policy_dynamo.c)
 *   round-robin  per request, per Service (policy_rr.c)
 *   random       per request (policy_random.c)
 *   approx       kv's placement over the approximate view, for clusters whose event ports
 *                cannot be reached (policy_approx.c; Dynamo's approximate mode)
 *
 * Terms. A request's chain is the own hash (blockhash.h) of each of its full blocks. Its "key" is
 * the block at chain position key_pos: the first block that not every candidate holds (so a
 * system prompt every worker caches is skipped), or its last block when all hold all of it. A
 * candidate "holds the key" when its depth is above key_pos. The key identifies the prefix the
 * request shares with other requests, whatever its length. */
#ifndef KVS_POLICY_H
#define KVS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/options.h"

struct discovery_routes;

/* Why a worker was chosen. The names (policy_reason_name) appear in /debug/route and /metrics. */
#define POLICY_REASONS(X)                                                                          \
	X(HOME, "home")	      /* the prefix's placement: it holds the key, or the key is new */    \
	X(REPLICA, "replica") /* another worker holding the key (home busy or not holding) */      \
	X(SPILL, "spill")     /* every holder under pressure: the least loaded other worker */     \
	X(BALANCE, "balance") /* nothing to place (no full block): the least loaded */             \
	X(COST, "cost")	      /* lowest cost (dynamo) */                                           \
	X(ROUND_ROBIN, "round-robin")                                                              \
	X(RANDOM, "random")
enum policy_reason {
#define X(e, s) POLICY_##e,
	POLICY_REASONS(X)
#undef X
	    POLICY_REASON_MAX
};
const char *policy_reason_name(enum policy_reason r);

/* Where the router takes the per-worker depths from for a policy. */
enum policy_source {
	POLICY_SRC_NONE,   /* none needed (round-robin, random) */
	POLICY_SRC_EVENTS, /* the event-fed index; the approximate view when events are off */
	POLICY_SRC_APPROX, /* always the approximate view */
};

/* One candidate worker (an endpoint not tried yet for this request). */
struct policy_cand {
	uint32_t ep;	 /* endpoint index in the Service: the router's answer */
	uint64_t id;	 /* identity every node shares (hash of the endpoint address) */
	uint32_t depth;	 /* leading blocks of the chain it holds (view) */
	uint32_t keys;	 /* blocks it holds at chain position key_pos (view) */
	double capacity; /* its KV cache, blocks (0: unknown) */
	/* load */
	uint32_t local;	    /* requests this router has in flight on it */
	double remote;	    /* requests others have on it, estimated from its metrics */
	double waiting;	    /* others' requests in its queue, from its metrics (-1: unknown) */
	double free_blocks; /* free KV blocks, estimated (-1: unknown) */
	uint32_t active;    /* distinct blocks of this router's in-flight requests on it */
	uint32_t fresh;	    /* blocks of this request not among them (filled when
			       POLICY_NEEDS_ACTIVE) */
	uint32_t flight;    /* leading blocks of the chain that this router's requests in flight
			       on it are computing or have computed: it holds them by the time
			       this request is scheduled (vLLM caches a block when it schedules
			       its computation; POLICY_NEEDS_ACTIVE) */
	uint32_t prefill;   /* blocks this router's requests there still have to prefill */
	double decode_ms;   /* the time this router's requests there have been decoding, summed
			       (ms since each one's first byte): of two workers with as many
			       requests, the one with more has less work left */
	/* out */
	double score; /* the policy's score, lower is better (for /debug/route) */
};

struct policy_view {
	const char *service;   /* Service name (per-Service state) */
	size_t nendpoints;     /* endpoints of the Service (candidates are a subset) */
	struct policy_cand *c; /* candidates, in endpoint order */
	size_t n;
	uint32_t nblocks; /* full blocks of the request (0: too short to place) */
	uint32_t key_pos; /* chain position of the key (valid when nblocks > 0) */
	uint32_t
	    prefixes; /* distinct blocks the cluster holds at key_pos (event view; 0: unknown) */
	uint64_t key; /* its hash */
	uint64_t rnd; /* a fresh random value, for tie-breaking */
};

struct policy_choice {
	size_t cand; /* index into view->c */
	enum policy_reason reason;
};

/* The view asks of the router: */
#define POLICY_NEEDS_ACTIVE 1u /* fill active and fresh (per-worker in-flight block sets) */

/* Tunables of the kv policy (ours); defaults from policy_kv_defaults(). */
struct policy_kv_opts {
	double spill_factor;  /* a worker is under pressure past this many times the average load */
	double spill_slack;   /* ... and at least this many requests above it */
	double key_slack;     /* a new prefix's home may hold this many more keys than its share */
	double balance_slack; /* a holder is balanced up to this many requests above the average */
	double replica_gap;   /* a cheap new replica must be this many requests below the holders */
	double replica_room;  /* ... or 1 for an idle worker, while the candidates' prefixes (keys,
				 each of this request's size) fill under this share of their caches
				 (0: off) */
	double replica_all;   /* caches are rich when every prefix the cluster holds at the key's
				 position, this request's size each, fits in this share of every
				 candidate's cache: then any worker 1 below the holders takes a
				 replica, and the least loaded balanced holder is taken (0: off) */
	double spill_gap;     /* a holder short of KV blocks spills only to one this much lighter */
	double spill_gap_remote; /* ... plus this much times the share of the candidates' load
				    this router knows only from their metrics (one of 3 nodes:
				    ~2/3), where its free blocks and loads are a scrape old */
	double backlog;		 /* a worker whose prefill backlog would delay this request's first
				    token by more than this many times its own prefill, compared with the
				    best, counts as pressed (0: off) */
};

struct policy_ops {
	const char *name;
	enum policy_source source;
	unsigned needs; /* POLICY_NEEDS_* */
	/* Creates per-router state (may leave *state NULL). 0 or -ENOMEM. */
	int (*create)(const struct policy_kv_opts *kv, void **state);
	void (*destroy)(void *state);
	/* Picks one of v->c[0..v->n) (n >= 1) and fills every candidate's score. Returns 0, or a
	 * negative errno (the router then falls back to the least loaded). */
	int (*pick)(void *state, struct policy_view *v, struct policy_choice *out);
};

extern const struct policy_ops policy_kv, policy_dynamo, policy_rr, policy_random, policy_approx;

/* The policy called name, or NULL. */
const struct policy_ops *policy_find(const char *name);
/* The registry in order: policy_at(0 .. POLICY_COUNT - 1). */
#define POLICY_COUNT 5
const struct policy_ops *policy_at(size_t i);
/* "kv, dynamo, round-robin, random, approx" (for --help and error messages). */
const char *policy_names(void);
/* policy_find and policy_names for discovery_set_routes (discovery cannot call up a layer). */
extern const struct discovery_routes policy_routes;

void policy_kv_defaults(struct policy_kv_opts *o);
/* The kv tunables as options (core/options.h), offsets into struct policy_kv_opts: kvsplice and
 * kvbench include this one table. */
#define POLICY_KV_NOPTIONS 10
extern const struct opt policy_kv_options[POLICY_KV_NOPTIONS];
/* kv's operations, shared with policy_approx.c (policy_kv_new: o NULL gives policy_kv_defaults;
 * 0 or -ENOMEM; policy_kv_free(NULL) is a no-op). */
int policy_kv_new(const struct policy_kv_opts *o, void **state);
void policy_kv_free(void *state);
int policy_kv_pick(void *state, struct policy_view *v, struct policy_choice *out);

/* Shared helpers for the policies. */
/* Rendezvous (highest random weight) score of candidate id for key: the candidate with the
 * highest score is the key's first choice, and removing a candidate moves only its keys. */
uint64_t policy_hrw(uint64_t key, uint64_t id);
/* Leading blocks of the request's chain candidate c holds, or will hold once this router's
 * requests in flight there are scheduled (vLLM caches a block when it schedules its computation,
 * so a request sent after them hits): a copy made a moment ago holds before its events arrive
 * (docs/journal/routing.md, crowding at the start). */
static inline uint32_t policy_held(const struct policy_cand *c)
{
	return c->flight > c->depth ? c->flight : c->depth;
}
/* The candidate's load, in requests: local + remote. */
static inline double policy_load(const struct policy_cand *c)
{
	return (double)c->local + (c->remote > 0 ? c->remote : 0);
}

#endif
