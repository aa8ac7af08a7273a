// SPDX-License-Identifier: Apache-2.0
/* router: see router.h. One decision:
 *
 *   read (first attempt only)      view                       policy          record
 *   endpoint? model? tokens ──▶ chain ──▶ candidates: depth, keys, load ──▶ pick ──▶ flight + log
 *        └─ not exact: raw-bytes chain, approximate view (fallback, counted)
 *
 * A flight is a request between router_pick and router_done: the worker it is on, its chain
 * (for the worker's active block set and for retries), what was predicted. Flights live in an
 * array indexed by ticket (1-based), recycled through a free list; their chain buffers are kept
 * for the next request, so a warm router allocates nothing per request.
 *
 * This file: the life cycle, the Services and workers, the flights and the queue of sent prompts
 * (router_sent to router_work), the end of a request. Reading the request is router_prompt.c, the
 * pick router_pick.c, what the router shows router_debug.c; route/router_int.h has what they
 * share. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "kv/approx.h"
#include "kv/blockhash.h"
#include "kv/events.h"
#include "kv/index.h"
#include "core/log.h"
#include "core/metrics.h"
#include "prompt/openai.h"
#include "route/router.h"
#include "route/scrape.h"
#include "prompt/tokenizer.h"
#include "route/workers.h"
#include "route/router_int.h"

static const char *flight_state_name(enum flight_state s)
{
	static const char *const names[FLIGHT_NSTATES] = {
	    [FLIGHT_FREE] = "free",
	    [FLIGHT_ON] = "on",
	    [FLIGHT_QUEUED] = "queued",
	    [FLIGHT_RETIRED] = "retired",
	};

	return (unsigned)s < FLIGHT_NSTATES ? names[s] : "?";
}

/* Moves f to state to. A move not in the list above is a bug of this file: asserted, and
 * logged when asserts are compiled out (the move is made: the accounting around it already
 * was). */
static void flight_set(struct flight *f, enum flight_state to)
{
	static const unsigned char moves[FLIGHT_NSTATES] = {
	    [FLIGHT_FREE] = 1u << FLIGHT_ON,
	    [FLIGHT_ON] = 1u << FLIGHT_QUEUED | 1u << FLIGHT_RETIRED | 1u << FLIGHT_FREE,
	    [FLIGHT_QUEUED] = 1u << FLIGHT_ON | 1u << FLIGHT_FREE,
	    [FLIGHT_RETIRED] = 1u << FLIGHT_FREE,
	};
	bool ok = (unsigned)f->state < FLIGHT_NSTATES && (moves[f->state] & 1u << to);

	assert(ok);
	if (!ok)
		log_error("router", "flight: no move from %s to %s", flight_state_name(f->state),
			  flight_state_name(to));
	f->state = to;
}

/* In the router's queue (its rest owed by router_work)? */
static bool flight_queued(const struct flight *f)
{
	return f->state == FLIGHT_QUEUED || f->state == FLIGHT_RETIRED;
}

/* --- life cycle --------------------------------------------------------------------------------
 */

static void scrape_cb(void *arg, void *user, const struct scrape_metrics *m, int err);
static void models_cb(void *arg, void *user, const struct scrape_metrics *m, int err);
static int models_body(void *arg, void *user, const char *text, size_t len);

void router_cfg_default(struct router_cfg *c)
{
	struct scraper_opts so;
	struct approx_cfg ac;

	scraper_opts_default(&so);
	approx_cfg_default(&ac);
	memset(c, 0, sizeof(*c));
	c->policy = "kv";
	c->scrape_interval_ms = so.interval_ms;
	c->scrape_max_body = so.max_body;
	c->scrape_max_head = so.max_head;
	c->scrape_timeout_ms = so.timeout_ms;
	c->models_interval_ms = SCRAPE_DEFAULT_MODELS_INTERVAL_MS;
	c->approx_ttl_s = ac.ttl_s;
	c->approx_max_entries = ac.max_entries;
	c->tokcache_bytes = ROUTER_TOKCACHE_BYTES;
}

