// SPDX-License-Identifier: Apache-2.0
/*
 * jinja_eval: renders a loaded template's tree with the request's variables, with jinja2 3.1's
 * semantics in transformers' environment (jinja2/runtime.py, filters.py, tests.py, sandbox.py):
 * - Scopes: each for-loop iteration has its own (a set inside does not leak, and the next
 *   iteration starts from the outer values again); if does not; a macro sees its arguments and
 *   the template's top level as it is when the macro is called, never the caller's loop.
 * - Undefined (plain): prints "", is false, iterates as empty, has length 0; an attribute or
 *   item of it, arithmetic, ordering or a call raises UndefinedError with jinja2's message.
 *   A missing attribute or item of a defined value is an Undefined that remembers why.
 * - obj.name is Python's getattr first (so d.items is the method even when d has a key
 *   "items"), then obj["name"]; obj[key] the other way round. The sandbox refuses a mutating
 *   method of list or dict and any __dunder__ (printing it gives "", calling it raises
 *   SecurityError).
 * - range() is refused beyond 100,000 items, as the sandbox does (MAX_RANGE).
 * Bounds (struct jinja_limits) are checked as the render goes: steps at every node, depth at
 * every nested evaluation and call, iterations at every loop pass, the output and every string
 * built against out_bytes, all values against mem_bytes (the arena).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prompt/jinja_int.h"
#include "prompt/unicode_tables.h"

#define MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE: items of one range() */
#define SCOPE_INLINE 8	 /* variables a scope holds before it allocates */

enum { FLOW_OK = 0, FLOW_BREAK = 1, FLOW_CONTINUE = 2 };

struct scope {
	struct scope *parent;
	uint32_t n, cap;
	int *syms;
	struct jv *vals;
	int isyms[SCOPE_INLINE];
	struct jv ivals[SCOPE_INLINE];
};

struct rctx {
	const struct jinja_template *t;
	struct jarena a;
	struct jerr er;
	struct jinja_limits lim;
	struct jinja_clock clock;
	struct buf *out;
	uint64_t steps, iters;
	unsigned depth;
	struct scope *root;
	int line;		   /* of the node being evaluated, for messages */
	struct jlist *gen_partial; /* the list a generator filter is filling */
};

static int ev(struct rctx *r, const struct node *n, struct scope *s, struct jv *out);
static int gen_raise(struct rctx *r, const struct jlist *l);
static int exec_body(struct rctx *r, const struct node *b, struct scope *s);

/* --- errors and limits ----------------------------------------------------------------------- */

static int oom(struct rctx *r)
{
	return jerr_set(&r->er, JINJA_LIMIT, r->line,
			r->a.over ? "memory limit of %zu bytes exceeded" : "out of memory (%zu)",
			r->lim.mem_bytes);
}

