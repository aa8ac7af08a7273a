/* SPDX-License-Identifier: Apache-2.0 */
/* events_trace.h: everything a decoded KV event carries, folded into one digest (XXH3 over the
 * fields in order), so a test or a fuzz target can compare two decoders event by event. Pass
 * trace_event as the events_decode callback with a struct trace as its argument. */
#ifndef KVS_EVENTS_TRACE_H
#define KVS_EVENTS_TRACE_H

#include <stdint.h>

#include <xxhash.h>

#include "kv/events_decode.h"

struct trace {
	uint64_t digest;
	int n;
};

static inline void events_trace_mix(struct trace *t, const void *p, size_t n)
{
	uint64_t v[2] = {t->digest, XXH3_64bits(p, n)};

	t->digest = XXH3_64bits(v, sizeof(v));
}

static inline int trace_event(void *arg, const struct events_event *e)
{
	struct trace *t = arg;
	int64_t f[] = {e->type,
		       (int64_t)e->n_hashes,
		       e->has_parent,
		       (int64_t)e->parent,
		       (int64_t)e->n_tokens,
		       e->block_size,
		       e->tier,
		       e->has_lora_id,
		       e->lora_id,
		       e->has_group,
		       e->group_idx,
		       e->other_kind,
		       (int64_t)e->lora_len,
		       e->lora_name != NULL,
		       e->extra != NULL};

	events_trace_mix(t, f, sizeof(f));
	events_trace_mix(t, e->hashes, e->n_hashes * sizeof(*e->hashes));
	events_trace_mix(t, e->tokens, e->n_tokens * sizeof(*e->tokens));
	if (e->lora_name)
		events_trace_mix(t, e->lora_name, e->lora_len);
	for (size_t i = 0; e->extra && i < e->n_hashes; i++) {
		events_trace_mix(t, &e->extra_len[i], sizeof(e->extra_len[i]));
		if (e->extra[i])
			events_trace_mix(t, e->extra[i], e->extra_len[i]);
	}
	t->n++;
	return 0;
}

#endif
