// SPDX-License-Identifier: Apache-2.0
/* policy: the registry of routing policies and the helpers they share (see policy.h). */
#include <string.h>

#include "core/mix.h"
#include "discovery/discovery.h"
#include "route/policy.h"

static const struct policy_ops *const all[] = {
    &policy_kv, &policy_dynamo, &policy_rr, &policy_random, &policy_approx,
};

static const char *const reason_names[POLICY_REASON_MAX] = {
#define X(e, s) [POLICY_##e] = s,
    POLICY_REASONS(X)
#undef X
};

const char *policy_reason_name(enum policy_reason r)
{
	return (unsigned)r < POLICY_REASON_MAX ? reason_names[r] : "unknown";
}

_Static_assert(sizeof(all) / sizeof(all[0]) == POLICY_COUNT, "POLICY_COUNT is the registry's size");

const struct policy_ops *policy_at(size_t i)
{
	return i < POLICY_COUNT ? all[i] : NULL;
}

const struct policy_ops *policy_find(const char *name)
{
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}

const char *policy_names(void)
{
	return "kv, dynamo, round-robin, random, approx";
}

static bool policy_known(const char *name)
{
	return policy_find(name) != NULL;
}

const struct discovery_routes policy_routes = {.known = policy_known, .names = policy_names};

void policy_kv_defaults(struct policy_kv_opts *o)
{
	o->spill_factor = 2.0;
	o->spill_slack = 4.0;
	o->key_slack = 0.0;
	o->balance_slack = 0.0;
	o->replica_gap = 4.0;
	o->replica_room = 0.35;
	o->replica_all = 0.6;
	o->spill_gap = 2.0;
	o->spill_gap_remote = 2.0;
	o->backlog = 0.25;
}

uint64_t policy_hrw(uint64_t key, uint64_t id)
{
	return mix64(key ^ mix64(id + MIX_GOLDEN));
}
