// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: arbitrary bytes as a KV event batch payload. Decodes with events_decode and
// applies every decoded event to a small index (so BlockStored/Removed/Cleared paths, parent
// resolution and the memory bound see fuzzed input too). Must never crash, leak or read out of
// bounds; the index must stay consistent (entries never above the bound). Differential too: the
// cursor decoder (events_decode) must give exactly what msgpack-c's (events_decode_msgpackc)
// gives: same return value, counters, timestamp and events. Only the decoder (events_decode.h)
// is involved: no sockets.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "kv/events_decode.h"
#include "events_trace.h"
#include "kv/index.h"

static struct index *idx;
static struct events_decoder *dec;

static int apply(void *arg, const struct events_event *ev)
{
	(void)arg;
	events_apply_event(idx, ev->n_hashes % 4, ev);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct index_stats st;

	if (!idx) {
		struct index_cfg cfg;
		index_cfg_default(&cfg);
		cfg.max_workers = 4;
		cfg.max_entries = 64;
		index_new(&cfg, &idx);
		events_decoder_new(&dec);
		if (!idx || !dec)
			abort();
	}
	index_write_lock(idx);
	(void)events_decode(dec, data, size, apply, NULL, NULL, NULL);
	index_write_unlock(idx);
	index_stats(idx, &st);
	if (st.entries > 64)
		abort();
	{
		struct trace a = {0}, b = {0};
		struct events_decode_counts ca = {0}, cb = {0};
		double ta = -1, tb = -1;
		int ra = events_decode(dec, data, size, trace_event, &a, &ca, &ta);
		int rb = events_decode_msgpackc(dec, data, size, trace_event, &b, &cb, &tb);
		if (ra != rb || a.n != b.n || a.digest != b.digest ||
		    memcmp(&ca, &cb, sizeof(ca)) || (ra >= 0 && memcmp(&ta, &tb, sizeof(ta))))
			abort(); /* the two decoders disagree */
	}
	return 0;
}
