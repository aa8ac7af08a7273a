// SPDX-License-Identifier: Apache-2.0
/* policy round-robin: endpoints in turn, per request and per Service; the position is kept by
 * Service name, so it survives a reload of the Services. Tried endpoints are skipped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/discovery.h"
#include "route/policy.h"

struct rr_slot {
	char name[DISCOVERY_NAME_MAX];
	uint64_t next;
};

struct rr {
	struct rr_slot *slots;
	size_t n;
};

static int rr_create(const struct policy_kv_opts *kv, void **state)
{
	*state = calloc(1, sizeof(struct rr));
	return *state ? 0 : -ENOMEM;
}

static void rr_destroy(void *state)
{
	struct rr *r = state;

	if (r)
		free(r->slots);
	free(r);
}

/* The position of Service name (created at 0), or NULL on ENOMEM. */
static struct rr_slot *rr_slot(struct rr *r, const char *name)
{
	struct rr_slot *p;

	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->slots[i].name, name) == 0)
			return &r->slots[i];
	p = realloc(r->slots, (r->n + 1) * sizeof(*p));
	if (!p)
		return NULL;
	r->slots = p;
	p = &r->slots[r->n++];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	return p;
}

/* The candidate whose endpoint comes first at or after the position (cyclically). */
static int rr_pick(void *state, struct policy_view *v, struct policy_choice *out)
{
	struct rr_slot *slot = rr_slot(state, v->service ? v->service : "");
	size_t n = v->nendpoints ? v->nendpoints : 1, start, best = 0, bestd = SIZE_MAX;

	start = slot ? (size_t)(slot->next++ % n) : 0;
	for (size_t i = 0; i < v->n; i++) {
		size_t d = (v->c[i].ep + n - start) % n;

		v->c[i].score = (double)d;
		if (d < bestd) {
			bestd = d;
			best = i;
		}
	}
	out->cand = best;
	out->reason = POLICY_ROUND_ROBIN;
	return 0;
}

const struct policy_ops policy_rr = {
    .name = "round-robin",
    .source = POLICY_SRC_NONE,
    .create = rr_create,
    .destroy = rr_destroy,
    .pick = rr_pick,
};
