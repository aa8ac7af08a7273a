// SPDX-License-Identifier: Apache-2.0
/* policy dynamo: NVIDIA Dynamo's default KV router cost (as below), the side-by-side baseline.
 * Cost of worker w, lowest wins, ties broken at random (temperature 0):
 *   prefill_load_scale * max(0, request_blocks - overlap_credit * overlap_blocks(w))
 *     + decode_blocks(w)
 * with prefill_load_scale = overlap_credit = 1 (Dynamo's defaults), overlap_blocks(w) the depth
 * from the view (the event-fed index: Dynamo's KV routing; the approximate view when events are
 * off: its approximate mode), and decode_blocks(w) = the distinct blocks of the requests this
 * router has in flight on w plus the new request's blocks not among them (active + fresh).
 * kvbench's client-side `--spread dynamo` runs this same code through the router. */
#include <math.h>

#include "core/mix.h"
#include "route/policy.h"

#ifndef DYNAMO_PREFILL_LOAD_SCALE
#define DYNAMO_PREFILL_LOAD_SCALE 1.0
#endif
#ifndef DYNAMO_OVERLAP_CREDIT
#define DYNAMO_OVERLAP_CREDIT 1.0
#endif

static int dynamo_pick(void *state, struct policy_view *v, struct policy_choice *out)
{
	uint64_t rs = v->rnd;
	size_t best = 0, nbest = 0;

	for (size_t i = 0; i < v->n; i++) {
		struct policy_cand *c = &v->c[i];
		double prefill = fmax(0.0, (double)v->nblocks - DYNAMO_OVERLAP_CREDIT * c->depth);

		c->score =
		    DYNAMO_PREFILL_LOAD_SCALE * prefill + (double)c->active + (double)c->fresh;
		if (nbest == 0 || c->score < v->c[best].score) {
			best = i;
			nbest = 1;
		} else if (c->score == v->c[best].score && mix_next(&rs) % ++nbest == 0) {
			best = i; /* reservoir choice among ties */
		}
	}
	out->cand = best;
	out->reason = POLICY_COST;
	return 0;
}

const struct policy_ops policy_dynamo = {
    .name = "dynamo",
    .source = POLICY_SRC_EVENTS,
    .needs = POLICY_NEEDS_ACTIVE,
    .pick = dynamo_pick,
};
