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
 * for the next request, so a warm router allocates nothing per request. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mix.h"
#include "core/clock.h"
#include "kv/approx.h"
#include "kv/blockhash.h"
#include "kv/events.h"
#include "kv/index.h"
#include "core/log.h"
#include "core/metrics.h"
#include "prompt/models.h"
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

int router_new(const struct router_cfg *cfg, struct router **out)
{
	const struct policy_ops *pol = policy_find(cfg->policy ? cfg->policy : "kv");
	struct approx_cfg acfg = {.max_workers = WORKERS_MAX,
				  .ttl_s = cfg->approx_ttl_s,
				  .max_entries = cfg->approx_max_entries};
	struct router *r;
	int rc = -ENOMEM;

	if (!pol)
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
	r->tokcache_bytes = cfg->tokcache_bytes < 0 ? ROUTER_TOKCACHE_BYTES : cfg->tokcache_bytes;
	r->whole_prompt = cfg->whole_prompt;
	r->free_fl = 0;
	if (pol->create && (rc = pol->create(&r->kv, &r->pol->st)) < 0)
		goto fail;
	r->pol->ready = true;
	rc = -ENOMEM;
	if (workers_new(&r->ws) < 0 || !(r->ax = approx_new(&acfg)))
		goto fail;
	if ((rc = router_debug_stats_init(r)) < 0)
		goto fail;
	r->approx_max_entries = acfg.max_entries ? acfg.max_entries : APPROX_DEFAULT_MAX_ENTRIES;
	if (cfg->loop && cfg->scrape_interval_ms >= 0) {
		struct scraper_opts so = {.interval_ms = cfg->scrape_interval_ms,
					  .timeout_ms = cfg->scrape_timeout_ms,
					  .mark = cfg->mark,
					  .max_body = cfg->scrape_max_body,
					  .max_head = cfg->scrape_max_head};

		if ((rc = scraper_new(cfg->loop, &so, scrape_cb, r, &r->scr)) < 0)
			goto fail;
		r->scrape_max_body = so.max_body ? so.max_body : SCRAPE_DEFAULT_MAX_BODY;
		r->scrape_max_head = so.max_head ? so.max_head : SCRAPE_DEFAULT_MAX_HEAD;
		r->scrape_timeout_ms = so.timeout_ms ? so.timeout_ms : SCRAPE_DEFAULT_TIMEOUT_MS;
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
	for (size_t i = 0; i < sizeof(r->tc) / sizeof(r->tc[0]); i++)
		tok_cache_free(r->tc[i].cache);
	for (size_t k = 0; k < POLICY_COUNT; k++)
		if (r->pi[k].ready && r->pi[k].ops->destroy)
			r->pi[k].ops->destroy(r->pi[k].st);
	for (uint32_t i = 0; i < r->nfl; i++) {
		free(r->fl[i].chain);
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

/* The policy of svc: the one it names (created on first use), else the default. */
static struct pinst *policy_of(struct router *r, const struct service *svc)
{
	struct pinst *p = NULL;

	for (size_t k = 0; svc->policy[0] && k < POLICY_COUNT; k++)
		if (strcmp(r->pi[k].ops->name, svc->policy) == 0)
			p = &r->pi[k];
	if (!p)
		return r->pol;
	if (!p->ready) {
		if (p->ops->create && p->ops->create(&r->kv, &p->st) < 0) {
			log_warn("router", "service %s: policy %s: out of memory, %s used",
				 svc->name, svc->policy, r->pol->ops->name);
			return r->pol;
		}
		p->ready = true;
	}
	return p;
}

/* --- Services and workers ----------------------------------------------------------------------
 */

/* A scrape of worker w ended: m, or the error err. */
static void metrics_in(struct router *r, struct worker *w, const struct scrape_metrics *m, int err)
{
	if (workers_metrics(r->ws, w, m, err, clock_ms()) == 1) {
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
	if (!r->scr)
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
	if (scraper_set_targets(r->scr, t, nt) < 0)
		log_warn("router", "scrape targets: out of memory");
	free(t);
}

/* The worker slot of endpoint k of svc, or UINT32_MAX. */
static uint32_t slot_of(struct router *r, const struct service *svc, size_t k)
{
	struct worker *w;

	for (size_t i = 0; i < r->nsvcs; i++)
		if (r->svcs[i].n == svc->nendpoints && strcmp(r->svcs[i].name, svc->name) == 0) {
			w = workers_at(r->ws, r->svcs[i].slot[k]);
			if (w &&
			    w->addr.sin_addr.s_addr == svc->endpoints[k].addr.sin_addr.s_addr &&
			    w->addr.sin_port == svc->endpoints[k].addr.sin_port)
				return w->slot;
			break;
		}
	/* a snapshot older than the router's (a connection keeps the one it started with) */
	w = workers_find(r->ws, svc->name, &svc->endpoints[k]);
	return w ? w->slot : UINT32_MAX;
}

void router_tick(struct router *r)
{
	if (r->scr)
		scraper_tick(r->scr);
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

/* --- the view and the pick ------------------------------------------------------------------- */

/* Cached tokens a depth of d blocks gives a prompt of n tokens (vLLM: whole blocks, at most
 * n - 1 tokens). */
static int64_t cached_of(const struct router *r, uint32_t d, uint32_t n)
{
	uint64_t c = (uint64_t)d * r->bs, lim = n ? (uint64_t)(n - 1) / r->bs * r->bs : 0;

	return (int64_t)(c < lim ? c : lim);
}

/* Fills the candidates of svc not in tried (workers known to be down and endpoints terminating are
 * left out while others are up: kube-proxy's fallback to terminating endpoints when no other is
 * left). Returns their number, or -ENOMEM. */
static long candidates(struct router *r, const struct service *svc, uint64_t tried)
{
	uint64_t now = clock_ms();
	size_t n = 0;

	if (router_scratch(r, svc->nendpoints, 0))
		return -ENOMEM;
	for (int pass = 0; pass < 2 && !n; pass++)
		for (size_t k = 0; k < svc->nendpoints; k++) {
			uint32_t slot = slot_of(r, svc, k);
			struct worker *w = slot == UINT32_MAX ? NULL : workers_at(r->ws, slot);

			if (tried & (1ULL << (k % 64)))
				continue;
			if (pass == 0 &&
			    ((w && workers_avoid(w, now)) || svc->endpoints[k].terminating))
				continue;
			memset(&r->cand[n], 0, sizeof(r->cand[n]));
			r->cand[n].ep = (uint32_t)k;
			r->cand[n].id = w ? w->id : k;
			r->cand_slot[n] = slot;
			n++;
		}
	return (long)n;
}

/* Depths, keys and load of the n candidates for flight f. */
static int fill_view(struct router *r, struct flight *f, size_t n, struct policy_view *v)
{
	uint64_t t = clock_ms();
	double now_s = clock_s();
	uint32_t key_pos = UINT32_MAX;
	double cap_floor = 0;

	v->nblocks = f->nblocks;
	if (f->n && (f->view == VIEW_EVENTS || f->view == VIEW_APPROX || f->view == VIEW_TEXT)) {
		bool events = f->view == VIEW_EVENTS;
		size_t nd = events ? index_max_workers(r->idx) : workers_count(r->ws);

		if (router_scratch(r, 0, nd ? nd : 1))
			return -ENOMEM;
		if (events)
			index_query(r->idx, f->chain, f->n, r->depth, NULL, nd);
		else
			approx_query(r->ax, f->chain, f->n, clock_s(), r->depth, nd);
		for (size_t i = 0; i < n; i++) {
			struct worker *w = workers_at(r->ws, r->cand_slot[i]);
			int id = !w ? -1 : events ? w->events_id : (int)w->slot;

			r->cand[i].depth = id >= 0 && (size_t)id < nd ? r->depth[id] : 0;
			if (r->cand[i].depth < key_pos)
				key_pos = r->cand[i].depth;
		}
		if (key_pos >= f->n)
			key_pos = (uint32_t)f->n - 1;
		v->key_pos = key_pos;
		v->key = f->chain[key_pos];
		v->prefixes = events ? index_blocks_at(r->idx, key_pos) : 0;
		for (size_t i = 0; i < n; i++) {
			struct worker *w = workers_at(r->ws, r->cand_slot[i]);

			if (!w)
				continue;
			if (events)
				r->cand[i].keys = w->events_id >= 0
						      ? index_worker_blocks_at(
							    r->idx, (uint32_t)w->events_id, key_pos)
						      : 0;
			else
				r->cand[i].keys = approx_blocks_at(r->ax, w->slot, key_pos);
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct worker *w = workers_at(r->ws, r->cand_slot[i]);

		if (w && r->idx && w->events_id >= 0) {
			uint64_t gpu = 0;

			index_worker_blocks(r->idx, (uint32_t)w->events_id, &gpu, NULL);
			workers_blocks_seen(w, gpu);
		}
		if (w && (double)w->max_blocks_seen > cap_floor)
			cap_floor = (double)w->max_blocks_seen;
	}
	for (size_t i = 0; i < n; i++) {
		struct worker *w = workers_at(r->ws, r->cand_slot[i]);
		struct policy_cand *c = &r->cand[i];

		c->waiting = c->free_blocks = -1;
		if (!w)
			continue;
		c->local = w->inflight;
		c->prefill = w->prefill;
		c->decode_ms =
		    w->decoding ? ((double)w->decoding * now_s - w->decode_since) * 1000 : 0;
		workers_load(r->ws, w, t, cap_floor, &c->remote, &c->waiting, &c->free_blocks,
			     &c->capacity);
		if (f->pol->ops->needs & POLICY_NEEDS_ACTIVE) {
			c->active = workers_active(r->ws, w);
			c->flight = workers_active_depth(r->ws, w, f->chain, f->n);
			c->fresh = f->nblocks - c->flight;
		}
	}
	v->c = r->cand;
	v->n = n;
	v->rnd = rnd(r);
	return 0;
}

/* A new record in the log for this decision. */
static struct route_rec *rec_new(struct router *r, const struct service *svc,
				 const struct router_request *req)
{
	struct route_rec *rec = &r->log[r->nlog % ROUTER_LOG];
	size_t tl = req->target_len;

	memset(rec, 0, sizeof(*rec));
	rec->seq = ++r->nlog;
	clock_gettime(CLOCK_REALTIME, &rec->when);
	if (req->client)
		rec->client = *req->client;
	snprintf(rec->service, sizeof(rec->service), "%s", svc->name);
	if (req->method) {
		const char *q = memchr(req->target, '?', req->target_len);

		if (q) /* the path only: a query string may carry what is not ours to log */
			tl = (size_t)(q - req->target);
		snprintf(rec->method, sizeof(rec->method), "%.*s", (int)req->method_len,
			 req->method);
		snprintf(rec->target, sizeof(rec->target), "%.*s", (int)tl, req->target);
	}
	rec->reported = -1;
	rec->predicted = rec->best = -1;
	return rec;
}

static struct flight *flight_new(struct router *r, uint32_t *id)
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

static void flight_release(struct router *r, uint32_t id)
{
	struct flight *f = &r->fl[id - 1];

	if (flight_queued(f))
		queue_unlink(r, f);
	flight_off(r, f);
	flight_set(f, FLIGHT_FREE);
	f->next_free = r->free_fl;
	r->free_fl = id;
}

int router_pick(struct router *r, const struct service *svc, const struct router_request *req,
		struct router_ticket *t)
{
	double t0 = clock_s();
	struct policy_view v = {0};
	struct policy_choice ch = {0};
	struct route_rec *rec = NULL;
	struct flight *f;
	struct worker *w;
	uint32_t id = t->flight;
	long n;
	int64_t best = -1;
	bool first = !id;

	if (!svc || !svc->nendpoints)
		goto none;
	if (first) {
		f = flight_new(r, &id);
		if (!f)
			return -ENOMEM;
		f->pol = policy_of(r, svc);
		rec = rec_new(r, svc, req);
		f->rec_seq = rec->seq;
		rec->policy = f->pol->ops->name;
		if (req->method)
			router_prompt_read(r, req, f, rec);
		else if (r->st.passthrough)
			metrics_inc(r->st.passthrough);
	} else {
		f = &r->fl[id - 1];
		router_prefill_done(r, f);
		router_decode_off(r, f);
		router_flight_unreg(r, f); /* the failed attempt leaves that worker */
		f->slot = UINT32_MAX;
		rec = router_rec_find(r, f->rec_seq);
	}
	n = candidates(r, svc, req->tried);
	if (n <= 0) {
		flight_release(r, id);
		goto none;
	}
	v.service = svc->name;
	v.nendpoints = svc->nendpoints;
	if (fill_view(r, f, (size_t)n, &v) < 0 || f->pol->ops->pick(f->pol->st, &v, &ch) < 0 ||
	    ch.cand >= (size_t)n) {
		ch.cand = (size_t)(rnd(r) % (uint64_t)n); /* out of memory: anywhere */
		ch.reason = POLICY_RANDOM;
	}
	w = workers_at(r->ws, r->cand_slot[ch.cand]);
	if (w) {
		workers_probe(w, clock_ms()); /* down by its connects: this request is its probe */
		if (router_flight_reg(r, f, w->slot) == 0) {
			uint32_t d = policy_held(&v.c[ch.cand]);

			f->slot = w->slot;
			/* the blocks it has to compute there wait in that worker's prefill queue
			 * (those a request in flight there computes are cached when it is
			 * scheduled) */
			f->prefill = f->nblocks - (d < f->nblocks ? d : f->nblocks);
			workers_prefill_add(w, f->prefill);
		}
		workers_routed(w);
		if ((f->view == VIEW_APPROX || f->view == VIEW_TEXT) && f->n)
			approx_insert(r->ax, w->slot, f->chain, f->n, clock_s());
	}
	if (f->view != VIEW_TEXT && f->prompt_tokens) {
		f->predicted = cached_of(r, v.c[ch.cand].depth, f->prompt_tokens);
		for (size_t i = 0; i < v.n; i++) {
			int64_t c = cached_of(r, v.c[i].depth, f->prompt_tokens);

			if (c > best)
				best = c;
		}
	}
	if (f->pol->decisions[ch.reason])
		metrics_inc(f->pol->decisions[ch.reason]);
	if (rec) {
		struct rec_cand *rc;

		rec->attempts++;
		snprintf(rec->endpoint, sizeof(rec->endpoint), "%s",
			 svc->endpoints[v.c[ch.cand].ep].name);
		rec->reason = ch.reason;
		rec->view = f->view;
		rec->prompt_tokens = f->prompt_tokens;
		rec->blocks = rec->decided_blocks = (uint32_t)f->n;
		rec->key_pos = v.nblocks ? v.key_pos : 0;
		rec->predicted = f->predicted;
		rec->best = f->best = best;
		rec->ncand = 0;
		for (size_t i = 0; i < v.n; i++) {
			/* the choice always, the others while there is room */
			if (rec->ncand == ROUTER_LOG_CANDS - 1 && i != ch.cand)
				continue;
			if (rec->ncand == ROUTER_LOG_CANDS)
				break;
			rc = &rec->cand[rec->ncand++];
			snprintf(rc->ep, sizeof(rc->ep), "%s", svc->endpoints[v.c[i].ep].name);
			rc->depth = v.c[i].depth;
			rc->keys = v.c[i].keys;
			rc->prefill = v.c[i].prefill;
			rc->load = policy_load(&v.c[i]);
			rc->waiting = v.c[i].waiting;
			rc->free_blocks = v.c[i].free_blocks;
			rc->score = v.c[i].score;
			rc->chosen = i == ch.cand;
		}
		rec->decision_us += (clock_s() - t0) * 1e6;
	}
	if (first && r->st.decision)
		metrics_observe(r->st.decision, clock_s() - t0);
	t->flight = id;
	return (int)v.c[ch.cand].ep;
none:
	t->flight = 0;
	return -ENOENT;
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
	flight_release(r, id);
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
	if (w->backoff_ms)
		log_info("router", "worker %s: connected again: up", w->name);
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
		flight_release(r, t->flight);
	}
	t->flight = 0;
}
