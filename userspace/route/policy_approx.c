// SPDX-License-Identifier: Apache-2.0
/* policy approx: kv's placement (policy_kv.c) over the approximate view (approx.h): for clusters
 * where the workers' KV event ports cannot be reached. Each routed request's blocks are assumed
 * cached on the worker it went to for a TTL, as Dynamo's approximate mode assumes; keys, homes,
 * pressure and spills are kv's. */
#include "route/policy.h"

const struct policy_ops policy_approx = {
    .name = "approx",
    .source = POLICY_SRC_APPROX,
    .needs = POLICY_NEEDS_ACTIVE,
    .create = policy_kv_new,
    .destroy = policy_kv_free,
    .pick = policy_kv_pick,
};
