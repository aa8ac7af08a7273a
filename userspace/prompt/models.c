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
	bool owner; /* frees the tokenizer */
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
		if (m->e[i].owner)
			tokenizer_free((struct tokenizer *)m->e[i].mt.tok);
		free(m->e[i].name);
		free(m->e[i].path);
	}
	free(m->e);
	free(m);
}

/* Checks the tokenizer_config.json of path (in it, a directory; beside it, a tokenizer.json) for
 * the template chat.h renders. */
static void check_template(const char *path, struct model_tok *mt)
{
	char *dup = strdup(path), cfg[4096];
	const char *why = "out of memory";
	int rc = -ENOMEM;

	if (dup) {
		struct stat st;
		/* a directory holds both files; a tokenizer.json has its config beside it */
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", path);
		else
			snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", dirname(dup));
		rc = chat_config_check(cfg, &why);
	}
	free(dup);
	mt->chat_ok = rc == 0;
	mt->chat_why = rc == 0 ? NULL
		       : rc == -ENOTSUP
			   ? "the model's chat template is not the one kvsplice renders"
			   : "no readable tokenizer_config.json beside the tokenizer";
	(void)why;
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
	check_template(path, &e->mt);
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
