/* SPDX-License-Identifier: Apache-2.0 */
/* workers: the router's table of worker endpoints and what it knows of each one's load.
 *
 * Identity. A worker is an endpoint of a Service, named "service/endpoint" (the name the events
 * module subscribes it under). Its slot in the table is stable while it stays in the Services
 * (slots are reused after removal), and its id — a hash of "ip:port" — is what every kvsplice
 * instance computes alike, so rendezvous placement agrees across nodes.
 *
 * Load has three sources:
 *   - local: the requests this router has in flight there and the distinct blocks of their chains
 *     (a multiset of block hashes per worker: shared prefix blocks counted once, as the engine
 *     allocates them once);
 *   - metrics: the worker's own running/waiting gauges, KV usage and capacity, scraped (scrape.h),
 *     which include other clients' and other nodes' requests;
 *   - the difference: requests and blocks others hold there = metrics at scrape time minus what
 *     this router had there at that moment; trusted for WORKERS_METRICS_FRESH_MS.
 *
 * Down, and retried with backoff. A worker is down for one of two reasons, both in one state:
 *   - its connects: a connect of the proxy to it failed (refused, timed out, unreachable): down
 *     at once. Requests avoid it for a backoff, WORKERS_BACKOFF_MIN_MS at first, doubled by
 *     every connect that fails while it is down, up to WORKERS_BACKOFF_MAX_MS; once the backoff
 *     is over, one request goes there as a probe (workers_probe starts the next wait). A connect
 *     that succeeds lifts this reason and resets the backoff.
 *   - its scrapes: its last WORKERS_DOWN_AFTER scrapes could not reach it (gone, or hung: its
 *     kernel still accepts connects, its API answers nothing). Requests avoid it for as long as
 *     that lasts: the scrapes, every scrape interval, are its probes (a request sent there would
 *     hang with them); a good connect does not lift this reason.
 * A scrape that reaches the worker (its metrics, or any HTTP answer) lifts both: it connects and
 * answers. Requests go to a down worker only when no endpoint of the Service is up. Without this,
 * a worker that refuses connections (a vLLM shutting down, its listener gone) would cost every
 * request routed there a failed connect, and a hung one would take new requests until they time
 * out.
 *
 * Not thread-safe: the loop thread owns it. */
#ifndef KVS_WORKERS_H
#define KVS_WORKERS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery/discovery.h"
#include "route/scrape.h"

/* Workers a table holds at most. Not a flag, structural: the router sizes the approximate
 * view's per-worker tables by it at start (about 1 KiB per worker, whatever the cluster), and it
 * must stay within APPROX_MAX_WORKERS; a node routes to the endpoints of the Services it serves,
 * far fewer. Past it an endpoint is left out, logged ("not every endpoint could be added"). */
#ifndef WORKERS_MAX
#define WORKERS_MAX 1024
#endif
/* Metrics older than this are not used for load, ms. */
#ifndef WORKERS_METRICS_FRESH_MS
#define WORKERS_METRICS_FRESH_MS 3000
#endif
/* Consecutive failed scrapes after which a worker counts as down (avoided while others are up). */
#ifndef WORKERS_DOWN_AFTER
#define WORKERS_DOWN_AFTER 3
#endif
/* First wait before a down worker is tried again, ms. */
#ifndef WORKERS_BACKOFF_MIN_MS
#define WORKERS_BACKOFF_MIN_MS 500
#endif
/* Longest wait between two tries of a down worker (so one that comes back is seen within it),
 * ms. */
#ifndef WORKERS_BACKOFF_MAX_MS
#define WORKERS_BACKOFF_MAX_MS 10000
#endif

/* Why a scrape failed (kvsplice_worker_scrape_errors_total{cause}): one list gives the enum
 * and the names, so they cannot get out of step. */
#define WORKERS_SCRAPE_CAUSES(X)                                                                   \
	X(TIMEOUT, "timeout")		/* no whole answer within --scrape-timeout */              \
	X(REFUSED, "refused")		/* connection refused */                                   \
	X(UNREACHABLE, "unreachable")	/* host or network unreachable */                          \
	X(CLOSED, "closed")		/* the worker closed or reset the connection mid-answer */ \
	X(TOO_LARGE, "too_large")	/* over --scrape-max-head or --scrape-max-body */          \
	X(BAD_RESPONSE, "bad_response") /* not HTTP, a status other than 200, a bad coding */      \
	X(NO_METRICS, "no_metrics")	/* 200, but no vLLM series in the body */                  \
	X(OTHER, "other")		/* anything else (out of memory, another socket error) */
