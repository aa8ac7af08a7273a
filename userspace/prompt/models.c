// SPDX-License-Identifier: Apache-2.0
/* models: see models.h. A handful of entries: a linear search is the fastest lookup there is. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "prompt/chat.h"
#include "prompt/models.h"
#include "prompt/tokenizer.h"

struct entry {
	char *name; /* NULL: the default */
	char *path;
	struct model_tok mt;
	struct chat_tmpl *chat; /* owned, with the tokenizer */
	char *why;		/* owned: mt.chat_why when it is a message of its own */
	bool owner;		/* frees the tokenizer */
};

struct models {
	struct entry *e;
	size_t n;
};

int models_new(struct models **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void models_free(struct models *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		if (m->e[i].owner) {
			tokenizer_free((struct tokenizer *)m->e[i].mt.tok);
			chat_tmpl_free(m->e[i].chat);
			free(m->e[i].why);
		}
		free(m->e[i].name);
		free(m->e[i].path);
	}
	free(m->e);
	free(m);
}

/* The chat template of the tokenizer at path (a directory, or a tokenizer.json whose directory
 * holds tokenizer_config.json), or why there is none vLLM would render through Jinja. */
static void load_template(const char *path, struct entry *e)
{
	struct model_tok *mt = &e->mt;
	char *dup = strdup(path), cfg[4096], err[512], tekken[4096];
	struct stat st;
	const char *dir;
	int rc;

	mt->chat_ok = false;
	mt->chat_kind = MODEL_CHAT_NONE;
	mt->chat_why = "out of memory";
	if (!dup)
		return;
	dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : dirname(dup);
	snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", dir);
	snprintf(tekken, sizeof(tekken), "%s/tekken.json", dir);
	if (stat(tekken, &st) == 0) {
		/* vLLM opens such a repository in its mistral tokenizer mode: mistral_common builds
		 * the ids, no Jinja, no reference here */
		mt->chat_kind = MODEL_CHAT_MISTRAL;
		mt->chat_why = "the repository has tekken.json: vLLM's mistral tokenizer mode";
		free(dup);
		return;
	}
	rc = chat_tmpl_load(cfg, &e->chat, err, sizeof(err));
	free(dup);
	if (rc == 0) {
		mt->chat = e->chat;
		mt->chat_ok = true;
		mt->chat_kind = MODEL_CHAT_OK;
		mt->chat_why = NULL;
		return;
	}
	if (rc == -ENOENT && tokenizer_token_id(mt->tok, "<|channel|>") >= 0 &&
	    tokenizer_token_id(mt->tok, "<|start|>") >= 0) {
		/* gpt-oss: vLLM renders its chat through openai_harmony, not a template */
		mt->chat_kind = MODEL_CHAT_HARMONY;
		mt->chat_why = "harmony: vLLM renders this model's chat with openai_harmony";
		return;
	}
	e->why = strdup(err);
	mt->chat_kind = rc == -ENOENT ? MODEL_CHAT_NONE : MODEL_CHAT_REFUSED;
	mt->chat_why = e->why ? e->why : "the chat template cannot be rendered here";
}

int models_add(struct models *m, const char *name, const char *path, char *err, size_t errlen)
{
	struct entry *ne, *e;

	ne = realloc(m->e, (m->n + 1) * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	m->e = ne;
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->name = name ? strdup(name) : NULL;
	e->path = strdup(path);
	if ((name && !e->name) || !e->path) {
		free(e->name);
		free(e->path);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->e[i].path, path) == 0) {
			e->mt = m->e[i].mt;
			m->n++;
			return 0;
		}
	e->mt.tok = tokenizer_load(path, err, errlen);
	if (!e->mt.tok) {
		free(e->name);
		free(e->path);
		return -EINVAL;
	}
	e->owner = true;
	load_template(path, e);
	m->n++;
	return 0;
}

const struct model_tok *models_find(const struct models *m, const char *model)
{
	const struct model_tok *def = NULL;

	if (!m)
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		if (!m->e[i].name)
			def = &m->e[i].mt;
		else if (model && strcmp(m->e[i].name, model) == 0)
			return &m->e[i].mt;
	}
	return def;
}

size_t models_count(const struct models *m)
{
	return m ? m->n : 0;
}
