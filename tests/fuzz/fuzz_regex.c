// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/regex. Differential: every match the engine finds is
 * checked against a slow, plainly written matcher here (a naive backtracker over the decoded code
 * points, continuation-passing, one recursion per step; the same utf8_get reading of ill-formed
 * bytes as U+FFFD, the same unicode_prop table, whose categories tests/js/verify_unicode.mjs
 * checks against the reference). Beyond no crash and no sanitizer report:
 *   - data[0] % 10 < 7: family pattern (data[0] % 10) (Llama 3, Qwen2, DeepSeek B1/B2/B3, gpt-oss,
 *     Mistral-Nemo) over the text data[1..]: the engine's matches (as regex_next iterates them),
 *     compiled both ways (direct backtracker, REGEX_PROGRAM_ONLY), equal the naive matcher's;
 *   - 7, 8: a random pattern built from the next bytes by a small grammar (literals, (?i)
 *     literals, classes, groups, alternation, greedy and lazy {m,n}, lookaheads), written as text
 *     for the engine and as a tree for the naive matcher, over the rest as text: same check, where
 *     the engine compiles it and stays within its budget;
 *     and where the tokenizer has a hand-written state machine for the pattern (Llama 3, Qwen2,
 *     gpt-oss, Mistral-Nemo, and DeepSeek V3's three Splits in turn with B3: tok_split_fast) and
 *     the text is valid UTF-8, its pieces are the engine's matches (for DeepSeek, the pieces of
 *     B1, then B2 on each, then B3 on each, matches and gaps);
 *   - 9: the rest as a raw pattern: compiling never crashes, and what compiles searches the
 *     pattern's own bytes with results inside bounds. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "prompt/regex.h"
#include "prompt/tokenizer.h"
#include "prompt/unicode_tables.h"

#define TEXT_MAX 200 /* code points the naive matcher reads (its recursion grows with them) */

/* --- the naive matcher ---------------------------------------------------------------------- */

enum { K_CLS, K_SEQ, K_ALT, K_REP, K_LOOK };

typedef bool (*pred_fn)(uint32_t c);

struct nd {
	int kind;
	pred_fn pred; /* K_CLS: membership, or NULL for lit */
	uint32_t lit; /* K_CLS without pred: this code point (icase: any of the same simple fold) */
	bool icase, neg;   /* neg: K_CLS negated, K_LOOK negative */
	bool greedy;	   /* K_REP */
	int min, max;	   /* K_REP; max -1: no bound */
	struct nd *kid[8]; /* K_SEQ, K_ALT: children; K_REP, K_LOOK: kid[0] */
	int nkid;
};

struct cont {
	const struct nd *x;
	int idx; /* K_SEQ: next child; K_REP: iterations done */
	const struct cont *next;
};

static uint32_t cps[TEXT_MAX];
static size_t offs[TEXT_MAX + 1];
static int ncp;
static long steps;

static bool cls_has(const struct nd *x, uint32_t c)
{
	bool in;

	if (x->pred)
		in = x->pred(c);
	else if (x->icase)
		in = unicode_fold_simple(c) == unicode_fold_simple(x->lit);
	else
		in = c == x->lit;
	return in != x->neg;
}

static int match(const struct nd *x, int pos, const struct cont *k, int *end);

static int run_cont(const struct cont *k, int pos, int *end)
{
	if (++steps > 200000)
		return -1; /* give up: as the engine's budget, not a verdict */
	if (!k) {
		*end = pos;
		return 1;
	}
	if (k->x->kind == K_SEQ) {
		if (k->idx == k->x->nkid)
			return run_cont(k->next, pos, end);
		struct cont c = {k->x, k->idx + 1, k->next};
		return match(k->x->kid[k->idx], pos, &c, end);
	}
	/* K_REP after k->idx iterations */
	{
		const struct nd *x = k->x;
		struct cont c = {x, k->idx + 1, k->next};
		bool more = x->max < 0 || k->idx < x->max, done = k->idx >= x->min;
		int r;
		if (x->greedy) {
			if (more && (r = match(x->kid[0], pos, &c, end)))
				return r;
			return done ? run_cont(k->next, pos, end) : 0;
		}
		if (done && (r = run_cont(k->next, pos, end)))
			return r;
		return more ? match(x->kid[0], pos, &c, end) : 0;
	}
}

