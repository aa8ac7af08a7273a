/* SPDX-License-Identifier: Apache-2.0 */
/* openai: reads an OpenAI API request body the way vLLM's frontend does, to the prompt token ids
 * the engine will see: /v1/completions takes "prompt" as a string (tokenized with
 * add_special_tokens=true, which for Qwen3 gives the same ids as false) or as an array of token
 * ids (used as is); /v1/chat/completions renders "messages" with the chat template (chat.h) and
 * tokenizes the result. Also reads model, stream, stream_options.include_usage, max_tokens (or
 * max_completion_tokens), cache_salt. What vLLM would accept but this module cannot reproduce
 * exactly is OPENAI_UNSUPPORTED (batched prompts, embeddings, ...); what vLLM refuses with a 400
 * is OPENAI_INVALID; both come with a static reason. Stateless; thread-safe. */
#ifndef KVS_OPENAI_H
#define KVS_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

enum openai_endpoint {
	OPENAI_NONE = 0,     /* not an endpoint this module reads */
	OPENAI_COMPLETIONS,  /* POST /v1/completions */
	OPENAI_CHAT,	     /* POST /v1/chat/completions */
};

enum openai_status {
	OPENAI_OK = 0,
	OPENAI_UNSUPPORTED = 1,
	OPENAI_INVALID = 2,
};

struct openai_req {
	enum openai_endpoint endpoint;
	char *model;		/* malloc'ed; NULL when absent */
	bool stream;
	bool include_usage;	/* stream_options.include_usage */
	int64_t max_tokens;	/* -1 when absent (vLLM then uses max_model_len - prompt) */
	int64_t seed;		/* "seed", or -1 */
	char *cache_salt;	/* malloc'ed; NULL when absent */
	struct tok_ids prompt;	/* the engine's prompt token ids */
	bool prompt_was_ids;	/* the prompt came as token ids */
};

/* The endpoint a request line names (path without query; method must be POST). */
enum openai_endpoint openai_endpoint_of(const char *method, size_t mlen, const char *path,
					size_t plen);

/* Parses body[0..len) for endpoint ep, tokenizing with t (vocab_size bounds token ids given as
 * ids). Fills *r (zero it first; free with openai_req_free even on failure). Returns an
 * openai_status, or -ENOMEM; *why is set for UNSUPPORTED and INVALID. */
int openai_parse(const struct tokenizer *t, enum openai_endpoint ep, const char *body, size_t len,
		 struct openai_req *r, const char **why);

void openai_req_free(struct openai_req *r);

#endif
