// SPDX-License-Identifier: Apache-2.0
/* The split-regex engine (userspace/prompt/regex) on the model families' Split patterns, read from
 * models/<family>/tokenizer.json (`make deps`).
 *   build/bench/regex --bench FILE [--runs N] [--json PATH] [--only NAME]
 *     every family pattern over FILE (bench/regex/run.sh gives the 10 KB prompt of
 *     bench/tokenizer/prompt.mjs), all matches as the reference iterates them; prints a table
 *     (median µs per pass, ns/byte, MB/s, matches, millions of matches/s) and writes it as JSON.
 *     Also DeepSeek V3's chain (B1, then B2 on its pieces, then B3 on theirs, as its pre-tokenizer
 *     Sequence runs them) and the tokenizer's hand-written state machines (tok_split_fast: Qwen2,
 *     gpt-oss, Mistral-Nemo) on the same text, for the choice of keeping those fast paths. --only
 *     NAME (a family, deepseek for B1, B2, B3 and the chain, sm for the state machines) runs that
 *     alone (for callgrind).
 *   build/bench/regex --split (--family NAME | --regex RE | --sm KIND)
 *     reads lines of hex-encoded bytes, writes per line the non-empty matches as "start,end ..."
 *     (byte offsets; as tests/js/ref_split.mjs --hex writes the reference's): the parity tests'
 *     C side, through the engine or through the state machine of KIND (qwen2, llama3, gptoss,
 *     nemo). Exits 1 after a line whose search failed (-E2BIG, written as "error -7"). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ascii.h"
#include "core/json.h"
#include "prompt/regex.h"
#include "prompt/tokenizer.h"

static const struct {
	const char *name, *model;
	int index; /* in the pre-tokenizer Sequence */
} families[] = {
    {"llama3", "llama3_2", 0},	       {"qwen2", "qwen3", 0},
    {"deepseek_b1", "deepseek_v3", 0}, {"deepseek_b2", "deepseek_v3", 1},
    {"deepseek_b3", "deepseek_v3", 2}, {"gptoss", "gptoss", 0},
    {"nemo", "mistral_nemo", 0},
};
#define NFAM (sizeof(families) / sizeof(families[0]))

/* The tokenizer's state machines (tok_split_fast kinds) and the family row each stands for. */
static const struct {
	const char *name, *row;
	int kind;
	size_t family;
} sms[] = {
    {"qwen2", "qwen2 state machine (tokenizer.c)", 1, 1},
    {"llama3", "llama3 state machine (tokenizer.c)", 3, 0},
    {"gptoss", "gpt-oss state machine (tokenizer.c)", 4, 5},
    {"nemo", "mistral-nemo state machine (tokenizer.c)", 5, 6},
    {"deepseek", "deepseek state machine, B1 B2 B3 (tokenizer.c)", 6, NFAM},
};
#define NSM (sizeof(sms) / sizeof(sms[0]))

/* Cuts valid UTF-8 s[0..n) with state machine kind: the number of pieces, and in *check the
 * bytes they cover (n). */