static int type_err(struct rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int type_err(struct rctx *r, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return jerr_set(&r->er, JINJA_TYPE, r->line, "%s", msg);
}

static int unsupported(struct rctx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int unsupported(struct rctx *r, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return jerr_set(&r->er, JINJA_UNSUPPORTED, r->line, "%s", msg);
}

static int step(struct rctx *r, const struct node *n)
{
	r->line = n->line;
	if (++r->steps > r->lim.steps)
		return jerr_set(&r->er, JINJA_LIMIT, n->line, "step limit of %llu exceeded",
				(unsigned long long)r->lim.steps);
	return 0;
}

static int check_out(struct rctx *r, struct buf *b)
{
	if (b->len > r->lim.out_bytes)
		return jerr_set(&r->er, JINJA_LIMIT, r->line, "output limit of %zu bytes exceeded",
				r->lim.out_bytes);
	return 0;
}

/* --- undefined -------------------------------------------------------------------------------- */

static struct jv mk_undef(struct rctx *r, int kind, const char *name, size_t nn,
			  const struct jv *obj)
{
	struct jundef *u = ja_alloc(&r->a, sizeof(*u));

	if (!u)
		return jv_undef(NULL);
	memset(u, 0, sizeof(*u));
	u->kind = (uint8_t)kind;
	u->name = name;
	u->name_n = nn;
	u->obj_type = obj ? jv_object_type(obj) : NULL;
	return jv_undef(u);
}

static struct jv undef_hint(struct rctx *r, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static struct jv undef_elem(struct rctx *r, const struct jv *obj, const struct jv *key)
{
	struct jv u;
	if (key->t == JV_INT) {
		u = mk_undef(r, JU_ELEM, NULL, 0, obj);
		if (u.u)
			u.u->elem = key->i;
		return u;
	}
	{
		struct buf b = {0};
		struct jerr er = {0};
		char *s;
		if (py_repr(&b, key, &er) || buf_printf(&b, "%s", "")) {
			/* a key Python prints with an address: its message cannot be matched */
			buf_free(&b);
			return undef_hint(r, JU_UNSUP,
					  "an undefined item whose key prints with an "
					  "address");
		}
		s = ja_strdup(&r->a, b.data, b.len);
		buf_free(&b);
		u = mk_undef(r, JU_ELEM, s, s ? strlen(s) : 0, obj);
		if (u.u)
			u.u->elem_is_str = true;
		return u;
	}
}

/* Raises the UndefinedError (or SecurityError) that using v raises in jinja2. */
static int undef_fail(struct rctx *r, const struct jv *v)
{
	const struct jundef *u = v->u;

	if (!u)
		return jerr_set(&r->er, JINJA_UNDEFINED, r->line, "'%s' is undefined", "missing");
	switch (u->kind) {
	case JU_NAME:
	case JU_ATTR: {
		/* the name as Python's repr() */
		struct buf b = {0};
		struct jv nm = jv_str(u->name, u->name_n);
		struct jerr ignore = {0};
		int rc;
		if (py_repr(&b, &nm, &ignore))
			return oom(r);
		if (u->kind == JU_NAME)
			rc = jerr_set(&r->er, JINJA_UNDEFINED, r->line, "%s is undefined", b.data);
		else
			rc = jerr_set(&r->er, JINJA_UNDEFINED, r->line, "'%s' has no attribute %s",
				      u->obj_type, b.data);
		buf_free(&b);
		return rc;
	}
	case JU_ELEM:
		if (u->elem_is_str)
			return jerr_set(&r->er, JINJA_UNDEFINED, r->line, "%s has no element %.*s",
					u->obj_type, (int)u->name_n, u->name);
		return jerr_set(&r->er, JINJA_UNDEFINED, r->line, "%s has no element %lld",
				u->obj_type, (long long)u->elem);
	case JU_HINT:
		return jerr_set(&r->er, JINJA_UNDEFINED, r->line, "%.*s", (int)u->name_n, u->name);
	case JU_UNSAFE:
		return jerr_set(&r->er, JINJA_SECURITY, r->line, "%.*s", (int)u->name_n, u->name);
	case JU_UNSUP:
		return jerr_set(&r->er, JINJA_UNSUPPORTED, r->line, "%.*s", (int)u->name_n,
				u->name);
	}
	return jerr_set(&r->er, JINJA_UNDEFINED, r->line, "undefined");
}

static struct jv undef_hint(struct rctx *r, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static struct jv undef_hint(struct rctx *r, int kind, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	char *s;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s = ja_strdup(&r->a, msg, strlen(msg));
	return mk_undef(r, kind, s, s ? strlen(s) : 0, NULL);
}

/* --- scopes ---------------------------------------------------------------------------------- */

static void scope_init(struct scope *s, struct scope *parent)
{
	s->parent = parent;
	s->n = 0;
	s->cap = SCOPE_INLINE;
	s->syms = s->isyms;
	s->vals = s->ivals;
}

static int scope_set(struct rctx *r, struct scope *s, int sym, struct jv v)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->syms[i] == sym) {
			s->vals[i] = v;
			return 0;
		}
	if (s->n == s->cap) {
		uint32_t cap = s->cap * 2;
		int *ns = ja_alloc(&r->a, cap * sizeof(*ns));
		struct jv *nv = ja_alloc(&r->a, cap * sizeof(*nv));
		if (!ns || !nv)
			return oom(r);
		memcpy(ns, s->syms, s->n * sizeof(*ns));
		memcpy(nv, s->vals, s->n * sizeof(*nv));
		s->syms = ns;
		s->vals = nv;
		s->cap = cap;
	}
	s->syms[s->n] = sym;
	s->vals[s->n] = v;
	s->n++;
	return 0;
}

static const struct jv *scope_find(const struct scope *s, int sym)
{
	for (; s; s = s->parent)
		for (uint32_t i = 0; i < s->n; i++)
			if (s->syms[i] == sym)
				return &s->vals[i];
	return NULL;
}

static int lookup(struct rctx *r, int sym, struct scope *s, struct jv *out)
{
	const struct jv *v = scope_find(s, sym);
	const char *name;

	if (v) {
		*out = *v;
		return 0;
	}
	for (int i = 0; i < JF_COUNT; i++)
		if (r->t->sym_global[i] == sym) {
			out->t = JV_FUNC;
			out->sub = (uint8_t)i;
			return 0;
		}
	name = r->t->syms[sym];
	*out = mk_undef(r, JU_NAME, name, strlen(name), NULL);
	return 0;
}

/* A frame starts: the names jinja2 starts as undefined there (jinja_parse.c, frames). */
static int frame_enter(struct rctx *r, const struct node *body, struct scope *s)
{
	for (uint32_t i = 0; i < body->npre; i++) {
		const char *name = r->t->syms[body->pre[i]];
		if (scope_set(r, s, body->pre[i], mk_undef(r, JU_NAME, name, strlen(name), NULL)))
			return -1;
	}
	return 0;
}

/* --- strings --------------------------------------------------------------------------------- */

static int mkstr(struct rctx *r, const char *s, size_t n, struct jv *out)
{
	char *c;
	if (n > r->lim.out_bytes)
		return jerr_set(&r->er, JINJA_LIMIT, r->line,
				"a string of %zu bytes: beyond the output limit of %zu", n,
				r->lim.out_bytes);
	if (!(c = ja_strdup(&r->a, s, n)))
		return oom(r);
	*out = jv_str(c, n);
	return 0;
}

/* str(v) as a string value (v itself when it is one). */
static int to_str(struct rctx *r, const struct jv *v, struct jv *out)
{
	struct buf b = {0};
	int rc;

	if (v->t == JV_STR) {
		*out = *v;
		return 0;
	}
	if (v->t == JV_UNDEF) {
		*out = jv_str("", 0);
		return 0;
	}
	if (py_str(&b, v, &r->er)) {
		buf_free(&b);
		return -1;
	}
	rc = mkstr(r, b.data ? b.data : "", b.len, out);
	buf_free(&b);
	return rc;
}

/* Is cp a letter Python may change the case of? ASCII letters are handled; the scripts without
 * case (CJK, kana, Hangul, Arabic, Hebrew, Indic, Thai) are not letters with case. */
static bool has_case(uint32_t cp)
{
	if (cp < 0x80)
		return false;
	if (cp == 0x345 || (cp >= 0x2160 && cp <= 0x2188) || (cp >= 0x24B6 && cp <= 0x24E9))
		return true;
	if ((unicode_cls(cp) & UCLS_MASK) != UCLS_LETTER)
		return false;
	if ((cp >= 0x590 && cp <= 0x6FF) || (cp >= 0x900 && cp <= 0xE7F) ||
	    (cp >= 0x3040 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7AF) ||
	    (cp >= 0x20000 && cp <= 0x3FFFF))
		return false;
	return true;
}

static int check_ascii_case(struct rctx *r, const struct jv *s, const char *what)
{
	for (size_t i = 0; i < s->n;) {
		size_t l = 1;
		uint32_t cp = (unsigned char)s->s[i];
		if (cp >= 0x80)
			cp = utf8_next(s->s + i, s->n - i, &l);
		if (has_case(cp))
			return unsupported(r, "%s of a string with non-ASCII letters", what);
		i += l;
	}
	return 0;
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_JTITLE };

static bool ascii_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static char up(char c)
{
	return c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
}
static char low(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static int str_case(struct rctx *r, const struct jv *s, int how, struct jv *out)
{
	char *o;
	bool prev_cased = false, start = true;

	if (check_ascii_case(r, s, how == CASE_UPPER ? "upper()" : "changing the case"))
		return -1;
	if (!(o = ja_alloc(&r->a, s->n + 1)))
		return oom(r);
	for (size_t i = 0; i < s->n; i++) {
		char c = s->s[i];
		switch (how) {
		case CASE_UPPER:
			c = up(c);
			break;
		case CASE_LOWER:
			c = low(c);
			break;
		case CASE_TITLE:
			if (ascii_alpha(c)) {
				c = prev_cased ? low(c) : up(c);
				prev_cased = true;
			} else {
				prev_cased = false;
			}
			break;
		case CASE_CAPITALIZE:
			c = i == 0 ? up(c) : low(c);
			break;
		case CASE_JTITLE: {
			/* jinja2's title: words begin after runs of -, white space, ( { [ < */
			bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' ||
				   py_isspace((unsigned char)c);
			if (sep) {
				start = true;
			} else {
				c = start ? up(c) : low(c);
				start = false;
			}
			break;
		}
		}
		o[i] = c;
	}
	o[s->n] = 0;
	*out = jv_str(o, s->n);
	return 0;
}

static void str_strip(const struct jv *s, const struct jv *chars, bool left, bool right,
		      struct jv *out)
{
	size_t b, e;

	py_strip(s->s, s->n, chars ? chars->s : NULL, chars ? chars->n : 0, left, right, &b, &e);
	*out = jv_str(s->s + b, e - b);
}

static const char *memfind(const char *h, size_t hn, const char *n, size_t nn)
{
	if (!nn)
		return h;
	if (nn > hn)
		return NULL;
	/* Short needles: memchr for the first byte, then a compare (at most nn per candidate). Also
	 * what keeps a replace loop linear under ASan, whose memmem checks the whole haystack per
	 * call. Long ones: memmem (linear for any input). */
	if (nn <= 16) {
		const char *end = h + hn - nn + 1, *p = h;

		while (p < end && (p = memchr(p, (unsigned char)n[0], (size_t)(end - p)))) {
			if (!memcmp(p + 1, n + 1, nn - 1))
				return p;
			p++;
		}
		return NULL;
	}
	return memmem(h, hn, n, nn);
}

static int str_replace(struct rctx *r, const struct jv *s, const struct jv *old,
		       const struct jv *new, int64_t count, struct jv *out)
{
	struct buf b = {0};
	size_t i = 0;
	int64_t done = 0;

	if (!old->n) {
		/* Python inserts new before every code point and at the end */
		size_t cps = utf8_count(s->s, s->n);
		for (size_t k = 0; k <= cps; k++) {
			size_t o = utf8_offset(s->s, s->n, k), l;
			if (count < 0 || done < count) {
				if (buf_append(&b, new->s, new->n))
					goto nomem;
				done++;
			}
			if (k < cps) {
				utf8_next(s->s + o, s->n - o, &l);
				if (buf_append(&b, s->s + o, l))
					goto nomem;
			}
			if (b.len > r->lim.out_bytes)
				break;
		}
	} else {
		while (i <= s->n) {
			const char *f = (count < 0 || done < count)
					    ? memfind(s->s + i, s->n - i, old->s, old->n)
					    : NULL;
			if (!f) {
				if (buf_append(&b, s->s + i, s->n - i))
					goto nomem;
				break;
			}
			if (buf_append(&b, s->s + i, (size_t)(f - (s->s + i))) ||
			    buf_append(&b, new->s, new->n))
				goto nomem;
			i = (size_t)(f - s->s) + old->n;
			done++;
			if (b.len > r->lim.out_bytes)
				break;
		}
	}
	{
		int rc = mkstr(r, b.data ? b.data : "", b.len, out);
		buf_free(&b);
		return rc;
	}
nomem:
	buf_free(&b);
	return oom(r);
}

static int str_split(struct rctx *r, const struct jv *s, const struct jv *sep, int64_t maxsplit,
		     bool from_right, struct jv *out)
{
	struct jlist *l = jl_new(&r->a, 4);
	struct jv piece;

	if (!l)
		return oom(r);
	if (sep && !sep->n)
		return type_err(r, "empty separator");
	if (!sep) {
		/* runs of white space; no empty strings */
		if (!from_right) {
			size_t i = 0;
			int64_t done = 0;
			for (;;) {
				size_t st, ln;
				while (i < s->n && py_isspace(utf8_next(s->s + i, s->n - i, &ln)))
					i += ln;
				if (i >= s->n)
					break;
				if (maxsplit >= 0 && done >= maxsplit) {
					size_t e = s->n;
					struct jv t = jv_str(s->s + i, e - i);
					str_strip(&t, NULL, false, true, &piece);
					if (jl_push(&r->a, l, piece))
						return oom(r);
					break;
				}
				st = i;
				while (i < s->n && !py_isspace(utf8_next(s->s + i, s->n - i, &ln)))
					i += ln;
				if (jl_push(&r->a, l, jv_str(s->s + st, i - st)))
					return oom(r);
				done++;
			}
		} else {
			size_t e = s->n;
			int64_t done = 0;
			struct jlist *rev = jl_new(&r->a, 4);
			if (!rev)
				return oom(r);
			for (;;) {
				size_t st, ln;
				while (e > 0) {
					st = e - 1;
					while (st > 0 && ((unsigned char)s->s[st] & 0xC0) == 0x80)
						st--;
					if (!py_isspace(utf8_next(s->s + st, e - st, &ln)))
						break;
					e = st;
				}
				if (!e)
					break;
				if (maxsplit >= 0 && done >= maxsplit) {
					struct jv t = jv_str(s->s, e);
					str_strip(&t, NULL, true, false, &piece);
					if (jl_push(&r->a, rev, piece))
						return oom(r);
					break;
				}
				st = e;
				while (st > 0) {
					size_t q = st - 1;
					while (q > 0 && ((unsigned char)s->s[q] & 0xC0) == 0x80)
						q--;
					if (py_isspace(utf8_next(s->s + q, st - q, &ln)))
						break;
					st = q;
				}
				if (jl_push(&r->a, rev, jv_str(s->s + st, e - st)))
					return oom(r);
				e = st;
				done++;
			}
			for (uint32_t k = rev->n; k > 0; k--)
				if (jl_push(&r->a, l, rev->v[k - 1]))
					return oom(r);
		}
	} else if (!from_right) {
		size_t i = 0;
		int64_t done = 0;
		for (;;) {
			const char *f = (maxsplit < 0 || done < maxsplit)
					    ? memfind(s->s + i, s->n - i, sep->s, sep->n)
					    : NULL;
			if (!f) {
				if (jl_push(&r->a, l, jv_str(s->s + i, s->n - i)))
					return oom(r);
				break;
			}
			if (jl_push(&r->a, l, jv_str(s->s + i, (size_t)(f - (s->s + i)))))
				return oom(r);
			i = (size_t)(f - s->s) + sep->n;
			done++;
		}
	} else {
		size_t e = s->n;
		int64_t done = 0;
		struct jlist *rev = jl_new(&r->a, 4);
		if (!rev)
			return oom(r);
		for (;;) {
			const char *f = NULL;
			if ((maxsplit < 0 || done < maxsplit) && e >= sep->n)
				for (size_t k = e - sep->n + 1; k > 0; k--)
					if (!memcmp(s->s + k - 1, sep->s, sep->n)) {
						f = s->s + k - 1;
						break;
					}
			if (!f) {
				if (jl_push(&r->a, rev, jv_str(s->s, e)))
					return oom(r);
				break;
			}
			if (jl_push(&r->a, rev,
				    jv_str(f + sep->n, e - (size_t)(f - s->s) - sep->n)))
				return oom(r);
			e = (size_t)(f - s->s);
			done++;
		}
		for (uint32_t k = rev->n; k > 0; k--)
			if (jl_push(&r->a, l, rev->v[k - 1]))
				return oom(r);
	}
	out->t = JV_LIST;
	out->sub = JL_LIST;
	out->l = l;
	return 0;
}

/* --- iteration ----------------------------------------------------------------------------- */

static struct jv mklist(struct jlist *l, int kind)
{
	struct jv v = {.t = JV_LIST, .sub = (uint8_t)kind, .l = l};
	return v;
}

/* Raises the error a lazy generator met, now that it is consumed. */
static int gen_raise(struct rctx *r, const struct jlist *l)
{
	return jerr_set(&r->er, l->err_status, l->err_line, "%s", l->err_msg);
}

/* The error just set, kept in a generator instead (see struct jlist). */
static int gen_poison(struct rctx *r, struct jv *out)
{
	struct jlist *l = r->gen_partial;
	struct jinja_error *e = r->er.e;
	char *msg;

	if (r->er.status == JINJA_LIMIT)
		return -1;
	r->er.set = false;
	if (!l && !(l = jl_new(&r->a, 0)))
		return oom(r);
	if (!(msg = ja_strdup(&r->a, e->msg, strlen(e->msg))))
		return oom(r);
	l->err_msg = msg;
	l->err_status = r->er.status;
	l->err_line = e->line;
	memset(e, 0, sizeof(*e));
	r->er.status = 0;
	*out = mklist(l, JL_GEN);
	return 0;
}

/* The items iterating v gives (Python's iter()), as a list. */
static int iterate(struct rctx *r, const struct jv *v, struct jlist **out)
{
	struct jlist *l;

	switch (v->t) {
	case JV_LIST:
		if (v->l->err_msg)
			return gen_raise(r, v->l);
		*out = v->l;
		return 0;
	case JV_UNDEF:
		if (!(*out = jl_new(&r->a, 0)))
			return oom(r);
		return 0;
	case JV_DICT:
		if (!(l = jl_new(&r->a, v->d->n)))
			return oom(r);
		for (uint32_t i = 0; i < v->d->n; i++)
			l->v[l->n++] = v->d->k[i];
		*out = l;
		return 0;
	case JV_STR: {
		size_t cps = utf8_count(v->s, v->n);
		if (cps > UINT32_MAX / 2 || !(l = jl_new(&r->a, (uint32_t)cps)))
			return oom(r);
		for (size_t i = 0; i < v->n;) {
			size_t len;
			utf8_next(v->s + i, v->n - i, &len);
			l->v[l->n++] = jv_str(v->s + i, len);
			i += len;
		}
		*out = l;
		return 0;
	}
	default:
		return type_err(r, "'%s' object is not iterable", jv_type_name(v));
	}
}

/* --- attribute and item access ----------------------------------------------------------- */

static bool name_in(const char *s, size_t n, const char *const *names)
{
	for (; *names; names++)
		if ((*names)[0] == s[0] && !strncmp(*names, s, n) && !(*names)[n])
			return true;
	return false;
}

static const char *const str_attrs[] = {
    "capitalize",   "casefold",	   "center",	"count",      "encode",	      "endswith",
    "expandtabs",   "find",	   "format",	"format_map", "index",	      "isalnum",
    "isalpha",	    "isascii",	   "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",	"istitle",    "isupper",      "join",
    "ljust",	    "lower",	   "lstrip",	"maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",	   "rfind",	"rindex",     "rjust",	      "rpartition",
    "rsplit",	    "rstrip",	   "split",	"splitlines", "startswith",   "strip",
    "swapcase",	    "title",	   "translate", "upper",      "zfill",	      NULL};
static const char *const dict_attrs[] = {"clear",      "copy",	 "fromkeys", "get",
					 "items",      "keys",	 "pop",	     "popitem",
					 "setdefault", "update", "values",   NULL};
static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const list_attrs[] = {"append", "clear", "copy",   "count",	 "extend", "index",
					 "insert", "pop",   "remove", "reverse", "sort",   NULL};
/* jinja2's ImmutableSandboxedEnvironment refuses these of a list (MutableSequence) but lets
 * pop and clear run: those mutate, and are refused here as unsupported */
static const char *const list_unsafe[] = {"append",  "extend", "insert", "remove",
					  "reverse", "sort",   NULL};
static const char *const tuple_attrs[] = {"count", "index", NULL};
static const char *const num_attrs[] = {
    "real",	 "imag",     "numerator",	 "denominator", "conjugate", "bit_length",
    "bit_count", "to_bytes", "as_integer_ratio", "is_integer",	"hex",	     "from_bytes",
    "fromhex",	 NULL};

/* A Python attribute of v's type that jinja2 would return as is (a method, mostly): refused
 * (printing a bound method shows an address), or the sandbox's unsafe undefined. 1 when
 * handled (out set or error), 0 when v's type has no such attribute. */
static int python_attr(struct rctx *r, const struct jv *v, const char *name, size_t n,
		       struct jv *out)
{
	const char *const *attrs = NULL, *const *unsafe = NULL;
	const char *tn = jv_type_name(v);

	if (n > 1 && name[0] == '_' && name[1] == '_') {
		*out =
		    undef_hint(r, JU_UNSAFE, "access to attribute '%.*s' of '%s' object is unsafe.",
			       (int)n, name, tn);
		return 1;
	}
	switch (v->t) {
	case JV_STR:
		attrs = str_attrs;
		break;
	case JV_DICT:
		attrs = dict_attrs;
		unsafe = dict_unsafe;
		break;
	case JV_LIST:
		if (v->sub == JL_LIST) {
			attrs = list_attrs;
			unsafe = list_unsafe;
		} else if (v->sub == JL_TUPLE) {
			attrs = tuple_attrs;
		}
		break;
	case JV_INT:
	case JV_BOOL:
	case JV_FLOAT:
		attrs = num_attrs;
		break;
	default:
		break;
	}
	if (unsafe && name_in(name, n, unsafe)) {
		*out =
		    undef_hint(r, JU_UNSAFE, "access to attribute '%.*s' of '%s' object is unsafe.",
			       (int)n, name, tn);
		return 1;
	}
	if (attrs && name_in(name, n, attrs)) {
		unsupported(r, "the attribute %s.%.*s used as a value", tn, (int)n, name);
		return 1;
	}
	return 0;
}

static int loop_attr(struct rctx *r, const struct jloop *lp, const char *name, size_t n,
		     struct jv *out)
{
	int64_t i0 = lp->index0, len = lp->length;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
	if (IS("index0"))
		*out = jv_int(i0);
	else if (IS("index"))
		*out = jv_int(i0 + 1);
	else if (IS("first"))
		*out = jv_bool(i0 == 0);
	else if (IS("last"))
		*out = jv_bool(i0 == len - 1);
	else if (IS("length"))
		*out = jv_int(len);
	else if (IS("revindex"))
		*out = jv_int(len - i0);
	else if (IS("revindex0"))
		*out = jv_int(len - i0 - 1);
	else if (IS("depth"))
		*out = jv_int(1);
	else if (IS("depth0"))
		*out = jv_int(0);
	else if (IS("previtem"))
		*out = i0 > 0 ? lp->items->v[i0 - 1]
			      : undef_hint(r, JU_HINT, "there is no previous item");
	else if (IS("nextitem"))
		*out = i0 + 1 < len ? lp->items->v[i0 + 1]
				    : undef_hint(r, JU_HINT, "there is no next item");
	else if (IS("cycle") || IS("changed") || IS("reset") || IS("length"))
		return unsupported(r, "loop.%.*s", (int)n, name);
	else
		return 0;
#undef IS
	return 1;
}

/* obj.name: Python's getattr, then obj["name"]. */
static int get_attr(struct rctx *r, const struct jv *obj, const char *name, size_t n,
		    struct jv *out)
{
	int h;

	if (obj->t == JV_UNDEF) {
		/* a dunder exists on the Undefined object: the sandbox's unsafe undefined */
		if (n > 4 && !memcmp(name, "__", 2) && !memcmp(name + n - 2, "__", 2)) {
			*out = undef_hint(
			    r, JU_UNSAFE,
			    "access to attribute '%.*s' of 'Undefined' object is unsafe.", (int)n,
			    name);
			return 0;
		}
		return undef_fail(r, obj);
	}
	if (obj->t == JV_NS) {
		struct jv *v = jd_get_str(obj->d, name, n);
		if (v) {
			*out = *v;
			return 0;
		}
	}
	if (obj->t == JV_LOOP) {
		h = loop_attr(r, obj->lp, name, n, out);
		if (h)
			return r->er.set ? -1 : 0;
	}
	h = python_attr(r, obj, name, n, out);
	if (h)
		return r->er.set ? -1 : 0;
	if (obj->t == JV_DICT) {
		struct jv *v = jd_get_str(obj->d, name, n);
		if (v) {
			*out = *v;
			return 0;
		}
	}
	*out = mk_undef(r, JU_ATTR, name, n, obj);
	return 0;
}

/* Python's index i into a sequence of n items (negative from the end); false if out of range. */
static bool py_index(int64_t i, size_t n, size_t *out)
{
	if (i < 0)
		i += (int64_t)n;
	if (i < 0 || (uint64_t)i >= n)
		return false;
	*out = (size_t)i;
	return true;
}

/* obj[key]: the item, then Python's getattr for a string key. */
static int get_item(struct rctx *r, const struct jv *obj, const struct jv *key, struct jv *out)
{
	size_t idx;

	if (obj->t == JV_UNDEF)
		return undef_fail(r, obj);
	switch (obj->t) {
	case JV_DICT:
		if (key->t == JV_LIST || key->t == JV_DICT || key->t == JV_NS) {
			if (key->t == JV_LIST && key->sub == JL_TUPLE)
				break; /* hashable, but never a key here */
			break;
		}
		if (key->t != JV_UNDEF) {
			struct jv *v = jd_get(&r->a, obj->d, *key);
			if (v) {
				*out = *v;
				return 0;
			}
		}
		break;
	case JV_LIST:
		if ((obj->sub == JL_LIST || obj->sub == JL_TUPLE || obj->sub == JL_RANGE) &&
		    (key->t == JV_INT || key->t == JV_BOOL)) {
			if (py_index(key->i, obj->l->n, &idx)) {
				*out = obj->l->v[idx];
				return 0;
			}
		}
		break;
	case JV_STR:
		if (key->t == JV_INT || key->t == JV_BOOL) {
			size_t cps = utf8_count(obj->s, obj->n);
			if (py_index(key->i, cps, &idx)) {
				size_t o = utf8_offset(obj->s, obj->n, idx), l;
				utf8_next(obj->s + o, obj->n - o, &l);
				*out = jv_str(obj->s + o, l);
				return 0;
			}
		}
		break;
	default:
		break;
	}
	if (key->t == JV_STR) {
		if (obj->t == JV_DICT) {
			int h = python_attr(r, obj, key->s, key->n, out);
			if (h)
				return r->er.set ? -1 : 0;
			*out = mk_undef(r, JU_ATTR, key->s, key->n, obj);
			return 0;
		}
		return get_attr(r, obj, key->s, key->n, out);
	}
	*out = undef_elem(r, obj, key);
	return 0;
}

/* Python's slice semantics (PySlice_AdjustIndices). */
static int slice_indices(struct rctx *r, const struct jv *a, const struct jv *b, const struct jv *c,
			 int64_t len, int64_t *start, int64_t *stop, int64_t *stepv)
{
	int64_t st = 1;

	if (c && c->t != JV_NONE) {
		if (c->t != JV_INT && c->t != JV_BOOL)
			return 1;
		st = c->i;
		if (!st)
			return type_err(r, "slice step cannot be zero");
	}
	for (int k = 0; k < 2; k++) {
		const struct jv *x = k ? b : a;
		int64_t *o = k ? stop : start, v;
		if (!x || x->t == JV_NONE) {
			if (st < 0)
				*o = k ? -1 : len - 1;
			else
				*o = k ? len : 0;
			if (st < 0 && k)
				*o = -1;
			continue;
		}
		if (x->t != JV_INT && x->t != JV_BOOL)
			return 1;
		v = x->i;
		if (v < 0) {
			v += len;
			if (v < 0)
				v = st < 0 ? -1 : 0;
		} else if (v >= len) {
			v = st < 0 ? len - 1 : len;
		}
		*o = v;
	}
	*stepv = st;
	return 0;
}

static int ev_slice(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	struct jv obj, a = jv_none(), b = jv_none(), c = jv_none();
	int64_t start = 0, stop = 0, st = 1, len;
	int rc;

	if (ev(r, n->a, s, &obj) || (n->b && ev(r, n->b, s, &a)) || (n->c && ev(r, n->c, s, &b)) ||
	    (n->d && ev(r, n->d, s, &c)))
		return -1;
	/* jinja2 subscripts slices directly (not through its getitem): Python's errors */
	if (obj.t == JV_UNDEF)
		return undef_fail(r, &obj);
	if (obj.t == JV_STR)
		len = (int64_t)utf8_count(obj.s, obj.n);
	else if (obj.t == JV_LIST && (obj.sub == JL_LIST || obj.sub == JL_TUPLE))
		len = obj.l->n;
	else if (obj.t == JV_LIST && obj.sub == JL_RANGE)
		return unsupported(r, "slicing a range");
	else if (obj.t == JV_DICT)
		return type_err(r, "unhashable type: 'slice'");
	else
		return type_err(r, "'%s' object is not subscriptable", jv_type_name(&obj));
	rc = slice_indices(r, &a, &b, &c, len, &start, &stop, &st);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return type_err(r, "slice indices must be integers or None or have an __index__ "
				   "method");
	if (obj.t == JV_STR) {
		struct buf bb = {0};
		bool ascii = obj.n == (size_t)len;
		if (st == 1) {
			size_t o1, o2;
			if (stop < start)
				stop = start;
			o1 = ascii ? (size_t)start : utf8_offset(obj.s, obj.n, (size_t)start);
			o2 = ascii ? (size_t)stop : utf8_offset(obj.s, obj.n, (size_t)stop);
			*out = jv_str(obj.s + o1, o2 - o1);
			return 0;
		}
		for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st) {
			size_t o = ascii ? (size_t)i : utf8_offset(obj.s, obj.n, (size_t)i), l = 1;
			if (!ascii)
				utf8_next(obj.s + o, obj.n - o, &l);
			if (buf_append(&bb, obj.s + o, l)) {
				buf_free(&bb);
				return oom(r);
			}
		}
		rc = mkstr(r, bb.data ? bb.data : "", bb.len, out);
		buf_free(&bb);
		return rc;
	} else {
		struct jlist *l = jl_new(&r->a, 0);
		if (!l)
			return oom(r);
		for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st)
			if (jl_push(&r->a, l, obj.l->v[i]))
				return oom(r);
		*out = mklist(l, obj.sub);
	}
	return 0;
}

/* --- arguments ------------------------------------------------------------------------------- */

/* Binds a call's arguments to names: slots[i] gets the i-th positional or the keyword names[i];
 * have[i] says which were given. what names the callee in messages. */
static int bind_args(struct rctx *r, const struct node *n, struct scope *s, const char *what,
		     const char *const *names, int nnames, struct jv *slots, bool *have)
{
	for (int i = 0; i < nnames; i++)
		have[i] = false;
	if ((int)n->nv > nnames)
		return type_err(r, "%s() takes at most %d arguments (%u given)", what, nnames,
				n->nv);
	for (uint32_t i = 0; i < n->nv; i++) {
		if (ev(r, n->v[i], s, &slots[i]))
			return -1;
		have[i] = true;
	}
	for (uint32_t k = 0; k < n->nkw; k++) {
		const struct node *kw = n->kw[k];
		int i;
		for (i = 0; i < nnames; i++)
			if (strlen(names[i]) == kw->k.n && !memcmp(names[i], kw->k.s, kw->k.n))
				break;
		if (i == nnames)
			return type_err(r, "%s() got an unexpected keyword argument '%s'", what,
					kw->k.s);
		if (have[i])
			return type_err(r, "%s() got multiple values for argument '%s'", what,
					names[i]);
		if (ev(r, kw->a, s, &slots[i]))
			return -1;
		have[i] = true;
	}
	return 0;
}

static int eval_args(struct rctx *r, const struct node *n, struct scope *s, struct jv *args,
		     uint32_t max)
{
	if (n->nv > max)
		return unsupported(r, "more than %u arguments", max);
	for (uint32_t i = 0; i < n->nv; i++)
		if (ev(r, n->v[i], s, &args[i]))
			return -1;
	return 0;
}

/* --- tests ----------------------------------------------------------------------------------- */

static int op_in(struct rctx *r, const struct jv *a, const struct jv *b, bool *res);
static int arith(struct rctx *r, int op, const struct jv *a, const struct jv *b, struct jv *out);

static int run_test(struct rctx *r, int id, const struct jv *v, const struct jv *args,
		    uint32_t nargs, bool *res)
{
	int c;
	const struct jv *o = nargs ? &args[0] : NULL;

	if (id >= TS_EQ && id <= TS_GE && !o)
		return type_err(r, "test takes exactly 2 arguments (1 given)");
	if (nargs > ((id >= TS_EQ && id <= TS_SAMEAS) || id == TS_DIVISIBLEBY || id == TS_IN))
		return type_err(
		    r, "the test takes %d positional arguments but %u were given",
		    1 + ((id >= TS_EQ && id <= TS_SAMEAS) || id == TS_DIVISIBLEBY || id == TS_IN),
		    nargs + 1);
	switch (id) {
	case TS_DEFINED:
		*res = v->t != JV_UNDEF;
		return 0;
	case TS_UNDEFINED:
		*res = v->t == JV_UNDEF;
		return 0;
	case TS_NONE:
		*res = v->t == JV_NONE;
		return 0;
	case TS_STRING:
		*res = v->t == JV_STR;
		return 0;
	case TS_MAPPING:
		*res = v->t == JV_DICT;
		return 0;
	case TS_ITERABLE:
		*res = v->t == JV_STR || v->t == JV_LIST || v->t == JV_DICT || v->t == JV_UNDEF;
		return 0;
	case TS_SEQUENCE:
		*res = v->t == JV_STR || v->t == JV_DICT || v->t == JV_UNDEF ||
		       (v->t == JV_LIST && v->sub != JL_GEN && v->sub != JL_ITEMS &&
			v->sub != JL_KEYS && v->sub != JL_VALUES);
		return 0;
	case TS_FALSE:
		*res = v->t == JV_BOOL && !v->i;
		return 0;
	case TS_TRUE:
		*res = v->t == JV_BOOL && v->i;
		return 0;
	case TS_NUMBER:
		*res = v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
		return 0;
	case TS_BOOLEAN:
		*res = v->t == JV_BOOL;
		return 0;
	case TS_INTEGER:
		*res = v->t == JV_INT;
		return 0;
	case TS_FLOAT:
		*res = v->t == JV_FLOAT;
		return 0;
	case TS_CALLABLE: /* an Undefined has __call__ (it raises), so it is callable */
		*res = v->t == JV_MACRO || v->t == JV_FUNC || v->t == JV_UNDEF;
		return 0;
	case TS_EQ:
		*res = py_eq(v, o);
		return 0;
	case TS_NE:
		*res = !py_eq(v, o);
		return 0;
	case TS_LT:
	case TS_LE:
	case TS_GT:
	case TS_GE: {
		static const char *const opn[] = {"<", "<=", ">", ">="};
		if (v->t == JV_UNDEF)
			return undef_fail(r, v);
		if (o->t == JV_UNDEF)
			return undef_fail(r, o);
		if (py_order(v, o, opn[id - TS_LT], &c, &r->er))
			return -1;
		*res = c == 2	     ? false
		       : id == TS_LT ? c < 0
		       : id == TS_LE ? c <= 0
		       : id == TS_GT ? c > 0
				     : c >= 0;
		return 0;
	}
	case TS_SAMEAS:
		if (!o)
			return type_err(r, "test_sameas() missing 1 required positional argument");
		if (o->t == JV_NONE || o->t == JV_BOOL || v->t == JV_NONE || v->t == JV_BOOL) {
			*res = v->t == o->t && (v->t == JV_NONE || v->i == o->i);
			return 0;
		}
		return unsupported(r, "sameas between %s and %s", jv_type_name(v), jv_type_name(o));
	case TS_ODD:
	case TS_EVEN:
	case TS_DIVISIBLEBY: {
		struct jv two = jv_int(2), m;
		if (id == TS_DIVISIBLEBY && !o)
			return type_err(
			    r, "test_divisibleby() missing 1 required positional argument");
		if (arith(r, '%', v, id == TS_DIVISIBLEBY ? o : &two, &m))
			return -1;
		{
			struct jv zero = jv_int(0), one = jv_int(1);
			*res = id == TS_ODD ? py_eq(&m, &one) : py_eq(&m, &zero);
		}
		return 0;
	}
	case TS_IN:
		if (!o)
			return type_err(r, "test_in() missing 1 required positional argument");
		return op_in(r, v, o, res);
	case TS_LOWER:
	case TS_UPPER: {
		struct jv sv;
		bool any = false, ok = true;
		if (to_str(r, v, &sv) || check_ascii_case(r, &sv, "islower()"))
			return -1;
		for (size_t i = 0; i < sv.n; i++) {
			char ch = sv.s[i];
			if (ascii_alpha(ch)) {
				any = true;
				if (id == TS_LOWER ? (ch >= 'A' && ch <= 'Z')
						   : (ch >= 'a' && ch <= 'z'))
					ok = false;
			}
		}
		*res = any && ok;
		return 0;
	}
	}
	return unsupported(r, "a test");
}

/* A test named by a string at render (select, selectattr): its id, or -1 with the error set. */
static int test_by_name(struct rctx *r, const struct jv *name)
{
	int id;
	if (name->t != JV_STR)
		return type_err(r, "a test name must be a string"), -1;
	id = jinja_test_id(name->s, name->n);
	if (id == -2)
		return unsupported(r, "the test '%.*s'", (int)name->n, name->s), -1;
	if (id < 0)
		return jerr_set(&r->er, JINJA_TYPE, r->line, "No test named '%.*s' found.",
				(int)name->n, name->s),
		       -1;
	return id;
}

/* --- operators ---------------------------------------------------------------------------------
 */

static bool is_num(const struct jv *v)
{
	return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
}

static double num_f(const struct jv *v)
{
	return v->t == JV_FLOAT ? v->f : (double)v->i;
}

static int overflow(struct rctx *r)
{
	return unsupported(r, "an integer beyond 64 bits (Python's ints are unbounded)");
}

static double py_fmod(double a, double b)
{
	double m = fmod(a, b);
	if (m != 0 && ((b < 0) != (m < 0)))
		m += b;
	else if (m == 0)
		m = copysign(0.0, b);
	return m;
}

static int repeat(struct rctx *r, const struct jv *seq, int64_t times, struct jv *out)
{
	if (times < 0)
		times = 0;
	if (!times || (seq->t == JV_STR ? !seq->n : !seq->l->n)) { /* '' * 10**18 is instant */
		struct jlist *l;
		if (seq->t == JV_STR) {
			*out = jv_str("", 0);
			return 0;
		}
		if (!(l = jl_new(&r->a, 0)))
			return oom(r);
		*out = mklist(l, seq->sub);
		return 0;
	}
	if (seq->t == JV_STR) {
		char *o;
		if (seq->n && (uint64_t)times > r->lim.out_bytes / seq->n)
			return jerr_set(
			    &r->er, JINJA_LIMIT, r->line,
			    "a string of %u x %lld bytes: beyond the output limit of %zu", seq->n,
			    (long long)times, r->lim.out_bytes);
		if (!(o = ja_alloc(&r->a, seq->n * (size_t)times + 1)))
			return oom(r);
		for (int64_t i = 0; i < times; i++)
			memcpy(o + (size_t)i * seq->n, seq->s, seq->n);
		o[seq->n * (size_t)times] = 0;
		*out = jv_str(o, seq->n * (size_t)times);
		return 0;
	}
	{
		struct jlist *l;
		uint64_t total = (uint64_t)seq->l->n * (uint64_t)times;
		if (seq->l->n &&
		    (uint64_t)times > (r->lim.mem_bytes / sizeof(struct jv)) / seq->l->n)
			return jerr_set(&r->er, JINJA_LIMIT, r->line,
					"a list of %llu items: beyond the memory limit",
					(unsigned long long)total);
		if (!(l = jl_new(&r->a, (uint32_t)total)))
			return oom(r);
		for (int64_t i = 0; i < times; i++)
			for (uint32_t k = 0; k < seq->l->n; k++)
				l->v[l->n++] = seq->l->v[k];
		*out = mklist(l, seq->sub);
	}
	return 0;
}

static const char *opname(int op)
{
	switch (op) {
	case '+':
		return "+";
	case '-':
		return "-";
	case '*':
		return "*";
	case '/':
		return "/";
	case '%':
		return "%";
	case OP_FLOORDIV:
		return "//";
	case OP_POW:
		return "** or pow()";
	}
	return "?";
}

static int arith(struct rctx *r, int op, const struct jv *a, const struct jv *b, struct jv *out)
{
	if (op == '%' && a->t == JV_STR)
		return unsupported(r, "printf-style string formatting");
	if (a->t == JV_UNDEF)
		return undef_fail(r, a);
	if (b->t == JV_UNDEF)
		return undef_fail(r, b);
	if (is_num(a) && is_num(b)) {
		bool fl = a->t == JV_FLOAT || b->t == JV_FLOAT;
		int64_t x = a->i, y = b->i, z;
		double fx = num_f(a), fy = num_f(b);
		switch (op) {
		case '+':
			if (fl)
				*out = jv_float(fx + fy);
			else if (__builtin_add_overflow(x, y, &z))
				return overflow(r);
			else
				*out = jv_int(z);
			return 0;
		case '-':
			if (fl)
				*out = jv_float(fx - fy);
			else if (__builtin_sub_overflow(x, y, &z))
				return overflow(r);
			else
				*out = jv_int(z);
			return 0;
		case '*':
			if (fl)
				*out = jv_float(fx * fy);
			else if (__builtin_mul_overflow(x, y, &z))
				return overflow(r);
			else
				*out = jv_int(z);
			return 0;
		case '/':
			if (fy == 0)
				return type_err(r,
						fl ? "float division by zero" : "division by zero");
			if (!fl && (llabs(x) > (1LL << 53) || llabs(y) > (1LL << 53)))
				return unsupported(r, "true division of integers beyond 2**53");
			*out = jv_float(fx / fy);
			return 0;
		case OP_FLOORDIV:
			if (fl) {
				if (fy == 0)
					return type_err(r, "float floor division by zero");
				*out = jv_float(floor(fx / fy));
				if (fx / fy != fx / fy)
					*out = jv_float(fx / fy);
				{
					/* Python: (a - a % b) / b, rounded as divmod does */
					double m = py_fmod(fx, fy), d = (fx - m) / fy;
					double fd = floor(d);
					if (d - fd > 0.5)
						fd += 1.0;
					if (d == 0)
						fd = copysign(0.0, fx / fy);
					*out = jv_float(fd);
				}
				return 0;
			}
			if (!y)
				return type_err(r, "integer division or modulo by zero");
			if (x == INT64_MIN && y == -1)
				return overflow(r);
			z = x / y;
			if ((x % y != 0) && ((x < 0) != (y < 0)))
				z--;
			*out = jv_int(z);
			return 0;
		case '%':
			if (fl) {
				if (fy == 0)
					return type_err(r, "float modulo");
				*out = jv_float(py_fmod(fx, fy));
				return 0;
			}
			if (!y)
				return type_err(r, "integer modulo by zero");
			if (y == -1) {
				*out = jv_int(0);
				return 0;
			}
			z = x % y;
			if (z != 0 && ((z < 0) != (y < 0)))
				z += y;
			*out = jv_int(z);
			return 0;
		case OP_POW:
			if (!fl && y >= 0) {
				int64_t acc = 1, base = x;
				int64_t e = y;
				while (e) {
					if (e & 1)
						if (__builtin_mul_overflow(acc, base, &acc))
							return overflow(r);
					e >>= 1;
					if (e && __builtin_mul_overflow(base, base, &base))
						return overflow(r);
				}
				*out = jv_int(acc);
				return 0;
			}
			if (fx == 0 && fy < 0)
				return type_err(r, "0.0 cannot be raised to a negative power");
			if (fx < 0 && fy != floor(fy))
				return unsupported(r, "a complex power");
			*out = jv_float(pow(fx, fy));
			return 0;
		}
	}
	if (op == '+') {
		if (a->t == JV_STR && b->t == JV_STR) {
			char *o;
			size_t n = (size_t)a->n + b->n;
			if (n > r->lim.out_bytes)
				return jerr_set(
				    &r->er, JINJA_LIMIT, r->line,
				    "a string of %zu bytes: beyond the output limit of %zu", n,
				    r->lim.out_bytes);
			if (!(o = ja_alloc(&r->a, n + 1)))
				return oom(r);
			memcpy(o, a->s, a->n);
			memcpy(o + a->n, b->s, b->n);
			o[n] = 0;
			*out = jv_str(o, n);
			return 0;
		}
		if (a->t == JV_LIST && b->t == JV_LIST && a->sub == b->sub &&
		    (a->sub == JL_LIST || a->sub == JL_TUPLE)) {
			struct jlist *l = jl_new(&r->a, a->l->n + b->l->n);
			if (!l)
				return oom(r);
			if (a->l->n)
				memcpy(l->v, a->l->v, a->l->n * sizeof(struct jv));
			if (b->l->n)
				memcpy(l->v + a->l->n, b->l->v, b->l->n * sizeof(struct jv));
			l->n = a->l->n + b->l->n;
			*out = mklist(l, a->sub);
			return 0;
		}
		if (a->t == JV_STR ||
		    (a->t == JV_LIST && (a->sub == JL_LIST || a->sub == JL_TUPLE)))
			return type_err(r, "can only concatenate %s (not \"%s\") to %s",
					jv_type_name(a), jv_type_name(b), jv_type_name(a));
	}
	if (op == '*') {
		const struct jv *seq = NULL, *cnt = NULL;
		if ((a->t == JV_STR ||
		     (a->t == JV_LIST && (a->sub == JL_LIST || a->sub == JL_TUPLE))) &&
		    (b->t == JV_INT || b->t == JV_BOOL))
			seq = a, cnt = b;
		else if ((b->t == JV_STR ||
			  (b->t == JV_LIST && (b->sub == JL_LIST || b->sub == JL_TUPLE))) &&
			 (a->t == JV_INT || a->t == JV_BOOL))
			seq = b, cnt = a;
		if (seq)
			return repeat(r, seq, cnt->i, out);
		if (a->t == JV_STR ||
		    (a->t == JV_LIST && (a->sub == JL_LIST || a->sub == JL_TUPLE)))
			if (b->t == JV_STR || b->t == JV_LIST || b->t == JV_FLOAT ||
			    b->t == JV_DICT || b->t == JV_NONE)
				return type_err(r,
						"can't multiply sequence by non-int of type '%s'",
						jv_type_name(b));
		if (b->t == JV_STR ||
		    (b->t == JV_LIST && (b->sub == JL_LIST || b->sub == JL_TUPLE)))
			if (a->t == JV_FLOAT)
				return type_err(r,
						"can't multiply sequence by non-int of type '%s'",
						jv_type_name(a));
	}
	if (op == '%' && a->t == JV_STR)
		return unsupported(r, "printf-style string formatting");
	return type_err(r, "unsupported operand type(s) for %s: '%s' and '%s'", opname(op),
			jv_type_name(a), jv_type_name(b));
}

static int op_in(struct rctx *r, const struct jv *a, const struct jv *b, bool *res)
{
	switch (b->t) {
	case JV_UNDEF:
		*res = false;
		return 0;
	case JV_STR:
		if (a->t != JV_STR)
			return type_err(r, "'in <string>' requires string as left operand, not %s",
					jv_type_name(a));
		*res = memfind(b->s, b->n, a->s, a->n) != NULL;
		return 0;
	case JV_LIST:
		*res = false;
		for (uint32_t i = 0; i < b->l->n; i++)
			if (py_eq(a, &b->l->v[i])) {
				*res = true;
				return 0;
			}
		if (b->l->err_msg) /* a generator consumed past its error */
			return gen_raise(r, b->l);
		return 0;
	case JV_DICT:
		if (a->t == JV_LIST && a->sub != JL_TUPLE)
			return type_err(r, "unhashable type: '%s'", jv_type_name(a));
		if (a->t == JV_DICT || a->t == JV_NS)
			return type_err(r, "unhashable type: '%s'", jv_type_name(a));
		*res = jd_get(&r->a, b->d, *a) != NULL;
		return 0;
	default:
		return type_err(r, "argument of type '%s' is not iterable", jv_type_name(b));
	}
}

/* --- filters ------------------------------------------------------------------------------ */

static int call_filter(struct rctx *r, int id, const struct jv *v, const struct node *n,
		       struct scope *s, const struct jv *xargs, uint32_t nxargs, struct jv *out);

/* jinja2's make_attrgetter: "a.b.0" looked up part by part with getitem semantics. */
static int attr_path(struct rctx *r, const struct jv *item, const struct jv *path, struct jv *out)
{
	struct jv cur = *item;
	size_t i = 0;

	if (path->t == JV_INT) {
		return get_item(r, &cur, path, out);
	}
	if (path->t != JV_STR)
		return unsupported(r, "an attribute path that is not a string");
	for (;;) {
		const char *dot = memchr(path->s + i, '.', path->n - i);
		size_t e = dot ? (size_t)(dot - path->s) : path->n;
		struct jv key = jv_str(path->s + i, e - i), nxt;
		bool digits = e > i;
		for (size_t k = i; k < e; k++)
			digits = digits && path->s[k] >= '0' && path->s[k] <= '9';
		if (digits && e - i < 18) {
			int64_t v = 0;
			for (size_t k = i; k < e; k++)
				v = v * 10 + (path->s[k] - '0');
			key = jv_int(v);
		}
		if (get_item(r, &cur, &key, &nxt))
			return -1;
		cur = nxt;
		if (!dot)
			break;
		i = e + 1;
	}
	*out = cur;
	return 0;
}

static int json_opts_from(struct rctx *r, const struct jv *slots, const bool *have,
			  struct json_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->ensure_ascii = have[0] && jv_truthy(&slots[0]);
	o->sort_keys = have[3] && jv_truthy(&slots[3]);
	if (have[1] && slots[1].t != JV_NONE) {
		const struct jv *ind = &slots[1];
		o->indent_set = true;
		if (ind->t == JV_STR) {
			o->indent = ind->s;
			o->indent_n = ind->n;
		} else if (ind->t == JV_INT || ind->t == JV_BOOL) {
			int64_t k = ind->i < 0 ? 0 : ind->i;
			char *sp;
			if (k > 1000)
				return unsupported(r, "tojson indent above 1000");
			if (!(sp = ja_alloc(&r->a, (size_t)k + 1)))
				return oom(r);
			memset(sp, ' ', (size_t)k);
			o->indent = sp;
			o->indent_n = (size_t)k;
		} else {
			return type_err(r, "can't multiply sequence by non-int of type '%s'",
					jv_type_name(ind));
		}
	}
	if (have[2] && slots[2].t != JV_NONE) {
		const struct jv *sep = &slots[2];
		if (sep->t != JV_LIST || (sep->sub != JL_LIST && sep->sub != JL_TUPLE) ||
		    sep->l->n != 2 || sep->l->v[0].t != JV_STR || sep->l->v[1].t != JV_STR)
			return unsupported(r, "tojson separators other than two strings");
		o->item_sep = sep->l->v[0].s;
		o->item_sep_n = sep->l->v[0].n;
		o->key_sep = sep->l->v[1].s;
		o->key_sep_n = sep->l->v[1].n;
	} else {
		o->item_sep = o->indent_set ? "," : ", ";
		o->item_sep_n = o->indent_set ? 1 : 2;
		o->key_sep = ": ";
		o->key_sep_n = 2;
	}
	return 0;
}

static int to_int_filter(struct rctx *r, const struct jv *v, const struct jv *dflt,
			 const struct jv *base, struct jv *out)
{
	if (base && !((base->t == JV_INT) && base->i == 10))
		return unsupported(r, "int() with a base other than 10");
	switch (v->t) {
	case JV_INT:
		*out = *v;
		return 0;
	case JV_BOOL:
		*out = jv_int(v->i);
		return 0;
	case JV_FLOAT:
		if (isnan(v->f))
			break;
		if (isinf(v->f))
			return type_err(r, "cannot convert float infinity to integer");
		if (fabs(v->f) >= 9.2e18)
			return overflow(r);
		*out = jv_int((int64_t)v->f);
		return 0;
	case JV_STR: {
		char tmp[128];
		size_t k = 0, i = 0, n = v->n;
		char *end;
		struct jv t;
		str_strip(v, NULL, true, true, &t);
		if (t.n == 0 || t.n >= sizeof(tmp))
			break;
		for (i = 0; i < t.n; i++) {
			char c = t.s[i];
			if (c == '_' && i > 0 && i + 1 < t.n && t.s[i - 1] >= '0' &&
			    t.s[i - 1] <= '9' && t.s[i + 1] >= '0' && t.s[i + 1] <= '9')
				continue;
			tmp[k++] = c;
		}
		tmp[k] = 0;
		(void)n;
		{
			bool ok = k > 0;
			size_t st = (tmp[0] == '+' || tmp[0] == '-') ? 1 : 0;
			ok = ok && k > st;
			for (size_t q = st; q < k; q++)
				ok = ok && tmp[q] >= '0' && tmp[q] <= '9';
			if (ok) {
				errno = 0;
				long long x = strtoll(tmp, NULL, 10);
				if (errno == ERANGE)
					return overflow(r);
				*out = jv_int(x);
				return 0;
			}
		}
		{
			double d = strtod(tmp, &end);
			if (*end || end == tmp)
				break;
			for (size_t q = 0; q < k; q++)
				if (tmp[q] == 'x' || tmp[q] == 'X' || tmp[q] == 'p' ||
				    tmp[q] == 'P')
					return unsupported(r, "int() of '%s'", tmp);
			if (isnan(d))
				break;
			if (isinf(d))
				return type_err(r, "cannot convert float infinity to integer");
			if (fabs(d) >= 9.2e18)
				return overflow(r);
			*out = jv_int((int64_t)d);
			return 0;
		}
	}
	default:
		break;
	}
	*out = dflt ? *dflt : jv_int(0);
	return 0;
}

static int to_float_filter(struct rctx *r, const struct jv *v, const struct jv *dflt,
			   struct jv *out)
{
	switch (v->t) {
	case JV_INT:
	case JV_BOOL:
		*out = jv_float((double)v->i);
		return 0;
	case JV_FLOAT:
		*out = *v;
		return 0;
	case JV_STR: {
		char tmp[128];
		char *end;
		struct jv t;
		str_strip(v, NULL, true, true, &t);
		if (t.n && t.n < sizeof(tmp) && !memchr(t.s, '_', t.n)) {
			memcpy(tmp, t.s, t.n);
			tmp[t.n] = 0;
			for (size_t q = 0; q < t.n; q++)
				if (tmp[q] == 'x' || tmp[q] == 'X' || tmp[q] == 'p' ||
				    tmp[q] == 'P')
					goto dflt;
			double d = strtod(tmp, &end);
			if (!*end && end != tmp) {
				*out = jv_float(d);
				return 0;
			}
		} else if (t.n && memchr(t.s, '_', t.n)) {
			return unsupported(r, "float() of a string with underscores");
		}
		break;
	}
	default:
		break;
	}
dflt:
	*out = dflt ? *dflt : jv_float(0.0);
	(void)r;
	return 0;
}

static int call_filter_now(struct rctx *r, int id, const struct jv *v, const struct node *n,
			   struct scope *s, const struct jv *xargs, uint32_t nxargs,
			   struct jv *out);

/* Runs filter id on v with the call's arguments (n, evaluated in s) or, from map(), with
 * already evaluated xargs. The filters that return generators defer their errors. */
static int call_filter(struct rctx *r, int id, const struct jv *v, const struct node *n,
		       struct scope *s, const struct jv *xargs, uint32_t nxargs, struct jv *out)
{
	struct jlist *saved = r->gen_partial;
	int rc;

	if (id != FL_MAP && id != FL_SELECT && id != FL_REJECT && id != FL_SELECTATTR &&
	    id != FL_REJECTATTR && id != FL_ITEMS)
		return call_filter_now(r, id, v, n, s, xargs, nxargs, out);
	r->gen_partial = NULL;
	if (id != FL_ITEMS && !jv_truthy(v)) {
		/* jinja2's map and select start with `if value:`, before any lookup */
		struct jlist *l = jl_new(&r->a, 0);
		if (!l)
			return oom(r);
		*out = mklist(l, JL_GEN);
		r->gen_partial = saved;
		return 0;
	}
	rc = call_filter_now(r, id, v, n, s, xargs, nxargs, out);
	if (rc && r->er.set)
		rc = gen_poison(r, out);
	r->gen_partial = saved;
	return rc;
}

static int call_filter_now(struct rctx *r, int id, const struct jv *v, const struct node *n,
			   struct scope *s, const struct jv *xargs, uint32_t nxargs, struct jv *out)
{
	struct jv a[8];
	bool have[8] = {false};
	uint32_t na = 0;
	struct node empty = {0};

	if (!n)
		n = &empty;
	/* Filters taking named parameters bind them; the others take positionals only. */
	if (xargs) {
		if (nxargs > 8)
			return unsupported(r, "more than 8 filter arguments");
		for (uint32_t i = 0; i < nxargs; i++) {
			a[i] = xargs[i];
			have[i] = true;
		}
		na = nxargs;
	}
#define BIND(name, ...)                                                                            \
	do {                                                                                       \
		static const char *const names_[] = {__VA_ARGS__};                                 \
		if (!xargs && bind_args(r, n, s, name, names_,                                     \
					(int)(sizeof(names_) / sizeof(names_[0])), a, have))       \
			return -1;                                                                 \
		if (xargs && nxargs > sizeof(names_) / sizeof(names_[0]))                          \
			return type_err(r, "%s() takes too many arguments", name);                 \
	} while (0)

	switch (id) {
	case FL_TRIM: {
		struct jv sv;
		BIND("do_trim", "chars");
		if (to_str(r, v, &sv))
			return -1;
		if (have[0] && a[0].t != JV_NONE && a[0].t != JV_STR)
			return type_err(r, "strip arg must be None or str");
		str_strip(&sv, have[0] && a[0].t == JV_STR ? &a[0] : NULL, true, true, out);
		return 0;
	}
	case FL_TOJSON: {
		struct json_opts o;
		struct buf b = {0};
		int rc;
		BIND("tojson", "ensure_ascii", "indent", "separators", "sort_keys");
		if (json_opts_from(r, a, have, &o))
			return -1;
		if (py_json(&b, v, &o, &r->a, &r->er)) {
			buf_free(&b);
			return -1;
		}
		rc = mkstr(r, b.data ? b.data : "", b.len, out);
		buf_free(&b);
		return rc;
	}
	case FL_LENGTH:
		BIND("length");
		switch (v->t) {
		case JV_UNDEF:
			*out = jv_int(0);
			return 0;
		case JV_STR:
			*out = jv_int((int64_t)utf8_count(v->s, v->n));
			return 0;
		case JV_LIST:
			if (v->sub == JL_GEN)
				break;
			*out = jv_int(v->l->n);
			return 0;
		case JV_DICT:
			*out = jv_int(v->d->n);
			return 0;
		default:
			break;
		}
		return type_err(r, "object of type '%s' has no len()", jv_type_name(v));
	case FL_LIST: {
		struct jlist *items, *l;
		BIND("do_list");
		if (iterate(r, v, &items))
			return -1;
		if (!(l = jl_new(&r->a, items->n)))
			return oom(r);
		if (items->n)
			memcpy(l->v, items->v, items->n * sizeof(struct jv));
		l->n = items->n;
		*out = mklist(l, JL_LIST);
		return 0;
	}
	case FL_STRING:
		BIND("do_string");
		return to_str(r, v, out);
	case FL_JOIN: {
		struct jlist *items;
		struct jv d = jv_str("", 0);
		struct buf b = {0};
		int rc = 0;
		BIND("do_join", "d", "attribute");
		if (have[0] && to_str(r, &a[0], &d))
			return -1;
		if (iterate(r, v, &items))
			return -1;
		for (uint32_t i = 0; i < items->n && !rc; i++) {
			struct jv it = items->v[i], sv;
			if (have[1] && a[1].t != JV_NONE && attr_path(r, &items->v[i], &a[1], &it))
				rc = -1;
			else if (i && buf_append(&b, d.s, d.n))
				rc = oom(r);
			else if (!rc && to_str(r, &it, &sv))
				rc = -1;
			else if (!rc && buf_append(&b, sv.s, sv.n))
				rc = oom(r);
			if (!rc && b.len > r->lim.out_bytes)
				rc = check_out(r, &b);
		}
		if (!rc)
			rc = mkstr(r, b.data ? b.data : "", b.len, out);
		buf_free(&b);
		return rc;
	}
	case FL_MAP: {
		struct jlist *items, *l;
		bool by_attr = false;
		struct jv attr = jv_none(), dflt = jv_undef(NULL);
		bool have_dflt = false;
		struct jv fargs[8];
		uint32_t nf = 0;
		int fid = -1;
		if (xargs)
			return unsupported(r, "map inside map");
		for (uint32_t k = 0; k < n->nkw; k++) {
			const struct node *kw = n->kw[k];
			if (kw->k.n == 9 && !memcmp(kw->k.s, "attribute", 9)) {
				by_attr = true;
				if (ev(r, kw->a, s, &attr))
					return -1;
			} else if (kw->k.n == 7 && !memcmp(kw->k.s, "default", 7)) {
				have_dflt = true;
				if (ev(r, kw->a, s, &dflt))
					return -1;
			} else {
				return unsupported(r, "map() with the keyword %s", kw->k.s);
			}
		}
		if (by_attr && n->nv)
			return unsupported(r, "map(attribute=) with positional arguments");
		if (!by_attr) {
			struct jv name;
			if (!n->nv)
				return unsupported(r, "map() without a filter");
			if (have_dflt)
				return unsupported(r, "map(filter, default=)");
			if (eval_args(r, n, s, fargs, 8))
				return -1;
			name = fargs[0];
			if (name.t != JV_STR)
				return type_err(r, "a filter name must be a string");
			fid = jinja_filter_id(name.s, name.n);
			if (fid == -2)
				return unsupported(r, "the filter '%.*s'", (int)name.n, name.s);
			if (fid < 0)
				return jerr_set(&r->er, JINJA_TYPE, r->line,
						"No filter named '%.*s' found.", (int)name.n,
						name.s);
			nf = n->nv;
		}
		if (iterate(r, v, &items))
			return -1;
		if (!(l = jl_new(&r->a, items->n)))
			return oom(r);
		r->gen_partial = l;
		for (uint32_t i = 0; i < items->n; i++) {
			struct jv res;
			if (by_attr) {
				if (attr_path(r, &items->v[i], &attr, &res))
					return -1;
				if (res.t == JV_UNDEF && have_dflt)
					res = dflt;
			} else if (call_filter(r, fid, &items->v[i], NULL, s, fargs + 1, nf - 1,
					       &res)) {
				return -1;
			}
			l->v[l->n++] = res;
		}
		*out = mklist(l, JL_GEN);
		return 0;
	}
	case FL_SELECT:
	case FL_REJECT:
	case FL_SELECTATTR:
	case FL_REJECTATTR: {
		struct jv args[8];
		struct jlist *items, *l;
		bool attr = id == FL_SELECTATTR || id == FL_REJECTATTR;
		bool want = id == FL_SELECT || id == FL_SELECTATTR;
		uint32_t first = attr ? 1 : 0;
		int tid = -1;
		if (xargs)
			return unsupported(r, "select inside map");
		if (n->nkw)
			return unsupported(r, "keyword arguments to select/reject");
		if (eval_args(r, n, s, args, 8))
			return -1;
		if (attr && !n->nv)
			return type_err(r, "Missing parameter for attribute name");
		if (n->nv > first && (tid = test_by_name(r, &args[first])) < 0)
			return -1;
		if (iterate(r, v, &items))
			return -1;
		if (!(l = jl_new(&r->a, items->n)))
			return oom(r);
		r->gen_partial = l;
		for (uint32_t i = 0; i < items->n; i++) {
			struct jv it = items->v[i];
			bool res;
			if (attr && attr_path(r, &items->v[i], &args[0], &it))
				return -1;
			if (tid < 0)
				res = jv_truthy(&it);
			else if (run_test(r, tid, &it, args + first + 1, n->nv - first - 1, &res))
				return -1;
			if (res == want)
				l->v[l->n++] = items->v[i];
		}
		*out = mklist(l, JL_GEN);
		return 0;
	}
	case FL_DEFAULT:
		BIND("do_default", "default_value", "boolean");
		if (v->t == JV_UNDEF || (have[1] && jv_truthy(&a[1]) && !jv_truthy(v)))
			*out = have[0] ? a[0] : jv_str("", 0);
		else
			*out = *v;
		return 0;
	case FL_FIRST:
	case FL_LAST: {
		struct jlist *items;
		BIND(id == FL_FIRST ? "do_first" : "do_last");
		if (id == FL_LAST && v->t == JV_LIST && v->sub == JL_GEN)
			return type_err(r, "'generator' object is not reversible");
		if (id == FL_FIRST && v->t == JV_LIST && v->l->err_msg && v->l->n) {
			*out = v->l->v[0];
			return 0;
		}
		if (iterate(r, v, &items))
			return -1;
		if (!items->n)
			*out = undef_hint(r, JU_HINT, "No %s item, sequence was empty.",
					  id == FL_FIRST ? "first" : "last");
		else
			*out = items->v[id == FL_FIRST ? 0 : items->n - 1];
		return 0;
	}
	case FL_UPPER:
	case FL_LOWER:
	case FL_CAPITALIZE:
	case FL_TITLE: {
		struct jv sv;
		BIND("case");
		if (to_str(r, v, &sv))
			return -1;
		return str_case(r, &sv,
				id == FL_UPPER	 ? CASE_UPPER
				: id == FL_LOWER ? CASE_LOWER
				: id == FL_TITLE ? CASE_JTITLE
						 : CASE_CAPITALIZE,
				out);
	}
	case FL_REPLACE: {
		struct jv sv, o, nw;
		int64_t count = -1;
		BIND("do_replace", "old", "new", "count");
		if (!have[0] || !have[1])
			return type_err(r, "do_replace() missing required positional arguments");
		if (to_str(r, v, &sv) || to_str(r, &a[0], &o) || to_str(r, &a[1], &nw))
			return -1;
		if (have[2] && a[2].t != JV_NONE) {
			if (a[2].t != JV_INT && a[2].t != JV_BOOL)
				return type_err(r,
						"'%s' object cannot be interpreted as an integer",
						jv_type_name(&a[2]));
			count = a[2].i;
		}
		return str_replace(r, &sv, &o, &nw, count, out);
	}
	case FL_ITEMS: {
		struct jlist *l;
		BIND("do_items");
		if (v->t == JV_UNDEF) {
			if (!(l = jl_new(&r->a, 0)))
				return oom(r);
			*out = mklist(l, JL_GEN);
			return 0;
		}
		if (v->t != JV_DICT)
			return type_err(r, "Can only get item pairs from a mapping.");
		if (!(l = jl_new(&r->a, v->d->n)))
			return oom(r);
		for (uint32_t i = 0; i < v->d->n; i++) {
			struct jlist *pair = jl_new(&r->a, 2);
			if (!pair)
				return oom(r);
			pair->v[0] = v->d->k[i];
			pair->v[1] = v->d->v[i];
			pair->n = 2;
			l->v[l->n++] = mklist(pair, JL_TUPLE);
		}
		*out = mklist(l, JL_GEN);
		return 0;
	}
	case FL_ABS:
		BIND("abs");
		if (v->t == JV_INT || v->t == JV_BOOL) {
			if (v->i == INT64_MIN)
				return overflow(r);
			*out = jv_int(v->i < 0 ? -v->i : v->i);
			return 0;
		}
		if (v->t == JV_FLOAT) {
			*out = jv_float(fabs(v->f));
			return 0;
		}
		return type_err(r, "bad operand type for abs(): '%s'", jv_type_name(v));
	case FL_INT:
		BIND("do_int", "default", "base");
		if (v->t == JV_UNDEF)
			return undef_fail(r, v);
		return to_int_filter(r, v, have[0] ? &a[0] : NULL, have[1] ? &a[1] : NULL, out);
	case FL_FLOAT:
		BIND("do_float", "default");
		if (v->t == JV_UNDEF)
			return undef_fail(r, v);
		return to_float_filter(r, v, have[0] ? &a[0] : NULL, out);
	case FL_REVERSE: {
		struct jlist *items, *l;
		BIND("do_reverse");
		if (v->t == JV_STR) {
			char *o = ja_alloc(&r->a, v->n + 1);
			size_t k = v->n;
			if (!o)
				return oom(r);
			for (size_t i = 0; i < v->n;) {
				size_t len;
				utf8_next(v->s + i, v->n - i, &len);
				k -= len;
				memcpy(o + k, v->s + i, len);
				i += len;
			}
			o[v->n] = 0;
			*out = jv_str(o, v->n);
			return 0;
		}
		if (v->t == JV_DICT || v->t == JV_NS || v->t == JV_INT || v->t == JV_FLOAT ||
		    v->t == JV_NONE || v->t == JV_BOOL) {
			if (v->t != JV_DICT)
				return type_err(r, "argument to reversed() must be a sequence");
		}
		if (iterate(r, v, &items))
			return -1;
		if (!(l = jl_new(&r->a, items->n)))
			return oom(r);
		for (uint32_t i = items->n; i > 0; i--)
			l->v[l->n++] = items->v[i - 1];
		/* reversed(): an iterator named after what it reverses; a generator becomes a
		 * list (jinja2 falls back to list(value).reverse()) */
		l->tname = v->t == JV_DICT			    ? "dict_reversekeyiterator"
			   : v->t == JV_LIST && v->sub == JL_LIST   ? "list_reverseiterator"
			   : v->t == JV_LIST && v->sub == JL_RANGE  ? "range_iterator"
			   : v->t == JV_LIST && v->sub == JL_KEYS   ? "dict_reversekeyiterator"
			   : v->t == JV_LIST && v->sub == JL_VALUES ? "dict_reversevalueiterator"
			   : v->t == JV_LIST && v->sub == JL_ITEMS  ? "dict_reverseitemiterator"
								    : "reversed";
		*out = mklist(l, v->t == JV_LIST && v->sub == JL_GEN ? JL_LIST : JL_GEN);
		return 0;
	}
	}
#undef BIND
	(void)na;
	return unsupported(r, "a filter");
}

/* --- methods ------------------------------------------------------------------------------ */

static int str_method(struct rctx *r, const struct node *n, struct scope *s, const struct jv *v,
		      struct jv *out)
{
	struct jv a[4];
	bool have[4];
	const char *name = n->k.s;

	switch (n->op) {
	case M_STRIP:
	case M_LSTRIP:
	case M_RSTRIP: {
		static const char *const names[] = {"chars"};
		if (bind_args(r, n, s, name, names, 1, a, have))
			return -1;
		if (n->nkw)
			return type_err(r, "str.%s() takes no keyword arguments", name);
		if (have[0] && a[0].t != JV_NONE && a[0].t != JV_STR)
			return type_err(r, "%s arg must be None or str", name);
		str_strip(v, have[0] && a[0].t == JV_STR ? &a[0] : NULL, n->op != M_RSTRIP,
			  n->op != M_LSTRIP, out);
		return 0;
	}
	case M_SPLIT:
	case M_RSPLIT: {
		static const char *const names[] = {"sep", "maxsplit"};
		int64_t maxsplit = -1;
		if (bind_args(r, n, s, name, names, 2, a, have))
			return -1;
		if (have[0] && a[0].t != JV_NONE && a[0].t != JV_STR)
			return type_err(r, "must be str or None, not %s", jv_type_name(&a[0]));
		if (have[1]) {
			if (a[1].t != JV_INT && a[1].t != JV_BOOL)
				return type_err(r,
						"'%s' object cannot be interpreted as an integer",
						jv_type_name(&a[1]));
			maxsplit = a[1].i;
		}
		return str_split(r, v, have[0] && a[0].t == JV_STR ? &a[0] : NULL, maxsplit,
				 n->op == M_RSPLIT, out);
	}
	case M_STARTSWITH:
	case M_ENDSWITH: {
		const struct jv *pre;
		uint32_t cnt = 1;
		bool res = false;
		if (n->nkw)
			return type_err(r, "str.%s() takes no keyword arguments", name);
		if (n->nv != 1)
			return n->nv
				   ? unsupported(r, "%s() with start or end", name)
				   : type_err(r, "%s() takes at least 1 argument (0 given)", name);
		if (eval_args(r, n, s, a, 1))
			return -1;
		pre = &a[0];
		if (a[0].t == JV_LIST && a[0].sub == JL_TUPLE) {
			cnt = a[0].l->n;
			pre = a[0].l->v;
			for (uint32_t i = 0; i < cnt; i++)
				if (pre[i].t != JV_STR)
					return type_err(
					    r, "tuple for %s must only contain str, not %s", name,
					    jv_type_name(&pre[i]));
		} else if (a[0].t != JV_STR) {
			return type_err(r, "%s first arg must be str or a tuple of str, not %s",
					name, jv_type_name(&a[0]));
		}
		for (uint32_t i = 0; i < cnt && !res; i++) {
			const struct jv *p = &pre[i];
			if (p->n <= v->n)
				res = n->op == M_STARTSWITH
					  ? !memcmp(v->s, p->s, p->n)
					  : !memcmp(v->s + v->n - p->n, p->s, p->n);
		}
		*out = jv_bool(res);
		return 0;
	}
	case M_REPLACE: {
		int64_t count = -1;
		if (n->nkw)
			return type_err(r, "str.replace() takes no keyword arguments");
		if (n->nv < 2 || n->nv > 3)
			return type_err(r, "replace expected at least 2 arguments, got %u", n->nv);
		if (eval_args(r, n, s, a, 3))
			return -1;
		if (a[0].t != JV_STR || a[1].t != JV_STR)
			return type_err(r, "replace() argument must be str, not %s",
					jv_type_name(a[0].t != JV_STR ? &a[0] : &a[1]));
		if (n->nv == 3) {
			if (a[2].t != JV_INT && a[2].t != JV_BOOL)
				return type_err(r,
						"'%s' object cannot be interpreted as an integer",
						jv_type_name(&a[2]));
			count = a[2].i;
		}
		return str_replace(r, v, &a[0], &a[1], count, out);
	}
	case M_UPPER:
	case M_LOWER:
	case M_TITLE:
	case M_CAPITALIZE:
		if (n->nv || n->nkw)
			return type_err(r, "str.%s() takes no arguments (%u given)", name, n->nv);
		return str_case(r, v,
				n->op == M_UPPER   ? CASE_UPPER
				: n->op == M_LOWER ? CASE_LOWER
				: n->op == M_TITLE ? CASE_TITLE
						   : CASE_CAPITALIZE,
				out);
	case M_FIND:
	case M_COUNT:
	case M_INDEX: {
		const char *f;
		if (n->nkw)
			return type_err(r, "str.%s() takes no keyword arguments", name);
		if (n->nv != 1)
			return n->nv
				   ? unsupported(r, "%s() with start or end", name)
				   : type_err(r, "%s() takes at least 1 argument (0 given)", name);
		if (eval_args(r, n, s, a, 1))
			return -1;
		if (a[0].t != JV_STR)
			return type_err(r, "must be str, not %s", jv_type_name(&a[0]));
		if (n->op == M_COUNT) {
			int64_t c = 0;
			if (!a[0].n) {
				*out = jv_int((int64_t)utf8_count(v->s, v->n) + 1);
				return 0;
			}
			for (size_t i = 0; (f = memfind(v->s + i, v->n - i, a[0].s, a[0].n));) {
				c++;
				i = (size_t)(f - v->s) + a[0].n;
			}
			*out = jv_int(c);
			return 0;
		}
		f = memfind(v->s, v->n, a[0].s, a[0].n);
		if (!f && n->op == M_INDEX)
			return type_err(r, "substring not found");
		*out = jv_int(f ? (int64_t)utf8_count(v->s, (size_t)(f - v->s)) : -1);
		return 0;
	}
	case M_JOIN: {
		struct jlist *items;
		struct buf b = {0};
		int rc = 0;
		if (n->nkw)
			return type_err(r, "str.join() takes no keyword arguments");
		if (n->nv != 1)
			return type_err(r, "str.join() takes exactly one argument (%u given)",
					n->nv);
		if (eval_args(r, n, s, a, 1) || iterate(r, &a[0], &items))
			return -1;
		for (uint32_t i = 0; i < items->n && !rc; i++) {
			if (items->v[i].t != JV_STR)
				rc =
				    type_err(r, "sequence item %u: expected str instance, %s found",
					     i, jv_type_name(&items->v[i]));
			else if ((i && buf_append(&b, v->s, v->n)) ||
				 buf_append(&b, items->v[i].s, items->v[i].n))
				rc = oom(r);
			else if (b.len > r->lim.out_bytes)
				rc = check_out(r, &b);
		}
		if (!rc)
			rc = mkstr(r, b.data ? b.data : "", b.len, out);
		buf_free(&b);
		return rc;
	}
	}
	return 1;
}

static int call_value(struct rctx *r, const struct jv *callee, const struct node *n,
		      struct scope *s, struct jv *out);

static int ev_method(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	struct jv obj, a[2], m;
	bool have[2];
	int rc;

	if (ev(r, n->a, s, &obj))
		return -1;
	r->line = n->line;
	if (obj.t == JV_UNDEF)
		return undef_fail(r, &obj);
	if (obj.t == JV_STR && n->op < M_ITEMS) {
		rc = str_method(r, n, s, &obj, out);
		if (rc <= 0)
			return rc;
	}
	if (obj.t == JV_STR && n->op == M_INDEX) {
		rc = str_method(r, n, s, &obj, out);
		if (rc <= 0)
			return rc;
	}
	if (obj.t == JV_DICT && (n->op == M_ITEMS || n->op == M_KEYS || n->op == M_VALUES)) {
		struct jlist *l = jl_new(&r->a, obj.d->n);
		if (n->nv || n->nkw)
			return type_err(r, "dict.%s() takes no arguments (%u given)", n->k.s,
					n->nv);
		if (!l)
			return oom(r);
		for (uint32_t i = 0; i < obj.d->n; i++) {
			if (n->op == M_ITEMS) {
				struct jlist *pair = jl_new(&r->a, 2);
				if (!pair)
					return oom(r);
				pair->v[0] = obj.d->k[i];
				pair->v[1] = obj.d->v[i];
				pair->n = 2;
				l->v[l->n++] = mklist(pair, JL_TUPLE);
			} else {
				l->v[l->n++] = n->op == M_KEYS ? obj.d->k[i] : obj.d->v[i];
			}
		}
		*out = mklist(l, n->op == M_ITEMS  ? JL_ITEMS
				 : n->op == M_KEYS ? JL_KEYS
						   : JL_VALUES);
		return 0;
	}
	if (obj.t == JV_DICT && n->op == M_GET) {
		struct jv *v;
		if (n->nkw)
			return type_err(r, "dict.get() takes no keyword arguments");
		if (n->nv < 1 || n->nv > 2)
			return type_err(r, "get expected at least 1 argument, got %u", n->nv);
		if (eval_args(r, n, s, a, 2))
			return -1;
		if ((a[0].t == JV_LIST && a[0].sub != JL_TUPLE) || a[0].t == JV_DICT)
			return type_err(r, "unhashable type: '%s'", jv_type_name(&a[0]));
		v = a[0].t == JV_UNDEF ? NULL : jd_get(&r->a, obj.d, a[0]);
		*out = v ? *v : n->nv == 2 ? a[1] : jv_none();
		return 0;
	}
	if (obj.t == JV_LIST && (obj.sub == JL_LIST || obj.sub == JL_TUPLE) &&
	    (n->op == M_INDEX || n->op == M_COUNT)) {
		static const char *const names[] = {"x"};
		int64_t c = 0;
		if (n->nkw)
			return type_err(r, "%s() takes no keyword arguments", n->k.s);
		if (n->nv != 1)
			return n->nv ? unsupported(r, "index() with start or end")
				     : type_err(r, "%s() takes exactly one argument (0 given)",
						n->k.s);
		if (bind_args(r, n, s, n->k.s, names, 1, a, have))
			return -1;
		for (uint32_t i = 0; i < obj.l->n; i++)
			if (py_eq(&obj.l->v[i], &a[0])) {
				if (n->op == M_INDEX) {
					*out = jv_int(i);
					return 0;
				}
				c++;
			}
		if (n->op == M_COUNT) {
			*out = jv_int(c);
			return 0;
		}
		{
			struct buf b = {0};
			if (py_repr(&b, &a[0], &r->er)) {
				buf_free(&b);
				return -1;
			}
			rc = obj.sub == JL_TUPLE
				 ? type_err(r, "tuple.index(x): x not in tuple")
				 : type_err(r, "%s is not in list", b.data ? b.data : "");
			buf_free(&b);
			return rc;
		}
	}
	/* Not a method of obj's type: what getattr gives (a namespace's macro, a dict's key, an
	 * undefined that raises when called). */
	if (get_attr(r, &obj, n->k.s, n->k.n, &m))
		return -1;
	return call_value(r, &m, n, s, out);
}

/* --- global functions and macros ------------------------------------------------------------- */

static int fn_range(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	struct jv a[3];
	int64_t start = 0, stop, st = 1, cnt;
	struct jlist *l;

	if (n->nkw)
		return type_err(r, "range() takes no keyword arguments");
	if (n->nv < 1 || n->nv > 3)
		return type_err(r, "range expected at most 3 arguments, got %u", n->nv);
	if (eval_args(r, n, s, a, 3))
		return -1;
	for (uint32_t i = 0; i < n->nv; i++) {
		if (a[i].t != JV_INT && a[i].t != JV_BOOL)
			return type_err(r, "'%s' object cannot be interpreted as an integer",
					jv_type_name(&a[i]));
	}
	if (n->nv == 1) {
		stop = a[0].i;
	} else {
		start = a[0].i;
		stop = a[1].i;
		if (n->nv == 3)
			st = a[2].i;
	}
	if (!st)
		return type_err(r, "range() arg 3 must not be zero");
	if (st > 0)
		cnt = stop > start ? (int64_t)(((__int128)stop - start + st - 1) / st) : 0;
	else
		cnt =
		    start > stop ? (int64_t)(((__int128)start - stop - st - 1) / -(__int128)st) : 0;
	if (cnt > MAX_RANGE)
		return type_err(r,
				"Range too big. The sandbox blocks ranges larger than MAX_RANGE "
				"(%d).",
				MAX_RANGE);
	if (!(l = jl_new(&r->a, (uint32_t)cnt)))
		return oom(r);
	for (int64_t i = 0; i < cnt; i++)
		l->v[l->n++] = jv_int(start + i * st);
	l->start = start;
	l->stop = stop;
	l->step = st;
	*out = mklist(l, JL_RANGE);
	return 0;
}

static int fn_dict(struct rctx *r, const struct node *n, struct scope *s, struct jv *out, bool ns)
{
	struct jdict *d = jd_new(&r->a, 0);
	struct jv a;

	if (!d)
		return oom(r);
	if (n->nv > 1)
		return type_err(r, "%s expected at most 1 argument, got %u", ns ? "dict" : "dict",
				n->nv);
	if (n->nv) {
		if (ev(r, n->v[0], s, &a))
			return -1;
		if (a.t == JV_DICT) {
			for (uint32_t i = 0; i < a.d->n; i++)
				if (jd_set(&r->a, d, a.d->k[i], a.d->v[i]))
					return oom(r);
		} else {
			return unsupported(r, "%s() from a %s", ns ? "namespace" : "dict",
					   jv_type_name(&a));
		}
	}
	for (uint32_t k = 0; k < n->nkw; k++) {
		struct jv v;
		if (ev(r, n->kw[k]->a, s, &v) || jd_set(&r->a, d, n->kw[k]->k, v))
			return r->er.set ? -1 : oom(r);
	}
	out->t = ns ? JV_NS : JV_DICT;
	out->d = d;
	return 0;
}

static int fn_strftime(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	struct jv f;
	char fmt[512], res[1024];
	size_t k = 0;
	struct tm tm;
	time_t t = (time_t)(r->clock.unix_s + r->clock.utc_offset_s);
	size_t len;

	if (n->nv != 1 || n->nkw)
		return type_err(r, "strftime_now() takes 1 positional argument");
	if (ev(r, n->v[0], s, &f))
		return -1;
	if (f.t != JV_STR)
		return type_err(r, "strftime() argument 1 must be str, not %s", jv_type_name(&f));
	if (f.n >= sizeof(fmt) / 2 || memchr(f.s, 0, f.n))
		return unsupported(r, "a strftime format of %u bytes", f.n);
	for (size_t i = 0; i < f.n; i++) {
		if (f.s[i] == '%' && i + 1 < f.n) {
			char c = f.s[i + 1];
			if (c == 'z' || c == 'Z') { /* a naive datetime: empty */
				i++;
				continue;
			}
			if (c == 'f') {
				memcpy(fmt + k, "000000", 6);
				k += 6;
				i++;
				continue;
			}
			if (!strchr("aAbBcdHIjmMpSUwWxXyYGuVgeCDFhnRrTt%", c))
				return unsupported(r, "the strftime directive %%%c", c);
			fmt[k++] = '%';
			fmt[k++] = c;
			i++;
			continue;
		}
		fmt[k++] = f.s[i];
	}
	fmt[k] = 0;
	gmtime_r(&t, &tm);
	len = k ? strftime(res, sizeof(res), fmt, &tm) : 0;
	return mkstr(r, res, len, out);
}

static int call_macro(struct rctx *r, const struct node *m, const struct node *n, struct scope *s,
		      struct jv *out)
{
	struct scope ms;
	struct buf body = {0}, *saved = r->out;
	uint32_t np = m->nv;
	struct jv *vals;
	bool *have;
	int rc;

	if (++r->depth > r->lim.depth)
		return jerr_set(&r->er, JINJA_LIMIT, n->line, "depth limit of %u exceeded",
				r->lim.depth);
	if (!(vals = ja_alloc(&r->a, (np + n->nv + 1) * sizeof(*vals))) ||
	    !(have = ja_alloc(&r->a, np + n->nv + 1)))
		return oom(r);
	memset(have, 0, np + n->nv + 1);
	for (uint32_t i = 0; i < n->nv; i++) {
		if (ev(r, n->v[i], s, &vals[i]))
			return -1;
		have[i] = true;
	}
	for (uint32_t k = 0; k < n->nkw; k++)
		if (ev(r, n->kw[k]->a, s, &vals[np + n->nv])) /* errors first, as Python */
			return -1;
	r->line = n->line;
	if (n->nv > np)
		return type_err(r, "macro '%s' takes not more than %u argument(s)", m->k.s, np);
	for (uint32_t k = 0; k < n->nkw; k++) {
		const struct node *kw = n->kw[k];
		uint32_t i;
		for (i = 0; i < np; i++)
			if (m->v[i]->k.n == kw->k.n && !memcmp(m->v[i]->k.s, kw->k.s, kw->k.n))
				break;
		if (i == np)
			return type_err(r, "macro '%s' takes no keyword argument '%s'", m->k.s,
					kw->k.s);
		if (have[i])
			return type_err(r, "macro '%s' got multiple values for argument '%s'",
					m->k.s, kw->k.s);
		if (ev(r, kw->a, s, &vals[i]))
			return -1;
		have[i] = true;
	}
	scope_init(&ms, r->root);
	for (uint32_t i = 0; i < np; i++) {
		const struct node *p = m->v[i];
		struct jv v;
		if (have[i])
			v = vals[i];
		else if (p->a) {
			if (ev(r, p->a, &ms, &v))
				return -1;
		} else {
			v = undef_hint(r, JU_HINT, "parameter '%s' was not provided", p->k.s);
		}
		if (scope_set(r, &ms, p->sym, v))
			return -1;
	}
	r->out = &body;
	rc = frame_enter(r, m->b, &ms);
	if (!rc)
		rc = exec_body(r, m->b, &ms);
	r->out = saved;
	if (rc >= 0)
		rc = mkstr(r, body.data ? body.data : "", body.len, out);
	buf_free(&body);
	r->depth--;
	return rc < 0 ? -1 : 0;
}

/* Evaluates a call's arguments for their errors only: Python evaluates them before it finds the
 * callee is undefined or not callable. */
static int eval_args_for_errors(struct rctx *r, const struct node *n, struct scope *s)
{
	struct jv v;

	for (uint32_t i = 0; i < n->nv; i++)
		if (ev(r, n->v[i], s, &v))
			return -1;
	for (uint32_t k = 0; k < n->nkw; k++)
		if (ev(r, n->kw[k]->a, s, &v))
			return -1;
	return 0;
}

static int call_value(struct rctx *r, const struct jv *callee, const struct node *n,
		      struct scope *s, struct jv *out)
{
	if (callee->t != JV_MACRO && callee->t != JV_FUNC && eval_args_for_errors(r, n, s))
		return -1;
	r->line = n->line;
	switch (callee->t) {
	case JV_UNDEF:
		return undef_fail(r, callee);
	case JV_MACRO:
		return call_macro(r, callee->m, n, s, out);
	case JV_FUNC:
		switch (callee->sub) {
		case JF_RANGE:
			return fn_range(r, n, s, out);
		case JF_NAMESPACE:
			return fn_dict(r, n, s, out, true);
		case JF_DICT:
			return fn_dict(r, n, s, out, false);
		case JF_STRFTIME:
			return fn_strftime(r, n, s, out);
		case JF_RAISE: {
			struct jv msg, sv;
			struct buf b = {0};
			if (n->nv != 1 || n->nkw)
				return type_err(r, "raise_exception() takes 1 positional argument");
			if (ev(r, n->v[0], s, &msg) || to_str(r, &msg, &sv))
				return -1;
			if (buf_append(&b, sv.s, sv.n))
				return oom(r);
			jerr_set(&r->er, JINJA_RAISED, n->line, "%s", b.data ? b.data : "");
			buf_free(&b);
			return -1;
		}
		}
		break;
	default:
		break;
	}
	return type_err(r, "'%s' object is not callable", jv_type_name(callee));
}

/* --- expressions ------------------------------------------------------------------------------ */

static int ev_add_chain(struct rctx *r, const struct node *n, struct scope *s, struct jv *out);

static int ev(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	struct jv a, b;
	int rc = 0;

	if (step(r, n))
		return -1;
	if (++r->depth > r->lim.depth)
		return jerr_set(&r->er, JINJA_LIMIT, n->line, "depth limit of %u exceeded",
				r->lim.depth);
	switch (n->kind) {
	case N_CONST:
		*out = n->k;
		break;
	case N_NAME:
		rc = lookup(r, n->sym, s, out);
		break;
	case N_GETATTR:
		if (!(rc = ev(r, n->a, s, &a)))
			rc = (r->line = n->line, get_attr(r, &a, n->k.s, n->k.n, out));
		break;
	case N_GETITEM:
		if (!(rc = ev(r, n->a, s, &a)) && !(rc = ev(r, n->b, s, &b)))
			rc = (r->line = n->line, get_item(r, &a, &b, out));
		break;
	case N_SLICE:
		rc = ev_slice(r, n, s, out);
		break;
	case N_CALL:
		if (!(rc = ev(r, n->a, s, &a)))
			rc = (r->line = n->line, call_value(r, &a, n, s, out));
		break;
	case N_METHOD:
		rc = ev_method(r, n, s, out);
		break;
	case N_FILTER:
		if (!(rc = ev(r, n->a, s, &a)))
			rc = (r->line = n->line, call_filter(r, n->op, &a, n, s, NULL, 0, out));
		break;
	case N_TEST: {
		struct jv args[8];
		bool res;
		if ((rc = ev(r, n->a, s, &a)))
			break;
		if (n->nkw) {
			rc = unsupported(r, "keyword arguments to a test");
			break;
		}
		if ((rc = eval_args(r, n, s, args, 8)))
			break;
		r->line = n->line;
		if (!(rc = run_test(r, n->op, &a, args, n->nv, &res)))
			*out = jv_bool(res);
		break;
	}
	case N_NOT:
		if (!(rc = ev(r, n->a, s, &a)))
			*out = jv_bool(!jv_truthy(&a));
		break;
	case N_NEG:
	case N_POS:
		if ((rc = ev(r, n->a, s, &a)))
			break;
		r->line = n->line;
		if (a.t == JV_UNDEF)
			rc = undef_fail(r, &a);
		else if (a.t == JV_INT || a.t == JV_BOOL) {
			if (n->kind == N_NEG && a.i == INT64_MIN)
				rc = overflow(r);
			else
				*out = jv_int(n->kind == N_NEG ? -a.i : a.i);
		} else if (a.t == JV_FLOAT)
			*out = jv_float(n->kind == N_NEG ? -a.f : a.f);
		else
			rc = type_err(r, "bad operand type for unary %c: '%s'",
				      n->kind == N_NEG ? '-' : '+', jv_type_name(&a));
		break;
	case N_BIN:
		if (n->op == '+') {
			rc = ev_add_chain(r, n, s, out);
			break;
		}
		if (!(rc = ev(r, n->a, s, &a)) && !(rc = ev(r, n->b, s, &b)))
			rc = (r->line = n->line, arith(r, n->op, &a, &b, out));
		break;
	case N_CONCAT: {
		struct buf bb = {0};
		for (uint32_t i = 0; i < n->nv && !rc; i++) {
			if ((rc = ev(r, n->v[i], s, &a)))
				break;
			if (a.t == JV_STR) {
				if (buf_append(&bb, a.s, a.n))
					rc = oom(r);
			} else if (a.t != JV_UNDEF && py_str(&bb, &a, &r->er)) {
				rc = -1;
			}
			if (!rc && bb.len > r->lim.out_bytes)
				rc = check_out(r, &bb);
		}
		if (!rc)
			rc = mkstr(r, bb.data ? bb.data : "", bb.len, out);
		buf_free(&bb);
		break;
	}
	case N_AND:
		if ((rc = ev(r, n->a, s, &a)))
			break;
		if (!jv_truthy(&a))
			*out = a;
		else
			rc = ev(r, n->b, s, out);
		break;
	case N_OR:
		if ((rc = ev(r, n->a, s, &a)))
			break;
		if (jv_truthy(&a))
			*out = a;
		else
			rc = ev(r, n->b, s, out);
		break;
	case N_CMP: {
		bool res = true;
		if ((rc = ev(r, n->a, s, &a)))
			break;
		for (uint32_t i = 0; i < n->nv && res; i++) {
			const struct node *o = n->v[i];
			int c;
			if ((rc = ev(r, o->a, s, &b)))
				break;
			r->line = o->line;
			switch (o->op) {
			case OP_EQ:
				res = py_eq(&a, &b);
				break;
			case OP_NE:
				res = !py_eq(&a, &b);
				break;
			case OP_IN:
			case OP_NOTIN:
				rc = op_in(r, &a, &b, &res);
				if (o->op == OP_NOTIN)
					res = !res;
				break;
			default: {
				static const char *const nm[] = {
				    [OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">="};
				if (a.t == JV_UNDEF) {
					rc = undef_fail(r, &a);
					break;
				}
				if (b.t == JV_UNDEF) {
					rc = undef_fail(r, &b);
					break;
				}
				if ((rc = py_order(&a, &b, nm[o->op], &c, &r->er)))
					break;
				res = c == 2	       ? false
				      : o->op == OP_LT ? c < 0
				      : o->op == OP_LE ? c <= 0
				      : o->op == OP_GT ? c > 0
						       : c >= 0;
			}
			}
			if (rc)
				break;
			a = b;
		}
		if (!rc)
			*out = jv_bool(res);
		break;
	}
	case N_COND:
		if ((rc = ev(r, n->a, s, &a)))
			break;
		if (jv_truthy(&a))
			rc = ev(r, n->b, s, out);
		else if (n->c)
			rc = ev(r, n->c, s, out);
		else
			*out = undef_hint(r, JU_HINT,
					  "the inline if-expression on line %d evaluated to false "
					  "and no else section was defined.",
					  n->line);
		break;
	case N_LIST:
	case N_TUPLE: {
		struct jlist *l = jl_new(&r->a, n->nv);
		if (!l) {
			rc = oom(r);
			break;
		}
		for (uint32_t i = 0; i < n->nv && !rc; i++)
			rc = ev(r, n->v[i], s, &l->v[l->n++]);
		*out = mklist(l, n->kind == N_LIST ? JL_LIST : JL_TUPLE);
		break;
	}
	case N_DICT: {
		struct jdict *d = jd_new(&r->a, n->nv);
		if (!d) {
			rc = oom(r);
			break;
		}
		for (uint32_t i = 0; i < n->nv && !rc; i++) {
			if ((rc = ev(r, n->v[i], s, &a)) || (rc = ev(r, n->kw[i], s, &b)))
				break;
			if ((a.t == JV_LIST && a.sub != JL_TUPLE) || a.t == JV_DICT ||
			    a.t == JV_NS) {
				rc = type_err(r, "unhashable type: '%s'", jv_type_name(&a));
				break;
			}
			if (a.t == JV_UNDEF) {
				rc = unsupported(r, "an undefined dict key");
				break;
			}
			if (jd_set(&r->a, d, a, b))
				rc = oom(r);
		}
		out->t = JV_DICT;
		out->d = d;
		break;
	}
	default:
		rc = unsupported(r, "an expression");
	}
	r->depth--;
	return rc ? -1 : 0;
}

/* a + b + c ...: evaluated left to right as Python does, but strings are joined once at the end
 * rather than copied at every +. */
static int ev_add_chain(struct rctx *r, const struct node *n, struct scope *s, struct jv *out)
{
	const struct node *ops[64];
	int k = 0;
	const struct node *x = n;
	struct jv acc, v;
	struct buf b = {0};
	bool strmode = false;
	int rc = 0;

	while (x->kind == N_BIN && x->op == '+' && k < 63) {
		ops[k++] = x->b;
		x = x->a;
	}
	if (ev(r, x, s, &acc))
		return -1;
	for (int i = k - 1; i >= 0 && !rc; i--) {
		if (ev(r, ops[i], s, &v)) {
			rc = -1;
			break;
		}
		r->line = n->line;
		if (acc.t == JV_STR && v.t == JV_STR) {
			if (!strmode) {
				strmode = true;
				b.len = 0;
				if (buf_append(&b, acc.s, acc.n)) {
					rc = oom(r);
					break;
				}
			}
			if (buf_append(&b, v.s, v.n))
				rc = oom(r);
			else if (b.len > r->lim.out_bytes)
				rc = jerr_set(&r->er, JINJA_LIMIT, n->line,
					      "a string beyond the output limit of %zu bytes",
					      r->lim.out_bytes);
			continue;
		}
		if (strmode) {
			if (mkstr(r, b.data ? b.data : "", b.len, &acc)) {
				rc = -1;
				break;
			}
			strmode = false;
		}
		if (arith(r, '+', &acc, &v, &acc))
			rc = -1;
	}
	if (!rc && strmode)
		rc = mkstr(r, b.data ? b.data : "", b.len, &acc);
	buf_free(&b);
	if (!rc)
		*out = acc;
	return rc ? -1 : 0;
}

/* --- statements ------------------------------------------------------------------------------ */

static int assign(struct rctx *r, const struct node *t, const struct jv *v, struct scope *s)
{
	if (t->kind == N_NAME)
		return scope_set(r, s, t->sym, *v);
	if (t->kind == N_NSATTR) {
		const struct jv *ns = scope_find(s, t->sym);
		if (!ns || ns->t != JV_NS)
			return type_err(r, "cannot assign attribute on non-namespace object");
		if (jd_set(&r->a, ns->d, t->k, *v))
			return oom(r);
		return 0;
	}
	/* a, b = ... */
	{
		struct jlist *items;
		if (v->t == JV_UNDEF)
			return undef_fail(r, v);
		if (iterate(r, v, &items))
			return -1;
		if (items->n < t->nv)
			return type_err(r, "not enough values to unpack (expected %u, got %u)",
					t->nv, items->n);
		if (items->n > t->nv)
			return type_err(r, "too many values to unpack (expected %u)", t->nv);
		for (uint32_t i = 0; i < t->nv; i++)
			if (assign(r, t->v[i], &items->v[i], s))
				return -1;
	}
	return 0;
}

static int exec_for(struct rctx *r, const struct node *n, struct scope *s)
{
	struct jv it;
	struct jlist *items, *kept;
	struct scope is;
	struct jloop *lp;
	struct jv lv;
	int rc = 0;

	const struct jlist *poisoned = NULL;
	bool completed = false;

	if (ev(r, n->b, s, &it))
		return -1;
	r->line = n->line;
	if (it.t == JV_LIST && it.l->err_msg) {
		poisoned = it.l; /* its items, then its error (unless the loop breaks) */
		items = it.l;
	} else if (iterate(r, &it, &items)) {
		return -1;
	}
	kept = items;
	if (n->c) {
		if (!(kept = jl_new(&r->a, items->n)))
			return oom(r);
		for (uint32_t i = 0; i < items->n; i++) {
			struct jv c;
			if (++r->iters > r->lim.loop_iters)
				return jerr_set(&r->er, JINJA_LIMIT, n->line,
						"loop iteration limit of %llu exceeded",
						(unsigned long long)r->lim.loop_iters);
			scope_init(&is, s);
			if (assign(r, n->a, &items->v[i], &is) || ev(r, n->c, &is, &c))
				return -1;
			if (jv_truthy(&c))
				kept->v[kept->n++] = items->v[i];
		}
	}
	if (!kept->n) {
		if (poisoned)
			return gen_raise(r, poisoned);
		if (n->e) {
			scope_init(&is, s);
			if (frame_enter(r, n->e, &is))
				return -1;
			return exec_body(r, n->e, &is) < 0 ? -1 : 0;
		}
		return 0;
	}
	if (!(lp = ja_alloc(&r->a, sizeof(*lp))))
		return oom(r);
	lp->length = kept->n;
	lp->items = kept;
	lv.t = JV_LOOP;
	lv.lp = lp;
	if (++r->depth > r->lim.depth)
		return jerr_set(&r->er, JINJA_LIMIT, n->line, "depth limit of %u exceeded",
				r->lim.depth);
	for (uint32_t i = 0; i < kept->n; i++) {
		if (++r->iters > r->lim.loop_iters)
			return jerr_set(&r->er, JINJA_LIMIT, n->line,
					"loop iteration limit of %llu exceeded",
					(unsigned long long)r->lim.loop_iters);
		lp->index0 = i;
		scope_init(&is, s);
		if (frame_enter(r, n->d, &is) || scope_set(r, &is, r->t->sym_loop, lv) ||
		    assign(r, n->a, &kept->v[i], &is))
			return -1;
		rc = exec_body(r, n->d, &is);
		if (rc < 0)
			return -1;
		if (rc == FLOW_OK)
			completed = true;
		if (rc == FLOW_BREAK)
			break;
	}
	r->depth--;
	if (poisoned && rc != FLOW_BREAK)
		return gen_raise(r, poisoned);
	/* jinja2 clears its "run the else" flag at the end of the body, so a loop whose every
	 * pass ended in continue or break runs its else too */
	if (!completed && n->e) {
		scope_init(&is, s);
		if (frame_enter(r, n->e, &is))
			return -1;
		return exec_body(r, n->e, &is) < 0 ? -1 : 0;
	}
	return 0;
}

static int exec_body(struct rctx *r, const struct node *b, struct scope *s)
{
	for (uint32_t i = 0; i < b->nv; i++) {
		const struct node *n = b->v[i];
		struct jv v;
		int rc;

		if (step(r, n))
			return -1;
		switch (n->kind) {
		case N_TEXT:
			if (buf_append(r->out, n->k.s, n->k.n))
				return oom(r);
			if (check_out(r, r->out))
				return -1;
			break;
		case N_PRINT:
			if (ev(r, n->a, s, &v))
				return -1;
			if (v.t == JV_STR) {
				if (buf_append(r->out, v.s, v.n))
					return oom(r);
			} else if (py_str(r->out, &v, &r->er)) {
				return -1;
			}
			if (check_out(r, r->out))
				return -1;
			break;
		case N_IF: {
			const struct node *c = n;
			while (c && c->kind == N_IF) {
				if (ev(r, c->a, s, &v))
					return -1;
				if (jv_truthy(&v)) {
					c = c->b;
					break;
				}
				c = c->c;
			}
			if (c) {
				rc = exec_body(r, c, s);
				if (rc)
					return rc;
			}
			break;
		}
		case N_FOR:
			if (exec_for(r, n, s))
				return -1;
			break;
		case N_SET:
			if (n->a->kind == N_NSATTR) {
				/* jinja2 checks the namespace before it evaluates the value */
				const struct jv *ns = scope_find(s, n->a->sym);
				if (!ns || ns->t != JV_NS)
					return type_err(
					    r, "cannot assign attribute on non-namespace object");
			}
			if (ev(r, n->b, s, &v) || (r->line = n->line, assign(r, n->a, &v, s)))
				return -1;
			break;
		case N_SETB: {
			/* the body is a frame of its own: what it sets stays there */
			struct buf body = {0}, *saved = r->out;
			struct scope bs;
			scope_init(&bs, s);
			r->out = &body;
			rc = frame_enter(r, n->b, &bs);
			if (!rc)
				rc = exec_body(r, n->b, &bs);
			r->out = saved;
			if (rc >= 0)
				rc = mkstr(r, body.data ? body.data : "", body.len, &v);
			buf_free(&body);
			if (rc < 0 || assign(r, n->a, &v, s))
				return -1;
			break;
		}
		case N_MACRO:
			v.t = JV_MACRO;
			v.m = n;
			if (scope_set(r, s, n->sym, v))
				return -1;
			break;
		case N_BREAK:
			return FLOW_BREAK;
		case N_CONTINUE:
			return FLOW_CONTINUE;
		case N_GEN: {
			/* transformers' AssistantTracker: a call block, so its own scope */
			struct scope gs;
			scope_init(&gs, s);
			rc = frame_enter(r, n->b, &gs);
			if (!rc)
				rc = exec_body(r, n->b, &gs);
			if (rc)
				return rc;
			break;
		}
		default:
			return unsupported(r, "a statement");
		}
	}
	return 0;
}

/* --- entry ------------------------------------------------------------------------------------ */

void jinja_limits_default(struct jinja_limits *l)
{
	l->depth = JINJA_DEPTH_MAX;
	l->loop_iters = JINJA_LOOP_ITERS_MAX;
	l->steps = JINJA_STEPS_MAX;
	l->out_bytes = JINJA_OUT_BYTES_MAX;
	l->mem_bytes = JINJA_MEM_BYTES_MAX;
}

const char *jinja_status_name(int status)
{
	switch (status) {
	case JINJA_OK:
		return "ok";
	case JINJA_SYNTAX:
		return "syntax";
	case JINJA_UNSUPPORTED:
		return "unsupported";
	case JINJA_RAISED:
		return "raised";
	case JINJA_UNDEFINED:
		return "undefined";
	case JINJA_TYPE:
		return "type";
	case JINJA_SECURITY:
		return "security";
	case JINJA_LIMIT:
		return "limit";
	case JINJA_INPUT:
		return "input";
	}
	return "error";
}

int jinja_render(const struct jinja_template *t, const char *vars, size_t n,
		 const struct jinja_limits *limits, const struct jinja_clock *clock,
		 struct buf *out, struct jinja_error *err)
{
	struct rctx r = {0};
	struct scope root;
	struct jv v;
	size_t mark = out->len;
	int rc = 0;

	struct jinja_error own;

	if (!err)
		err = &own;
	memset(err, 0, sizeof(*err));
	r.t = t;
	r.er.e = err;
	if (limits)
		r.lim = *limits;
	else
		jinja_limits_default(&r.lim);
	if (!r.lim.depth || !r.lim.loop_iters || !r.lim.steps || !r.lim.out_bytes ||
	    !r.lim.mem_bytes) {
		jerr_set(&r.er, JINJA_INPUT, 0, "a limit of 0");
		return JINJA_INPUT;
	}
	if (clock) {
		r.clock = *clock;
	} else {
		r.clock.unix_s = (int64_t)time(NULL);
	}
	r.a.limit = r.lim.mem_bytes;
	r.er.max_out = r.lim.out_bytes;
	r.out = out;
	scope_init(&root, NULL);
	r.root = &root;
	if (jv_from_json(&r.a, vars, n, &v, &r.er)) {
		rc = -1;
		goto cleanup;
	}
	if (v.t != JV_DICT) {
		jerr_set(&r.er, JINJA_INPUT, 0, "variables: not a JSON object");
		rc = -1;
		goto cleanup;
	}
	for (uint32_t i = 0; i < v.d->n; i++) {
		const struct jv *k = &v.d->k[i];
		for (uint32_t sym = 0; sym < t->nsyms; sym++)
			if (t->syms[sym][0] == (k->n ? k->s[0] : 0) &&
			    !strncmp(t->syms[sym], k->s, k->n) && !t->syms[sym][k->n]) {
				if (scope_set(&r, &root, (int)sym, v.d->v[i]))
					rc = -1;
				break;
			}
	}
	if (!rc && (frame_enter(&r, t->root, &root) || exec_body(&r, t->root, &root) < 0))
		rc = -1;
cleanup:
	if (rc) {
		rc = r.er.set ? r.er.status : -ENOMEM;
		out->len = mark;
		if (out->data)
			out->data[mark] = 0;
	}
	ja_free_all(&r.a);
	return rc;
}
