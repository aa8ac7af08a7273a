/* SPDX-License-Identifier: Apache-2.0 */
/* router_int: what the files of the router share, private to them (route/router*.c; nothing else
 * includes it). The router is one module in four files, along its seams:
 *   router.c         life cycle, Services and workers, flights (router_pick to router_done),
 *                    the decision log, the work queue of sent prompts (router_work);
 *   router_prompt.c  reading a request: body -> model -> tokens -> block chain, or the fallback
 *                    view; the lazy tokenization of a prompt's rest;
 *   router_pick.c    one decision: the candidates, their view (depth, keys, load), the policy's
 *                    pick, its record;
 *   router_debug.c   what it shows: its metrics and /metrics collector, /debug/route,
 *                    /debug/workers.
 * Not thread-safe, as router.h says: one loop thread owns a router. */
#ifndef KVS_ROUTER_INT_H
#define KVS_ROUTER_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/buf.h"
#include "core/mix.h"
#include "discovery/discovery.h"
#include "prompt/openai.h"
#include "prompt/tokenizer.h"
#include "route/policy.h"
#include "route/router.h"
#include "route/scrape.h"
#include "route/workers.h"

/* Why a request could not be read exactly (the label of kvsplice_route_fallbacks_total). */
#define FALLBACKS(X)                                                                               \
	X(NO_TOKENIZER, "no_tokenizer") /* no tokenizer configured for the model */                \
	X(TEMPLATE, "chat_template")	/* no chat template rendered here for the model */         \
	X(HARMONY, "harmony")		/* gpt-oss: vLLM renders its chat with openai_harmony */   \
	X(MISTRAL, "mistral_mode")	/* tekken.json: vLLM's mistral tokenizer mode */           \
	X(NOT_EXACT, "not_exact")	/* the reader or renderer reported it cannot be exact */   \
	X(MODEL, "model")		/* no worker of the Service serves the request's model */  \
	X(NOT_JSON, "not_json")		/* the body is not JSON */                                 \
	X(INVALID, "invalid")		/* vLLM will refuse it (400) */                            \
	X(NOMEM, "nomem")
enum fallback {
	FB_NONE = -1,
#define X(e, s) FB_##e,
	FALLBACKS(X)
#undef X
	    FB_MAX
};

enum view { VIEW_NONE, VIEW_EVENTS, VIEW_APPROX, VIEW_TEXT };

/* Where a flight stands; changed only by flight_set, along the moves it allows:
 *   FREE -> ON (router_pick) -> QUEUED (router_sent, a partial prompt) -> ON (router_work did its
 *   rest); ON -> RETIRED (router_done while its rest is not done); ON, QUEUED, RETIRED -> FREE. */
enum flight_state {
	FLIGHT_FREE,	/* on the free list */
	FLIGHT_ON,	/* between router_pick and router_done, nothing queued */
	FLIGHT_QUEUED,	/* sent, its prompt's rest queued for router_work */
	FLIGHT_RETIRED, /* done, off its worker, its rest still queued: router_work books and frees
			   it */
	FLIGHT_NSTATES
};