int router_new(const struct router_cfg *cfg, struct router **out)
{
	const struct policy_ops *pol = policy_find(cfg->policy ? cfg->policy : "kv");
	struct approx_cfg acfg = {.max_workers = WORKERS_MAX,
				  .ttl_s = cfg->approx_ttl_s,
				  .max_entries = cfg->approx_max_entries};
	struct router *r;
	int rc = -ENOMEM;

	if (!pol || cfg->scrape_interval_ms < 0 || cfg->models_interval_ms < 0 ||
	    cfg->tokcache_bytes < 0)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t k = 0; k < POLICY_COUNT; k++) {
		r->pi[k].ops = policy_at(k);
		if (r->pi[k].ops == pol)
			r->pol = &r->pi[k];
	}
	if (cfg->kv)
		r->kv = *cfg->kv;
	else
		policy_kv_defaults(&r->kv);
	r->idx = cfg->index;
	r->ev = cfg->events;
	r->models = cfg->models;
	r->metrics = cfg->metrics;
	r->bs = r->idx ? index_block_size(r->idx) : BLOCKHASH_DEFAULT_BLOCK_SIZE;
	r->hseed = r->idx ? index_seed(r->idx) : BLOCKHASH_DEFAULT_SEED;
	r->rng = cfg->seed ^ 0x6b7673706c696365ULL;
	r->tokcache_bytes = cfg->tokcache_bytes;
	r->whole_prompt = cfg->whole_prompt;
	r->free_fl = 0;
	if (pol->create && (rc = pol->create(&r->kv, &r->pol->st)) < 0)
		goto fail;
	r->pol->ready = true;
	rc = -ENOMEM;
	if (workers_new(&r->ws) < 0 || approx_new(&acfg, &r->ax) < 0)
		goto fail;
	if ((rc = router_debug_stats_init(r)) < 0)
		goto fail;
	r->approx_max_entries = acfg.max_entries;
	if (cfg->loop && cfg->scrape_interval_ms > 0) {
		struct scraper_opts so;

		scraper_opts_default(&so);
		so.interval_ms = cfg->scrape_interval_ms;
		so.timeout_ms = cfg->scrape_timeout_ms;
		so.mark = cfg->mark;
		so.max_body = cfg->scrape_max_body;
		so.max_head = cfg->scrape_max_head;

		if ((rc = scraper_new(cfg->loop, &so, scrape_cb, r, &r->scr)) < 0)
			goto fail;
	}
	if (cfg->loop && cfg->models_interval_ms > 0) {
		struct scraper_opts so;

		scraper_opts_default(&so);
		so.interval_ms = cfg->models_interval_ms;
		so.timeout_ms = cfg->scrape_timeout_ms;
		so.mark = cfg->mark;
		so.max_body = cfg->scrape_max_body;
		so.max_head = cfg->scrape_max_head;
		so.path = "/v1/models";
		so.body = models_body;
		if ((rc = scraper_new(cfg->loop, &so, models_cb, r, &r->mscr)) < 0)
			goto fail;
	}
	*out = r;
	return 0;
fail:
	router_free(r);
	return rc;
}

void router_free(struct router *r)
{
	if (!r)
		return;
	scraper_free(r->scr);
	scraper_free(r->mscr);
	for (size_t i = 0; i < sizeof(r->tc) / sizeof(r->tc[0]); i++)
		tok_cache_free(r->tc[i].cache);
	for (size_t k = 0; k < POLICY_COUNT; k++)
		if (r->pi[k].ready && r->pi[k].ops->destroy)
			r->pi[k].ops->destroy(r->pi[k].st);
	for (uint32_t i = 0; i < r->nfl; i++) {
		free(r->fl[i].chain);
		buf_free(&r->fl[i].extra0);
		buf_free(&r->fl[i].text);
		tok_stream_free(&r->fl[i].ts);
		tok_ids_free(&r->fl[i].toks);
	}
	free(r->fl);
	for (size_t i = 0; i < r->nsvcs; i++)
		free(r->svcs[i].slot);
	free(r->svcs);
	free(r->cand);
	free(r->cand_slot);
	free(r->depth);
	openai_req_free(&r->oq);
	approx_free(r->ax);
	workers_free(r->ws);
	free(r);
}

