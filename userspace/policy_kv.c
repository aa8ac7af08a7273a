// SPDX-License-Identifier: Apache-2.0
/* policy kv: capacity-aware prefix placement (ARCHITECTURE.md decisions 3-4, TARGETS.md).
 *
 * Why not Dynamo's cost: it trades overlap against load request by request, so a busy prefix's
 * requests land on its owner's neighbours, which then cache it too and evict other prefixes: at 24
 * prefix types on 6 workers every prefix ends up on ~5 workers and the caches hold a quarter of
 * what they could. Here each prefix (the request's key, see policy.h) has ONE home, the workers
 * share the prefixes by their capacity, and a prefix only spreads when its home is under real
 * pressure. Every choice is a pure function of what every kvsplice instance sees alike — the
 * event-fed index, the endpoints, the key's hash — plus load, which only moves requests when a
 * worker is under pressure. So instances on different nodes place a new prefix on the same worker
 * without talking to each other.
 *
 * The pick, for a request whose key is k:
 *  1. Pressure. A candidate is under pressure when its queue is not empty (its metrics), when its
 *     free KV blocks (estimated) cannot take this request's new blocks (it would queue), or when
 *     its load would pass max(spill_factor x average, average + spill_slack) requests. Free blocks
 *     and the queue come first: the in-flight count alone spills too early and raises TTFT
 *     (TARGETS.md).
 *  2. k is held (some candidate's depth passes key_pos): the holder with the deepest match (depths
 *     within 1/16 of the best count as equal, so one copy stays hot), the first in rendezvous
 *     order among equals, not under pressure -> HOME when it is the first holder in rendezvous
 *     order, else REPLICA. Holders all under pressure -> SPILL to the least loaded candidate not
 *     under pressure (a new replica; it ages out of the LRU once its home copes again).
 *  3. k is new: its home is the first candidate in rendezvous order (highest policy_hrw(k, id))
 *     that holds fewer keys (blocks at key_pos, from the index) than its capacity-weighted share
 *     ceil((K + 1) x cap / total cap + key_slack), K = the keys of all candidates; no candidate
 *     with room -> the first in rendezvous order. Under pressure -> SPILL as above.
 *  4. Everything under pressure: Dynamo's cost (prefill blocks + active + new blocks), so that an
 *     overloaded cluster still gains from hits -> SPILL.
 *  5. A request with no full block has nothing to place -> BALANCE: the least loaded.
 * Ties in load are broken by rendezvous order of the key, so concurrent deciders spread. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "policy.h"

struct kv {
	struct policy_kv_opts o;
};

int policy_kv_create(const struct policy_kv_opts *o, void **state)
{
	struct kv *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	if (o)
		k->o = *o;
	else
		policy_kv_defaults(&k->o);
	*state = k;
	return 0;
}

void policy_kv_destroy(void *state)
{
	free(state);
}

/* Is candidate c under pressure, given the average load avg over the candidates? */
static bool pressured(const struct policy_kv_opts *o, const struct policy_cand *c, double avg)
{
	double limit = fmax(avg * o->spill_factor, avg + o->spill_slack);

	if (c->waiting > 0.5)
		return true;
	if (c->free_blocks >= 0 && c->free_blocks < (double)c->fresh)
		return true;
	return policy_load(c) + 1 > limit;
}

/* Index of the least loaded candidate among those with ok[i] (all when ok is NULL); ties by
 * rendezvous score hrw (higher first). -1 when none. */
static long least_loaded(const struct policy_view *v, const bool *ok, const uint64_t *hrw)
{
	long best = -1;

	for (size_t i = 0; i < v->n; i++) {
		double l = policy_load(&v->c[i]), bl;

		if (ok && !ok[i])
			continue;
		if (best < 0) {
			best = (long)i;
			continue;
		}
		bl = policy_load(&v->c[best]);
		if (l < bl || (l == bl && hrw[i] > hrw[best]))
			best = (long)i;
	}
	return best;
}

/* Blocks to prefill there plus its decode blocks (Dynamo's cost, both weights 1). */
static double overload_cost(const struct policy_view *v, const struct policy_cand *c)
{
	uint32_t d = c->depth < v->nblocks ? c->depth : v->nblocks;

	return (double)(v->nblocks - d) + (double)c->active + (double)c->fresh;
}

