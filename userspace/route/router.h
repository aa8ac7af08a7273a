/* SPDX-License-Identifier: Apache-2.0 */
/* router: the routing decision, in one module (docs/design.md, "Exact tokens"). The proxy
 * asks one question per request — which endpoint? — and knows nothing of tokens. The answer:
 *
 *   body -> model -> its workers (their /v1/models), tokenizer (models.h), LoRA root and
 *   cache_salt (blockhash.h) -> prompt token ids (openai.h: every completions prompt
 *   shape, chat through the template) -> own block chain (blockhash.h) -> per-worker depth (the
 *   event-fed index.h, or the approximate approx.h) -> load (workers.h: in flight here, scraped
 *   metrics) -> policy (policy.h) -> endpoint + reason
 *
 * Fallbacks. When exact tokens are impossible — no tokenizer for the model, a request the reader
 * or the chat renderer reports as not exact, a model no worker of the Service serves (their
 * /v1/models), a body that is not JSON or that vLLM would refuse — the request is routed on the
 * approximate view of its raw body bytes (blockhash_bytes_chain), counted by cause in /metrics, and
 * never refused here: the worker answers it as it would without kvsplice. Requests to other paths,
 * and pass-through connections, carry no prompt: the policy places them by load alone.
 *
 * Explainability. Every decision is kept (router_debug_json: /debug/route): model, tokens, chain
 * length, per candidate the matched blocks, keys, load and score, the choice, the reason, the
 * cached tokens it predicts; router_done adds what the worker reported (the cached_tokens of the
 * response's usage, read as it streams past). /metrics counts decisions by policy and reason,
 * fallbacks by cause, predicted / best possible / reported cached tokens and the outcome matrix
 * (predicted hit or miss x reported hit or miss), the decision latency, and per worker its load.
 * How an operator reads them (no reuse, a wrong router, a stale index): docs/operating.md.
 *
 * Threading: one router per loop thread; every function runs on it. The index is written by the
 * events module on this same thread (index.h's single-writer rule); the router only reads it, and
 * it calls events only to map workers to index ids and to resync a restarted worker. */
#ifndef KVS_ROUTER_H
#define KVS_ROUTER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "discovery/discovery.h"
#include "route/policy.h"

/* Decisions kept for /debug/route. */
#ifndef ROUTER_LOG
#define ROUTER_LOG 128
#endif
/* Candidates recorded per decision (the choice is always recorded). */
#ifndef ROUTER_LOG_CANDS
#define ROUTER_LOG_CANDS 16
#endif
/* Bytes per block of the approximate view of raw request bytes (~16 tokens of text). */
#ifndef ROUTER_TEXT_CHUNK
#define ROUTER_TEXT_CHUNK 64
#endif
/* Default bound of the encoding cache of each tokenizer, bytes. */
#ifndef ROUTER_TOKCACHE_BYTES
#define ROUTER_TOKCACHE_BYTES (64L << 20)
#endif
/* Longest chain considered, blocks (1 M tokens at 16 per block). Not a flag, structural: it
 * caps the work of one decision past any model's context (a longer prompt is placed on its first
 * 1 M tokens); what a client may send is bounded by --max-body. */
#ifndef ROUTER_MAX_BLOCKS
#define ROUTER_MAX_BLOCKS 65536
#endif
/* A text prompt is tokenized this many tokens first, then twice as far as before, until its last
 * block is one no worker holds (the rest after the request is sent: router_sent). */
#ifndef ROUTER_LAZY_TOKENS
#define ROUTER_LAZY_TOKENS 256
#endif
/* The rest of a sent prompt is tokenized this many tokens at a time (router_work), so that a
 * slice delays the loop's next event by microseconds, not by a long prompt's milliseconds. */
#ifndef ROUTER_SLICE_TOKENS
#define ROUTER_SLICE_TOKENS 256
#endif
/* Sent prompts whose rest may wait for router_work; past this, router_work finishes the oldest
 * whole (a loop with no idle turn still keeps up). */
#ifndef ROUTER_QUEUE_MAX
#define ROUTER_QUEUE_MAX 64
#endif

struct router;
struct index;
struct events;
struct models;
struct metrics;
struct loop;

/* The router's /metrics families (daemon/catalog.c lists them): there once the daemon serves. */
extern const struct metrics_family router_families[];
extern const size_t router_nfamilies;