struct flight {
	enum flight_state state;
	uint32_t next_free;
	uint32_t slot; /* worker slot of the current attempt, UINT32_MAX: none */
	uint64_t *chain;
	size_t n, cap;
	/* its chain's keys: the root (blockhash_root of its LoRA adapter, 0: a base model) and the
	 * extra bytes of block 0 (its cache_salt, as events_extra_strings packs [salt]; empty:
	 * none)
	 */
	uint64_t root;
	struct buf extra0;
	/* its model, when workers must serve it (model_filter): only those whose /v1/models lists
	 * it as a base model (as an adapter, model_adapter) are candidates; with model_unknown_ok
	 * also those whose list is not known yet */
	bool model_filter, model_adapter, model_unknown_ok;
	char model[SCRAPE_MODEL_NAME_MAX + 1];
	enum view view;
	bool wants_usage;
	uint32_t prompt_tokens;
	int64_t predicted, best; /* cached tokens on the chosen worker, and the best any held */
	uint32_t prefill;	 /* blocks it has to prefill on its worker, until its first byte */
	double first_s;		 /* when its first byte came (clock_s), 0: not yet */
	uint64_t rec_seq;	 /* its record in the log (if still there) */
	struct pinst *pol;	 /* its Service's policy */
	/* A text prompt is tokenized only as far as a worker's cache can reach (the decision needs
	 * nothing beyond the first block no worker holds), the rest once the request is on its
	 * way to the worker (finish_prompt): text, its encoder, its tokens so far. */
	struct buf text;
	struct tok_stream ts;
	struct tok_ids toks;
	const struct tokenizer *tok;
	bool partial;	  /* tokens missing: prompt_tokens and nblocks are estimates */
	uint32_t nblocks; /* the prompt's full blocks (the policy's nblocks); n <= nblocks */
	/* What its worker's accounting holds (workers_flight_add): the chain's first reg_n blocks
	 * and reg_unhashed more, estimated. The chain grows past reg_n while router_work tokenizes
	 * the rest; finish_prompt then registers it whole. */
	size_t reg_n;
	uint32_t reg_unhashed;
	/* QUEUED or RETIRED: its neighbours in the router's queue (ids, 0: none). */
	uint32_t qprev, qnext;
	/* RETIRED: off its worker already, it waits only for its token count, which router_work
	 * books (book_prompt: into the prompt-token metric) before it frees the flight. A worker
	 * that answers within microseconds then does not hold the loop while the rest of a long
	 * prompt is tokenized. */
	bool book_prompt;
};

struct rec_cand {
	char ep[DISCOVERY_NAME_MAX];
	uint32_t depth, keys, prefill;
	double load, waiting, free_blocks, score;
	bool chosen;
};

struct route_rec {
	uint64_t seq; /* 0: unused */
	struct timespec when;
	struct sockaddr_in client;
	char service[DISCOVERY_NAME_MAX], endpoint[DISCOVERY_NAME_MAX];
	char method[16], target[128], model[64];
	const char *policy; /* its policy's name (static) */
	int attempts, status;
	double ms, decision_us;
	uint32_t prompt_tokens, blocks, key_pos;
	uint32_t decided_blocks; /* blocks hashed when it was decided (lazy: fewer than blocks) */
	enum view view;
	enum fallback fallback;
	enum policy_reason reason;
	int64_t predicted, best, reported;
	uint32_t ncand;
	struct rec_cand cand[ROUTER_LOG_CANDS];
};

/* The worker slots of one Service's endpoints, by endpoint index. */
struct svc_slots {
	char name[DISCOVERY_NAME_MAX];
	size_t n;
	uint32_t *slot;
};

struct rstats {
	uint64_t *fallbacks[FB_MAX];
	uint64_t *tok_prompt, *tok_predicted, *tok_best, *tok_reported, *tok_reported_prompt;
	uint64_t *outcome[2][3]; /* [predicted hit][reported hit, miss, unknown] */
	uint64_t *passthrough;
	struct metrics_hist *decision;
};

/* The encoding cache of one tokenizer (a tok_cache serves one tokenizer only). */
struct tcache {
	const struct tokenizer *tok;
	struct tok_cache *cache;
};

/* A policy of this router: the default (--router) and any a Service names, created when first
 * needed. */
struct pinst {
	const struct policy_ops *ops;
	void *st;
	bool ready; /* created */
	uint64_t *decisions[POLICY_REASON_MAX];
};

