// SPDX-License-Identifier: Apache-2.0
/* workers: see workers.h. The active set of a worker is an open-addressing multiset of block
 * hashes (linear probing, backward-shift deletion, so no tombstones build up as requests come and
 * go), sized to the blocks in flight. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "route/workers.h"

struct bset {
	uint64_t *k; /* 0: empty */
	uint32_t *c;
	size_t cap, n;
};

struct workers {
	struct worker *w; /* slots; name[0] == '\0' marks a free one */
	struct bset *act;
	uint32_t n, cap;
};

static inline size_t bs_home(const struct bset *s, uint64_t k)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ULL) >> 20) & (s->cap - 1);
}

static long bs_find(const struct bset *s, uint64_t k)
{
	if (!s->cap)
		return -1;
	for (size_t i = bs_home(s, k);; i = (i + 1) & (s->cap - 1)) {
		if (s->k[i] == k)
			return (long)i;
		if (!s->k[i])
			return -1;
	}
}

static int bs_grow(struct bset *s)
{
	struct bset ns = {.cap = s->cap ? s->cap * 2 : 256};

	ns.k = calloc(ns.cap, sizeof(*ns.k));
	ns.c = calloc(ns.cap, sizeof(*ns.c));
	if (!ns.k || !ns.c) {
		free(ns.k);
		free(ns.c);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		size_t j;

		if (!s->k[i])
			continue;
		for (j = bs_home(&ns, s->k[i]); ns.k[j]; j = (j + 1) & (ns.cap - 1))
			;
		ns.k[j] = s->k[i];
		ns.c[j] = s->c[i];
	}
	ns.n = s->n;
	free(s->k);
	free(s->c);
	*s = ns;
	return 0;
}

/* Adds one reference to k (never 0). 0 or -ENOMEM. */
static int bs_add(struct bset *s, uint64_t k)
{
	long i = bs_find(s, k);
	size_t j;

	if (i >= 0) {
		s->c[i]++;
		return 0;
	}
	if ((s->n + 1) * 4 > s->cap * 3 && bs_grow(s))
		return -ENOMEM;
	for (j = bs_home(s, k); s->k[j]; j = (j + 1) & (s->cap - 1))
		;
	s->k[j] = k;
	s->c[j] = 1;
	s->n++;
	return 0;
}

