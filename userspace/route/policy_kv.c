// SPDX-License-Identifier: Apache-2.0
/* policy kv: capacity-aware prefix placement (docs/design.md, "The kv policy"; measured:
 * docs/benchmarks.md, routing).
 *
 * Why not Dynamo's cost: it trades overlap against load request by request, so a busy prefix's
 * requests land on its owner's neighbours, which then cache it too and evict other prefixes: at 24
 * prefix types on 6 workers every prefix ends up on ~5 workers and the caches hold a quarter of
 * what they could. Here each prefix (the request's key, see policy.h) has one home, the workers
 * share the prefixes by their capacity, and a prefix gets more workers only where that is cheap
 * (the new worker's cache has room for it) or where its holders are under real pressure. A new
 * prefix's home is a pure function of what every kvsplice instance sees alike — the event-fed
 * index, the endpoints, the key's hash — so instances on different nodes place it on the same
 * worker without talking to each other; load only decides among holders and when to spread.
 *
 * Terms, per candidate: load = requests in flight there (this router's and others', policy.h);
 * avg = the mean load over the candidates; balanced = load <= avg + balance_slack. Hard
 * pressure: others' requests queue there (its metrics' queue beyond this router's own requests:
 * those are its backlog, below), or load + 1 > max(spill_factor x avg, avg + spill_slack).
 * Soft pressure: its free KV blocks (estimated) cannot take this request's new blocks, so it
 * would queue it for a moment. Free blocks and the queue come first: the in-flight count alone
 * spills too early and raises TTFT. Backlog: the blocks it would compute
 * before this request's first token (the prefill still owed to this router's requests there, plus
 * this request's blocks it does not hold) exceed the least over the candidates no busier than it by
 * more than backlog x the request's blocks, and so does the backlog alone (a miss is not a queue);
 * a backlogged worker counts as pressed like soft pressure, but is never waived in 1 (its queue is
 * what makes the tail of the first-token time). Room: its cache could hold one more prefix of this
 * size, (keys + 1) x blocks <= capacity.
 *
 * The pick, for a request whose key is k:
 *  1. k is held (some candidate's depth passes key_pos). Holders whose depth is within 1/16 of
 *     the deepest are "near" (so one copy stays hot rather than the deepest by a block winning).
 *     A holder under soft pressure only counts as pressed when some cache has room for the
 *     prefix or some worker is spill_gap requests lighter: elsewhere a spill is a miss that also
 *     evicts another prefix, and a short wait for blocks is the better deal. The gap grows by
 *     spill_gap_remote x the share of the load this router knows only from the workers'
 *     metrics: one of several instances (a node among nodes) sees the others' requests and
 *     blocks a scrape late, so its "short of blocks" and "lighter" are weaker evidence, and a
 *     spill one well-informed router would not make costs a miss and an eviction (measured:
 *     docs/journal/nodes.md). Alone, that share is ~0 and the gap is spill_gap.
 *     a. the first near holder in rendezvous order that is balanced and not pressed -> HOME when
 *        it is the first near holder, else REPLICA (a replica is used only while the home is
 *        busy, so it ages out of the LRU when the prefix cools);
 *     b. else, when the key is in demand (this router's requests in flight compute it on some
 *        worker), a new replica where it is cheap: the least loaded candidate with room, not
 *        pressed, replica_gap requests below the least loaded holder -> SPILL (a hot prefix
 *        gets as many workers as its traffic needs, one gap at a time). A key with nothing in
 *        flight gains nothing from a copy, which costs a miss of all it holds: a
 *        conversation's next turn, whose context is its own, stays with its holder (c) (the
 *        sessions workload: 91 -> 99 % of the ideal, docs/benchmarks.md). An idle worker (no
 *        request from anyone) needs a gap of only 1 while the cluster's caches are mostly empty
 *        of prefixes (all candidates' keys, one more, times this request's blocks, within
 *        replica_room of their summed capacity: few prefix types on many workers): a copy then
 *        costs one miss and evicts nothing, and without it a worker no prefix lives on sits
 *        idle while the holders queue (the seeds' Dynamo lost throughput at P=2 that way);
 *        Rich caches (every candidate could hold every prefix the cluster holds at the key's
 *        position, this request's size each, within replica_all of its cache: few prefix types)
 *        change a and b: b (for a key in demand) comes first and takes any worker 1 request
 *        below the holders, and a
 *        takes the least loaded balanced near holder; a copy then costs one miss and evicts
 *        nothing, and the cluster ends with every worker holding every prefix, as round-robin
 *        does, and balanced like it (P=2 on 6 workers: docs/journal/routing.md);
 *     c. else the least loaded holder not pressed (near ones first) -> HOME / REPLICA;
 *     d. else (every holder pressed) the least loaded candidate not pressed -> SPILL.
 *  2. k is new: its home is the first candidate in rendezvous order (highest policy_hrw(k, id))
 *     that holds fewer keys (blocks at key_pos, from the index) than its capacity-weighted
 *     share ceil((K + 1) x cap / total cap + key_slack), K = the keys of all candidates; none
 *     with room: the first in rendezvous order -> HOME; home pressed -> 1d. Load does not enter:
 *     the home of a new prefix depends on the index, the endpoints and the key alone, so
 *     instances on different nodes choosing at the same moment choose alike.
 *  3. Everything pressed: Dynamo's cost (prefill blocks + active + new blocks), so that an
 *     overloaded cluster still gains from hits -> SPILL.
 *  4. A request with no full block has nothing to place, and one whose first blocks every
 *     candidate holds, with a new tail under a quarter of it, changes little for the caches
 *     wherever it goes -> BALANCE: the least loaded not pressed.
 * A candidate holds what the index says it caches or what this router's requests in flight
 * there compute (policy_held()). Ties in load are broken by the time this router's requests there
 * have been decoding (more: less work left), then by the key's rendezvous order, so concurrent
 * deciders spread. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "route/policy.h"

struct kv {
	struct policy_kv_opts o;
};

int policy_kv_new(const struct policy_kv_opts *o, void **state)
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

void policy_kv_free(void *state)
{
	free(state);
}

/* Is candidate c under hard pressure (a queue, or too many requests), given the average load avg
 * over the candidates? */
