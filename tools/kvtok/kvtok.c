// SPDX-License-Identifier: Apache-2.0
/* kvtok: the tokenizer from the command line.
 *   build/kvtok --tokenizer PATH < in.jsonl > out.jsonl
 *     PATH: a tokenizer.json, or a directory with tokenizer.json and tokenizer_config.json.
 *     one JSON object a line in, one a line out, same order:
 *       {"text": "...", "add_special_tokens": false}
 *                              -> {"ids": [...]}   (add_special_tokens: default false)
 *       {"messages": [...], "add_generation_prompt": true, "chat_template_kwargs": {...}}
 *                              -> {"ids": [...]}   (chat template, then tokenized)
 *     a line that cannot be handled gets {"error": "..."} (and the exit status is 1 at the end).
 *   build/kvtok --tokenizer PATH --bench FILE [--runs N] [--cache]
 *     encodes FILE's bytes repeatedly and prints the median microseconds per encode. --cache:
 *     each encode through a new tok_cache of the router's size (freed after it), as the daemon
 *     meets a text it has not seen: the pieces the text repeats are merged once. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "prompt/chat.h"
#include "core/json.h"
#include "prompt/tokenizer.h"
#include "route/router.h"

/* tokenizer_config.json beside --tokenizer: its chat_template must be the one userspace/prompt/chat
 * renders before {"messages": ...} lines are answered. */
static char chat_config[4096];
static const char *chat_template; /* --chat-template FILE, or NULL */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: kvtok --tokenizer PATH [--chat-template FILE] [--trust-request-chat-template]\n"
	    "             [--default-chat-template-kwargs JSON] [--bench FILE [--runs N] "
	    "[--cache]]\n"
	    "  (the chat options as the workers' vLLM was started)\n"
	    "  reads JSONL on stdin: {\"text\": ...} or {\"messages\": [...], ...} per line;\n"
	    "  writes {\"ids\": [...]} (or {\"error\": ...}) per line, in order.\n");
}

/* --- exact JSON string bytes ------------------------------------------------------------------
 * cJSON hands strings over NUL-terminated, which loses text after an escaped U+0000. These helpers
 * find a top-level key in an object already validated by cJSON and decode its string value with
 * its exact length. A lone surrogate escape decodes to U+FFFD, as the engine's JSON layer turns it
 * into text; raw bytes (valid or not) are copied as they are. */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* p at '"': returns the position after the closing quote. */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return end;
}