const char *router_policy(const struct router *r)
{
	return r->pol->ops->name;
}

/* --- Services and workers ----------------------------------------------------------------------
 */

/* A scrape of worker w ended: m, or the error err. */
static void metrics_in(struct router *r, struct worker *w, const struct scrape_metrics *m, int err)
{
	bool was_failing = w->scrape_fails > 0 || w->scrape_err;
	int restarted = workers_metrics(r->ws, w, m, err, clock_ms());

	/* back, or a new process: what it serves is read again at once */
	if (r->mscr && m && (restarted == 1 || was_failing))
		scraper_kick(r->mscr, (void *)(uintptr_t)w->slot);
	if (restarted == 1) {
		log_info("router",
			 "worker %s: a new process (from its metrics): its cache is read "
			 "again",
			 w->name);
		if (r->ev && w->events_id >= 0)
			events_worker_resync(r->ev, (uint32_t)w->events_id);
		approx_worker_clear(r->ax, w->slot);
	}
	/* the approximate view evicts as the worker's cache does once its size is known */
	if (w->have_metrics && w->m.num_gpu_blocks > 0)
		approx_set_capacity(r->ax, w->slot,
				    w->m.num_gpu_blocks < UINT32_MAX ? (uint32_t)w->m.num_gpu_blocks
								     : UINT32_MAX);
}

static void scrape_cb(void *arg, void *user, const struct scrape_metrics *m, int err)
{
	struct router *r = arg;
	struct worker *w = workers_at(r->ws, (uint32_t)(uintptr_t)user);

	if (w)
		metrics_in(r, w, m, err);
}

/* A /v1/models answer of the worker in slot user: what it serves. */
static int models_body(void *arg, void *user, const char *text, size_t len)
{
	struct router *r = arg;
	struct worker *w = workers_at(r->ws, (uint32_t)(uintptr_t)user);
	struct scrape_models m;
	int rc;

	if (!w)
		return 0;
	if ((rc = scrape_models_parse(text, len, &m)) < 0)
		return rc;
	if (workers_set_models(w, &m, 0) == 1)
		log_info("router", "worker %s: serves %zu model(s)", w->name, w->models_n);
	scrape_models_free(&m);
	return 0;
}

static void models_cb(void *arg, void *user, const struct scrape_metrics *m, int err)
{
	struct router *r = arg;
	struct worker *w = workers_at(r->ws, (uint32_t)(uintptr_t)user);

	(void)m;
	if (w && err)
		workers_set_models(w, NULL, err);
}

int router_worker_models(struct router *r, const struct service *svc, size_t ep, const char *body,
			 size_t len)
{
	struct worker *w =
	    ep < svc->nendpoints ? workers_find(r->ws, svc->name, &svc->endpoints[ep]) : NULL;

	if (!w)
		return -ENOENT;
	return models_body(r, (void *)(uintptr_t)w->slot, body, len);
}

int router_worker_metrics(struct router *r, const struct service *svc, size_t ep,
			  const struct scrape_metrics *m)
{
	struct worker *w =
	    ep < svc->nendpoints ? workers_find(r->ws, svc->name, &svc->endpoints[ep]) : NULL;

	if (!w)
		return -ENOENT;
	metrics_in(r, w, m, 0);
	return 0;
}