/* What router_cfg_default gives; a 0 is off (no scraping, no deadline, no bound, no cache). */
struct router_cfg {
	const char *policy;		 /* a policy_find name; NULL: "kv" */
	const struct policy_kv_opts *kv; /* kv / approx tunables; NULL: policy_kv_defaults */
	struct index *index;		 /* the event-fed index; NULL: events are off */
	struct events *events;		 /* its writer (worker ids, resync); NULL with index NULL */
	const struct models *models;	 /* tokenizers; NULL: none (every prompt is a fallback) */
	struct metrics *metrics;	 /* NULL: no metrics */
	struct loop *loop;		 /* drives the metrics scraper; NULL: load is local only */
	uint32_t mark;			 /* SO_MARK of scrape connections */
	int scrape_interval_ms;		 /* how often each worker's /metrics is read; 0: never */
	int models_interval_ms; /* how often each worker's /v1/models is read (also at once when it
				   comes back or restarts); 0: never (every worker takes every
				   model) */
	size_t scrape_max_body; /* scraper_opts' */
	size_t scrape_max_head;
	int scrape_timeout_ms;
	double approx_ttl_s; /* approx_cfg's */
	size_t approx_max_entries;
	long tokcache_bytes; /* encoding cache per tokenizer (tok_cache); 0: none */
	bool whole_prompt;   /* tokenize whole prompts before deciding (default: lazily) */
	uint64_t seed;	     /* tie-breaking draws */
};

/* Fills c with the defaults: the kv policy, scraping every SCRAPE_DEFAULT_INTERVAL_MS with the
 * scraper's default bounds, /v1/models every SCRAPE_DEFAULT_MODELS_INTERVAL_MS, the approximate
 * view's defaults, ROUTER_TOKCACHE_BYTES; no index, models, metrics or loop. */
void router_cfg_default(struct router_cfg *c);

/* What the proxy knows about the request when it must choose. Pointers are valid for the call. */
struct router_request {
	const char *method; /* NULL for a pass-through connection */
	size_t method_len;
	const char *target;
	size_t target_len;
	const char *head; /* the request head as forwarded */
	size_t head_len;
	const char *body; /* the whole (decoded) request body */
	size_t body_len;
	uint64_t tried;			  /* endpoints already tried: bit (index % 64) */
	const struct sockaddr_in *client; /* for the record; may be NULL */
};

/* A request in flight, from router_pick to router_done. Zero-initialise. */
struct router_ticket {
	uint32_t flight; /* 0: none */
};

/* How a request ended. */
struct router_outcome {
	int status;	       /* HTTP status relayed, 0 when no response came */
	int64_t cached_tokens; /* usage.prompt_tokens_details.cached_tokens, -1 unseen */
	int64_t prompt_tokens; /* usage.prompt_tokens, -1 unseen */
	int attempts;	       /* endpoints tried */
	double ms;	       /* request start to end */
};

/* Creates a router. Returns 0 and *out; -EINVAL for an unknown policy; -ENOMEM. */
int router_new(const struct router_cfg *cfg, struct router **out);
void router_free(struct router *r);

/* The policy's name. */
const char *router_policy(const struct router *r);

/* Installs the workers of a Services snapshot (after events_sync_services, so their index ids are
 * known): worker table, scrape targets. Requests in flight keep their accounting. */
void router_set_services(struct router *r, const struct services *s);

/* Picks an endpoint of svc for req, skipping the tried ones. The first call for a request (t
 * zeroed) reads the request; a retry (t as the first call left it) reuses what was read and
 * moves the request's accounting to the new endpoint. Returns the endpoint index, or -ENOENT
 * when none is left (t then holds nothing: no router_done is owed). */
int router_pick(struct router *r, const struct service *svc, const struct router_request *req,
		struct router_ticket *t);

/* Should the response of t be read for its usage (openai_usage_feed)? */
bool router_wants_usage(const struct router *r, const struct router_ticket *t);

/* t's request has been written to its worker: what the decision left for later is queued, for
 * router_work to do while the worker works (the rest of a text prompt's tokens and blocks, so
 * that its chain, its token count, its record and its worker's active and prefill blocks become
 * exact). Until then they are estimates, as between router_pick and router_sent. Idempotent; a
 * zeroed t is a no-op. */
