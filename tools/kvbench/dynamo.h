/* SPDX-License-Identifier: Apache-2.0 */
/* dynamo: NVIDIA Dynamo's KV router cost as a client-side spread policy, for side-by-side tables
 * without running Dynamo (FACTS.md §3). Block hashes: XXH3-64 with seed 1337 over each block's
 * tokens as u32 little-endian, chained. Worker cost (lowest wins, ties at random):
 *   prefill_load_scale * max(0, request_blocks - overlap_credit * overlap_blocks(w)) + decode_blocks(w)
 * where decode_blocks(w) = distinct blocks of the requests this router has in flight on w plus
 * the new request's. Overlap comes from the workers' KV events when the caller passes it (Dynamo's
 * default, "KV routing"), else from an approximate index of what this router routed (each routed
 * request's blocks assumed cached on its worker for ttl seconds: Dynamo's "approximate mode").
 * Single-threaded. */
#ifndef KVS_DYNAMO_H
#define KVS_DYNAMO_H

#include <stddef.h>
#include <stdint.h>

struct dynamo;

struct dynamo_opts {
	uint32_t workers;
	uint32_t block_size;       /* 16 */
	double prefill_load_scale; /* 1.0 */
	double overlap_credit;	   /* 1.0 */
	double ttl_s;		   /* approximate index TTL (120 s) */
	uint64_t seed;		   /* tie-breaking */
};

struct dynamo *dynamo_new(const struct dynamo_opts *o);
void dynamo_free(struct dynamo *d);

/* Picks a worker for a request of tokens[0..n) at time now (seconds), records it in flight there
 * and in the approximate index. overlap[w] (blocks of the request worker w holds, from KV events)
 * or NULL for the approximate index. *handle identifies the request for dynamo_done. Returns the
 * worker index, or -ENOMEM. */
int dynamo_route(struct dynamo *d, const uint32_t *tokens, size_t n, double now,
		 const uint32_t *overlap, uint64_t *handle);
/* The request ended (done or failed): its blocks leave the in-flight load. */
void dynamo_done(struct dynamo *d, uint64_t handle);

#endif