static bool pressured_hard(const struct policy_kv_opts *o, const struct policy_cand *c, double avg)
{
	double limit = fmax(avg * o->spill_factor, avg + o->spill_slack);

	return c->waiting > 0.5 || policy_load(c) + 1 > limit;
}

/* Would c queue this request for want of free KV blocks (soft pressure)? */
static bool pressured_soft(const struct policy_cand *c)
{
	return c->free_blocks >= 0 && c->free_blocks < (double)c->fresh;
}

/* Blocks c would compute before this request's first token: the prefill backlog of this router's
 * requests there that have not answered yet, plus this request's own blocks it does not hold. */
static double first_token_work(const struct policy_view *v, const struct policy_cand *c)
{
	return (double)c->prefill +
	       (double)(v->nblocks - (policy_held(c) < v->nblocks ? policy_held(c) : v->nblocks));
}

/* The least first-token work among the candidates no more loaded than candidate i: a backlog
 * counts only against a worker the request could go to without crowding it (in a burst, every
 * worker that computes a new copy has a backlog, and the one warm holder without one would take
 * them all: docs/journal/routing.md, crowding at the start). */
static double lighter_work(const struct policy_view *v, size_t i)
{
	double best = -1, li = policy_load(&v->c[i]);

	for (size_t k = 0; k < v->n; k++) {
		double w = first_token_work(v, &v->c[k]);

		if (policy_load(&v->c[k]) <= li && (best < 0 || w < best))
			best = w;
	}
	return best;
}

/* Has c's cache room for one more prefix of this request's size? */
static bool has_room(const struct policy_view *v, const struct policy_cand *c)
{
	return c->capacity > 0 && ((double)c->keys + 1) * v->nblocks <= c->capacity;
}

/* Are the caches rich: could every candidate hold every prefix the cluster holds at the key's
 * position (v->prefixes, this request's size each) within replica_all of its cache? Then a copy
 * costs one miss and never evicts another prefix, and the end state is every worker holding
 * every prefix, as round-robin reaches: kv spreads like a balancer, a new replica at a gap of 1
 * and the least loaded balanced holder, keeping only the misses round-robin makes on the way. */
static bool rich_caches(const struct policy_kv_opts *o, const struct policy_view *v)
{
	if (o->replica_all <= 0 || !v->prefixes)
		return false;
	for (size_t i = 0; i < v->n; i++)
		if (v->c[i].capacity <= 0 ||
		    (double)v->prefixes * v->nblocks > o->replica_all * v->c[i].capacity)
			return false;
	return true;
}

/* Are the caches mostly free of prefixes: every candidate's keys, plus one, of this request's
 * size within replica_room of the candidates' summed capacity (all capacities known)? */