void router_set_services(struct router *r, const struct services *s)
{
	struct svc_slots *ns;
	struct scrape_target *t = NULL;
	size_t nt = 0;

	if (workers_sync(r->ws, s) < 0)
		log_warn("router", "worker table: not every endpoint could be added");
	for (size_t i = 0; i < r->nsvcs; i++)
		free(r->svcs[i].slot);
	free(r->svcs);
	r->svcs = NULL;
	r->nsvcs = 0;
	ns = s && s->n ? calloc(s->n, sizeof(*ns)) : NULL;
	if (s && s->n && !ns) {
		log_error("router", "out of memory installing the Services");
		return;
	}
	for (size_t i = 0; s && i < s->n; i++) {
		const struct service *svc = &s->v[i];

		snprintf(ns[i].name, sizeof(ns[i].name), "%s", svc->name);
		ns[i].slot = calloc(svc->nendpoints ? svc->nendpoints : 1, sizeof(uint32_t));
		if (!ns[i].slot)
			continue;
		ns[i].n = svc->nendpoints;
		for (size_t k = 0; k < svc->nendpoints; k++) {
			struct worker *w = workers_find(r->ws, svc->name, &svc->endpoints[k]);

			ns[i].slot[k] = w ? w->slot : UINT32_MAX;
			if (w)
				workers_set_events_id(w, r->ev ? events_worker_find(r->ev, w->name)
							       : -1);
		}
	}
	r->svcs = ns;
	r->nsvcs = ns ? s->n : 0;
	if (!r->scr && !r->mscr)
		return;
	t = calloc(workers_count(r->ws) + 1, sizeof(*t));
	if (!t)
		return;
	for (uint32_t i = 0; i < workers_count(r->ws); i++) {
		struct worker *w = workers_at(r->ws, i);

		if (w)
			t[nt++] = (struct scrape_target){.addr = w->addr,
							 .user = (void *)(uintptr_t)w->slot};
	}
	if (r->scr && scraper_set_targets(r->scr, t, nt) < 0)
		log_warn("router", "scrape targets: out of memory");
	if (r->mscr && scraper_set_targets(r->mscr, t, nt) < 0)
		log_warn("router", "/v1/models targets: out of memory");
	free(t);
}

void router_tick(struct router *r)
{
	if (r->scr)
		scraper_tick(r->scr);
	if (r->mscr)
		scraper_tick(r->mscr);
	approx_expire(r->ax, clock_s());
}

int router_scratch(struct router *r, size_t ncand, size_t ndepth)
{
	if (ncand > r->cand_cap) {
		struct policy_cand *c = realloc(r->cand, ncand * sizeof(*c));
		uint32_t *s;

		if (!c)
			return -ENOMEM;
		r->cand = c;
		s = realloc(r->cand_slot, ncand * sizeof(*s));
		if (!s)
			return -ENOMEM;
		r->cand_slot = s;
		r->cand_cap = ncand;
	}
	if (ndepth > r->depth_cap) {
		uint32_t *d = realloc(r->depth, ndepth * sizeof(*d));

		if (!d)
			return -ENOMEM;
		r->depth = d;
		r->depth_cap = ndepth;
	}
	return 0;
}

/* Blocks of f's prompt past its chain (not tokenized yet: estimated). */
static uint32_t unhashed(const struct flight *f)
{
	return f->nblocks > f->n ? f->nblocks - (uint32_t)f->n : 0;
}

/* Adds f to the accounting of the worker in slot (its chain so far and its unhashed rest), and
 * remembers what it added. Returns 0 or -ENOMEM (then nothing changed). */
int router_flight_reg(struct router *r, struct flight *f, uint32_t slot)
{
	uint32_t u = unhashed(f);
	int rc = workers_flight_add(r->ws, slot, f->chain, f->n, u);

	if (rc == 0) {
		f->reg_n = f->n;
		f->reg_unhashed = u;
	}
	return rc;
}

/* Takes f out of its worker's accounting (what flight_reg added). f->slot is left to the
 * caller. */
void router_flight_unreg(struct router *r, struct flight *f)
{
	if (f->slot != UINT32_MAX)
		workers_flight_del(r->ws, f->slot, f->chain, f->reg_n, f->reg_unhashed);
}

/* The queue of flights whose rest router_work has to do: flight id in, as to (QUEUED or
 * RETIRED). */
static void queue_push(struct router *r, uint32_t id, enum flight_state to)
{
	struct flight *f = &r->fl[id - 1];

	flight_set(f, to);
	f->qnext = 0;
	f->qprev = r->q_tail;
	if (r->q_tail)
		r->fl[r->q_tail - 1].qnext = id;
	else
		r->q_head = id;
	r->q_tail = id;
	r->nq++;
}

