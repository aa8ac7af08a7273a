/* SPDX-License-Identifier: Apache-2.0 */
/* models: which tokenizer reads the requests of which served model. The router tokenizes a
 * request with the tokenizer of its "model" field: an exact entry (--model-tokenizer NAME=PATH),
 * else the default (--tokenizer PATH), else none (the request is routed on the approximate view,
 * counted as a fallback). Chat requests also need the model's chat template: it is loaded from
 * the tokenizer_config.json in the tokenizer's directory (chat.h renders it), and a model without
 * one vLLM renders through Jinja (no template, gpt-oss's harmony, a Mistral tekken.json, a
 * template the interpreter refuses) has its chat requests routed as fallbacks, never on wrong
 * tokens.
 * Tokenizers are loaded once, shared by every name that points at the same file. Read-only after
 * set-up: any thread may look up. */
#ifndef KVS_MODELS_H
#define KVS_MODELS_H

#include <stdbool.h>
#include <stddef.h>

struct tokenizer;
struct models;

struct chat_tmpl;

/* How this model's chat requests are rendered. */
enum model_chat {
	MODEL_CHAT_OK = 0,	/* its template, through chat.h */
	MODEL_CHAT_NONE = 1,	/* no chat template: vLLM refuses such chat requests */
	MODEL_CHAT_REFUSED = 2, /* a template the interpreter does not implement */
	MODEL_CHAT_HARMONY = 3, /* gpt-oss: vLLM renders it with openai_harmony */
	MODEL_CHAT_MISTRAL = 4, /* tekken.json: vLLM's mistral tokenizer mode */
};

/* One model's reading tools. */
struct model_tok {
	const struct tokenizer *tok;
	const struct chat_tmpl *chat; /* its chat template (chat.h), when chat_ok */
	bool chat_ok;		      /* chat requests are rendered exactly */
	enum model_chat chat_kind;    /* why not, as a kind */
	const char *chat_why;	      /* why not, in words, when !chat_ok */
};

int models_new(struct models **out);
void models_free(struct models *m);

/* Loads path (a tokenizer directory, or a tokenizer.json) for model name, or as the default when
 * name is NULL. Returns 0, or -EINVAL with a message in err (file missing, pipeline not reproduced
 * exactly), -ENOMEM. */
int models_add(struct models *m, const char *name, const char *path, char *err, size_t errlen);

/* The entry for model (NULL or unknown: the default), or NULL when there is none. */
const struct model_tok *models_find(const struct models *m, const char *model);

/* Models configured (the default counts as one). */
size_t models_count(const struct models *m);

#endif