void router_sent(struct router *r, struct router_ticket *t);

/* Is work queued for router_work? (The loop then polls instead of sleeping.) */
bool router_busy(const struct router *r);

/* Does one slice of the queued work: the oldest sent prompt's next ROUTER_SLICE_TOKENS tokens
 * and their blocks, and when its text ends, its exact accounting. Call it when the loop has no
 * event ready (bytes to relay come first), and at least once per loop turn. Returns whether work
 * is left. */
bool router_work(struct router *r);

/* Books now every request done whose rest was still queued (router_done): before /metrics or a
 * /debug page is read, so that they count each request done exactly. The rests of requests in
 * flight stay for router_work. */
void router_settle(struct router *r);

/* The first byte of t's response body arrived: its prefill is done (vLLM sends the head of a
 * stream at once, its first chunk with the first token; a whole response comes after the
 * decode), so its blocks no longer stand in the prefill queue of its worker (what the policies
 * read as prefill backlog). Idempotent; a zeroed t is a no-op. */
void router_first_byte(struct router *r, struct router_ticket *t);

/* A connect to the endpoint of t's current attempt failed (refused, timed out, unreachable): its
 * worker is down and requests avoid it, retried with backoff (workers.h). Call before the retry's
 * router_pick. A zeroed t is a no-op. */
void router_connect_failed(struct router *r, const struct router_ticket *t);
/* A connect to t's endpoint succeeded: its worker is up again as far as connects go. */
void router_connect_ok(struct router *r, const struct router_ticket *t);
/* Is the worker of t's current attempt down by its scrapes (its metrics unanswered: gone or
 * hung)? The proxy then gives up on a request that has no answer from it yet. */
bool router_ticket_hung(const struct router *r, const struct router_ticket *t);

/* The request of t ended (answered, failed, or the client left): releases its load accounting,
 * completes its record and its metrics. Zeroes t. A zeroed t is a no-op. A text prompt whose
 * rest is not tokenized yet (a worker that answered within microseconds, or a request never
 * sent) stays queued for router_work, off its worker already: its record's token and block
 * counts, and its prompt tokens in the metrics, become exact there (router_settle: at once). */
void router_done(struct router *r, struct router_ticket *t, const struct router_outcome *o);

/* Endpoint ep of svc answered m on its /metrics, read by the caller (a router without a loop
 * scrapes nothing: kvbench reads each worker's metrics between runs and hands them over, so that
 * its client-side policies know the workers' KV capacity as the daemon does). As a scrape
 * would, it sets the worker's load and capacity from m. 0, or -ENOENT for an unknown endpoint. */
struct scrape_metrics;
int router_worker_metrics(struct router *r, const struct service *svc, size_t ep,
			  const struct scrape_metrics *m);

/* Endpoint ep of svc answered body[0..len) on its /v1/models, read by the caller (as the models
 * scraper would hand it over: what the worker serves, base models and LoRA adapters). 0,
 * -ENOENT for an unknown endpoint, -ENODATA for a body that is no model list, -ENOMEM. */
int router_worker_models(struct router *r, const struct service *svc, size_t ep, const char *body,
			 size_t len);

/* Housekeeping: scrapes, approximate view expiry. Call after every loop_run (at least every
 * 100 ms). */
void router_tick(struct router *r);

/* Appends the last decisions, newest first, as JSON:
 * {"router":"kv","routes":[{"time":"...Z","client":"ip:port","service":"qwen","method":"POST",
 *   "target":"/v1/completions","endpoint":"w1","attempts":1,"status":200,"ms":12.3,
 *   "model":"...","prompt_tokens":2371,"blocks":148,"key_pos":0,"view":"events","fallback":null,
 *   "reason":"home","predicted_cached_tokens":2032,"best_cached_tokens":2032,
 *   "reported_cached_tokens":2032,"decision_us":41.2,
 *   "candidates":[{"endpoint":"w1","depth":127,"keys":4,"load":1,"waiting":0,
 *                  "free_blocks":400,"score":21,"chosen":true},...]}]}
 * (pass-through connections have method "" and status 0). Returns 0 or -ENOMEM. */
int router_debug_json(const struct router *r, struct buf *out);

/* Appends a JSON object of the worker table (load, metrics, capacity) for /debug/workers. */
int router_workers_json(const struct router *r, struct buf *out);

#endif