/* Matches x at pos, then the continuation k: 1 (end in *end), 0, -1 (gave up). */
static int match(const struct nd *x, int pos, const struct cont *k, int *end)
{
	int r, e;

	switch (x->kind) {
	case K_CLS:
		if (pos < ncp && cls_has(x, cps[pos]))
			return run_cont(k, pos + 1, end);
		return 0;
	case K_SEQ: {
		struct cont c = {x, 0, k};
		return run_cont(&c, pos, end);
	}
	case K_ALT:
		for (int i = 0; i < x->nkid; i++)
			if ((r = match(x->kid[i], pos, k, end)))
				return r;
		return 0;
	case K_REP: {
		struct cont c = {x, 0, k};
		return run_cont(&c, pos, end);
	}
	default: /* K_LOOK: atomic, consumes nothing */
		r = match(x->kid[0], pos, NULL, &e);
		if (r < 0)
			return r;
		return r != x->neg ? run_cont(k, pos, end) : 0;
	}
}

/* --- node construction ---------------------------------------------------------------------- */

static struct nd pool[4096];
static int npool;

static struct nd *mk(int kind)
{
	struct nd *x;

	if (npool >= (int)(sizeof(pool) / sizeof(pool[0])))
		abort();
	x = &pool[npool++];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->greedy = true;
	return x;
}

static struct nd *cls(pred_fn p, bool neg)
{
	struct nd *x = mk(K_CLS);
	x->pred = p;
	x->neg = neg;
	return x;
}

static struct nd *lit(uint32_t c, bool icase)
{
	struct nd *x = mk(K_CLS);
	x->lit = c;
	x->icase = icase;
	return x;
}

static struct nd *rep(struct nd *a, int min, int max)
{
	struct nd *x = mk(K_REP);
	x->kid[0] = a;
	x->nkid = 1;
	x->min = min;
	x->max = max;
	return x;
}

static struct nd *look(struct nd *a, bool neg)
{
	struct nd *x = mk(K_LOOK);
	x->kid[0] = a;
	x->nkid = 1;
	x->neg = neg;
	return x;
}

static struct nd *group(int kind, int n, struct nd **kids)
{
	struct nd *x = mk(kind);
	for (int i = 0; i < n; i++)
		x->kid[i] = kids[i];
	x->nkid = n;
	return x;
}
#define SEQ(...)                                                                                   \
	group(K_SEQ, sizeof((struct nd *[]){__VA_ARGS__}) / sizeof(struct nd *),                   \
	      (struct nd *[]){__VA_ARGS__})
#define ALT(...)                                                                                   \
	group(K_ALT, sizeof((struct nd *[]){__VA_ARGS__}) / sizeof(struct nd *),                   \
	      (struct nd *[]){__VA_ARGS__})

