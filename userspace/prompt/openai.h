/* SPDX-License-Identifier: Apache-2.0 */
/* openai: reads an OpenAI API request body the way vLLM's frontend does, to the prompt token ids
 * the engine will see: /v1/completions takes "prompt" as a string (tokenized with
 * add_special_tokens, true by default as in vLLM: BOS for the models whose post-processor adds
 * one) or as an array of token ids (used as is); /v1/chat/completions renders "messages" with the
 * chat template (chat.h) and tokenizes the result (add_special_tokens false by default: the
 * template writes its own BOS). Also reads model, stream, stream_options.include_usage,
 * max_tokens (or max_completion_tokens), cache_salt, add_special_tokens. Prompt shapes (vLLM
 * accepts all four): a string, a list of strings, a list of token ids, a list of lists of token
 * ids; a batch (a list of several prompts) is read as its FIRST prompt, and nprompts says how many
 * there were. What vLLM would accept but this module cannot reproduce exactly is OPENAI_UNSUPPORTED
 * (embeddings, multimodal chat, ...); what vLLM refuses with a 400 is OPENAI_INVALID; both come
 * with a static reason. Also reads a response body as it streams past (openai_usage_feed).
 * Stateless; thread-safe. */
#ifndef KVS_OPENAI_H
#define KVS_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prompt/tokenizer.h"

enum openai_endpoint {
	OPENAI_NONE = 0,    /* not an endpoint this module reads */
	OPENAI_COMPLETIONS, /* POST /v1/completions */
	OPENAI_CHAT,	    /* POST /v1/chat/completions */
};

enum openai_status {
	OPENAI_OK = 0,
	OPENAI_UNSUPPORTED = 1,
	OPENAI_INVALID = 2,
};

struct openai_req {
	enum openai_endpoint endpoint;
	char *model; /* malloc'ed; NULL when absent */
	bool stream;
	bool include_usage;	 /* stream_options.include_usage */
	int64_t max_tokens;	 /* -1 when absent (vLLM then uses max_model_len - prompt) */
	int64_t seed;		 /* "seed", or -1 */
	char *cache_salt;	 /* malloc'ed; NULL when absent */
	bool add_special_tokens; /* as vLLM reads it: the request's, else true for completions */
	struct tok_ids prompt; /* the engine's prompt token ids (of the first prompt of a batch) */
	bool prompt_was_ids;   /* the prompt came as token ids */
	size_t nprompts;       /* prompts in the request (> 1: a batch; prompt is the first) */
	struct buf text;       /* openai_parse_text: the text prompt, untokenized */
	bool text_pending;     /* ... is there (prompt is then empty) */
};

/* The endpoint a request line names (path without query; method must be POST). */
enum openai_endpoint openai_endpoint_of(const char *method, size_t mlen, const char *path,
					size_t plen);

/* Parses body[0..len) for endpoint ep, tokenizing with t (vocab_size bounds token ids given as
 * ids). Fills *r (zero it first; free with openai_req_free even on failure). Returns an
 * openai_status, or -ENOMEM; *why is set for UNSUPPORTED and INVALID. */
int openai_parse(const struct tokenizer *t, enum openai_endpoint ep, const char *body, size_t len,
		 struct openai_req *r, const char **why);

/* openai_parse tokenizing through tc (tokenizer_encode_cached; NULL: none). */
int openai_parse_cached(const struct tokenizer *t, struct tok_cache *tc, enum openai_endpoint ep,
			const char *body, size_t len, struct openai_req *r, const char **why);

/* openai_parse_cached, but a text prompt (a string, the first of a list of strings, the rendered
 * chat) is not tokenized: its text is left in r->text and r->text_pending set, for the caller to
 * tokenize with t as far as it needs (tokenizer_encode_more). Token-id prompts fill r->prompt as
 * before. Every check that does not need the tokens is made alike. */
int openai_parse_text(const struct tokenizer *t, struct tok_cache *tc, enum openai_endpoint ep,
		      const char *body, size_t len, struct openai_req *r, const char **why);

struct chat_tmpl;

/* The parse of openai_parse_cached (defer false) or openai_parse_text (defer true) rendering a
 * chat request with the model's chat template chat (chat.h; NULL: the Qwen3 renderer, as the
 * functions above do). */
int openai_parse_with(const struct tokenizer *t, const struct chat_tmpl *chat, struct tok_cache *tc,
		      bool defer, enum openai_endpoint ep, const char *body, size_t len,
		      struct openai_req *r, const char **why);

void openai_req_free(struct openai_req *r);

/* Reads "usage" figures from a response body as it streams past, without holding any of it:
 * feed the body bytes (de-chunked; a JSON object or an SSE stream of them) in pieces of any size.
 * It follows JSON strings (escapes included), so text inside a completion that looks like a
 * usage object is never taken for one. A value that is null, negative, not an integer or longer
 * than 18 digits is ignored. Zero-initialise, then call openai_usage_init. */
struct openai_usage {
	int64_t prompt_tokens; /* the last "prompt_tokens": N seen, or -1 */
	int64_t
	    cached_tokens; /* the last "cached_tokens": N seen (in prompt_tokens_details), or -1 */
	/* scanner state (private to openai.c): constant size, no copy of the body */
	uint8_t st;	 /* where the scanner stands (outside/inside a string, after a key, ...) */
	bool esc;	 /* inside a string, the previous byte was a backslash */
	uint8_t keypos;	 /* bytes of the current string so far (strings longer than a key: none) */
	uint8_t keymask; /* the wanted keys the current string still spells, one bit each */
	uint8_t ndig;	 /* digits of the value read so far (past 18: too big, ignored) */
	int64_t num;	 /* the value so far */
};
void openai_usage_init(struct openai_usage *u);
void openai_usage_feed(struct openai_usage *u, const char *p, size_t n);

#endif
