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

/* Option tables name the leading fields and leave the rest zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define KV(f) offsetof(struct policy_kv_opts, f)
const struct opt policy_kv_options[POLICY_KV_NOPTIONS] = {
    {"kv-spill-factor", OPT_DOUBLE, KV(spill_factor), "X", 1, 1e6,
     "kv: a worker is under pressure past X times the average load ..."},
    {"kv-spill-slack", OPT_DOUBLE, KV(spill_slack), "N", 0, 1e6, "... and N requests above it"},
    {"kv-key-slack", OPT_DOUBLE, KV(key_slack), "N", 0, 1e6,
     "kv: prefixes a worker may hold above its share when a new one is placed"},
    {"kv-balance-slack", OPT_DOUBLE, KV(balance_slack), "N", 0, 1e6,
     "kv: requests above the average a worker may have and still take a prefix it holds "
     "before a replica is used"},
    {"kv-replica-gap", OPT_DOUBLE, KV(replica_gap), "N", 0, 1e6,
     "kv: a worker with room gets a new replica of a busy prefix when N requests below its "
     "holders"},
    {"kv-replica-room", OPT_DOUBLE, KV(replica_room), "F", 0, 1e6,
     "kv: ... or an idle worker 1 below, while all workers' prefixes fill under F of their KV "
     "caches (0: off)"},
    {"kv-replica-all", OPT_DOUBLE, KV(replica_all), "F", 0, 1e6,
     "kv: caches are rich when every prefix the cluster holds fits in F of every worker's KV "
     "cache: any worker 1 below the holders then takes a replica, and the least loaded holder "
     "is taken (0: off)"},
    {"kv-spill-gap", OPT_DOUBLE, KV(spill_gap), "N", 0, 1e6,
     "kv: a holder short of free KV blocks spills a request only to a worker N requests less "
     "loaded"},
    {"kv-spill-gap-remote", OPT_DOUBLE, KV(spill_gap_remote), "N", 0, 1e6,
     "kv: ... plus N times the share of the load it knows only from the workers' metrics "
     "(other nodes')"},
    {"kv-backlog", OPT_DOUBLE, KV(backlog), "X", 0, 1e6,
     "kv: a worker owing more than X times the request's prefill blocks beyond the best place "
     "counts as busy (0: off)"},
};

uint64_t policy_hrw(uint64_t key, uint64_t id)
{
	return mix64(key ^ mix64(id + MIX_GOLDEN));
}