struct router {
	struct pinst pi[POLICY_COUNT];
	struct pinst *pol; /* the default */
	struct policy_kv_opts kv;
	struct index *idx;
	struct events *ev;
	const struct models *models;
	struct metrics *metrics;
	struct approx *ax;
	struct workers *ws;
	struct scraper *scr;
	struct scraper *mscr; /* each worker's /v1/models, every models_interval */
	/* the bound in force, for /metrics (the scraper reports its own) */
	size_t approx_max_entries;
	uint32_t bs;
	uint64_t hseed;
	uint64_t rng;
	long tokcache_bytes;
	bool whole_prompt; /* tokenize every prompt whole before deciding (not lazily) */
	struct tcache tc[8];
	/* per-request scratch, reused */
	struct openai_req oq;
	struct policy_cand *cand;
	uint32_t *cand_slot;
	size_t cand_cap;
	uint32_t *depth; /* by index id or slot */
	size_t depth_cap;
	/* flights */
	struct flight *fl;
	uint32_t nfl, free_fl;
	/* the flights whose rest waits for router_work, oldest first (ids, 0: none) */
	uint32_t q_head, q_tail, nq;
	/* Services */
	struct svc_slots *svcs;
	size_t nsvcs;
	/* the decision log */
	struct route_rec log[ROUTER_LOG];
	uint64_t nlog;
	struct rstats st;
};

static inline uint64_t rnd(struct router *r)
{
	return mix_next(&r->rng);
}

/* router.c */
/* Grows the per-request scratch to ncand candidates and ndepth depths. 0 or -ENOMEM. */
int router_scratch(struct router *r, size_t ncand, size_t ndepth);
/* Adds f to the accounting of the worker in slot (its chain so far and its unhashed rest), and
 * remembers what it added. Returns 0 or -ENOMEM (then nothing changed). */
int router_flight_reg(struct router *r, struct flight *f, uint32_t slot);
/* Takes f out of its worker's accounting (what router_flight_reg added). f->slot is left to the
 * caller. */
void router_flight_unreg(struct router *r, struct flight *f);
/* A flight for a new request (ON), *id its ticket; NULL when out of memory. */
struct flight *router_flight_new(struct router *r, uint32_t *id);
/* Flight id off its worker and its queue, FREE. */
void router_flight_release(struct router *r, uint32_t id);

/* router_prompt.c */
/* Reads req, a request to svc, into flight f and rec: the endpoint, the model (the workers of svc
 * that serve it, its tokenizer, its chain's root), the tokens and the chain, or the fallback
 * view. */
void router_prompt_read(struct router *r, const struct service *svc,
			const struct router_request *req, struct flight *f, struct route_rec *rec);
/* router_pick.c: the worker of endpoint k of svc (through the slots router_set_services
 * installed), or NULL. */
struct worker *router_worker_of(struct router *r, const struct service *svc, size_t k);
/* May worker w take flight f (its model: see struct flight)? */
bool router_model_ok(const struct flight *f, const struct worker *w);
/* The rest of f's prompt, tokenized and hashed: its chain, token count and worker accounting
 * become exact (router_sent; router_done when it was never sent). f is out of the queue, or
 * RETIRED (freed next). */
void router_prompt_finish(struct router *r, struct flight *f);
/* One slice of f's rest: ROUTER_SLICE_TOKENS more tokens and their blocks. Returns true when it
 * was the last (the text ended, the chain is at ROUTER_MAX_BLOCKS, or out of memory): then
 * router_prompt_finish. */
bool router_prompt_slice(struct router *r, struct flight *f);

/* Hot helpers, once per request or attempt. */
static inline struct route_rec *router_rec_find(struct router *r, uint64_t seq)
{
	struct route_rec *rec;

	if (!seq || seq + ROUTER_LOG <= r->nlog)
		return NULL;
	rec = &r->log[(seq - 1) % ROUTER_LOG];
	return rec->seq == seq ? rec : NULL;
}

/* Takes flight f's blocks out of its worker's prefill backlog (once). */
static inline void router_prefill_done(struct router *r, struct flight *f)
{
	struct worker *w = f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;

	if (w && f->prefill)
		workers_prefill_done(w, f->prefill);
	f->prefill = 0;
}

/* Takes flight f off its worker's decoding requests (once). */
static inline void router_decode_off(struct router *r, struct flight *f)
{
	struct worker *w = f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;

	if (w && f->first_s > 0)
		workers_decode_end(w, f->first_s);
	f->first_s = 0;
}

/* router_debug.c */
/* Registers r's metrics and its /metrics collector (none without r->metrics). 0 or -ENOMEM. */
int router_debug_stats_init(struct router *r);

#endif