/* Takes f out of the queue's links (its state is the caller's). */
static void queue_unlink(struct router *r, struct flight *f)
{
	if (f->qprev)
		r->fl[f->qprev - 1].qnext = f->qnext;
	else
		r->q_head = f->qnext;
	if (f->qnext)
		r->fl[f->qnext - 1].qprev = f->qprev;
	else
		r->q_tail = f->qprev;
	f->qprev = f->qnext = 0;
	r->nq--;
}

/* A sent flight's rest no longer owed by router_work (done, or about to be retired): ON again.
 * A no-op for a flight not QUEUED. */
static void queue_del(struct router *r, struct flight *f)
{
	if (f->state != FLIGHT_QUEUED)
		return;
	queue_unlink(r, f);
	flight_set(f, FLIGHT_ON);
}

struct flight *router_flight_new(struct router *r, uint32_t *id)
{
	struct flight *f;

	if (r->free_fl) {
		*id = r->free_fl;
		f = &r->fl[*id - 1];
		r->free_fl = f->next_free;
	} else {
		struct flight *nf = realloc(r->fl, (r->nfl + 1) * sizeof(*nf));

		if (!nf)
			return NULL;
		r->fl = nf;
		f = &r->fl[r->nfl];
		memset(f, 0, sizeof(*f));
		*id = ++r->nfl;
	}
	flight_set(f, FLIGHT_ON);
	f->slot = UINT32_MAX;
	f->n = f->nblocks = 0;
	f->partial = false;
	f->predicted = f->best = -1;
	f->rec_seq = 0;
	f->first_s = 0;
	f->reg_n = 0;
	f->reg_unhashed = 0;
	f->qprev = f->qnext = 0;
	f->book_prompt = false;
	f->model_filter = false;
	f->root = 0;
	buf_reset(&f->extra0);
	return f;
}

/* Takes f off its worker: its prefill backlog, its decoding, its blocks. */
static void flight_off(struct router *r, struct flight *f)
{
	router_prefill_done(r, f);
	router_decode_off(r, f);
	router_flight_unreg(r, f);
	f->slot = UINT32_MAX;
}

void router_flight_release(struct router *r, uint32_t id)
{
	struct flight *f = &r->fl[id - 1];

	if (flight_queued(f))
		queue_unlink(r, f);
	flight_off(r, f);
	flight_set(f, FLIGHT_FREE);
	f->next_free = r->free_fl;
	r->free_fl = id;
}

void router_sent(struct router *r, struct router_ticket *t)
{
	struct flight *f = t->flight ? &r->fl[t->flight - 1] : NULL;

	if (f && f->partial && !flight_queued(f))
		queue_push(r, t->flight, FLIGHT_QUEUED);
}

bool router_busy(const struct router *r)
{
	return r->q_head != 0;
}

/* Flight id's rest tokenized and hashed (finish_prompt); one already done (RETIRED) is then
 * booked and freed, one still on (QUEUED) is ON again. */
static void complete(struct router *r, uint32_t id)
{
	struct flight *f = &r->fl[id - 1];

	if (f->state != FLIGHT_RETIRED) {
		queue_del(r, f);
		router_prompt_finish(r, f);
		return;
	}
	router_prompt_finish(r, f);
	if (f->book_prompt && r->metrics)
		metrics_add(r->st.tok_prompt, f->prompt_tokens);
	router_flight_release(r, id);
}

bool router_work(struct router *r)
{
	struct flight *f;
	uint32_t id;

	/* a backlog past the bound (no idle turn for a while): whole prompts, oldest first */
	while (r->nq > ROUTER_QUEUE_MAX)
		complete(r, r->q_head);
	if (!(id = r->q_head))
		return false;
	f = &r->fl[id - 1];
	if (router_prompt_slice(r, f))
		complete(r,
			 id); /* its last slice (or out of memory: router_prompt_finish decides) */
	return r->q_head != 0;
}

void router_settle(struct router *r)
{
	for (uint32_t id = r->q_head, next; id; id = next) {
		next = r->fl[id - 1].qnext;
		if (r->fl[id - 1].state == FLIGHT_RETIRED)
			complete(r, id);
	}
}

