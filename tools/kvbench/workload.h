/* SPDX-License-Identifier: Apache-2.0 */
/* workload: the seeds' request set (docs/benchmarks.md, the seeds' workload), reproducible from a
 * seed. Each prefix type and
 * each request's unique suffix is a run of words that are each exactly one token of the model's
 * tokenizer (" word" pieces are split apart by the pre-tokenizer, so their ids simply concatenate):
 * the prompt of request k has exactly prefix_tokens + suffix_tokens tokens, checked with the
 * tokenizer. Prefix choice: uniform or Zipf(s) over P types. */
#ifndef KVS_WORKLOAD_H
#define KVS_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "prompt/tokenizer.h"

struct wl_opts {
	uint32_t prefix_types;
	uint32_t prefix_tokens; /* 2032 */
	uint32_t suffix_tokens; /* 339 */
	uint32_t mixed_pct;	/* 0: fixed lengths; else prefix and suffix vary by +-pct % */
	double zipf_s;		/* 0: uniform */
	uint64_t seed;		/* request order, suffixes */
	uint64_t prefix_seed;	/* the prefix texts (prefix_seed_set), else seed */
	bool prefix_seed_set;
	size_t requests; /* measured requests */
};

struct wl_req {
	uint32_t prefix; /* prefix type, or the warm-up's type */
	char *text;	 /* the prompt */
	size_t text_len;
	struct tok_ids ids; /* its tokens (for the dynamo policy and checks) */
};

struct workload {
	struct wl_opts o;
	struct wl_req *warm; /* one per prefix type */
	struct wl_req *reqs; /* o.requests, in order */
};

/* Builds the warm-up and measured requests. Returns 0, or -EINVAL with a message in err when the
 * tokenizer does not give the exact token counts, -ENOMEM. */
int wl_build(struct workload *w, const struct wl_opts *o, const struct tokenizer *t, char *err,
	     size_t errlen);
void wl_free(struct workload *w);

/* The one-token words of tokenizer t, for other generated texts (the conversations' chat
 * messages): wl_words_add appends n of them (" word" each), chosen by seed. -EINVAL when the
 * tokenizer has too few such words. */
struct wl_words;
int wl_words_new(const struct tokenizer *t, struct wl_words **out);
void wl_words_free(struct wl_words *w);
int wl_words_add(const struct wl_words *w, uint64_t seed, uint32_t n, struct buf *out);

#endif