static unsigned gc(uint32_t c)
{
	return unicode_prop(c) & UPROP_GC_MASK;
}
static bool p_l(uint32_t c)
{
	return gc(c) <= UGC_LO;
}
static bool p_n(uint32_t c)
{
	return gc(c) >= UGC_ND && gc(c) <= UGC_NO;
}
static bool p_p(uint32_t c)
{
	return gc(c) >= UGC_PC && gc(c) <= UGC_PO;
}
static bool p_s(uint32_t c)
{
	return gc(c) >= UGC_SM && gc(c) <= UGC_SO;
}
static bool p_m(uint32_t c)
{
	return gc(c) >= UGC_MN && gc(c) <= UGC_ME;
}
static bool p_space(uint32_t c)
{
	return unicode_prop(c) & UPROP_SPACE;
}
static bool p_word(uint32_t c)
{
	return unicode_prop(c) & UPROP_WORD;
}
static bool p_digit(uint32_t c)
{
	return gc(c) == UGC_ND;
}
static bool p_crlf(uint32_t c)
{
	return c == '\r' || c == '\n';
}
static bool p_crlf_slash(uint32_t c)
{
	return c == '\r' || c == '\n' || c == '/';
}
static bool p_not_crlf_l_n(uint32_t c)
{
	return !p_crlf(c) && !p_l(c) && !p_n(c);
}
static bool p_not_s_l_n(uint32_t c)
{
	return !p_space(c) && !p_l(c) && !p_n(c);
}
static bool p_not_crlf_l_p_s(uint32_t c)
{
	return !p_crlf(c) && !p_l(c) && !p_p(c) && !p_s(c);
}
static bool p_l_m(uint32_t c)
{
	return p_l(c) || p_m(c);
}
static bool p_p_s(uint32_t c)
{
	return p_p(c) || p_s(c);
}
static bool p_upper(uint32_t c) /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
{
	unsigned g = gc(c);
	return g == UGC_LU || g == UGC_LT || g == UGC_LM || g == UGC_LO || p_m(c);
}
static bool p_lower(uint32_t c) /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
{
	unsigned g = gc(c);
	return g == UGC_LL || g == UGC_LM || g == UGC_LO || p_m(c);
}
static bool p_ascii_punct(uint32_t c)
{
	return c < 0x80 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (int)c) && c;
}
static bool p_ascii_alpha(uint32_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
static bool p_cjk(uint32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) ||
	       (c >= 0x30A0 && c <= 0x30FF);
}
static bool p_not_nl(uint32_t c)
{
	return c != '\n';
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
static struct nd *contractions(void)
{
	struct nd *q = lit('\'', true);
	return ALT(SEQ(q, lit('s', true)), SEQ(q, lit('t', true)),
		   SEQ(q, lit('r', true), lit('e', true)), SEQ(q, lit('v', true), lit('e', true)),
		   SEQ(q, lit('m', true)), SEQ(q, lit('l', true), lit('l', true)),
		   SEQ(q, lit('d', true)));
}

/* \s*[\r\n]+|\s+(?!\S)|\s+ : the three white space alternatives every pattern ends with */
static void ws_tail(struct nd **a)
{
	a[0] = SEQ(rep(cls(p_space, false), 0, -1), rep(cls(p_crlf, false), 1, -1));
	a[1] = SEQ(rep(cls(p_space, false), 1, -1), look(cls(p_space, true), true));
	a[2] = rep(cls(p_space, false), 1, -1);
}

static struct nd *family_tree(int f)
{
	struct nd *t[3];

	ws_tail(t);
	switch (f) {
	case 0: /* Llama 3 */
	case 1: /* Qwen2 */
		return ALT(contractions(),
			   SEQ(rep(cls(p_not_crlf_l_n, false), 0, 1), rep(cls(p_l, false), 1, -1)),
			   rep(cls(p_n, false), 1, f == 0 ? 3 : 1),
			   SEQ(rep(lit(' ', false), 0, 1), rep(cls(p_not_s_l_n, false), 1, -1),
			       rep(cls(p_crlf, false), 0, -1)),
			   t[0], t[1], t[2]);
	case 2:
		return rep(cls(p_n, false), 1, 3);
	case 3:
		return rep(cls(p_cjk, false), 1, -1);
	case 4:
		return ALT(
		    SEQ(cls(p_ascii_punct, false), rep(cls(p_ascii_alpha, false), 1, -1)),
		    SEQ(rep(cls(p_not_crlf_l_p_s, false), 0, 1), rep(cls(p_l_m, false), 1, -1)),
		    SEQ(rep(lit(' ', false), 0, 1), rep(cls(p_p_s, false), 1, -1),
			rep(cls(p_crlf, false), 0, -1)),
		    t[0], t[1], t[2]);
	default: { /* 5: gpt-oss, 6: Mistral-Nemo (no contractions, \p{N} alone) */
		bool oss = f == 5;
		struct nd *a1 =
		    SEQ(rep(cls(p_not_crlf_l_n, false), 0, 1), rep(cls(p_upper, false), 0, -1),
			rep(cls(p_lower, false), 1, -1), rep(contractions(), 0, 1));
		struct nd *a2 =
		    SEQ(rep(cls(p_not_crlf_l_n, false), 0, 1), rep(cls(p_upper, false), 1, -1),
			rep(cls(p_lower, false), 0, -1), rep(contractions(), 0, 1));
		if (!oss)
			a1->nkid = a2->nkid = 3;
		return ALT(a1, a2, rep(cls(p_n, false), 1, oss ? 3 : 1),
			   SEQ(rep(lit(' ', false), 0, 1), rep(cls(p_not_s_l_n, false), 1, -1),
			       rep(cls(p_crlf_slash, false), 0, -1)),
			   t[0], t[1], t[2]);
	}
	}
}

static const char *const family_pats[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    "\\p{N}{1,3}",
    "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'"
    "s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'"
    "s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

/* --- random patterns: text and tree together ------------------------------------------------ */

struct gen {
	const uint8_t *p, *end;
	char pat[4096];
	size_t n;
	bool overflow;
};

static unsigned take(struct gen *g, unsigned k)
{
	return g->p < g->end ? *g->p++ % k : 0;
}

static void put(struct gen *g, const char *s)
{
	size_t l = strlen(s);
	if (g->n + l >= sizeof(g->pat)) {
		g->overflow = true;
		return;
	}
	memcpy(g->pat + g->n, s, l);
	g->n += l;
}

static const struct {
	const char *text;
	pred_fn pred;
	bool neg;
} gen_classes[] = {
    {"\\p{L}", p_l, false},
    {"\\p{N}", p_n, false},
    {"\\s", p_space, false},
    {"\\S", p_space, true},
    {"\\w", p_word, false},
    {"\\d", p_digit, false},
    {"[\\r\\n]", p_crlf, false},
    {"[^\\s\\p{L}\\p{N}]", p_not_s_l_n, false},
    {"\\p{M}", p_m, false},
    {"[\\p{P}\\p{S}]", p_p_s, false},
    {".", p_not_nl, false},
    {"\\P{L}", p_l, true},
    {"[a-zA-Z]", p_ascii_alpha, false},
};
static const uint32_t gen_lits[] = {'a',  'b',	's',	'k',	 ' ',	'\'',
				    '\n', 0xE9, 0x4E2D, 0x1F600, 0x17F, 0x212A};

static struct nd *gen_node(struct gen *g, int depth);

static struct nd *gen_atom(struct gen *g, int depth)
{
	unsigned k = take(g, depth > 3 ? 3 : 6);
	char buf[16];

	if (k == 0 || k == 1) {
		uint32_t c = gen_lits[take(g, sizeof(gen_lits) / sizeof(gen_lits[0]))];
		uint8_t u[5] = {0};
		bool ic = take(g, 4) == 0 && c != ' ' && c != '\n' && c != '\'';
		utf8_put(u, c);
		if (ic)
			put(g, "(?i:");
		if (c == '\n')
			put(g, "\\n");
		else
			put(g, (const char *)u);
		if (ic)
			put(g, ")");
		return lit(c, ic);
	}
	if (k == 2) {
		unsigned i = take(g, sizeof(gen_classes) / sizeof(gen_classes[0]));
		put(g, gen_classes[i].text);
		return cls(gen_classes[i].pred, gen_classes[i].neg);
	}
	if (k == 5) {
		bool neg = take(g, 2);
		struct nd *a;
		put(g, neg ? "(?!" : "(?=");
		a = gen_node(g, depth + 1);
		put(g, ")");
		return look(a, neg);
	}
	put(g, "(?:");
	{
		struct nd *a = gen_node(g, depth + 1);
		put(g, ")");
		(void)buf;
		return a;
	}
}

static struct nd *gen_piece(struct gen *g, int depth)
{
	struct nd *a = gen_atom(g, depth);
	unsigned q = take(g, 8);
	int min, max;
	char buf[32];

	if (a->kind == K_LOOK || q < 3)
		return a;
	switch (q) {
	case 3:
		min = 0, max = 1, put(g, "?");
		break;
	case 4:
		min = 0, max = -1, put(g, "*");
		break;
	case 5:
		min = 1, max = -1, put(g, "+");
		break;
	default:
		min = (int)take(g, 4);
		max = take(g, 3) == 0 ? -1 : min + (int)take(g, 3);
		if (max < 0)
			snprintf(buf, sizeof(buf), "{%d,}", min);
		else
			snprintf(buf, sizeof(buf), "{%d,%d}", min, max);
		put(g, buf);
		break;
	}
	a = rep(a, min, max);
	if (take(g, 4) == 0) {
		a->greedy = false;
		put(g, "?");
	}
	return a;
}

static struct nd *gen_seq(struct gen *g, int depth)
{
	struct nd *x = mk(K_SEQ);
	int n = 1 + (int)take(g, 4);

	for (int i = 0; i < n; i++)
		x->kid[x->nkid++] = gen_piece(g, depth);
	return x;
}

static struct nd *gen_node(struct gen *g, int depth)
{
	struct nd *x = mk(K_ALT);
	int n = 1 + (int)take(g, depth ? 3 : 5);

	for (int i = 0; i < n; i++) {
		if (i)
			put(g, "|");
		x->kid[x->nkid++] = gen_seq(g, depth);
	}
	return x;
}

/* --- the checks ----------------------------------------------------------------------------- */

static void decode(const uint8_t *s, size_t n)
{
	size_t i = 0;
	uint32_t c;

	ncp = 0;
	while (i < n && ncp < TEXT_MAX) {
		offs[ncp] = i;
		i += utf8_get(s + i, n - i, &c);
		cps[ncp++] = c;
	}
	offs[ncp] = i;
}

/* The engine's matches against the naive matcher's, iterated as the reference iterates them. */
static void differential(const struct regex *re, const struct nd *tree, const uint8_t *s, size_t n)
{
	struct regex_iter it = {0};
	int pos = 0, last = -1;

	steps = 0;
	for (;;) {
		size_t a, b;
		int r = regex_next(re, s, n, &it, &a, &b), ms = -1, me = -1, e;

		if (r < 0)
			return; /* over budget: the caller falls back; nothing to compare */
		/* the naive search: leftmost start, empty match right after the last one skipped */
		for (int p = pos; p <= ncp && ms < 0; p++) {
			int m = match(tree, p, NULL, &e);
			if (m < 0)
				return;
			if (m && !(e == p && e == last)) {
				ms = p;
				me = e;
			} else if (m) {
				continue;
			}
		}
		if (ms < 0) {
			if (r != 0) {
				fprintf(stderr, "engine matched %zu..%zu, naive matcher none\n", a,
					b);
				abort();
			}
			return;
		}
		if (r != 1 || a != offs[ms] || b != offs[me]) {
			fprintf(stderr, "engine %d %zu..%zu, naive %zu..%zu\n", r, r == 1 ? a : 0,
				r == 1 ? b : 0, offs[ms], offs[me]);
			abort();
		}
		pos = me;
		last = me;
	}
}

static struct regex *fam[7][2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	for (int f = 0; f < 7; f++)
		for (int o = 0; o < 2; o++) {
			fam[f][o] =
			    regex_compile_opts(family_pats[f], strlen(family_pats[f]),
					       o ? REGEX_PROGRAM_ONLY : 0, err, sizeof(err));
			if (!fam[f][o]) {
				fprintf(stderr, "fuzz_regex: pattern %d: %s\n", f, err);
				abort();
			}
		}
	return 0;
}

/* tok_split_fast's kind for family pattern m, or 0 where the tokenizer has no state machine. */
static const int sm_kind[7] = {3, 1, 0, 0, 0, 4, 5};

static bool valid_utf8(const uint8_t *s, size_t n)
{
	for (size_t i = 0, l; i < n; i += l) {
		uint32_t c;

		l = utf8_get(s + i, n - i, &c);
		if (c == 0xFFFD &&
		    !(l == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD))
			return false;
	}
	return true;
}

/* The state machine's pieces of s[0..n) against the engine's matches: the same cuts. */
static void sm_differential(int kind, const struct regex *re, const uint8_t *s, size_t n)
{
	struct regex_iter it = {0};
	size_t a, b, i = 0;
	int r;

	struct tok_split_state st = {0};

	if (!kind || !valid_utf8(s, n))
		return;
	while (i < n) {
		size_t e = tok_split_fast(kind, s, n, i, &st);

		r = regex_next(re, s, n, &it, &a, &b);
		if (r < 0)
			return; /* the engine's budget */
		if (r != 1 || a != i || b != e || e <= i || e > n) {
			fprintf(stderr,
				"state machine %d: piece [%zu, %zu), engine %d [%zu, %zu)\n", kind,
				i, e, r, a, b);
			abort();
		}
		i = e;
	}
	if (regex_next(re, s, n, &it, &a, &b) == 1 && a != b)
		abort(); /* the engine matched past the machine's last piece */
}

/* The pieces of s[off..off+n) under the Isolated Splits re[0..depth) in turn (a piece of each
 * split by the next), appended to cuts (their ends). Returns -1 where the engine gave up. */
static int chain_pieces(const struct regex *const *re, int depth, const uint8_t *s, size_t off,
			size_t n, size_t *cuts, size_t *nc, size_t max)
{
	struct regex_iter it = {0};
	size_t a, b, prev = 0;
	int r;

	if (!depth) {
		if (*nc >= max)
			return -1;
		cuts[(*nc)++] = off + n;
		return 0;
	}
	while ((r = regex_next(re[0], s + off, n, &it, &a, &b)) == 1) {
		if (a == b)
			continue;
		if ((a > prev &&
		     chain_pieces(re + 1, depth - 1, s, off + prev, a - prev, cuts, nc, max) < 0) ||
		    chain_pieces(re + 1, depth - 1, s, off + a, b - a, cuts, nc, max) < 0)
			return -1;
		prev = b;
	}
	if (r < 0)
		return -1;
	return prev < n ? chain_pieces(re + 1, depth - 1, s, off + prev, n - prev, cuts, nc, max)
			: 0;
}

/* DeepSeek V3's state machine against the engine running its three Splits in turn. */
static void sm_chain_differential(const uint8_t *s, size_t n)
{
	static size_t cuts[4 * TEXT_MAX + 8];
	const struct regex *re[3] = {fam[2][0], fam[3][0], fam[4][0]};
	struct tok_split_state st = {0};
	size_t nc = 0, i = 0, k = 0;

	if (!valid_utf8(s, n) ||
	    chain_pieces(re, 3, s, 0, n, cuts, &nc, sizeof(cuts) / sizeof(cuts[0])) < 0)
		return;
	while (i < n) {
		size_t e = tok_split_fast(6, s, n, i, &st);

		if (k >= nc || cuts[k] != e || e <= i) {
			fprintf(stderr,
				"deepseek state machine: piece [%zu, %zu), chain's end %zu\n", i, e,
				k < nc ? cuts[k] : 0);
			abort();
		}
		i = e;
		k++;
	}
	if (k != nc)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned mode;

	if (!size)
		return 0;
	mode = data[0] % 10;
	npool = 0;
	if (mode < 7) {
		const uint8_t *s = data + 1;
		size_t n = size - 1;
		struct nd *tree = family_tree((int)mode);
		decode(s, n);
		n = offs[ncp];
		differential(fam[mode][0], tree, s, n);
		differential(fam[mode][1], tree, s, n);
		sm_differential(sm_kind[mode], fam[mode][0], s, n);
		if (mode >= 2 && mode <= 4)
			sm_chain_differential(s, n);
		return 0;
	}
	if (mode < 9) {
		struct gen g = {0};
		size_t glen = size > 1 ? data[1] % 48 : 0;
		struct nd *tree;
		char err[256];

		if (size < 2 + glen)
			return 0;
		g.p = data + 2;
		g.end = data + 2 + glen;
		tree = gen_node(&g, 0);
		if (g.overflow)
			return 0;
		for (unsigned o = 0; o < 2; o++) {
			struct regex *re = regex_compile_opts(
			    g.pat, g.n, o ? REGEX_PROGRAM_ONLY : 0, err, sizeof(err));
			if (!re)
				return 0; /* refused (e.g. a quantified group that can match empty)
					   */
			decode(g.end, size - 2 - glen);
			differential(re, tree, g.end, offs[ncp]);
			regex_free(re);
		}
		return 0;
	}
	{
		char err[128];
		struct regex *re =
		    regex_compile((const char *)data + 1, size - 1, err, sizeof(err));
		struct regex_iter it = {0};
		size_t a, b, prev = 0;
		int r, k = 0;

		if (!re) {
			if (!memchr(err, 0, sizeof(err)) || !err[0])
				abort(); /* a refusal always says why */
			return 0;
		}
		while (k++ < 64 && (r = regex_next(re, data + 1, size - 1, &it, &a, &b)) == 1) {
			if (a > b || b > size - 1 || a < prev)
				abort();
			prev = b;
		}
		regex_free(re);
		return 0;
	}
}