/* Drops one reference to k; the key leaves at 0. */
static void bs_del(struct bset *s, uint64_t k)
{
	long f = bs_find(s, k);
	size_t i, j, mask = s->cap - 1;

	if (f < 0 || --s->c[f])
		return;
	i = j = (size_t)f;
	for (;;) {
		size_t h;

		j = (j + 1) & mask;
		if (!s->k[j])
			break;
		h = bs_home(s, s->k[j]);
		/* leave the entry at j where it is when its home lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		s->k[i] = s->k[j];
		s->c[i] = s->c[j];
		i = j;
	}
	s->k[i] = 0;
	s->c[i] = 0;
	s->n--;
}

int workers_new(struct workers **out)
{
	struct workers *ws = calloc(1, sizeof(*ws));

	if (!ws)
		return -ENOMEM;
	*out = ws;
	return 0;
}

void workers_free(struct workers *ws)
{
	if (!ws)
		return;
	for (uint32_t i = 0; i < ws->cap; i++) {
		free(ws->act[i].k);
		free(ws->act[i].c);
	}
	for (uint32_t i = 0; i < ws->n; i++)
		free(ws->w[i].models);
	free(ws->act);
	free(ws->w);
	free(ws);
}

static void worker_name(char *out, size_t n, const char *svc, const char *ep)
{
	snprintf(out, n, "%s/%s", svc, ep);
}

struct worker *workers_find(struct workers *ws, const char *svc_name, const struct endpoint *e)
{
	char name[sizeof(ws->w->name)];

	worker_name(name, sizeof(name), svc_name, e->name);
	for (uint32_t i = 0; i < ws->n; i++)
		if (ws->w[i].name[0] && strcmp(ws->w[i].name, name) == 0 &&
		    ws->w[i].addr.sin_addr.s_addr == e->addr.sin_addr.s_addr &&
		    ws->w[i].addr.sin_port == e->addr.sin_port)
			return &ws->w[i];
	return NULL;
}

struct worker *workers_at(struct workers *ws, uint32_t slot)
{
	return slot < ws->n && ws->w[slot].name[0] ? &ws->w[slot] : NULL;
}

uint32_t workers_count(const struct workers *ws)
{
	return ws->n;
}

/* A free slot (growing the table), or NULL. */
static struct worker *slot_new(struct workers *ws)
{
	uint32_t i;

	for (i = 0; i < ws->n; i++)
		if (!ws->w[i].name[0] && !ws->w[i].inflight)
			break;
	if (i == ws->n) {
		if (ws->n == WORKERS_MAX)
			return NULL;
		if (ws->n == ws->cap) {
			uint32_t ncap = ws->cap ? ws->cap * 2 : 16;
			struct worker *nw = realloc(ws->w, ncap * sizeof(*nw));
			struct bset *na;

			if (!nw)
				return NULL;
			ws->w = nw;
			na = realloc(ws->act, ncap * sizeof(*na));
			if (!na)
				return NULL;
			ws->act = na;
			memset(ws->act + ws->cap, 0, (ncap - ws->cap) * sizeof(*na));
			memset(ws->w + ws->cap, 0, (ncap - ws->cap) * sizeof(*nw));
			ws->cap = ncap;
		}
		ws->n++;
	}
	free(ws->w[i].models); /* a slot reused: its last worker's list */
	memset(&ws->w[i], 0, sizeof(ws->w[i]));
	ws->w[i].slot = i;
	ws->w[i].events_id = -1;
	return &ws->w[i];
}

int workers_sync(struct workers *ws, const struct services *s)
{
	int rc = 0;

	for (uint32_t i = 0; i < ws->n; i++)
		ws->w[i].live = false;
	for (size_t i = 0; s && i < s->n; i++)
		for (size_t k = 0; k < s->v[i].nendpoints; k++) {
			const struct endpoint *e = &s->v[i].endpoints[k];
			struct worker *w = workers_find(ws, s->v[i].name, e);
			char ipport[INET_ADDRSTRLEN + 8], ip[INET_ADDRSTRLEN];

			if (w) {
				w->live = true;
				continue;
			}
			w = slot_new(ws);
			if (!w) {
				rc = ws->n == WORKERS_MAX ? -ENOSPC : -ENOMEM;
				continue;
			}
			worker_name(w->name, sizeof(w->name), s->v[i].name, e->name);
			w->addr = e->addr;
			inet_ntop(AF_INET, &e->addr.sin_addr, ip, sizeof(ip));
			snprintf(ipport, sizeof(ipport), "%s:%u", ip, ntohs(e->addr.sin_port));
			w->id = XXH3_64bits(ipport, strlen(ipport));
			w->live = true;
		}
	/* workers that left: forgotten (a slot with requests in flight is reused only once they
	 * are done, see slot_new) */
	for (uint32_t i = 0; i < ws->n; i++)
		if (ws->w[i].name[0] && !ws->w[i].live)
			ws->w[i].name[0] = '\0';
	while (ws->n && !ws->w[ws->n - 1].name[0] && !ws->w[ws->n - 1].inflight)
		ws->n--;
	return rc;
}

int workers_flight_add(struct workers *ws, uint32_t slot, const uint64_t *chain, size_t n,
		       uint32_t unhashed)
{
	struct worker *w = &ws->w[slot];
	struct bset *s = &ws->act[slot];

	for (size_t i = 0; i < n; i++)
		if (bs_add(s, chain[i])) {
			while (i--)
				bs_del(s, chain[i]);
			return -ENOMEM;
		}
	w->inflight++;
	w->unhashed += unhashed;
	return 0;
}

void workers_flight_del(struct workers *ws, uint32_t slot, const uint64_t *chain, size_t n,
			uint32_t unhashed)
{
	struct worker *w = &ws->w[slot];
	struct bset *s = &ws->act[slot];

	for (size_t i = 0; i < n; i++)
		bs_del(s, chain[i]);
	if (w->inflight)
		w->inflight--;
	w->unhashed -= unhashed < w->unhashed ? unhashed : w->unhashed;
}

uint32_t workers_active(const struct workers *ws, const struct worker *w)
{
	return (uint32_t)ws->act[w->slot].n + w->unhashed;
}

bool workers_block_in_flight(const struct workers *ws, uint64_t h)
{
	for (uint32_t i = 0; i < ws->n; i++)
		if (ws->act[i].n && bs_find(&ws->act[i], h) >= 0)
			return true;
	return false;
}

uint32_t workers_active_depth(const struct workers *ws, const struct worker *w,
			      const uint64_t *chain, size_t n)
{
	const struct bset *s = &ws->act[w->slot];
	uint32_t d = 0;

	while (d < n && bs_find(s, chain[d]) >= 0)
		d++;
	return d;
}

/* The worker answered a scrape (with metrics or not): it is reachable and its API answers, so
 * neither reason to be down is left; its backoff starts over. */
static void reached(struct worker *w)
{
	w->scrape_fails = 0;
	w->connect_down = false;
	w->connect_fails = 0;
	w->backoff_ms = 0;
	w->retry_ms = 0;
}

enum workers_scrape_cause workers_scrape_cause_of(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return WORKERS_SCRAPE_TIMEOUT;
	case -ECONNREFUSED:
		return WORKERS_SCRAPE_REFUSED;
	case -EHOSTUNREACH:
	case -ENETUNREACH:
		return WORKERS_SCRAPE_UNREACHABLE;
	case -ECONNRESET:
	case -EPIPE:
		return WORKERS_SCRAPE_CLOSED;
	case -EMSGSIZE:
		return WORKERS_SCRAPE_TOO_LARGE;
	case -EPROTO:
		return WORKERS_SCRAPE_BAD_RESPONSE;
	case -ENODATA:
		return WORKERS_SCRAPE_NO_METRICS;
	default:
		return WORKERS_SCRAPE_OTHER;
	}
}

const char *workers_scrape_cause_name(enum workers_scrape_cause c)
{
#define WORKERS_SCRAPE_NAME(id, name) [WORKERS_SCRAPE_##id] = name,
	static const char *const names[] = {WORKERS_SCRAPE_CAUSES(WORKERS_SCRAPE_NAME)};
#undef WORKERS_SCRAPE_NAME

	return (unsigned)c < WORKERS_SCRAPE_NCAUSES ? names[c] : NULL;
}

int workers_metrics(struct workers *ws, struct worker *w, const struct scrape_metrics *m, int err,
		    uint64_t now_ms)
{
	int restarted = 0;

	w->scrapes++;
	if (!m) {
		/* only a worker that cannot be reached is down; one that answers without vLLM
		 * metrics (another server, a 404) is up, its load just local */
		bool unreachable = err == -ECONNREFUSED || err == -ETIMEDOUT ||
				   err == -ECONNRESET || err == -EHOSTUNREACH ||
				   err == -ENETUNREACH;

		w->scrape_err = err;
		w->scrape_errors[workers_scrape_cause_of(err)]++;
		if (unreachable) {
			bool was = workers_down(w);

			w->scrape_fails++;
			w->downs += !was && workers_down(w);
		} else {
			reached(w);
		}
		return 0;
	}
	if (w->have_metrics && ((m->start_time > 0 && w->m.start_time > 0 &&
				 fabs(m->start_time - w->m.start_time) > 0.5) ||
				(m->prefix_queries >= 0 && w->m.prefix_queries >= 0 &&
				 m->prefix_queries < w->m.prefix_queries))) {
		restarted = 1;
		w->restarts++;
	}
	w->m = *m;
	w->have_metrics = true;
	w->metrics_ms = now_ms;
	w->inflight_at_metrics = w->inflight;
	w->active_at_metrics = workers_active(ws, w);
	w->scrape_err = 0;
	reached(w);
	return restarted;
}

void workers_load(const struct workers *ws, const struct worker *w, uint64_t now_ms,
		  double cap_floor, double *remote, double *waiting, double *free_blocks,
		  double *capacity)
{
	bool fresh = w->have_metrics && now_ms - w->metrics_ms <= WORKERS_METRICS_FRESH_MS;
	const struct scrape_metrics *m = &w->m;

	*remote = 0;
	*waiting = -1;
	*free_blocks = -1;
	if (w->have_metrics && m->num_gpu_blocks > 0)
		*capacity = (double)m->num_gpu_blocks;
	else
		*capacity = fmax((double)w->max_blocks_seen, cap_floor);
	if (!fresh || m->kv_usage < 0) {
		/* no usage from the worker: what this router's own requests hold */
		if (*capacity > 0) {
			*free_blocks = *capacity - (double)workers_active(ws, w);
			if (*free_blocks < 0)
				*free_blocks = 0;
		}
	}
	if (!fresh)
		return;
	if (m->running >= 0) {
		double theirs =
		    m->running + (m->waiting > 0 ? m->waiting : 0) - (double)w->inflight_at_metrics;

		*remote = theirs > 0 ? theirs : 0;
	}
	/* the queue others' requests make: this router's own queued requests are already counted
	 * by their prefill backlog, and a queue of its own read at the scrape may have been
	 * scheduled since (counting it made kv spill requests off their prefix's worker for
	 * nothing: docs/journal/trace.md, the queue change) */
	*waiting = m->running >= 0 && m->waiting > *remote ? *remote : m->waiting;
	if (m->kv_usage >= 0 && *capacity > 0) {
		double used_theirs = m->kv_usage * *capacity - (double)w->active_at_metrics;

		if (used_theirs < 0)
			used_theirs = 0;
		*free_blocks = *capacity - used_theirs - (double)workers_active(ws, w);
		if (*free_blocks < 0)
			*free_blocks = 0;
	}
}

void workers_blocks_seen(struct worker *w, uint64_t blocks)
{
	if (blocks > w->max_blocks_seen)
		w->max_blocks_seen = blocks;
}

bool workers_scrape_down(const struct worker *w)
{
	return w->scrape_fails >= WORKERS_DOWN_AFTER;
}

bool workers_down(const struct worker *w)
{
	return w->connect_down || workers_scrape_down(w);
}

bool workers_avoid(const struct worker *w, uint64_t now_ms)
{
	return workers_scrape_down(w) || (w->connect_down && now_ms < w->retry_ms);
}

void workers_connect_failed(struct worker *w, uint64_t now_ms)
{
	w->downs += !workers_down(w);
	w->connect_down = true;
	w->connect_fails++;
	if (!w->backoff_ms)
		w->backoff_ms = WORKERS_BACKOFF_MIN_MS;
	else if (w->backoff_ms < WORKERS_BACKOFF_MAX_MS / 2)
		w->backoff_ms *= 2;
	else
		w->backoff_ms = WORKERS_BACKOFF_MAX_MS;
	w->retry_ms = now_ms + w->backoff_ms;
}

void workers_connect_ok(struct worker *w)
{
	w->connect_down = false;
	w->connect_fails = 0;
	w->backoff_ms = 0;
	w->retry_ms = 0;
}

void workers_probe(struct worker *w, uint64_t now_ms)
{
	if (w->connect_down)
		w->retry_ms = now_ms + w->backoff_ms;
}

void workers_set_events_id(struct worker *w, int id)
{
	w->events_id = id;
}

void workers_routed(struct worker *w)
{
	w->routed++;
}

void workers_prefill_add(struct worker *w, uint32_t blocks)
{
	w->prefill += blocks;
}

void workers_prefill_done(struct worker *w, uint32_t blocks)
{
	w->prefill -= blocks < w->prefill ? blocks : w->prefill;
}

void workers_prefill_move(struct worker *w, uint32_t from, uint32_t to)
{
	w->prefill = w->prefill - from + to;
}

void workers_decode_start(struct worker *w, double first_s)
{
	w->decoding++;
	w->decode_since += first_s;
}

void workers_decode_end(struct worker *w, double first_s)
{
	if (!w->decoding)
		return;
	w->decoding--;
	w->decode_since = w->decoding ? w->decode_since - first_s : 0;
}

void workers_reports_cached(struct worker *w)
{
	w->reports_cached = true;
}

int workers_set_models(struct worker *w, struct scrape_models *m, int err)
{
	bool same;

	if (!m) {
		w->models_errors++;
		w->models_err = err;
		return 0;
	}
	w->models_reads++;
	w->models_err = 0;
	same = w->models_known && m->n == w->models_n && m->len == w->models_len &&
	       (!m->len || memcmp(m->text, w->models, m->len) == 0);
	free(w->models);
	w->models = m->text;
	w->models_len = m->len;
	w->models_n = m->n;
	w->models_known = true;
	m->text = NULL;
	m->len = m->n = 0;
	return !same;
}

enum workers_serve workers_serves(const struct worker *w, const char *model, size_t len,
				  const char **parent)
{
	const char *p = w->models, *end = w->models + w->models_len;

	if (!w->models_known)
		return WORKERS_SERVE_UNKNOWN;
	while (p && p < end) {
		size_t il = strlen(p);
		const char *par = p + il + 1;

		if (il == len && memcmp(p, model, len) == 0) {
			if (!par[0])
				return WORKERS_SERVE_BASE;
			if (parent)
				*parent = par;
			return WORKERS_SERVE_ADAPTER;
		}
		p = par + strlen(par) + 1;
	}
	return WORKERS_SERVE_NO;
}
