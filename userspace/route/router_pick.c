// SPDX-License-Identifier: Apache-2.0
/* router_pick: one decision (route/router_int.h has the map of the router's files): the
 * candidates of the Service (down and terminating endpoints left out while others are up), their
 * view (depth in the index or the approximate view, keys at the key position, load), the policy's
 * pick, and the decision's record in the log. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kv/approx.h"
#include "kv/index.h"
#include "route/router_int.h"
#include "route/workers.h"

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

struct worker *router_worker_of(struct router *r, const struct service *svc, size_t k)
{
	uint32_t slot = slot_of(r, svc, k);

	return slot == UINT32_MAX ? NULL : workers_at(r->ws, slot);
}

/* Cached tokens a depth of d blocks gives a prompt of n tokens (vLLM: whole blocks, at most
 * n - 1 tokens). */
static int64_t cached_of(const struct router *r, uint32_t d, uint32_t n)
{
	uint64_t c = (uint64_t)d * r->bs, lim = n ? (uint64_t)(n - 1) / r->bs * r->bs : 0;

	return (int64_t)(c < lim ? c : lim);
}

/* Fills the candidates of svc not in tried that may take f's model (router_model_ok; workers
 * known to be down and endpoints terminating are left out while others are up: kube-proxy's
 * fallback to terminating endpoints when no other is left). Returns their number, or -ENOMEM. */
static long candidates(struct router *r, const struct service *svc, const struct flight *f,
		       uint64_t tried)
{
	uint64_t now = clock_ms();
	size_t n = 0;

	if (router_scratch(r, svc->nendpoints, 0))
		return -ENOMEM;
	for (int pass = 0; pass < 2 && !n; pass++)
		for (size_t k = 0; k < svc->nendpoints; k++) {
			uint32_t slot = slot_of(r, svc, k);
			struct worker *w = slot == UINT32_MAX ? NULL : workers_at(r->ws, slot);

			if (tried & (1ULL << (k % 64)) || !router_model_ok(f, w))
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
		f = router_flight_new(r, &id);
		if (!f)
			return -ENOMEM;
		f->pol = policy_of(r, svc);
		rec = rec_new(r, svc, req);
		f->rec_seq = rec->seq;
		rec->policy = f->pol->ops->name;
		if (req->method)
			router_prompt_read(r, svc, req, f, rec);
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
	n = candidates(r, svc, f, req->tried);
	if (n <= 0) {
		router_flight_release(r, id);
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
