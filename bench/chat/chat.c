// SPDX-License-Identifier: Apache-2.0
/* Chat-template rendering cost: for each request of a JSONL file, the median microseconds of
 * chat_render_json (raw check + json_parse + render) and of chat_render alone (tree already
 * parsed), over N runs. Prints one JSON object a line: {"i","request_bytes","prompt_bytes",
 * "parse_render_us","render_us"}. Driven by bench/chat/run.sh.
 * Usage: build/bench/chat FILE [RUNS]
 *
 * With --jinja, the interpreter of userspace/prompt/jinja instead: the template of a
 * tokenizer_config.json rendered with each line's variables (JSON text, read by jinja_render:
 * the variables' parse is part of the time), then, with --tokenizer, the rendering tokenized by
 * userspace/prompt/tokenizer. Prints {"i","vars_bytes","prompt_bytes","render_us","p90_us",
 * "tokens","render_tokenize_us"} a line, the text of each rendering to --texts FILE.
 * Usage: build/bench/chat --jinja CONFIG VARS [RUNS] [--tokenizer FILE] [--texts FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "prompt/chat.h"
#include "prompt/jinja.h"
#include "prompt/tokenizer.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of runs timings of one request; mode 0 parse+render, 1 render only. */
static double median(const char *json, size_t len, const cJSON *tree, int runs, int mode,
		     size_t *prompt_len)
{
	struct buf out = {0};
	double *t = calloc((size_t)runs, sizeof(*t)), m;
	const char *why;
	int i, rc = 0;

	for (i = 0; t && i < runs; i++) {
		double t0 = now_us();
		buf_reset(&out);
		rc |= mode ? chat_render(tree, &out, &why)
			   : chat_render_json(json, len, NULL, &out, &why);
		t[i] = now_us() - t0;
	}
	*prompt_len = out.len;
	if (!t || rc) {
		free(t);
		buf_free(&out);
		return -1;
	}
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	m = t[runs / 2];
	free(t);
	buf_free(&out);
	return m;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long len;

	if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)len + 1)) &&
	    fread(s, 1, (size_t)len, f) == (size_t)len) {
		s[len] = 0;
		*n = (size_t)len;
	} else {
		free(s);
		s = NULL;
	}
	if (f)
		fclose(f);
	return s;
}

static int jinja_mode(int argc, char **argv)
{
	const char *config = argv[2], *vars_path = argv[3], *tok_path = NULL, *texts_path = NULL;
	int runs = argc > 4 && argv[4][0] != '-' ? atoi(argv[4]) : 2000, i = 0;
	struct jinja_clock clock = {1700000000, 0};
	struct jinja_template *t = NULL;
	struct jinja_error e;
	struct tokenizer *tok = NULL;
	struct tok_ids ids = {0};
	struct buf out = {0};
	FILE *f, *texts = NULL;
	char *line = NULL, *cfg_text, err[256];
	size_t cap = 0, n = 0;
	ssize_t len;
	cJSON *cfg;
	const cJSON *ct;

	for (int k = 4; k + 1 < argc; k++) {
		if (!strcmp(argv[k], "--tokenizer"))
			tok_path = argv[++k];
		else if (!strcmp(argv[k], "--texts"))
			texts_path = argv[++k];
	}
	if (!(cfg_text = slurp(config, &n)) || !(cfg = cJSON_ParseWithLength(cfg_text, n)) ||
	    !cJSON_IsString(ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template"))) {
		fprintf(stderr, "chat: no chat_template in %s\n", config);
		return 1;
	}
	if (jinja_load(ct->valuestring, strlen(ct->valuestring), &t, &e)) {
		fprintf(stderr, "chat: %s: %s\n", config, e.msg);
		return 1;
	}
	if (tok_path && !(tok = tokenizer_load(tok_path, err, sizeof(err))))
		fprintf(stderr, "chat: not tokenized (%s)\n", err); /* not every family's yet */
	if (texts_path && !(texts = fopen(texts_path, "w")))
		return 1;
	if (!(f = fopen(vars_path, "r")) || runs < 1)
		return 2;
	while ((len = getline(&line, &cap, f)) > 0) {
		double *tm = calloc((size_t)runs, sizeof(*tm)),
		       *tt = calloc((size_t)runs, sizeof(*tt));
		int rc = 0;

		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		for (int r = 0; tm && tt && r < runs; r++) {
			double t0 = now_us(), t1;
			buf_reset(&out);
			rc |= jinja_render(t, line, (size_t)len, NULL, &clock, &out, &e);
			t1 = now_us();
			tm[r] = t1 - t0;
			if (tok) {
				ids.n = 0;
				rc |=
				    tokenizer_encode(tok, out.data ? out.data : "", out.len, &ids);
				tt[r] = now_us() - t0;
			}
		}
		if (!tm || !tt || rc) {
			fprintf(stderr, "chat: line %d: %s\n", i, rc ? e.msg : "out of memory");
			return 1;
		}
		qsort(tm, (size_t)runs, sizeof(*tm), cmp_double);
		qsort(tt, (size_t)runs, sizeof(*tt), cmp_double);
		printf("{\"i\":%d,\"vars_bytes\":%zd,\"prompt_bytes\":%zu,\"render_us\":%.2f,"
		       "\"p90_us\":%.2f,\"tokens\":%zu,\"render_tokenize_us\":%.2f}\n",
		       i++, len, out.len, tm[runs / 2], tm[runs * 9 / 10], tok ? ids.n : 0,
		       tok ? tt[runs / 2] : 0.0);
		if (texts) {
			struct buf j = {0};
			buf_json_str(&j, out.data ? out.data : "", out.len);
			fprintf(texts, "%s\n", j.data);
			buf_free(&j);
		}
		free(tm);
		free(tt);
	}
	if (texts)
		fclose(texts);
	fclose(f);
	free(line);
	buf_free(&out);
	tok_ids_free(&ids);
	tokenizer_free(tok);
	jinja_free(t);
	cJSON_Delete(cfg);
	free(cfg_text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 3 && !strcmp(argv[1], "--jinja"))
		return jinja_mode(argc, argv);
	{
		FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
		int runs = argc > 2 ? atoi(argv[2]) : 2000, i = 0;
		char *line = NULL;
		size_t cap = 0, plen;
		ssize_t n;

		if (!f || runs < 1) {
			fprintf(stderr, "usage: chat FILE [RUNS]\n");
			return 2;
		}
		while ((n = getline(&line, &cap, f)) > 0) {
			cJSON *tree;
			double a, b;

			while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
				n--;
			tree = cJSON_ParseWithLength(line, (size_t)n);
			a = median(line, (size_t)n, tree, runs, 0, &plen);
			b = median(line, (size_t)n, tree, runs, 1, &plen);
			cJSON_Delete(tree);
			if (a < 0) { /* b < 0: chat_render refuses tools with numbers from a bare
					tree */
				fprintf(stderr, "chat: request %d is not rendered\n", i);
				return 1;
			}
			printf("{\"i\":%d,\"request_bytes\":%zd,\"prompt_bytes\":%zu,\"parse_"
			       "render_us\":%.2f,"
			       "\"render_us\":%.2f}\n",
			       i++, n, plen, a, b);
		}
		free(line);
		fclose(f);
		return 0;
	}
}
