/* SPDX-License-Identifier: Apache-2.0 */
/* models: which tokenizer reads the requests of which served model. The router tokenizes a
 * request with the tokenizer of its "model" field: an exact entry (--model-tokenizer NAME=PATH),
 * else the default (--tokenizer PATH), else none (the request is routed on the approximate view,
 * counted as a fallback). Chat requests also need the chat template this project renders
 * (chat.h): it is checked against the tokenizer_config.json beside each tokenizer.json, and a
 * model whose template differs has its chat requests routed as fallbacks, never on wrong tokens.
 * Tokenizers are loaded once, shared by every name that points at the same file. Read-only after
 * set-up: any thread may look up. */
#ifndef KVS_MODELS_H
#define KVS_MODELS_H

#include <stdbool.h>
#include <stddef.h>

struct tokenizer;
struct models;

/* One model's reading tools. */
struct model_tok {
	const struct tokenizer *tok;
	bool chat_ok;	      /* the template beside it is the one chat.h renders */
	const char *chat_why; /* why not, when !chat_ok */
};

int models_new(struct models **out);
void models_free(struct models *m);

/* Loads path (a tokenizer.json, or a directory with tokenizer.json and tokenizer_config.json:
 * tokenizer_load) for model name, or as the default when name is NULL. Returns 0,
 * or -EINVAL with a message in err (file missing, pipeline not reproduced exactly), -ENOMEM. */
int models_add(struct models *m, const char *name, const char *path, char *err, size_t errlen);

/* The entry for model (NULL or unknown: the default), or NULL when there is none. */
const struct model_tok *models_find(const struct models *m, const char *model);

/* Models configured (the default counts as one). */
size_t models_count(const struct models *m);

#endif
