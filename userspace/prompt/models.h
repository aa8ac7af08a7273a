/* SPDX-License-Identifier: Apache-2.0 */
/* models: which tokenizer reads the requests of which served model. The router tokenizes a
 * request with the tokenizer of its "model" field: an exact entry (--model-tokenizer NAME=PATH),
 * else the default (--tokenizer PATH), else none (the request is routed on the approximate view,
 * counted as a fallback). Chat requests also need the model's chat template: it is loaded from
 * the tokenizer_config.json in the tokenizer's directory (chat.h renders it), and a model without
 * one vLLM renders through Jinja (no template, gpt-oss's harmony, a Mistral tekken.json, a
 * template the interpreter refuses) has its chat requests routed as fallbacks, never on wrong
 * tokens.
 * Tokenizers are loaded once, shared by every name that points at the same file. The entries of
 * models_add are set up before serving; those a Service names are installed at run time
 * (models_install, below) on the thread that looks up, which is then the only one that may. */
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

/* models_add with the chat template of file tmpl (NULL: the tokenizer_config.json's), as vLLM's
 * --chat-template FILE (chat.h: chat_tmpl_load_with). A file that cannot be opened is -EINVAL;
 * one the interpreter refuses makes the model's chat a counted fallback, as a config's would. */
int models_add_with(struct models *m, const char *name, const char *path, const char *tmpl,
		    char *err, size_t errlen);

/* The entry for model (NULL or unknown: the default), or NULL when there is none. */
const struct model_tok *models_find(const struct models *m, const char *model);

/* The entry configured for exactly model (--model-tokenizer), or NULL: no default. The router
 * reads a LoRA adapter's requests with the adapter's own entry, else its base model's. */
const struct model_tok *models_find_exact(const struct models *m, const char *model);

/* Tokenizers named at run time (a Service's kvsplice.io/model-tokenizers) are loaded off the
 * thread that serves: models_load reads one on any thread (about a second for a large
 * vocabulary), models_install adds it on the thread that owns m, between two lookups. A model
 * whose tokenizer is still loading is installed first with models_install_pending: its requests
 * are then fallbacks "no_tokenizer", never read with another model's tokenizer. */
struct models_loaded;
/* Loads path (a tokenizer.json) and checks the chat template beside it, as models_add. Returns
 * 0 and *out, or -EINVAL with a message in err, -ENOMEM. Touches no struct models. */
int models_load(const char *path, struct models_loaded **out, char *err, size_t errlen);
void models_loaded_free(struct models_loaded *l);
/* Makes l (taken over) the entry of model name, replacing an entry of that name (a pending one
 * too); path is what the entry shows. 0 or -ENOMEM (l is freed). */
int models_install(struct models *m, const char *name, const char *path, struct models_loaded *l);
/* An entry for name with no tokenizer yet (models_find gives it: its tok is NULL), unless name
 * has an entry already. 0 or -ENOMEM. */
int models_install_pending(struct models *m, const char *name);
/* Drops the entry of name (loaded at run time or pending), so that the default reads it again.
 * Entries added by models_add stay. */
void models_remove(struct models *m, const char *name);

/* Models configured (the default counts as one). */
size_t models_count(const struct models *m);

#endif