static bool roomy(const struct policy_kv_opts *o, const struct policy_view *v)
{
	double keys = 1, cap = 0;

	if (o->replica_room <= 0)
		return false;
	for (size_t i = 0; i < v->n; i++) {
		if (v->c[i].capacity <= 0)
			return false;
		keys += v->c[i].keys;
		cap += v->c[i].capacity;
	}
	return keys * v->nblocks <= o->replica_room * cap;
}

/* Does candidate a come before b among equally loaded ones? The one whose requests have been
 * decoding longer (they end sooner, and so it has less work left), then by rendezvous score hrw
 * (higher first). Spreading a closed loop's requests by what is left on each worker keeps every
 * worker's requests at different stages, where a fixed order piles fresh requests on the same
 * few (docs/journal/routing.md, P=2 at C=16). */
static bool before(const struct policy_view *v, const uint64_t *hrw, size_t a, size_t b)
{
	if (v->c[a].decode_ms != v->c[b].decode_ms)
		return v->c[a].decode_ms > v->c[b].decode_ms;
	return hrw[a] > hrw[b];
}

/* Is candidate a less loaded than b, or as loaded and before() it? */
static bool lighter_of(const struct policy_view *v, const uint64_t *hrw, size_t a, size_t b)
{
	double la = policy_load(&v->c[a]), lb = policy_load(&v->c[b]);

	return la < lb || (la == lb && before(v, hrw, a, b));
}

/* Index of the least loaded candidate among those with ok[i] (all when ok is NULL); ties by
 * before(). -1 when none. */