/* Skips one JSON value (validated input). */
static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;

	if (p < end && *p == '"')
		return skip_string(p, end);
	if (p < end && (*p == '{' || *p == '[')) {
		while (p < end) {
			if (*p == '"') {
				p = skip_string(p, end);
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return end;
	}
	while (p < end && !strchr(",}] \t\r\n", *p))
		p++;
	return p;
}

static int hex4(const char *p, const char *end, unsigned *v)
{
	*v = 0;
	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

static int put_utf8(struct buf *o, unsigned c)
{
	char b[4];
	size_t n;

	if (c < 0x80) {
		b[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xC0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3F));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (char)(0xE0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[2] = (char)(0x80 | (c & 0x3F));
		n = 3;
	} else {
		b[0] = (char)(0xF0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[3] = (char)(0x80 | (c & 0x3F));
		n = 4;
	}
	return buf_append(o, b, n);
}

/* p at '"': decodes the string literal into o. Returns 0, -EINVAL, -ENOMEM. */
static int decode_string(const char *p, const char *end, struct buf *o)
{
	const char *run;

	for (p++, run = p; p < end; p++) {
		unsigned c, lo;
		if (*p == '"')
			return buf_append(o, run, (size_t)(p - run));
		if (*p != '\\')
			continue;
		if (buf_append(o, run, (size_t)(p - run)))
			return -ENOMEM;
		if (++p >= end)
			return -EINVAL;
		switch (*p) {
		case '"':
			c = '"';
			break;
		case '\\':
			c = '\\';
			break;
		case '/':
			c = '/';
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u':
			if (hex4(p + 1, end, &c))
				return -EINVAL;
			p += 4;
			if (c >= 0xD800 && c <= 0xDBFF && end - p >= 7 && p[1] == '\\' &&
			    p[2] == 'u' && !hex4(p + 3, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
				c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			} else if (c >= 0xD800 && c <= 0xDFFF) {
				c = 0xFFFD;
			}
			break;
		default:
			return -EINVAL;
		}
		if (put_utf8(o, c))
			return -ENOMEM;
		run = p + 1;
	}
	return -EINVAL;
}

/* Finds top-level key in the object text line[0..n) and decodes its string value into o.
 * Returns 0, -ENOENT (absent or not a string), -EINVAL, -ENOMEM. */
static int json_key_string(const char *line, size_t n, const char *key, struct buf *o)
{
	const char *p = line, *end = line + n;
	struct buf k = {0};
	int err = -ENOENT;

	p = skip_ws(p, end);
	if (p >= end || *p != '{')
		return -EINVAL;
	p = skip_ws(p + 1, end);
	while (p < end && *p == '"') {
		bool match;
		k.len = 0;
		if ((err = decode_string(p, end, &k)))
			goto cleanup;
		match = k.len == strlen(key) && memcmp(k.data, key, k.len) == 0;
		p = skip_ws(skip_string(p, end), end);
		if (p >= end || *p != ':') {
			err = -EINVAL;
			goto cleanup;
		}
		p = skip_ws(p + 1, end);
		if (match) {
			err = p < end && *p == '"' ? decode_string(p, end, o) : -ENOENT;
			goto cleanup;
		}
		p = skip_ws(skip_value(p, end), end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
	}
	err = -ENOENT;
cleanup:
	buf_free(&k);
	return err;
}

/* --- one line --------------------------------------------------------------------------------- */

/* Renders a {"messages": ..., "tools": ...} request as vLLM does for /v1/chat/completions with the
 * model's chat template (tokenizer_config.json beside --tokenizer; userspace/prompt/chat: the
 * Qwen3 template by hand, any other through the Jinja interpreter; add_generation_prompt default
 * true, chat_template_kwargs) and tokenizes the prompt with add_special_tokens (default false, as
 * vLLM's chat). A request not reproduced exactly, a template that raised (its message), or a
 * model without a template gets an error line saying why. Returns 0 and the ids, or non-zero
 * with *why. */
static int kvtok_messages(const struct tokenizer *tok, const cJSON *req, const char *line, size_t n,
			  struct tok_ids *ids, const char **why)
{
	static struct chat_tmpl *tmpl;
	static char cfg_err[512];
	static int cfg_rc = 1;
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(req, "add_special_tokens");
	struct buf text = {0};
	int rc;

	if (cfg_rc == 1)
		cfg_rc = chat_tmpl_load_with(chat_config, chat_template, &tmpl, cfg_err,
					     sizeof(cfg_err));
	if (cfg_rc) {
		*why = cfg_err;
		return cfg_rc;
	}
	rc = chat_raw_check(line, n, why);
	/* from the text, not the cJSON tree alone: tool JSON keeps 1 and 1.0 apart */
	if (rc == CHAT_OK)
		rc = chat_tmpl_render(tmpl, req, line, n, NULL, &text, why);
	if (rc == CHAT_OK) {
		rc = tokenizer_encode_special(tok, NULL, text.data ? text.data : "", text.len,
					      cJSON_IsTrue(sp), ids);
		if (rc == -E2BIG)
			*why = "a split ran out of its step budget";
	}
	if (rc == -ENOMEM)
		*why = "out of memory";
	buf_free(&text);
	return rc;
}

static void put_error(struct buf *out, const char *why)
{
	buf_puts(out, "{\"error\":");
	buf_json_str(out, why, strlen(why));
	buf_puts(out, "}\n");
}

/* Handles one input line; appends one output line. Returns 0 or -1 for a line in error. */
static int do_line(const struct tokenizer *tok, const char *line, size_t n, struct buf *out)
{
	cJSON *req = json_parse(line, n);
	struct tok_ids ids = {0};
	struct buf text = {0};
	const char *why = NULL;
	int rc = -1;

	if (!req || !cJSON_IsObject(req)) {
		why = "not a JSON object";
		goto cleanup;
	}
	if (cJSON_HasObjectItem(req, "messages")) {
		if (kvtok_messages(tok, req, line, n, &ids, &why))
			goto cleanup;
	} else if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(req, "text"))) {
		if (json_key_string(line, n, "text", &text)) {
			why = "text: cannot decode the string";
			goto cleanup;
		}
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(req, "add_special_tokens");
		int e;
		if (sp && !cJSON_IsBool(sp)) {
			why = "add_special_tokens: must be true or false";
			goto cleanup;
		}
		e = tokenizer_encode_special(tok, NULL, text.data ? text.data : "", text.len,
					     cJSON_IsTrue(sp), &ids);
		if (e) {
			why =
			    e == -E2BIG ? "the split regex ran out of its budget" : "out of memory";
			goto cleanup;
		}
	} else {
		why = "expected {\"text\": string} or {\"messages\": [...]}";
		goto cleanup;
	}
	buf_puts(out, "{\"ids\":[");
	for (size_t i = 0; i < ids.n; i++)
		buf_printf(out, i ? ",%u" : "%u", ids.v[i]);
	buf_puts(out, "]}\n");
	rc = 0;
cleanup:
	if (rc)
		put_error(out, why);
	cJSON_Delete(req);
	tok_ids_free(&ids);
	buf_free(&text);
	return rc;
}

/* --- bench ------------------------------------------------------------------------------------ */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPU time of this thread: unlike wall time, not inflated while other processes hold the CPU
 * (read around all runs, not each: the call is a system call of a few µs here). */
static double cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Resident set size in bytes (from /proc/self/statm), 0 if unknown. */
static size_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* One encode of the bench: plain, or through a new cache (cache_bytes > 0). */
static int bench_encode(const struct tokenizer *tok, const struct buf *text, size_t cache_bytes,
			struct tok_ids *ids)
{
	struct tok_cache *c;
	int rc;

	if (!cache_bytes)
		return tokenizer_encode(tok, text->data ? text->data : "", text->len, ids);
	if (!(c = tok_cache_new(cache_bytes)))
		return -ENOMEM;
	rc = tokenizer_encode_cached(tok, c, text->data ? text->data : "", text->len, ids);
	tok_cache_free(c);
	return rc;
}

static int bench(const struct tokenizer *tok, const char *file, int runs, size_t rss_load,
		 double load_ms, size_t cache_bytes)
{
	FILE *f = fopen(file, "rb");
	struct buf text = {0};
	struct tok_ids ids = {0};
	double *t = NULL, cpu0;
	char chunk[65536];
	size_t r, n_ids = 0;
	int rc = 1;

	if (!f) {
		fprintf(stderr, "kvtok: %s: %s\n", file, strerror(errno));
		return 1;
	}
	while ((r = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&text, chunk, r);
	fclose(f);
	if (!(t = calloc((size_t)runs, sizeof(*t))))
		goto cleanup;
	for (int i = 0; i < runs / 10 + 1; i++) { /* warm up */
		ids.n = 0;
		bench_encode(tok, &text, cache_bytes, &ids);
	}
	cpu0 = cpu_us();
	for (int i = 0; i < runs; i++) {
		double t0;
		ids.n = 0;
		t0 = now_us();
		if (bench_encode(tok, &text, cache_bytes, &ids))
			goto cleanup;
		t[i] = now_us() - t0;
		n_ids = ids.n;
	}
	cpu0 = (cpu_us() - cpu0) / runs;
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	printf("{\"bytes\":%zu,\"ids\":%zu,\"runs\":%d,\"median_us\":%.2f,\"min_us\":%.2f,\"p90_"
	       "us\":%.2f,"
	       "\"cpu_mean_us\":%.2f,\"tokenizer_bytes\":%zu,\"load_rss_bytes\":%zu,\"load_ms\":%."
	       "1f,\"cache\":%s}\n",
	       text.len, n_ids, runs, t[runs / 2], t[0], t[runs * 9 / 10], cpu0,
	       tokenizer_memory(tok), rss_load, load_ms, cache_bytes ? "true" : "false");
	rc = 0;
cleanup:
	free(t);
	buf_free(&text);
	tok_ids_free(&ids);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"tokenizer", required_argument, NULL, 't'},
	    {"bench", required_argument, NULL, 'b'},
	    {"chat-template", required_argument, NULL, 'c'},
	    {"runs", required_argument, NULL, 'n'},
	    {"cache", no_argument, NULL, 'C'},
	    {"trust-request-chat-template", no_argument, NULL, 'T'},
	    {"default-chat-template-kwargs", required_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *path = NULL, *bench_file = NULL, *server_kw = NULL;
	bool trust = false;
	struct tokenizer *tok;
	char err[512];
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int c, runs = 1000, bad = 0;
	size_t cache_bytes = 0;
	struct buf out = {0};
	size_t rss0;
	double t0;

	while ((c = getopt_long(argc, argv, "t:b:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			path = optarg;
			break;
		case 'b':
			bench_file = optarg;
			break;
		case 'c':
			chat_template = optarg;
			break;
		case 'n':
			runs = atoi(optarg);
			break;
		case 'C':
			cache_bytes = ROUTER_TOKCACHE_BYTES;
			break;
		case 'T':
			trust = true;
			break;
		case 'K':
			server_kw = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!path || optind != argc || runs < 1) {
		usage(stderr);
		return 2;
	}
	if (chat_server_configure(server_kw, trust, err, sizeof(err))) {
		fprintf(stderr, "kvtok: %s\n", err);
		return 2;
	}
	rss0 = rss_bytes();
	t0 = now_us();
	if (!(tok = tokenizer_load(path, err, sizeof(err)))) {
		fprintf(stderr, "kvtok: %s\n", err);
		return 1;
	}
	{
		struct stat st;
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			snprintf(chat_config, sizeof(chat_config), "%s/tokenizer_config.json",
				 path);
		else
			snprintf(chat_config, sizeof(chat_config), "%.*stokenizer_config.json",
				 strrchr(path, '/') ? (int)(strrchr(path, '/') - path + 1) : 0,
				 path);
	}
	if (bench_file) {
		double load_ms = (now_us() - t0) / 1e3;
		malloc_trim(0); /* hand the parser's freed memory back, so RSS shows what stays */
		c = bench(tok, bench_file, runs, rss_bytes() - rss0, load_ms, cache_bytes);
		tokenizer_free(tok);
		return c;
	}
	while ((n = getline(&line, &cap, stdin)) > 0) {
		size_t len = (size_t)n;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (!len)
			continue;
		out.len = 0;
		if (do_line(tok, line, len, &out))
			bad++;
		fwrite(out.data, 1, out.len, stdout);
	}
	fflush(stdout);
	free(line);
	buf_free(&out);
	tokenizer_free(tok);
	if (bad)
		fprintf(stderr, "kvtok: %d line(s) in error\n", bad);
	return bad ? 1 : 0;
}
