// SPDX-License-Identifier: Apache-2.0
/* Chat-template rendering cost: for each request of a JSONL file, the median microseconds of
 * chat_render_json (raw check + json_parse + render) and of chat_render alone (tree already
 * parsed), over N runs. Prints one JSON object a line: {"i","request_bytes","prompt_bytes",
 * "parse_render_us","render_us"}. Driven by bench/chat/run.sh.
 * Usage: build/bench/chat FILE [RUNS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "prompt/chat.h"

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

int main(int argc, char **argv)
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
		if (a < 0 || b < 0) {
			fprintf(stderr, "chat: request %d is not rendered\n", i);
			return 1;
		}
		printf(
		    "{\"i\":%d,\"request_bytes\":%zd,\"prompt_bytes\":%zu,\"parse_render_us\":%.2f,"
		    "\"render_us\":%.2f}\n",
		    i++, n, plen, a, b);
	}
	free(line);
	fclose(f);
	return 0;
}
