// SPDX-License-Identifier: Apache-2.0
/* kvbench's Dynamo cost policy (tools/kvbench/dynamo.c, compiled in) on small exact cases:
 * cost = prefill_load_scale * max(0, blocks - overlap_credit * overlap) + decode_blocks. */
#include <stdlib.h>
#include <string.h>

#include "../../tools/kvbench/dynamo.c"
#include "tap.h"

static void fill(uint32_t *t, size_t n, uint32_t base)
{
	for (size_t i = 0; i < n; i++)
		t[i] = base + (uint32_t)i;
}

int main(void)
{
	struct dynamo_opts o = {.workers = 3, .block_size = 16, .prefill_load_scale = 1.0,
				.overlap_credit = 1.0, .ttl_s = 120, .seed = 1};
	struct dynamo *d = dynamo_new(&o);
	uint32_t a[160], b[160], ov[3];
	uint64_t h1, h2, h3, h4;
	int w1, w2, w3, w4;

	fill(a, 160, 1000); /* 10 blocks */
	fill(b, 160, 9000);
	w1 = dynamo_route(d, a, 160, 0.0, NULL, &h1);
	CHECK(w1 >= 0 && w1 < 3, "first request goes somewhere (tie broken at random)");
	dynamo_done(d, h1);
	w2 = dynamo_route(d, a, 160, 1.0, NULL, &h2);
	CHECK_EQ(w2, w1, "same prefix again: the approximate index's overlap wins (cost 0+10 vs 20)");
	/* While A is in flight on w1, another A: w1 costs 0 + 10 (shared blocks counted once),
	 * others 10 + 10. */
	w3 = dynamo_route(d, a, 160, 2.0, NULL, &h3);
	CHECK_EQ(w3, w1, "in-flight blocks of the same prefix are counted once");
	/* B on w1 would cost 10 + 20 (A's blocks in flight + B's); elsewhere 10 + 10. */
	w4 = dynamo_route(d, b, 160, 3.0, NULL, &h4);
	CHECK(w4 != w1, "a new prefix avoids the loaded worker");
	dynamo_done(d, h2);
	dynamo_done(d, h3);
	dynamo_done(d, h4);
	/* Past the TTL the approximate index forgets. */
	uint64_t h5;
	int seen[3] = {0};
	for (int i = 0; i < 30; i++) {
		int w = dynamo_route(d, a, 160, 1000.0 + 200.0 * i, NULL, &h5);

		dynamo_done(d, h5);
		if (w >= 0)
			seen[w] = 1;
	}
	CHECK(seen[0] + seen[1] + seen[2] >= 2, "after the TTL the overlap is gone: ties spread");
	/* With overlap from events, it is what counts. */
	ov[0] = 0;
	ov[1] = 0;
	ov[2] = 10;
	CHECK_EQ(dynamo_route(d, b, 160, 5000.0, ov, &h5), 2, "event overlap: the worker holding it");
	dynamo_done(d, h5);
	ov[2] = 3;
	ov[0] = 4;
	CHECK_EQ(dynamo_route(d, b, 160, 5001.0, ov, &h5), 0, "the longest event overlap wins");
	dynamo_done(d, h5);
	dynamo_free(d);
	return tap_done();
}