int policy_kv_pick(void *state, struct policy_view *v, struct policy_choice *out)
{
	const struct policy_kv_opts *o = &((struct kv *)state)->o;
	uint64_t hrw_s[64], *hrw = v->n <= 64 ? hrw_s : malloc(v->n * sizeof(*hrw));
	bool pr_s[64], *pr = v->n <= 64 ? pr_s : malloc(v->n * sizeof(*pr));
	bool nok_s[64], *notpr = v->n <= 64 ? nok_s : malloc(v->n * sizeof(*notpr));
	double sum = 0, avg;
	long pick = -1, first_holder = -1;
	uint32_t best_depth = 0;
	int rc = 0;

	if (!hrw || !pr || !notpr) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < v->n; i++)
		sum += policy_load(&v->c[i]);
	avg = sum / (double)v->n;
	for (size_t i = 0; i < v->n; i++) {
		struct policy_cand *c = &v->c[i];

		/* no block: rendezvous on a random value, so equal loads rotate */
		hrw[i] = policy_hrw(v->nblocks ? v->key : v->rnd, c->id);
		pr[i] = pressured(o, c, avg);
		notpr[i] = !pr[i];
		/* blocks to prefill there; a million more under pressure */
		c->score = (double)(v->nblocks - (c->depth < v->nblocks ? c->depth : v->nblocks)) +
			   (pr[i] ? 1e6 : 0);
		if (c->depth > v->key_pos && c->depth > best_depth)
			best_depth = c->depth;
	}
	if (!v->nblocks) {
		pick = least_loaded(v, NULL, hrw);
		out->reason = POLICY_BALANCE;
		goto done;
	}
	if (best_depth) {
		/* 2. held: deepest (within tolerance), then rendezvous order; not under pressure */
		uint32_t tol = best_depth / 16 ? best_depth / 16 : 1;

		for (size_t i = 0; i < v->n; i++) {
			const struct policy_cand *c = &v->c[i];

			if (c->depth <= v->key_pos)
				continue;
			if (first_holder < 0 || hrw[i] > hrw[first_holder])
				first_holder = (long)i;
			if (pr[i])
				continue;
			if (pick < 0) {
				pick = (long)i;
				continue;
			}
			uint32_t pd = v->c[pick].depth;
			bool near = c->depth + tol >= pd && pd + tol >= c->depth;

			if ((!near && c->depth > pd) || (near && hrw[i] > hrw[pick]))
				pick = (long)i;
		}
		if (pick >= 0) {
			out->reason = pick == first_holder ? POLICY_HOME : POLICY_REPLICA;
			goto done;
		}
	} else {
		/* 3. new: the first in rendezvous order with room in its capacity-weighted share */
		double keys = 0, cap = 0;
		bool caps = true;

		for (size_t i = 0; i < v->n; i++) {
			keys += v->c[i].keys;
			cap += v->c[i].capacity;
			caps &= v->c[i].capacity > 0;
		}
		for (size_t i = 0; i < v->n; i++) {
			double share =
			    (keys + 1) * (caps ? v->c[i].capacity / cap : 1.0 / (double)v->n);

			if ((double)v->c[i].keys >= ceil(share + o->key_slack))
				continue;
			if (pick < 0 || hrw[i] > hrw[pick])
				pick = (long)i;
		}
		if (pick < 0)
			for (size_t i = 0; i < v->n; i++)
				if (pick < 0 || hrw[i] > hrw[pick])
					pick = (long)i;
		if (!pr[pick]) {
			out->reason = POLICY_HOME;
			goto done;
		}
	}
	/* spill: the least loaded candidate not under pressure */
	pick = least_loaded(v, notpr, hrw);
	out->reason = POLICY_SPILL;
	if (pick >= 0)
		goto done;
	/* 4. everything under pressure: Dynamo's cost, so hits still count */
	for (size_t i = 0; i < v->n; i++) {
		double cost = overload_cost(v, &v->c[i]);

		if (pick < 0 || cost < overload_cost(v, &v->c[pick]) ||
		    (cost == overload_cost(v, &v->c[pick]) && hrw[i] > hrw[pick]))
			pick = (long)i;
	}
done:
	out->cand = (size_t)pick;
cleanup:
	if (hrw != hrw_s)
		free(hrw);
	if (pr != pr_s)
		free(pr);
	if (notpr != nok_s)
		free(notpr);
	return rc;
}

const struct policy_ops policy_kv = {
    .name = "kv",
    .source = POLICY_SRC_EVENTS,
    .needs = POLICY_NEEDS_ACTIVE,
    .create = policy_kv_create,
    .destroy = policy_kv_destroy,
    .pick = policy_kv_pick,
};