static long least_loaded(const struct policy_view *v, const bool *ok, const uint64_t *hrw)
{
	long best = -1;

	for (size_t i = 0; i < v->n; i++) {
		if (ok && !ok[i])
			continue;
		if (best < 0 || lighter_of(v, hrw, i, (size_t)best))
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

/* Scratch arrays of one pick: on the stack for up to 64 candidates. */
struct pick_tmp {
	uint64_t *hrw;
	bool *ok;
	bool *pr;   /* under pressure, hard or soft */
	bool *hard; /* under hard pressure */
	bool *back; /* its prefill backlog would delay the first token (never waived) */
	uint64_t hrw_s[64];
	bool ok_s[64], pr_s[64], hard_s[64], back_s[64];
};

static int tmp_init(struct pick_tmp *t, size_t n)
{
	if (n <= 64) {
		t->hrw = t->hrw_s;
		t->ok = t->ok_s;
		t->pr = t->pr_s;
		t->hard = t->hard_s;
		t->back = t->back_s;
		return 0;
	}
	t->hrw = malloc(n * sizeof(*t->hrw));
	t->ok = malloc(n * sizeof(*t->ok));
	t->pr = malloc(n * sizeof(*t->pr));
	t->hard = malloc(n * sizeof(*t->hard));
	t->back = malloc(n * sizeof(*t->back));
	return t->hrw && t->ok && t->pr && t->hard && t->back ? 0 : -ENOMEM;
}

static void tmp_free(struct pick_tmp *t)
{
	if (t->hrw != t->hrw_s) {
		free(t->hrw);
		free(t->ok);
		free(t->pr);
		free(t->hard);
		free(t->back);
	}
}

/* The least loaded holder of the key not under pressure (-1: none). */
static double min_holder_load(const struct policy_view *v, const struct pick_tmp *t)
{
	double min_hold = -1;

	for (size_t i = 0; i < v->n; i++)
		if (policy_held(&v->c[i]) > v->key_pos && !t->pr[i] &&
		    (min_hold < 0 || policy_load(&v->c[i]) < min_hold))
			min_hold = policy_load(&v->c[i]);
	return min_hold;
}

/* 1b. A new replica where it is cheap: the least loaded candidate with room, not pressed, rgap
 * requests below the least loaded holder min_hold (replica_gap for a busy candidate when the
 * caches are not rich). -1 when none. */
static long new_replica(const struct policy_kv_opts *o, const struct policy_view *v,
			struct pick_tmp *t, bool rich, double min_hold)
{
	double rgap = rich || roomy(o, v) ? fmin(o->replica_gap, 1) : o->replica_gap;

	if (min_hold < 0)
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		const struct policy_cand *c = &v->c[i];
		/* idle, or any worker while the caches are rich: rgap */
		double need = rich || policy_load(c) < 0.5 ? rgap : o->replica_gap;

		t->ok[i] = policy_held(c) <= v->key_pos && !t->pr[i] && has_room(v, c) &&
			   policy_load(c) + need <= min_hold;
	}
	return least_loaded(v, t->ok, t->hrw);
}

/* 1. k is held: best_depth > 0 is the deepest holder's depth. Returns the pick or -1. */
static long pick_policy_held(const struct policy_kv_opts *o, const struct policy_view *v,
			     struct pick_tmp *t, double avg, uint32_t best_depth,
			     enum policy_reason *why)
{
	uint32_t tol = best_depth / 16 ? best_depth / 16 : 1;
	long first = -1, pick = -1;
	double min_hold, sum = 0, remote = 0, gap;
	bool rich = rich_caches(o, v);
	bool cheap = false, hot = false;

	/* A holder short of free blocks would queue the request for a moment, then hit. Sending it
	 * elsewhere is a miss, and where no cache has room for the prefix it also evicts another
	 * prefix there: that is worth it only when some worker is clearly less loaded than the
	 * holder (its queue would be short there); when all are about as busy (a cluster whose
	 * caches are all full and all working, where every eviction costs a hit), waiting wins. */
	for (size_t i = 0; i < v->n && !cheap; i++)
		cheap = policy_held(&v->c[i]) <= v->key_pos && !t->pr[i] && has_room(v, &v->c[i]);
	for (size_t i = 0; i < v->n; i++) {
		sum += policy_load(&v->c[i]);
		remote += v->c[i].remote > 0 ? v->c[i].remote : 0;
	}
	gap = o->spill_gap + (sum > 0 ? o->spill_gap_remote * remote / sum : 0);
	for (size_t i = 0; i < v->n; i++) {
		bool lighter = false;

		if (policy_held(&v->c[i]) <= v->key_pos || cheap || t->hard[i])
			continue;
		for (size_t k = 0; k < v->n && !lighter; k++)
			lighter = policy_held(&v->c[k]) <= v->key_pos && !t->pr[k] &&
				  policy_load(&v->c[k]) + gap <= policy_load(&v->c[i]);
		t->pr[i] = t->back[i] || (lighter && t->pr[i]);
	}
	min_hold = min_holder_load(v, t);
	/* A new replica serves a key in demand: one that this router's requests are computing on
	 * some worker right now. A key with none in flight (a conversation's next turn: its context
	 * is its own, the turn before has finished) gains nothing from a second copy, and the copy
	 * is a miss of all it holds: it goes to a holder (c) unless every holder is pressed. */
	for (size_t i = 0; i < v->n && !hot; i++)
		hot = v->c[i].flight > v->key_pos;
	/* rich caches: a copy evicts nothing and costs one miss, less than a request more on a
	 * worker for a whole decode, so a lighter worker takes one before a balanced holder is
	 * used (otherwise a worker that holds only the other prefixes sits a request or two below
	 * the rest for the whole run: docs/journal/routing.md, P=2 at C=16 through the daemon) */
	if (rich && hot && (pick = new_replica(o, v, t, rich, min_hold)) >= 0) {
		*why = POLICY_SPILL;
		return pick;
	}
	/* a. the first near holder in rendezvous order that is balanced and not under pressure */
	for (size_t i = 0; i < v->n; i++) {
		const struct policy_cand *c = &v->c[i];

		if (policy_held(c) <= v->key_pos || policy_held(c) + tol < best_depth)
			continue;
		if (first < 0 || t->hrw[i] > t->hrw[first])
			first = (long)i;
		if (!t->pr[i] && policy_load(c) <= avg + o->balance_slack &&
		    (pick < 0 ||
		     (rich ? lighter_of(v, t->hrw, i, (size_t)pick) : t->hrw[i] > t->hrw[pick])))
			pick = (long)i;
	}
	if (pick >= 0) {
		*why = pick == first ? POLICY_HOME : POLICY_REPLICA;
		return pick;
	}
	/* b. a new replica where the cache has room for it and the load is clearly lower */
	if (!rich && hot && (pick = new_replica(o, v, t, rich, min_hold)) >= 0) {
		*why = POLICY_SPILL;
		return pick;
	}
	/* c. the least loaded holder not under pressure, near ones first */
	for (int pass = 0; pass < 2 && pick < 0; pass++) {
		for (size_t i = 0; i < v->n; i++)
			t->ok[i] = policy_held(&v->c[i]) > v->key_pos && !t->pr[i] &&
				   (pass || policy_held(&v->c[i]) + tol >= best_depth);
		pick = least_loaded(v, t->ok, t->hrw);
	}
	if (pick >= 0)
		*why = pick == first ? POLICY_HOME : POLICY_REPLICA;
	return pick;
}

/* 2. k is new: its home by rendezvous order among the candidates with room in their share. A pure
 * function of the index, the endpoints and the key: load does not enter, so every kvsplice
 * places a new prefix on the same worker (a home under pressure is handled by the caller). */
static long pick_new(const struct policy_kv_opts *o, const struct policy_view *v,
		     const struct pick_tmp *t)
{
	double keys = 0, cap = 0;
	bool caps = true;
	long pick = -1, any = -1;

	for (size_t i = 0; i < v->n; i++) {
		keys += v->c[i].keys;
		cap += v->c[i].capacity;
		caps &= v->c[i].capacity > 0;
	}
	for (size_t i = 0; i < v->n; i++) {
		double share = (keys + 1) * (caps ? v->c[i].capacity / cap : 1.0 / (double)v->n);

		if ((double)v->c[i].keys < ceil(share + o->key_slack) &&
		    (pick < 0 || t->hrw[i] > t->hrw[pick]))
			pick = (long)i;
		if (any < 0 || t->hrw[i] > t->hrw[any])
			any = (long)i;
	}
	return pick >= 0 ? pick : any;
}

int policy_kv_pick(void *state, struct policy_view *v, struct policy_choice *out)
{
	const struct policy_kv_opts *o = &((struct kv *)state)->o;
	struct pick_tmp t = {0};
	double sum = 0, avg;
	uint32_t best_depth = 0;
	long pick = -1;

	if (tmp_init(&t, v->n) < 0) {
		tmp_free(&t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->n; i++)
		sum += policy_load(&v->c[i]);
	avg = sum / (double)v->n;
	for (size_t i = 0; i < v->n; i++) {
		struct policy_cand *c = &v->c[i];

		/* no block: rendezvous on a random value, so equal loads rotate */
		t.hrw[i] = policy_hrw(v->nblocks ? v->key : v->rnd, c->id);
		t.hard[i] = pressured_hard(o, c, avg);
		t.back[i] =
		    o->backlog > 0 && c->prefill > o->backlog * (double)v->nblocks &&
		    lighter_work(v, i) + o->backlog * (double)v->nblocks < first_token_work(v, c);
		t.pr[i] = t.hard[i] || t.back[i] || pressured_soft(c);
		t.ok[i] = !t.pr[i];
		/* blocks to prefill there; a million more under pressure */
		c->score = (double)(v->nblocks -
				    (policy_held(c) < v->nblocks ? policy_held(c) : v->nblocks)) +
			   (t.pr[i] ? 1e6 : 0);
		if (policy_held(c) > v->key_pos && policy_held(c) > best_depth)
			best_depth = policy_held(c);
	}
	if (!v->nblocks) {
		pick = least_loaded(v, NULL, t.hrw);
		out->reason = POLICY_BALANCE;
		goto done;
	}
	if (v->key_pos && (v->nblocks - v->key_pos) * 4 < v->nblocks) {
		/* every candidate holds most of it (a prefix every worker caches, a short new
		 * tail): where it goes changes little for the caches, so load alone decides */
		for (size_t i = 0; i < v->n; i++)
			t.ok[i] = !t.pr[i];
		pick = least_loaded(v, t.ok, t.hrw);
		out->reason = POLICY_BALANCE;
	} else if (best_depth) {
		pick = pick_policy_held(o, v, &t, avg, best_depth, &out->reason);
	} else {
		pick = pick_new(o, v, &t);
		out->reason = POLICY_HOME;
		if (t.pr[pick])
			pick = -1;
	}
	if (pick >= 0)
		goto done;
	/* 1d: the least loaded candidate not under pressure */
	for (size_t i = 0; i < v->n; i++)
		t.ok[i] = !t.pr[i];
	pick = least_loaded(v, t.ok, t.hrw);
	out->reason = POLICY_SPILL;
	if (pick >= 0)
		goto done;
	/* 3. everything under pressure: Dynamo's cost, so hits still count */
	for (size_t i = 0; i < v->n; i++) {
		double cost = overload_cost(v, &v->c[i]);

		if (pick < 0 || cost < overload_cost(v, &v->c[pick]) ||
		    (cost == overload_cost(v, &v->c[pick]) && t.hrw[i] > t.hrw[pick]))
			pick = (long)i;
	}
done:
	out->cand = (size_t)pick;
	tmp_free(&t);
	return 0;
}

const struct policy_ops policy_kv = {
    .name = "kv",
    .source = POLICY_SRC_EVENTS,
    .needs = POLICY_NEEDS_ACTIVE,
    .create = policy_kv_new,
    .destroy = policy_kv_free,
    .pick = policy_kv_pick,
};
