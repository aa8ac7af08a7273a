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
	char *tmpl; /* --chat-template's file, or NULL */
	struct model_tok mt;
	bool owner;   /* frees the tokenizer */
	bool runtime; /* installed at run time (models_install, _pending): models_remove drops it */
};

struct models_loaded {
	struct model_tok mt;
};

struct models {
	struct entry *e;
	size_t n;
	/* tokenizers replaced or removed at run time, freed with m: a request in flight may still
	 * be reading one, and the router keys its encoding caches by tokenizer address */
	struct model_tok *old;
	size_t nold;
};

/* Frees what a model_tok owns: its tokenizer, its chat template, its chat_why message. */
static void mt_free(const struct model_tok *mt)
{
	tokenizer_free((struct tokenizer *)mt->tok);
	chat_tmpl_free((struct chat_tmpl *)mt->chat);
	free((char *)mt->chat_why);
}

/* Retires mt's parts (freed by models_free). */
static void retire(struct models *m, const struct model_tok *mt)
{
	struct model_tok *p;

	if (!mt->tok)
		return;
	p = realloc(m->old, (m->nold + 1) * sizeof(*p));
	if (!p)
		return; /* leaked rather than freed under a reader */
	m->old = p;
	m->old[m->nold++] = *mt;
}

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
		if (m->e[i].owner)
			mt_free(&m->e[i].mt);
		free(m->e[i].name);
		free(m->e[i].path);
		free(m->e[i].tmpl);
	}
	free(m->e);
	for (size_t i = 0; i < m->nold; i++)
		mt_free(&m->old[i]);
	free(m->old);
	free(m);
}

/* The chat template of the tokenizer at path (a directory, or a tokenizer.json whose directory
 * holds tokenizer_config.json), or the one in file tmpl (vLLM's --chat-template) when not NULL,
 * or why there is none vLLM would render through Jinja: mt->chat and mt->chat_why are mt's own
 * (mt_free). */
static void load_template(const char *path, const char *tmpl, struct model_tok *mt)
{
	char *dup = strdup(path), cfg[4096], err[512], tekken[4096];
	struct chat_tmpl *chat = NULL;
	const char *why = NULL;
	struct stat st;
	const char *dir;
	int rc;

	mt->chat = NULL;
	mt->chat_ok = false;
	mt->chat_kind = MODEL_CHAT_NONE;
	mt->chat_why = NULL;
	if (!dup)
		return;
	dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : dirname(dup);
	snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", dir);
	snprintf(tekken, sizeof(tekken), "%s/tekken.json", dir);
	if (stat(tekken, &st) == 0) {
		/* vLLM opens such a repository in its mistral tokenizer mode: mistral_common builds
		 * the ids, no Jinja, no reference here */
		mt->chat_kind = MODEL_CHAT_MISTRAL;
		why = "the repository has tekken.json: vLLM's mistral tokenizer mode";
	} else if (tmpl && tokenizer_token_id(mt->tok, "<|channel|>") >= 0 &&
		   tokenizer_token_id(mt->tok, "<|start|>") >= 0) {
		/* vLLM renders gpt-oss through openai_harmony whatever template it is given */
		mt->chat_kind = MODEL_CHAT_HARMONY;
		why = "harmony: vLLM renders this model's chat with openai_harmony";
	} else if ((rc = chat_tmpl_load_with(cfg, tmpl, &chat, err, sizeof(err))) == 0) {
		mt->chat = chat;
		mt->chat_ok = true;
		mt->chat_kind = MODEL_CHAT_OK;
	} else if (rc == -ENOENT && tokenizer_token_id(mt->tok, "<|channel|>") >= 0 &&
		   tokenizer_token_id(mt->tok, "<|start|>") >= 0) {
		/* gpt-oss: vLLM renders its chat through openai_harmony, not a template */
		mt->chat_kind = MODEL_CHAT_HARMONY;
		why = "harmony: vLLM renders this model's chat with openai_harmony";
	} else {
		mt->chat_kind = rc == -ENOENT ? MODEL_CHAT_NONE : MODEL_CHAT_REFUSED;
		why = err;
	}
	free(dup);
	if (why)
		mt->chat_why = strdup(why);
}

