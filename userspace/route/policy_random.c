// SPDX-License-Identifier: Apache-2.0
/* policy random: a candidate drawn uniformly per request (kube-proxy's choice, but per request
 * rather than per connection). The draw comes from the view's random value. */
#include "route/policy.h"

static int random_pick(void *state, struct policy_view *v, struct policy_choice *out)
{
	for (size_t i = 0; i < v->n; i++)
		v->c[i].score = 0;
	/* the high bits of a 64-bit value: unbiased enough for n far below 2^32 */
	out->cand = (size_t)(((v->rnd >> 32) * (uint64_t)v->n) >> 32);
	out->reason = POLICY_RANDOM;
	return 0;
}

const struct policy_ops policy_random = {
    .name = "random",
    .source = POLICY_SRC_NONE,
    .pick = random_pick,
};
