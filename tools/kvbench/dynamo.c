// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "dynamo.h"

/* u64 -> u64 open-addressing map (key 0 is reserved: hashes are never 0 here). */
struct map {
	uint64_t *k, *v;
	size_t cap, n;
};

static size_t map_slot(const struct map *m, uint64_t k)
{
	size_t i = (size_t)(k * 0x9e3779b97f4a7c15ull) & (m->cap - 1);

	while (m->k[i] && m->k[i] != k)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int map_grow(struct map *m)
{
	struct map nm = {.cap = m->cap ? m->cap * 2 : 1024};

	nm.k = calloc(nm.cap, sizeof(uint64_t));
	nm.v = calloc(nm.cap, sizeof(uint64_t));
	if (!nm.k || !nm.v) {
		free(nm.k);
		free(nm.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->k[i])
			continue;
		size_t j = map_slot(&nm, m->k[i]);
		nm.k[j] = m->k[i];
		nm.v[j] = m->v[i];
		nm.n++;
	}
	free(m->k);
	free(m->v);
	*m = nm;
	return 0;
}

static uint64_t *map_get(const struct map *m, uint64_t k)
{
	size_t i;

	if (!m->cap)
		return NULL;
	i = map_slot(m, k);
	return m->k[i] ? &m->v[i] : NULL;
}

static uint64_t *map_put(struct map *m, uint64_t k)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap && map_grow(m))
		return NULL;
	i = map_slot(m, k);
	if (!m->k[i]) {
		m->k[i] = k;
		m->v[i] = 0;
		m->n++;
	}
	return &m->v[i];
}

static void map_del(struct map *m, uint64_t k)
{
	size_t i, j;

	if (!m->cap)
		return;
	i = map_slot(m, k);
	if (!m->k[i])
		return;
	m->k[i] = 0;
	m->n--;
	/* Backward-shift deletion keeps probe chains intact. */
	for (j = (i + 1) & (m->cap - 1); m->k[j]; j = (j + 1) & (m->cap - 1)) {
		size_t home = (size_t)(m->k[j] * 0x9e3779b97f4a7c15ull) & (m->cap - 1);

		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			m->k[j] = 0;
			i = j;
		}
	}
}

struct flight {
	int worker; /* -1: free slot */
	uint64_t *hashes;
	size_t n;
};

struct dynamo {
	struct dynamo_opts o;
	struct map *cached;   /* per worker: block hash -> expiry (double bits) */
	struct map *inflight; /* per worker: block hash -> count */
	struct flight *f;
	size_t nf;
	uint64_t rng;
	double *cost;
};

struct dynamo *dynamo_new(const struct dynamo_opts *o)
{
	struct dynamo *d = calloc(1, sizeof(*d));

	if (!d || !o->workers)
		goto fail;
	d->o = *o;
	d->rng = o->seed ^ 0x1337;
	d->cached = calloc(o->workers, sizeof(struct map));
	d->inflight = calloc(o->workers, sizeof(struct map));
	d->cost = calloc(o->workers, sizeof(double));
	if (!d->cached || !d->inflight || !d->cost)
		goto fail;
	return d;
fail:
	dynamo_free(d);
	return NULL;
}

void dynamo_free(struct dynamo *d)
{
	if (!d)
		return;
	for (uint32_t w = 0; d->cached && w < d->o.workers; w++) {
		free(d->cached[w].k);
		free(d->cached[w].v);
		free(d->inflight[w].k);
		free(d->inflight[w].v);
	}
	for (size_t i = 0; i < d->nf; i++)
		free(d->f[i].hashes);
	free(d->f);
	free(d->cached);
	free(d->inflight);
	free(d->cost);
	free(d);
}

static uint64_t rnd(struct dynamo *d)
{
	uint64_t x = (d->rng += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double dbits(uint64_t v)
{
	double x;

	memcpy(&x, &v, sizeof(x));
	return x;
}

static uint64_t bitsd(double x)
{
	uint64_t v;

	memcpy(&v, &x, sizeof(v));
	return v;
}

int dynamo_route(struct dynamo *d, const uint32_t *tokens, size_t n, double now,
		 const uint32_t *overlap_ev, uint64_t *handle)
{
	size_t nb = n / d->o.block_size, slot;
	uint64_t *h = calloc(nb ? nb : 1, sizeof(uint64_t)), parent = 0;
	uint32_t best = 0, nbest = 0;
	uint8_t buf[8 + 4 * 4096];

	if (!h)
		return -ENOMEM;
	/* Dynamo's own chained block hash: XXH3-64(seed 1337) over parent hash + u32 LE tokens. */
	for (size_t i = 0; i < nb; i++) {
		size_t len = 0;

		if (i) {
			memcpy(buf, &parent, 8);
			len = 8;
		}
		for (uint32_t j = 0; j < d->o.block_size; j++) {
			uint32_t t = tokens[i * d->o.block_size + j];

			buf[len++] = t & 0xff;
			buf[len++] = (t >> 8) & 0xff;
			buf[len++] = (t >> 16) & 0xff;
			buf[len++] = t >> 24;
		}
		h[i] = XXH3_64bits_withSeed(buf, len, 1337) | 1; /* never 0 (map key) */
		parent = h[i];
	}
	for (uint32_t w = 0; w < d->o.workers; w++) {
		size_t overlap = 0, active = d->inflight[w].n;
		double prefill;

		while (!overlap_ev && overlap < nb) {
			uint64_t *e = map_get(&d->cached[w], h[overlap]);

			if (!e || dbits(*e) < now)
				break;
			overlap++;
		}
		if (overlap_ev)
			overlap = overlap_ev[w] < nb ? overlap_ev[w] : nb;
		for (size_t i = 0; i < nb; i++)
			if (!map_get(&d->inflight[w], h[i]))
				active++;
		prefill = fmax(0.0, (double)nb - d->o.overlap_credit * (double)overlap);
		d->cost[w] = d->o.prefill_load_scale * prefill + (double)active;
	}
	for (uint32_t w = 0; w < d->o.workers; w++) {
		if (nbest == 0 || d->cost[w] < d->cost[best]) {
			best = w;
			nbest = 1;
		} else if (d->cost[w] == d->cost[best] && rnd(d) % ++nbest == 0) {
			best = w; /* reservoir choice among ties */
		}
	}
	for (size_t i = 0; i < nb; i++) {
		uint64_t *c = map_put(&d->inflight[best], h[i]);
		uint64_t *e = map_put(&d->cached[best], h[i]);

		if (!c || !e) {
			free(h);
			return -ENOMEM;
		}
		(*c)++;
		*e = bitsd(now + d->o.ttl_s);
	}
	for (slot = 0; slot < d->nf && d->f[slot].worker >= 0; slot++)
		;
	if (slot == d->nf) {
		void *p = realloc(d->f, (d->nf + 1) * sizeof(*d->f));

		if (!p) {
			free(h);
			return -ENOMEM;
		}
		d->f = p;
		d->nf++;
	}
	d->f[slot] = (struct flight){.worker = (int)best, .hashes = h, .n = nb};
	*handle = slot;
	return (int)best;
}

void dynamo_done(struct dynamo *d, uint64_t handle)
{
	struct flight *f;

	if (handle >= d->nf || d->f[handle].worker < 0)
		return;
	f = &d->f[handle];
	for (size_t i = 0; i < f->n; i++) {
		uint64_t *c = map_get(&d->inflight[f->worker], f->hashes[i]);

		if (c && --*c == 0)
			map_del(&d->inflight[f->worker], f->hashes[i]);
	}
	free(f->hashes);
	f->hashes = NULL;
	f->worker = -1;
}