#define WORKERS_SCRAPE_ENUM(id, name) WORKERS_SCRAPE_##id,
enum workers_scrape_cause { WORKERS_SCRAPE_CAUSES(WORKERS_SCRAPE_ENUM) WORKERS_SCRAPE_NCAUSES };
#undef WORKERS_SCRAPE_ENUM

struct worker {
	char name[2 * DISCOVERY_NAME_MAX + 2]; /* "service/endpoint" */
	struct sockaddr_in addr;
	uint64_t id;   /* hash of "ip:port": the same on every node */
	uint32_t slot; /* its index in the table */
	bool live;     /* in the current Services snapshot */
	int events_id; /* its id in the events module and the index, -1: none */
	/* local load */
	uint32_t inflight; /* requests this router has in flight there */
	uint32_t prefill;  /* blocks those of them still before their first token have to compute */
	uint32_t unhashed; /* blocks of theirs not hashed yet (a prompt's estimated rest) */
	uint32_t decoding; /* those past their first byte (decoding) */
	double decode_since; /* the sum of their first bytes' times (clock_s): the time they have
				been decoding is decoding x now - decode_since */
	/* metrics */
	bool have_metrics;
	struct scrape_metrics m;
	uint64_t metrics_ms;	      /* when they arrived (monotonic ms) */
	uint32_t inflight_at_metrics; /* local in-flight requests then */
	uint32_t active_at_metrics;   /* local distinct in-flight blocks then */
	uint32_t scrape_fails;	      /* consecutive scrapes that could not reach it */
	int scrape_err;		      /* last error (0: the last scrape worked) */
	uint64_t scrapes, restarts;
	uint64_t scrape_errors[WORKERS_SCRAPE_NCAUSES]; /* failed scrapes, by cause */
	/* down (see the top): by a failed connect; its backoff (0: not down by its connects) and
	 * when it ends; consecutive failed connects; times it went down (either reason) */
	bool connect_down;
	uint32_t backoff_ms;
	uint64_t retry_ms;
	uint32_t connect_fails;
	uint64_t downs;
	/* most blocks its events ever showed it holding (its capacity, learned) */
	uint64_t max_blocks_seen;
	/* its responses have carried usage.prompt_tokens_details.cached_tokens */
	bool reports_cached;
	/* counters */
	uint64_t routed;
	/* what it serves (its /v1/models: base models and LoRA adapters), models_n of them packed
	 * as scrape_models packs them; unknown until its first answer (models_known false). A
	 * failed read keeps the last list. */
	bool models_known;
	char *models;
	size_t models_len;
	size_t models_n;
	uint64_t models_reads, models_errors; /* /v1/models read, and failed */
	int models_err;			      /* last error (0: the last read worked) */
};

/* What workers_serves says of a model on a worker. */
enum workers_serve {
	WORKERS_SERVE_UNKNOWN = -1, /* its list is not known yet */
	WORKERS_SERVE_NO = 0,
	WORKERS_SERVE_BASE = 1,	   /* a base model it serves */
	WORKERS_SERVE_ADAPTER = 2, /* a LoRA adapter it serves (its parent: the base model) */
};

struct workers;

int workers_new(struct workers **out);
void workers_free(struct workers *ws);

/* Marks every worker not live, then makes the endpoints of s live (adding new ones); workers of
 * endpoints that left are dropped (their in-flight accounting stays until router_done releases
 * it, then the slot is reused). Returns 0 or -ENOMEM / -ENOSPC. */
int workers_sync(struct workers *ws, const struct services *s);

/* The worker for endpoint e of Service svc_name, or NULL. */
struct worker *workers_find(struct workers *ws, const char *svc_name, const struct endpoint *e);
/* Worker by slot, or NULL when the slot is unused. */
struct worker *workers_at(struct workers *ws, uint32_t slot);
/* One past the highest slot in use. */
uint32_t workers_count(const struct workers *ws);

/* A request with chain[0..n) and unhashed more blocks (its prompt's rest, not tokenized yet) goes
 * in flight on the worker in slot (+1 request, its blocks into the active set, the unhashed ones
 * counted as distinct) or leaves it (with the same n and unhashed). A slot whose worker left the
 * Services is reused only once its last request left. flight_add returns 0 or -ENOMEM (then
 * nothing changed). */
int workers_flight_add(struct workers *ws, uint32_t slot, const uint64_t *chain, size_t n,
		       uint32_t unhashed);
void workers_flight_del(struct workers *ws, uint32_t slot, const uint64_t *chain, size_t n,
			uint32_t unhashed);

/* Distinct blocks of w's in-flight requests (those not hashed yet counted as distinct). */
uint32_t workers_active(const struct workers *ws, const struct worker *w);
/* Is block h in some worker's active set (a request in flight has it)? */
bool workers_block_in_flight(const struct workers *ws, uint64_t h);
/* Leading blocks of chain[0..n) in w's active set (blocks in flight share whole prefixes, so the
 * request's blocks not in the set are n minus this). */
