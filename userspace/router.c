// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"

/* Round-robin position per Service, by name, so that it survives a reload of the Services. */
struct rr_slot {
	char name[DISCOVERY_NAME_MAX];
	uint64_t next;
};

struct router {
	const char *policy;
	struct rr_slot *slots;
	size_t nslots;
};

int router_new(const char *policy, struct router **out)
{
	struct router *r;

	if (strcmp(policy, "round-robin") != 0)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->policy = "round-robin";
	*out = r;
	return 0;
}

void router_free(struct router *r)
{
	if (!r)
		return;
	free(r->slots);
	free(r);
}

const char *router_policy(const struct router *r)
{
	return r->policy;
}

static struct rr_slot *rr_slot(struct router *r, const char *name)
{
	struct rr_slot *p;

	for (size_t i = 0; i < r->nslots; i++)
		if (strcmp(r->slots[i].name, name) == 0)
			return &r->slots[i];
	p = realloc(r->slots, (r->nslots + 1) * sizeof(*p));
	if (!p)
		return NULL;
	r->slots = p;
	p = &r->slots[r->nslots++];
	memset(p, 0, sizeof(*p));
	strcpy(p->name, name);
	return p;
}

int router_pick(struct router *r, const struct service *svc, const struct router_request *req)
{
	struct rr_slot *slot;
	uint64_t start;

	if (!svc || svc->nendpoints == 0)
		return -ENOENT;
	slot = rr_slot(r, svc->name);
	start = slot ? slot->next++ : 0;
	for (size_t k = 0; k < svc->nendpoints; k++) {
		size_t i = (size_t)((start + k) % svc->nendpoints);

		if (!(req->tried & (1ULL << (i % 64))))
			return (int)i;
	}
	return -ENOENT;
}
