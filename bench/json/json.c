// SPDX-License-Identifier: Apache-2.0
/* Request-body parsing cost, side by side in one run: cJSON_ParseWithLength against json_parse
 * (userspace/core/json.h) on each file given, the two alternating round by round; each figure is
 * the best round's mean (parse + cJSON_Delete) over RUNS parses. Checks first that both give the
 * same tree (tests/lib/json_same.h) and says whether the strict reader took the body or left it
 * to cJSON. Prints one JSON object a line: {"file","bytes","strict","cjson_us","json_parse_us"}.
 * Driven by bench/json/run.sh. Usage: build/bench/json [--runs N] FILE... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "json_same.h"

#define ROUNDS 15

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)len + 1)) && fread(b, 1, (size_t)len, f) == (size_t)len)
		*n = (size_t)len;
	else
		free(b), b = NULL;
	fclose(f);
	return b;
}

static double round_us(const char *b, size_t n, int runs, bool fast)
{
	double t0 = now_us();

	for (int i = 0; i < runs; i++)
		cJSON_Delete(fast ? json_parse(b, n) : cJSON_ParseWithLength(b, n));
	return (now_us() - t0) / runs;
}

int main(int argc, char **argv)
{
	int runs = 500, i = 1;

	if (argc > 2 && strcmp(argv[1], "--runs") == 0)
		runs = atoi(argv[2]), i = 3;
	if (i >= argc || runs < 1) {
		fprintf(stderr, "usage: %s [--runs N] FILE...\n", argv[0]);
		return 2;
	}
	for (; i < argc; i++) {
		size_t n = 0;
		char *b = slurp(argv[i], &n);
		cJSON *ref, *fast = NULL;
		double best[2] = {1e18, 1e18};
		int strict;

		if (!b) {
			fprintf(stderr, "json: cannot read %s\n", argv[i]);
			return 1;
		}
		ref = cJSON_ParseWithLength(b, n);
		strict = json_parse_strict(b, n, &fast);
		if (strict < 0 || (strict == 1 && !json_same(fast, ref, 0))) {
			fprintf(stderr, "json: %s: the strict reader's tree is not cJSON's\n",
				argv[i]);
			return 1;
		}
		cJSON_Delete(fast);
		cJSON_Delete(ref);
		for (int r = 0; r < ROUNDS; r++)
			for (int k = 0; k < 2; k++) {
				double us = round_us(b, n, runs, k == 1);

				if (us < best[k])
					best[k] = us;
			}
		printf("{\"file\":\"%s\",\"bytes\":%zu,\"strict\":%s,\"cjson_us\":%.2f,"
		       "\"json_parse_us\":%.2f}\n",
		       argv[i], n, strict == 1 ? "true" : "false", best[0], best[1]);
		free(b);
	}
	return 0;
}