void router_first_byte(struct router *r, struct router_ticket *t)
{
	struct flight *f = t->flight ? &r->fl[t->flight - 1] : NULL;
	struct worker *w = f && f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;

	if (!f)
		return;
	router_prefill_done(r, f);
	if (w && f->first_s <= 0) {
		f->first_s = clock_s();
		workers_decode_start(w, f->first_s);
	}
}

bool router_wants_usage(const struct router *r, const struct router_ticket *t)
{
	return t->flight && r->fl[t->flight - 1].wants_usage;
}

/* The worker of t's current attempt, or NULL. */
static struct worker *ticket_worker(const struct router *r, const struct router_ticket *t)
{
	const struct flight *f = t->flight ? &r->fl[t->flight - 1] : NULL;

	return f && f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;
}

void router_connect_failed(struct router *r, const struct router_ticket *t)
{
	struct worker *w = ticket_worker(r, t);

	if (!w)
		return;
	if (!w->backoff_ms)
		log_info("router", "worker %s: connect failed: down, retried with backoff",
			 w->name);
	workers_connect_failed(w, clock_ms());
}

void router_connect_ok(struct router *r, const struct router_ticket *t)
{
	struct worker *w = ticket_worker(r, t);

	if (!w)
		return;
	if (w->backoff_ms) {
		log_info("router", "worker %s: connected again: up", w->name);
		if (r->mscr) /* what it serves may have changed while it was away */
			scraper_kick(r->mscr, (void *)(uintptr_t)w->slot);
	}
	workers_connect_ok(w);
}

bool router_ticket_hung(const struct router *r, const struct router_ticket *t)
{
	const struct worker *w = ticket_worker(r, t);

	return w && workers_scrape_down(w);
}

void router_done(struct router *r, struct router_ticket *t, const struct router_outcome *o)
{
	struct flight *f;
	struct route_rec *rec;
	struct worker *w;
	int64_t cached = o->cached_tokens;

	if (!t->flight)
		return;
	f = &r->fl[t->flight - 1];
	w = f->slot != UINT32_MAX ? workers_at(r->ws, f->slot) : NULL;
	/* vLLM leaves prompt_tokens_details out of the usage when nothing was cached: from a worker
	 * known to report them, a usage without them is 0 cached tokens, not "unknown" */
	if (w && cached >= 0)
		workers_reports_cached(w);
	else if (w && w->reports_cached && o->prompt_tokens >= 0)
		cached = 0;
	rec = router_rec_find(r, f->rec_seq);
	if (rec) {
		rec->status = o->status;
		rec->ms = o->ms;
		rec->reported = cached;
	}
	if (f->wants_usage && f->prompt_tokens && r->metrics && o->status >= 200 &&
	    o->status < 300) {
		int p = f->predicted > 0 ? 0 : 1;
		int q = cached < 0 ? 2 : cached > 0 ? 0 : 1;

		if (f->partial) /* booked once its rest is counted (complete) */
			f->book_prompt = true;
		else
			metrics_add(r->st.tok_prompt, f->prompt_tokens);
		if (f->predicted > 0)
			metrics_add(r->st.tok_predicted, (uint64_t)f->predicted);
		if (f->best > 0)
			metrics_add(r->st.tok_best, (uint64_t)f->best);
		if (cached > 0)
			metrics_add(r->st.tok_reported, (uint64_t)cached);
		if (o->prompt_tokens > 0)
			metrics_add(r->st.tok_reported_prompt, (uint64_t)o->prompt_tokens);
		metrics_inc(r->st.outcome[p][q]);
	}
	if (f->partial) {
		/* its rest not tokenized yet (sent, or never sent): off its worker now, counted
		 * by router_work while the loop is idle (complete), not on this turn */
		queue_del(r, f); /* behind the requests still in flight, whose rests count more */
		flight_off(r, f);
		queue_push(r, t->flight, FLIGHT_RETIRED);
	} else {
		router_flight_release(r, t->flight);
	}
	t->flight = 0;
}