uint32_t workers_active_depth(const struct workers *ws, const struct worker *w,
			      const uint64_t *chain, size_t n);

/* Records a scrape result for w (m NULL: failed with err, counted by cause; one that reached
 * it, with or without metrics, lifts both reasons to be down: see the top). Returns 1 when it shows
 * a new worker process (start time changed, or counters went back): the caller resyncs its events;
 * else 0. */
/* The cause a scrape error (scrape_fn's err) is counted under. */
enum workers_scrape_cause workers_scrape_cause_of(int err);
/* Its name in kvsplice_worker_scrape_errors_total ("timeout", "too_large", ...); NULL for a
 * value out of range. */
const char *workers_scrape_cause_name(enum workers_scrape_cause c);
int workers_metrics(struct workers *ws, struct worker *w, const struct scrape_metrics *m, int err,
		    uint64_t now_ms);

/* Records that w's events show it holding blocks GPU blocks now (the capacity is learned from
 * the most ever seen when its metrics do not give num_gpu_blocks). */
void workers_blocks_seen(struct worker *w, uint64_t blocks);

/* Load estimates for w at now_ms (from local counts and fresh metrics; see the top comment):
 * requests others have there, the part of its queue that is others' (at most what others have
 * there: a queue of this router's own requests is not counted; -1 unknown), its free KV blocks
 * (-1 unknown), its
 * capacity in blocks (0 unknown). Capacity: num_gpu_blocks from its metrics, else the most
 * blocks its events showed it holding, at least cap_floor (the caller's prior: the most any
 * worker of the Service was seen holding, since a worker that never filled up shows less than
 * it has); free blocks: capacity minus the blocks in use, from its
 * kv usage when fresh metrics give it (others' requests included), else from this router's own
 * requests alone. */
void workers_load(const struct workers *ws, const struct worker *w, uint64_t now_ms,
		  double cap_floor, double *remote, double *waiting, double *free_blocks,
		  double *capacity);

/* True when w could not be reached by its last WORKERS_DOWN_AFTER scrapes (refused, timed out,
 * reset, unreachable); a worker that answers without vLLM metrics is not down. */
bool workers_scrape_down(const struct worker *w);
/* True when w is down, by its scrapes or by a failed connect (see the top). */
bool workers_down(const struct worker *w);
/* Should a request avoid w at now_ms? While it is down by its scrapes, and while it is down by
 * its connects until its backoff is over (then a request may go as the probe: workers_probe). */
bool workers_avoid(const struct worker *w, uint64_t now_ms);

/* A connect to w failed (refused, timed out, unreachable): down at once, its backoff grown. */
void workers_connect_failed(struct worker *w, uint64_t now_ms);
/* A connect to w succeeded: no longer down by its connects (up unless its scrapes fail). */
void workers_connect_ok(struct worker *w);
/* A request goes to w (router_pick): if w is down by its connects, this is its probe and the
 * next one waits another backoff. No-op otherwise. */
void workers_probe(struct worker *w, uint64_t now_ms);

/* The router's share of w's fields (everything else in struct worker is written here, from
 * the Services, the scrapes and the connects; the router reads them). */
/* w is id in the events module and the index (-1: none), as router_set_services finds it. */
void workers_set_events_id(struct worker *w, int id);
/* A request was routed to w (router_pick): its routed total. */
void workers_routed(struct worker *w);
/* Prefill backlog: a request's blocks to compute there added; taken out at its first byte (never
 * below 0); or, once its prompt is hashed whole, its estimate from replaced by the exact to. */
void workers_prefill_add(struct worker *w, uint32_t blocks);
void workers_prefill_done(struct worker *w, uint32_t blocks);
void workers_prefill_move(struct worker *w, uint32_t from, uint32_t to);
/* A request on w decoding from first_s (clock_s of its first byte) on, or no longer (with the
 * same first_s; a no-op when none decodes). */
void workers_decode_start(struct worker *w, double first_s);
void workers_decode_end(struct worker *w, double first_s);
/* w's responses carry usage.prompt_tokens_details.cached_tokens. */
void workers_reports_cached(struct worker *w);

/* w's /v1/models was read: m (taken over: m is emptied), or it failed with err (m NULL: the
 * last list stays). Returns 1 when the list changed (or became known), else 0. */
int workers_set_models(struct worker *w, struct scrape_models *m, int err);
/* Does w serve model (len bytes; not NUL-terminated)? For an adapter, *parent (may be NULL) gets
 * its base model's name (NUL-terminated, in w's list, valid until the list changes). */
enum workers_serve workers_serves(const struct worker *w, const char *model, size_t len,
				  const char **parent);

#endif