int models_add(struct models *m, const char *name, const char *path, char *err, size_t errlen)
{
	return models_add_with(m, name, path, NULL, err, errlen);
}

int models_add_with(struct models *m, const char *name, const char *path, const char *tmpl,
		    char *err, size_t errlen)
{
	struct entry *ne, *e;
	FILE *f;

	if (tmpl) { /* a file named on the command line that cannot be read is a mistake */
		if (!(f = fopen(tmpl, "rb"))) {
			snprintf(err, errlen, "chat template %s: %s", tmpl, strerror(errno));
			return -EINVAL;
		}
		fclose(f);
	}

	ne = realloc(m->e, (m->n + 1) * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	m->e = ne;
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->name = name ? strdup(name) : NULL;
	e->path = strdup(path);
	e->tmpl = tmpl ? strdup(tmpl) : NULL;
	if ((name && !e->name) || !e->path || (tmpl && !e->tmpl)) {
		free(e->name);
		free(e->path);
		free(e->tmpl);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->e[i].path, path) == 0 &&
		    (m->e[i].tmpl ? tmpl && strcmp(m->e[i].tmpl, tmpl) == 0 : !tmpl)) {
			e->mt = m->e[i].mt;
			m->n++;
			return 0;
		}
	e->mt.tok = tokenizer_load(path, err, errlen);
	if (!e->mt.tok) {
		free(e->name);
		free(e->path);
		free(e->tmpl);
		return -EINVAL;
	}
	e->owner = true;
	load_template(path, tmpl, &e->mt);
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

const struct model_tok *models_find_exact(const struct models *m, const char *model)
{
	for (size_t i = 0; m && model && i < m->n; i++)
		if (m->e[i].name && strcmp(m->e[i].name, model) == 0)
			return &m->e[i].mt;
	return NULL;
}

size_t models_count(const struct models *m)
{
	return m ? m->n : 0;
}

int models_load(const char *path, struct models_loaded **out, char *err, size_t errlen)
{
	struct models_loaded *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->mt.tok = tokenizer_load(path, err, errlen);
	if (!l->mt.tok) {
		free(l);
		return -EINVAL;
	}
	load_template(path, NULL, &l->mt);
	*out = l;
	return 0;
}

void models_loaded_free(struct models_loaded *l)
{
	if (!l)
		return;
	mt_free(&l->mt);
	free(l);
}

/* The entry of name, or NULL. */
static struct entry *entry_of(struct models *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].name && strcmp(m->e[i].name, name) == 0)
			return &m->e[i];
	return NULL;
}

/* A new runtime entry for name at the end of m, or NULL. */
static struct entry *entry_new(struct models *m, const char *name, const char *path)
{
	struct entry *ne = realloc(m->e, (m->n + 1) * sizeof(*ne)), *e;

	if (!ne)
		return NULL;
	m->e = ne;
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	e->path = strdup(path);
	if (!e->name || !e->path) {
		free(e->name);
		free(e->path);
		return NULL;
	}
	e->runtime = true;
	m->n++;
	return e;
}

int models_install(struct models *m, const char *name, const char *path, struct models_loaded *l)
{
	struct entry *e = entry_of(m, name);
	char *np;

	if (e && !e->runtime) { /* --model-tokenizer wins over a Service's annotation */
		models_loaded_free(l);
		return 0;
	}
	if (!e && !(e = entry_new(m, name, path))) {
		models_loaded_free(l);
		return -ENOMEM;
	}
	if ((np = strdup(path))) {
		free(e->path);
		e->path = np;
	}
	if (e->owner)
		retire(m, &e->mt);
	e->mt = l->mt;
	e->owner = true;
	free(l);
	return 0;
}

int models_install_pending(struct models *m, const char *name)
{
	if (entry_of(m, name))
		return 0;
	return entry_new(m, name, "") ? 0 : -ENOMEM;
}

void models_remove(struct models *m, const char *name)
{
	struct entry *e = entry_of(m, name);

	if (!e || !e->runtime)
		return;
	if (e->owner)
		retire(m, &e->mt);
	free(e->name);
	free(e->path);
	free(e->tmpl);
	memmove(e, e + 1, (size_t)(m->e + m->n - (e + 1)) * sizeof(*e));
	m->n--;
}
