// SPDX-License-Identifier: Apache-2.0
/* trace: the Mooncake / aiperf trace reader and the prompts replayed from it (trace.h).
 *
 * Reading: one line at a time (trace_load streams the file with getline, so a limit stops the read
 * early and a large trace is never held as text), each line parsed with cJSON on its own, so an
 * error names its line. The kept rows' hash ids go to one array, each row pointing into it.
 *
 * The ideal reuse walks a trie of hash-id chains kept in one open-addressing table keyed by
 * (parent node, id): a node is a prefix chain some earlier row had, and remembers the longest its
 * last block ever was (a full block, or a cut last block). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "trace.h"

#define TRACE_MAX_ID 9007199254740992.0 /* 2^53: larger JSON numbers are not exact integers */

/* What the reader carries from one line to the next. */
struct reader {
	struct trace *t;
	size_t skip, limit;
	size_t rows;	 /* rows seen (skipped and kept) */
	size_t rows_cap; /* t->rows capacity */
	size_t ids_cap;	 /* t->ids capacity */
	double prev_ms;	 /* the previous row's timestamp */
	bool done;	 /* limit reached */
	char *err;
	size_t errlen;
};

/* Writes "line N: ..." to the reader's err. Returns -EINVAL. */
__attribute__((format(printf, 3, 4))) static int line_error(struct reader *rd, uint32_t line,
							    const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(rd->err, rd->errlen, "line %u: ", line);

	if (n >= 0 && (size_t)n < rd->errlen) {
		va_start(ap, fmt);
		vsnprintf(rd->err + n, rd->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Reads field name of object o as a length: a non-negative integer up to TRACE_MAX_LENGTH, into
 * *v. Returns 0, or -EINVAL (the message in the reader's err) when it is missing, not a number,
 * negative, fractional or too large. */
static int get_length(struct reader *rd, uint32_t line, const cJSON *o, const char *name,
		      uint64_t *v)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);
	double d;

	if (!j)
		return line_error(rd, line, "missing field \"%s\"", name);
	if (!cJSON_IsNumber(j))
		return line_error(rd, line, "\"%s\" is not a number", name);
	d = j->valuedouble;
	if (d < 0)
		return line_error(rd, line, "negative \"%s\" (%.0f)", name, d);
	if (d != floor(d))
		return line_error(rd, line, "\"%s\" is not an integer (%g)", name, d);
	if (d > TRACE_MAX_LENGTH)
		return line_error(rd, line, "\"%s\" %.0f is above %u", name, d, TRACE_MAX_LENGTH);
	*v = (uint64_t)d;
	return 0;
}

/* Makes room for one more row and n more ids. Returns 0 or -ENOMEM. */
static int reserve(struct reader *rd, size_t n)
{
	struct trace *t = rd->t;

	if (t->n == rd->rows_cap) {
		size_t cap = rd->rows_cap ? 2 * rd->rows_cap : 256;
		struct trace_row *r = realloc(t->rows, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		t->rows = r;
		rd->rows_cap = cap;
	}
	if (t->nids + n > rd->ids_cap) {
		size_t cap = rd->ids_cap ? 2 * rd->ids_cap : 4096;
		uint64_t *v;

		while (cap < t->nids + n)
			cap *= 2;
		v = realloc(t->ids, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->ids = v;
		rd->ids_cap = cap;
	}
	return 0;
}

/* Parses one line p[0..n) (no newline) numbered line. Blank lines are skipped. Returns 0, -ENOMEM,
 * or -EINVAL with the problem in the reader's err (the list in trace.h). */
static int parse_line(struct reader *rd, const char *p, size_t n, uint32_t line)
{
	struct trace_row row = {.line = line};
	const cJSON *ts, *ids, *e;
	const char *end = NULL, *start = p;
	cJSON *o = NULL;
	size_t i = 0, nids;
	int rc = -EINVAL;

	rd->t->lines = line;
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	while (n && (*p == ' ' || *p == '\t')) {
		p++;
		n--;
	}
	if (!n)
		return 0;
	o = cJSON_ParseWithLengthOpts(p, n, &end, false);
	if (!o) {
		line_error(rd, line, "bad JSON near column %zu",
			   (size_t)((end ? end : p) - start) + 1);
		goto cleanup;
	}
	while (end < p + n && (*end == ' ' || *end == '\t'))
		end++;
	if (end != p + n) {
		line_error(rd, line, "bad JSON near column %zu (text after the object)",
			   (size_t)(end - start) + 1);
		goto cleanup;
	}
	if (!cJSON_IsObject(o)) {
		line_error(rd, line, "not a JSON object");
		goto cleanup;
	}
	ts = cJSON_GetObjectItemCaseSensitive(o, "timestamp");
	if (!ts) {
		line_error(rd, line, "missing field \"timestamp\"");
		goto cleanup;
	}
	if (!cJSON_IsNumber(ts) || !isfinite(ts->valuedouble)) {
		line_error(rd, line, "\"timestamp\" is not a number");
		goto cleanup;
	}
	row.t_ms = ts->valuedouble;
	if (get_length(rd, line, o, "input_length", &row.input_length) ||
	    get_length(rd, line, o, "output_length", &row.output_length))
		goto cleanup;
	ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
	if (!ids) {
		line_error(rd, line, "missing field \"hash_ids\"");
		goto cleanup;
	}
	if (!cJSON_IsArray(ids)) {
		line_error(rd, line, "\"hash_ids\" is not an array");
		goto cleanup;
	}
	nids = (size_t)cJSON_GetArraySize(ids);
	if (!nids && row.input_length > 0) {
		line_error(rd, line, "empty \"hash_ids\" with input_length %" PRIu64,
			   row.input_length);
		goto cleanup;
	}
	if (row.input_length == 0) {
		line_error(rd, line, "input_length 0: an empty prompt (vLLM refuses it)");
		goto cleanup;
	}
	if (rd->rows > 0 && row.t_ms < rd->prev_ms) {
		line_error(
		    rd, line,
		    "timestamp %.15g is before the previous row's %.15g (rows must be sorted by "
		    "time)",
		    row.t_ms, rd->prev_ms);
		goto cleanup;
	}
	if ((rc = reserve(rd, nids)))
		goto cleanup;
	rc = -EINVAL;
	cJSON_ArrayForEach(e, ids)
	{
		double d = cJSON_IsNumber(e) ? e->valuedouble : -1;

		if (d < 0 || d != floor(d) || d > TRACE_MAX_ID) {
			line_error(rd, line, "hash_ids[%zu] is not a non-negative integer", i);
			goto cleanup;
		}
		rd->t->ids[rd->t->nids + i++] = (uint64_t)d;
	}
	rd->prev_ms = row.t_ms;
	if (rd->rows++ >= rd->skip) {
		row.ids_off = rd->t->nids;
		row.nids = nids;
		rd->t->nids += nids;
		rd->t->rows[rd->t->n++] = row;
		rd->done = rd->limit && rd->t->n == rd->limit;
	}
	rc = 0;
cleanup:
	cJSON_Delete(o);
	return rc;
}

int trace_parse(const char *text, size_t len, size_t skip, size_t limit, struct trace *t, char *err,
		size_t errlen)
{
	struct reader rd = {.t = t, .skip = skip, .limit = limit, .err = err, .errlen = errlen};
	const char *p = text, *end = text + len;
	uint32_t line = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	while (p < end && !rd.done) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if ((rc = parse_line(&rd, p, n, ++line)))
			goto fail;
		p += n + (nl ? 1 : 0);
	}
	return 0;
fail:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return rc;
}

int trace_load(const char *path, size_t skip, size_t limit, struct trace *t, char *err,
	       size_t errlen)
{
	struct reader rd = {.t = t, .skip = skip, .limit = limit, .err = err, .errlen = errlen};
	FILE *f = fopen(path, "r");
	char *lb = NULL, pre[256];
	size_t cap = 0;
	uint32_t line = 0;
	ssize_t n;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (!rd.done && (n = getline(&lb, &cap, f)) >= 0) {
		if (n && lb[n - 1] == '\n')
			n--;
		if ((rc = parse_line(&rd, lb, (size_t)n, ++line)))
			break;
	}
	if (!rc && ferror(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	} else if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
	} else if (rc) {
		snprintf(pre, sizeof(pre), "%s", err);
		snprintf(err, errlen, "%s: %s", path, pre);
	}
	free(lb);
	fclose(f);
	return rc;
}

void trace_free(struct trace *t)
{
	free(t->rows);
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

/* splitmix64's output function: a bijection of 64-bit words that mixes every bit. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint32_t trace_token(uint64_t id, uint32_t pos)
{
	return TRACE_TOKEN_FIRST + (uint32_t)(mix64(mix64(id) ^ pos) % TRACE_TOKEN_COUNT);
}

/* The last block's length of row r with bt tokens per hash id, and whether the row's lengths do
 * not fit its ids at the format's own 512 tokens per id.
 *
 * The last block gets round(input_length * bt / 512) - (n - 1) * bt tokens, clamped to 1..bt:
 * - below 1: at small bt a last block of r tokens rounds to 0 when r * bt / 512 < 0.5 (input
 *   513 over 2 ids at bt 16 rounds to 16 tokens, all of them in block 0); a row that names more
 *   ids than its length fills does the same. The block keeps 1 token, so every id the row names
 *   still reaches the workers; the prompt grows by at most the deficit.
 * - above bt: the row's length runs past its last id. No content is named for the rest, so the
 *   prompt stops at n whole blocks (shorter than input_length says). */
static uint32_t last_len(const struct trace_row *r, uint32_t bt, bool *clamped)
{
	uint64_t scaled = (r->input_length * bt + TRACE_FORMAT_BLOCK / 2) / TRACE_FORMAT_BLOCK;
	uint64_t before = (uint64_t)(r->nids - 1) * bt;
	uint64_t fmt_before = (uint64_t)(r->nids - 1) * TRACE_FORMAT_BLOCK;

	if (clamped)
		*clamped = r->input_length <= fmt_before ||
			   r->input_length > fmt_before + TRACE_FORMAT_BLOCK;
	if (scaled <= before)
		return 1;
	if (scaled - before > bt)
		return bt;
	return (uint32_t)(scaled - before);
}

uint32_t trace_block_len(const struct trace_row *r, uint32_t bt, size_t i)
{
	if (i + 1 < r->nids)
		return bt;
	return i + 1 == r->nids ? last_len(r, bt, NULL) : 0;
}

uint64_t trace_prompt_len(const struct trace_row *r, uint32_t bt, bool *clamped)
{
	if (!r->nids) {
		if (clamped)
			*clamped = false;
		return 0;
	}
	return (uint64_t)(r->nids - 1) * bt + last_len(r, bt, clamped);
}

void trace_prompt(const struct trace *t, const struct trace_row *r, uint32_t bt, uint32_t *out)
{
	for (size_t i = 0; i < r->nids; i++) {
		uint64_t id = t->ids[r->ids_off + i];
		uint32_t n = trace_block_len(r, bt, i);

		for (uint32_t k = 0; k < n; k++)
			*out++ = trace_token(id, k);
	}
}

uint32_t trace_max_tokens(const struct trace_row *r, uint32_t bt, uint32_t cap)
{
	uint64_t m = (r->output_length * bt + TRACE_FORMAT_BLOCK / 2) / TRACE_FORMAT_BLOCK;

	if (m < 1)
		m = 1;
	if (cap && m > cap)
		m = cap;
	return (uint32_t)m;
}

/* The trie of hash-id chains (see the top of this file). A slot is free when node == 0. */
struct chain_slot {
	uint64_t parent; /* the parent's node number, 0 for the root */
	uint64_t id;
	uint64_t node;	 /* this chain's node number, 1.. */
	uint32_t maxlen; /* the longest its last block was in any row so far */
};

struct chains {
	struct chain_slot *s;
	size_t mask;
	uint64_t nodes;
};

/* The slot of (parent, id): its node, or the free slot where it goes. */
static struct chain_slot *chains_slot(struct chains *c, uint64_t parent, uint64_t id)
{
	size_t i = (size_t)mix64(mix64(parent) ^ id) & c->mask;

	while (c->s[i].node && (c->s[i].parent != parent || c->s[i].id != id))
		i = (i + 1) & c->mask;
	return &c->s[i];
}

int trace_ideal(const struct trace *t, uint32_t bt, uint32_t kv_block, struct trace_reuse *out,
		uint64_t *row_cached)
{
	struct chains c = {0};
	size_t cap = 16;

	memset(out, 0, sizeof(*out));
	while (cap < 2 * t->nids + 1)
		cap *= 2;
	c.s = calloc(cap, sizeof(*c.s));
	if (!c.s)
		return -ENOMEM;
	c.mask = cap - 1;
	for (size_t k = 0; k < t->n; k++) {
		const struct trace_row *r = &t->rows[k];
		const uint64_t *ids = t->ids + r->ids_off;
		uint64_t len = trace_prompt_len(r, bt, NULL), match = 0, parent = 0, cached;

		/* The longest token prefix shared with an earlier row: whole blocks while both had
		 * them full, then the shorter of the two at the first block either cut. */
		for (size_t i = 0; i < r->nids; i++) {
			struct chain_slot *s = chains_slot(&c, parent, ids[i]);
			uint32_t bl = trace_block_len(r, bt, i), m;

			if (!s->node)
				break;
			m = s->maxlen < bl ? s->maxlen : bl;
			match += m;
			if (m < bt)
				break;
			parent = s->node;
		}
		cached = (match < len - 1 ? match : len - 1) / kv_block * kv_block;
		if (row_cached)
			row_cached[k] = cached;
		out->prompt_tokens += len;
		out->cached_tokens += cached;
		out->hit_rows += cached > 0;
		parent = 0;
		for (size_t i = 0; i < r->nids; i++) {
			struct chain_slot *s = chains_slot(&c, parent, ids[i]);
			uint32_t bl = trace_block_len(r, bt, i);

			if (!s->node) {
				s->parent = parent;
				s->id = ids[i];
				s->node = ++c.nodes;
			}
			if (bl > s->maxlen)
				s->maxlen = bl;
			parent = s->node;
		}
	}
	out->ratio = out->prompt_tokens ? (double)out->cached_tokens / out->prompt_tokens : 0;
	free(c.s);
	return 0;
}