__attribute__((noinline)) static long sm_pieces(int kind, const uint8_t *s, size_t n, size_t *check)
{
	struct tok_split_state st = {0};
	size_t i = 0, sum = 0;
	long k = 0;

	while (i < n) {
		size_t e = tok_split_fast(kind, s, n, i, &st);

		sum += e - i;
		i = e;
		k++;
	}
	*check = sum;
	return k;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
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

/* The Split regex of family f (malloc'd), or NULL with a message. */
static char *family_pattern(size_t f)
{
	char path[256], *text, *pat = NULL;
	size_t n;
	cJSON *root, *pt, *split;
	const cJSON *p, *re;

	snprintf(path, sizeof(path), "models/%s/tokenizer.json", families[f].model);
	if (!(text = slurp(path, &n))) {
		fprintf(stderr, "regex: cannot read %s (make deps)\n", path);
		return NULL;
	}
	root = json_parse(text, n);
	free(text);
	pt = root ? cJSON_GetObjectItem(root, "pre_tokenizer") : NULL;
	split =
	    pt && cJSON_GetObjectItem(pt, "pretokenizers")
		? cJSON_GetArrayItem(cJSON_GetObjectItem(pt, "pretokenizers"), families[f].index)
		: pt;
	p = split ? cJSON_GetObjectItem(split, "pattern") : NULL;
	re = p ? cJSON_GetObjectItem(p, "Regex") : NULL;
	if (cJSON_IsString(re))
		pat = strdup(re->valuestring);
	else
		fprintf(stderr, "regex: %s has no Split regex at %d\n", path, families[f].index);
	cJSON_Delete(root);
	return pat;
}

static struct regex *family_regex(size_t f)
{
	char err[256], *pat = family_pattern(f);
	struct regex *re;

	if (!pat)
		return NULL;
	re = regex_compile(pat, strlen(pat), err, sizeof(err));
	if (!re)
		fprintf(stderr, "regex: %s: %s\n", families[f].name, err);
	free(pat);
	return re;
}

/* All matches of re in s[0..n): their number, or a negative errno. */
__attribute__((noinline)) static long count_matches(const struct regex *re, const uint8_t *s,
						    size_t n)
{
	struct regex_iter it = {0};
	size_t a, b;
	long k = 0;
	int r;

	while ((r = regex_next(re, s, n, &it, &a, &b)) == 1)
		k++;
	return r < 0 ? r : k;
}

/* DeepSeek V3's pre-tokenizer: B1 splits the text (Isolated: matches and the gaps between them
 * are pieces), B2 each piece, B3 each of theirs. Returns the final pieces. */
__attribute__((noinline)) static long split_pieces(const struct regex *const *re, int depth,
						   const uint8_t *s, size_t n)
{
	struct regex_iter it = {0};
	size_t a, b, prev = 0;
	long k = 0, r = 0;
	int m;

	if (!depth)
		return 1;
	while ((m = regex_next(re[0], s, n, &it, &a, &b)) == 1) {
		if (a == b)
			continue;
		if (a > prev && (r = split_pieces(re + 1, depth - 1, s + prev, a - prev)) < 0)
			return r;
		k += a > prev ? r : 0;
		if ((r = split_pieces(re + 1, depth - 1, s + a, b - a)) < 0)
			return r;
		k += r;
		prev = b;
	}
	if (m < 0)
		return m;
	if (n > prev) {
		if ((r = split_pieces(re + 1, depth - 1, s + prev, n - prev)) < 0)
			return r;
		k += r;
	}
	return k;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct row {
	const char *name;
	double median_ns;
	long matches;
};

/* Median ns of `runs` calls of f (after a warm-up), its last result in *out. */
#define TIME_RUNS(runs, out, expr)                                                                 \
	({                                                                                         \
		double *t_ = malloc(sizeof(double) * (size_t)(runs)), med_;                        \
		for (int w_ = 0; w_ < (runs) / 10 + 3; w_++)                                       \
			(out) = (expr);                                                            \
		for (int i_ = 0; i_ < (runs); i_++) {                                              \
			double t0_ = now_ns();                                                     \
			(out) = (expr);                                                            \
			t_[i_] = now_ns() - t0_;                                                   \
		}                                                                                  \
		qsort(t_, (size_t)(runs), sizeof(double), cmp_double);                             \
		med_ = t_[(runs) / 2];                                                             \
		free(t_);                                                                          \
		med_;                                                                              \
	})

static const char *only; /* --only NAME: time that row alone (the others run once) */

static int bench(const char *file, int runs, const char *json_path)
{
	size_t n, check;
	uint8_t *s = (uint8_t *)slurp(file, &n);
	struct regex *re[NFAM] = {0};
	struct row rows[NFAM + 1 + NSM];
	int nrows = 0, rc = 1;
	FILE *js;

	if (!s) {
		fprintf(stderr, "regex: cannot read %s\n", file);
		return 1;
	}
	for (size_t f = 0; f < NFAM; f++) {
		if (!(re[f] = family_regex(f)))
			goto out;
		if (only && strcmp(only, families[f].name) && strcmp(only, "deepseek"))
			continue;
		rows[nrows].name = families[f].name;
		rows[nrows].median_ns =
		    TIME_RUNS(runs, rows[nrows].matches, count_matches(re[f], s, n));
		if (rows[nrows].matches < 0) {
			fprintf(stderr, "regex: %s: search failed (%ld)\n", families[f].name,
				rows[nrows].matches);
			goto out;
		}
		nrows++;
	}
	if (!only || !strcmp(only, "deepseek")) {
		const struct regex *chain[3] = {re[2], re[3], re[4]};
		rows[nrows].name = "deepseek chain (B1, B2, B3)";
		rows[nrows].median_ns =
		    TIME_RUNS(runs, rows[nrows].matches, split_pieces(chain, 3, s, n));
		nrows++;
	}
	for (size_t k = 0; k < NSM && (!only || !strcmp(only, "sm")); k++) {
		long engine = rows[sms[k].family].matches;

		rows[nrows].name = sms[k].row;
		rows[nrows].median_ns =
		    TIME_RUNS(runs, rows[nrows].matches,
			      sm_pieces(sms[k].kind, (const uint8_t *)s, n, &check));
		if (check != n || (!only && rows[nrows].matches != engine))
			fprintf(stderr,
				"regex: the %s cut %ld pieces over %zu bytes, the engine %ld\n",
				sms[k].row, rows[nrows].matches, check, engine);
		nrows++;
	}

	printf("text: %s, %zu bytes; %d runs, median of each\n", file, n, runs);
	printf("| pattern | median µs | ns/byte | MB/s | matches | M matches/s |\n");
	printf("|---|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nrows; i++)
		printf("| %s | %.1f | %.2f | %.0f | %ld | %.1f |\n", rows[i].name,
		       rows[i].median_ns / 1e3, rows[i].median_ns / (double)n,
		       (double)n * 1e3 / rows[i].median_ns, rows[i].matches,
		       (double)rows[i].matches * 1e3 / rows[i].median_ns);
	if (json_path && (js = fopen(json_path, "w"))) {
		fprintf(js, "{\"bytes\": %zu, \"runs\": %d, \"rows\": [", n, runs);
		for (int i = 0; i < nrows; i++)
			fprintf(js,
				"%s{\"pattern\": \"%s\", \"median_us\": %.2f, \"ns_per_byte\": "
				"%.3f, \"matches\": %ld}",
				i ? ", " : "", rows[i].name, rows[i].median_ns / 1e3,
				rows[i].median_ns / (double)n, rows[i].matches);
		fprintf(js, "]}\n");
		fclose(js);
	}
	rc = 0;
out:
	for (size_t f = 0; f < NFAM; f++)
		regex_free(re[f]);
	free(s);
	return rc;
}

static int split(const struct regex *re, int sm)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint8_t *s = NULL;
	int rc = 0;

	while ((len = getline(&line, &cap, stdin)) >= 0) {
		struct regex_iter it = {0};
		size_t n = 0, a, b;
		int r, first = 1;

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		free(s);
		s = malloc((size_t)len / 2 + 1);
		for (ssize_t i = 0; i + 1 < len; i += 2) {
			int hi = hex_digit(line[i]), lo = hex_digit(line[i + 1]);
			if (hi < 0 || lo < 0) {
				fprintf(stderr, "regex: not a hex line\n");
				rc = 2;
				goto out;
			}
			s[n++] = (uint8_t)(hi * 16 + lo);
		}
		if (sm) {
			struct tok_split_state st = {0};

			for (a = 0; a < n; a = b) {
				b = tok_split_fast(sm, s, n, a, &st);
				printf("%s%zu,%zu", first ? "" : " ", a, b);
				first = 0;
			}
			printf("\n");
			continue;
		}
		while ((r = regex_next(re, s, n, &it, &a, &b)) == 1) {
			if (a == b)
				continue;
			printf("%s%zu,%zu", first ? "" : " ", a, b);
			first = 0;
		}
		if (r < 0) {
			printf("%serror %d", first ? "" : " ", r);
			rc = 1;
		}
		printf("\n");
	}
out:
	free(line);
	free(s);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"bench", required_argument, NULL, 'b'},
	    {"runs", required_argument, NULL, 'r'},
	    {"json", required_argument, NULL, 'j'},
	    {"split", no_argument, NULL, 's'},
	    {"family", required_argument, NULL, 'f'},
	    {"regex", required_argument, NULL, 'e'},
	    {"only", required_argument, NULL, 'o'},
	    {"sm", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	const char *bench_file = NULL, *json_path = NULL, *family = NULL, *pat = NULL;
	int runs = 2000, do_split = 0, sm = 0, c, rc;
	struct regex *re = NULL;
	char err[256];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			bench_file = optarg;
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'j':
			json_path = optarg;
			break;
		case 's':
			do_split = 1;
			break;
		case 'f':
			family = optarg;
			break;
		case 'e':
			pat = optarg;
			break;
		case 'o':
			only = optarg;
			break;
		case 'm':
			for (size_t k = 0; k < NSM; k++)
				if (!strcmp(sms[k].name, optarg))
					sm = sms[k].kind;
			if (!sm) {
				fprintf(stderr, "regex: no state machine %s\n", optarg);
				return 2;
			}
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || runs < 1)
		goto usage;
	if (bench_file && !do_split)
		return bench(bench_file, runs, json_path);
	if (do_split && sm && !family && !pat)
		return split(NULL, sm);
	if (!do_split || !family == !pat || sm)
		goto usage;
	if (family) {
		for (size_t f = 0; f < NFAM; f++)
			if (!strcmp(families[f].name, family))
				re = family_regex(f);
		if (!re) {
			fprintf(stderr, "regex: no family pattern %s\n", family);
			return 2;
		}
	} else if (!(re = regex_compile(pat, strlen(pat), err, sizeof(err)))) {
		fprintf(stderr, "regex: %s\n", err);
		return 2;
	}
	rc = split(re, 0);
	regex_free(re);
	return rc;
usage:
	fprintf(stderr,
		"usage: regex --bench FILE [--runs N] [--json PATH]\n"
		"       regex --split (--family NAME | --regex RE | --sm KIND) < hex-lines\n");
	return 2;
}
