// SPDX-License-Identifier: Apache-2.0
/*
 * jinja_value: the values of a render as Python holds them. Memory comes from an arena freed
 * at once when the render ends, bounded by struct jinja_limits.mem_bytes. Printing follows
 * CPython 3.11: str() and repr() of None/bool/int/float/str/list/tuple/dict, float repr as the
 * shortest digits that read back to the same double (1e-05, 1e+16, 0.1), string repr with
 * Python's choice of quotes and escapes; json.dumps as the json module prints (float repr,
 * Infinity/NaN, ensure_ascii's \uXXXX, the indent layout). JSON input follows json.loads: an
 * integer stays an int (beyond 64 bits refused), anything with '.', 'e' or 'E' is a float, the
 * last of repeated keys wins, in the place of the first.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt/jinja_int.h"
#include "prompt/unicode_tables.h"
#include "core/utf8.h"

/* --- arena ---------------------------------------------------------------------------------- */

#define CHUNK_MIN (16u << 10) /* bytes of the arena's smallest chunk */

struct jchunk {
	struct jchunk *next;
	size_t size, used;
	max_align_t data[];
};

void *ja_alloc(struct jarena *a, size_t n)
{
	struct jchunk *c = a->head;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (a->limit && (a->used + n > a->limit || n > a->limit)) {
		a->over = true;
		return NULL;
	}
	if (!c || c->size - c->used < n) {
		size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
		if (c && size < c->size * 2 && c->size < (4u << 20))
			size = c->size * 2 > n ? c->size * 2 : n;
		if (!(c = malloc(sizeof(*c) + size)))
			return NULL;
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	a->used += n;
	return p;
}

void ja_free_all(struct jarena *a)
{
	struct jchunk *c = a->head;

	while (c) {
		struct jchunk *n = c->next;
		free(c);
		c = n;
	}
	a->head = NULL;
	a->used = 0;
}

char *ja_strdup(struct jarena *a, const char *s, size_t n)
{
	char *c = ja_alloc(a, n + 1);
	if (!c)
		return NULL;
	if (n)
		memcpy(c, s, n);
	c[n] = 0;
	return c;
}

int jerr_set(struct jerr *er, int status, int line, const char *fmt, ...)
{
	va_list ap;

	if (er->set)
		return -1;
	er->set = true;
	er->status = status;
	if (er->e) {
		er->e->status = status;
		er->e->line = line;
		va_start(ap, fmt);
		vsnprintf(er->e->msg, sizeof(er->e->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* --- lists and dicts ------------------------------------------------------------------------- */

struct jlist *jl_new(struct jarena *a, uint32_t cap)
{
	struct jlist *l = ja_alloc(a, sizeof(*l));
	if (!l)
		return NULL;
	memset(l, 0, sizeof(*l));
	if (cap && !(l->v = ja_alloc(a, cap * sizeof(struct jv))))
		return NULL;
	l->cap = cap;
	return l;
}

int jl_push(struct jarena *a, struct jlist *l, struct jv v)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 4;
		struct jv *nv = ja_alloc(a, cap * sizeof(*nv));
		if (!nv)
			return -1;
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof(*nv));
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

struct jdict *jd_new(struct jarena *a, uint32_t cap)
{
	struct jdict *d = ja_alloc(a, sizeof(*d));
	if (!d)
		return NULL;
	memset(d, 0, sizeof(*d));
	if (cap && (!(d->k = ja_alloc(a, cap * sizeof(struct jv))) ||
		    !(d->v = ja_alloc(a, cap * sizeof(struct jv)))))
		return NULL;
	d->cap = cap;
	return d;
}

static uint32_t str_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

#define DICT_INDEX_MIN 12 /* entries from which string keys are found through a hash index */

static void idx_insert(struct jdict *d, uint32_t i)
{
	uint32_t m = d->idx_cap - 1, h = str_hash(d->k[i].s, d->k[i].n) & m;
	while (d->idx[h])
		h = (h + 1) & m;
	d->idx[h] = i + 1;
}

static void idx_build(struct jarena *a, struct jdict *d)
{
	uint32_t cap = 32;

	while (cap < d->n * 2)
		cap *= 2;
	if (!(d->idx = ja_alloc(a, cap * sizeof(uint32_t)))) {
		d->idx_bad = true; /* linear search then */
		return;
	}
	memset(d->idx, 0, cap * sizeof(uint32_t));
	d->idx_cap = cap;
	for (uint32_t i = 0; i < d->n; i++)
		idx_insert(d, i);
}

struct jv *jd_get_str(const struct jdict *d, const char *s, size_t n)
{
	if (d->idx) {
		uint32_t m = d->idx_cap - 1, h = str_hash(s, n) & m;
		while (d->idx[h]) {
			const struct jv *k = &d->k[d->idx[h] - 1];
			if (k->n == n && !memcmp(k->s, s, n))
				return &d->v[d->idx[h] - 1];
			h = (h + 1) & m;
		}
		return NULL;
	}
	for (uint32_t i = 0; i < d->n; i++)
		if (d->k[i].t == JV_STR && d->k[i].n == n && !memcmp(d->k[i].s, s, n))
			return &d->v[i];
	return NULL;
}

struct jv *jd_get(struct jarena *a, const struct jdict *d, struct jv key)
{
	(void)a;
	if (key.t == JV_STR && (d->idx || !d->idx_bad))
		return jd_get_str(d, key.s, key.n);
	for (uint32_t i = 0; i < d->n; i++)
		if (py_eq(&d->k[i], &key))
			return &d->v[i];
	return NULL;
}

int jd_set(struct jarena *a, struct jdict *d, struct jv key, struct jv val)
{
	struct jv *old = jd_get(a, d, key);

	if (key.t == JV_UNDEF)
		return -1;
	if (old) {
		*old = val;
		return 0;
	}
	if (d->n == d->cap) {
		uint32_t cap = d->cap ? d->cap * 2 : 4;
		struct jv *nk = ja_alloc(a, cap * sizeof(*nk)),
			  *nv = ja_alloc(a, cap * sizeof(*nv));
		if (!nk || !nv)
			return -1;
		if (d->n) {
			memcpy(nk, d->k, d->n * sizeof(*nk));
			memcpy(nv, d->v, d->n * sizeof(*nv));
		}
		d->k = nk;
		d->v = nv;
		d->cap = cap;
	}
	d->k[d->n] = key;
	d->v[d->n] = val;
	d->n++;
	if (key.t != JV_STR) {
		d->idx_bad = true;
		d->idx = NULL;
	} else if (d->idx) {
		if (d->n * 2 > d->idx_cap)
			idx_build(a, d);
		else
			idx_insert(d, d->n - 1);
	} else if (!d->idx_bad && d->n >= DICT_INDEX_MIN) {
		idx_build(a, d);
	}
	return 0;
}

/* --- UTF-8 ---------------------------------------------------------------------------------- */

uint32_t utf8_next(const char *s, size_t n, size_t *len)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] < 0x80 || n < 2) {
		*len = 1;
		return u[0];
	}
	if (u[0] < 0xE0) {
		*len = 2;
		return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
	}
	if (u[0] < 0xF0 || n < 4) {
		*len = n < 3 ? n : 3;
		if (n < 3)
			return 0xFFFD;
		return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) |
		       (u[2] & 0x3F);
	}
	*len = 4;
	return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
	       ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned char c = u[i];
		uint32_t cp;
		size_t len;
		if (c < 0x80) {
			/* ASCII runs 8 bytes at a time */
			while (i + 8 <= n) {
				uint64_t w;
				memcpy(&w, u + i, 8);
				if (w & 0x8080808080808080ull)
					break;
				i += 8;
			}
			while (i < n && u[i] < 0x80)
				i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			len = 2;
		else if (c >= 0xE0 && c <= 0xEF)
			len = 3;
		else if (c >= 0xF0 && c <= 0xF4)
			len = 4;
		else
			return false;
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++)
			if ((u[i + k] & 0xC0) != 0x80)
				return false;
		if (len == 3) {
			cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(u[i + 1] & 0x3F) << 6);
			if (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))
				return false;
		} else if (len == 4) {
			cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(u[i + 1] & 0x3F) << 12);
			if (cp < 0x10000 || cp > 0x10FFFF)
				return false;
		}
		i += len;
	}
	return true;
}

size_t utf8_count(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

size_t utf8_offset(const char *s, size_t n, size_t i)
{
	size_t o = 0;

	while (i && o < n) {
		o++;
		while (o < n && ((unsigned char)s[o] & 0xC0) == 0x80)
			o++;
		i--;
	}
	return o;
}

bool py_isspace(uint32_t c)
{
	if (c < 0x80)
		return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
	if (c >= 0x110000)
		return false;
	return (unicode_cls(c) & UCLS_MASK) == UCLS_SPACE;
}

static bool strip_in(uint32_t cp, const char *chars, size_t nchars)
{
	if (!chars)
		return py_isspace(cp);
	for (size_t i = 0, l; i < nchars; i += l)
		if (utf8_next(chars + i, nchars - i, &l) == cp)
			return true;
	return false;
}

void py_strip(const char *s, size_t n, const char *chars, size_t nchars, bool left, bool right,
	      size_t *b, size_t *e)
{
	size_t i = 0, j = n, l;

	while (left && i < j && strip_in(utf8_next(s + i, j - i, &l), chars, nchars))
		i += l;
	while (right && j > i) {
		size_t k = j - 1;

		while (k > i && ((unsigned char)s[k] & 0xC0) == 0x80)
			k--;
		if (!strip_in(utf8_next(s + k, j - k, &l), chars, nchars))
			break;
		j = k;
	}
	*b = i;
	*e = j;
}

/* Python's str.isprintable() for one code point: not Cc, Cf, Cs, Co, Cn, Zl, Zp, Zs (but space).
 * Beyond ASCII this knows the separators, the format characters in use and the private-use
 * areas; an unassigned code point counts as printable (Python would escape it). */
static bool py_isprintable(uint32_t c)
{
	static const uint32_t cf[][2] = {
	    {0xAD, 0xAD},	{0x600, 0x605},	    {0x61C, 0x61C},	 {0x6DD, 0x6DD},
	    {0x70F, 0x70F},	{0x890, 0x891},	    {0x8E2, 0x8E2},	 {0x180E, 0x180E},
	    {0x200B, 0x200F},	{0x202A, 0x202E},   {0x2060, 0x2064},	 {0x2066, 0x206F},
	    {0xFEFF, 0xFEFF},	{0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},	 {0x110CD, 0x110CD},
	    {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},	 {0xE0001, 0xE0001},
	    {0xE0020, 0xE007F}, {0xE000, 0xF8FF},   {0xF0000, 0x10FFFF}, {0xD800, 0xDFFF},
	    {0xFFFE, 0xFFFF},
	};
	if (c < 0x80)
		return c >= 0x20 && c < 0x7f;
	if (c < 0xA0 || c >= 0x110000)
		return false;
	if (c != ' ' && (unicode_cls(c) & UCLS_MASK) == UCLS_SPACE)
		return false; /* Zs, Zl, Zp (and the controls, handled above) */
	for (size_t i = 0; i < sizeof(cf) / sizeof(cf[0]); i++)
		if (c >= cf[i][0] && c <= cf[i][1])
			return false;
	return true;
}

/* --- printing ------------------------------------------------------------------------------- */

/* Steps the last mantissa digit of "[-]d.ddde[+-]XX" in t up (or down) by one, with carry;
 * false when that leaves the form (9.99 up, 1.00 down). */
static bool neighbour(char *t, bool up)
{
	char *e = strchr(t, 'e'), *p;
	bool neg = t[0] == '-';

	if (!e)
		return false;
	if (neg)
		up = !up; /* the magnitude moves the other way */
	for (p = e - 1; p >= t + neg; p--) {
		if (*p == '.')
			continue;
		if (up ? *p < '9' : *p > '0') {
			*p = (char)(*p + (up ? 1 : -1));
			return !(p == t + neg && *p == '0');
		}
		*p = up ? '0' : '9';
	}
	return false;
}

size_t py_float_repr(double f, char *o)
{
	char tmp[40], digits[24];
	int prec, exp10, nd = 0;

	if (isnan(f))
		return (size_t)sprintf(o, "nan");
	if (isinf(f))
		return (size_t)sprintf(o, f < 0 ? "-inf" : "inf");
	if (f == 0)
		return (size_t)sprintf(o, signbit(f) ? "-0.0" : "0.0");
	/* The shortest digits that read back as f (Python's repr, David Gay's mode 0): at each
	 * length the correctly rounded digits, or else their neighbour on f's side, which can
	 * read back when the rounded ones do not (2**-24: 5.960464477539063e-08). */
	for (prec = 1; prec <= 17; prec++) {
		double back;
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
		back = strtod(tmp, NULL);
		if (back == f)
			break;
		if (prec < 17 && neighbour(tmp, back < f) && strtod(tmp, NULL) == f)
			break;
	}
	/* tmp: [-]d[.ddd]e[+-]XX */
	{
		const char *p = tmp;
		bool neg = *p == '-';
		char *e;
		size_t k = 0;
		if (neg)
			p++;
		for (; *p && *p != 'e'; p++)
			if (*p != '.')
				digits[nd++] = *p;
		while (nd > 1 && digits[nd - 1] == '0')
			nd--;
		exp10 = (int)strtol(p + 1, &e, 10);
		if (neg)
			o[k++] = '-';
		if (exp10 < -4 || exp10 >= 16) {
			o[k++] = digits[0];
			if (nd > 1) {
				o[k++] = '.';
				memcpy(o + k, digits + 1, (size_t)nd - 1);
				k += (size_t)nd - 1;
			}
			k += (size_t)sprintf(o + k, "e%c%02d", exp10 < 0 ? '-' : '+',
					     exp10 < 0 ? -exp10 : exp10);
		} else if (exp10 < 0) {
			o[k++] = '0';
			o[k++] = '.';
			for (int i = -1; i > exp10; i--)
				o[k++] = '0';
			memcpy(o + k, digits, (size_t)nd);
			k += (size_t)nd;
		} else {
			for (int i = 0; i <= exp10; i++)
				o[k++] = i < nd ? digits[i] : '0';
			o[k++] = '.';
			if (nd > exp10 + 1) {
				memcpy(o + k, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
				k += (size_t)(nd - exp10 - 1);
			} else {
				o[k++] = '0';
			}
		}
		o[k] = 0;
		return k;
	}
}

const char *jv_type_name(const struct jv *v)
{
	switch (v->t) {
	case JV_UNDEF:
		return "Undefined";
	case JV_NONE:
		return "NoneType";
	case JV_BOOL:
		return "bool";
	case JV_INT:
		return "int";
	case JV_FLOAT:
		return "float";
	case JV_STR:
		return "str";
	case JV_LIST:
		switch (v->sub) {
		case JL_TUPLE:
			return "tuple";
		case JL_GEN:
			return v->l->tname ? v->l->tname : "generator";
		case JL_ITEMS:
			return "dict_items";
		case JL_KEYS:
			return "dict_keys";
		case JL_VALUES:
			return "dict_values";
		case JL_RANGE:
			return "range";
		}
		return "list";
	case JV_DICT:
		return "dict";
	case JV_NS:
		return "Namespace";
	case JV_MACRO:
		return "Macro";
	case JV_LOOP:
		return "LoopContext";
	case JV_FUNC:
		return "function";
	}
	return "object";
}

const char *jv_object_type(const struct jv *v)
{
	switch (v->t) {
	case JV_NONE:
		return "None";
	case JV_BOOL:
		return "bool object";
	case JV_INT:
		return "int object";
	case JV_FLOAT:
		return "float object";
	case JV_STR:
		return "str object";
	case JV_LIST:
		switch (v->sub) {
		case JL_TUPLE:
			return "tuple object";
		case JL_GEN:
			if (v->l->tname) {
				static __thread char name[48];
				snprintf(name, sizeof(name), "%s object", v->l->tname);
				return name;
			}
			return "generator object";
		case JL_ITEMS:
			return "dict_items object";
		case JL_KEYS:
			return "dict_keys object";
		case JL_VALUES:
			return "dict_values object";
		case JL_RANGE:
			return "range object";
		}
		return "list object";
	case JV_DICT:
		return "dict object";
	case JV_NS:
		return "jinja2.utils.Namespace object";
	case JV_MACRO:
		return "jinja2.runtime.Macro object";
	case JV_LOOP:
		return "jinja2.runtime.LoopContext object";
	case JV_FUNC:
		return "function object";
	case JV_UNDEF:
		return "jinja2.runtime.Undefined object";
	}
	return "object";
}

bool jv_truthy(const struct jv *v)
{
	switch (v->t) {
	case JV_UNDEF:
	case JV_NONE:
		return false;
	case JV_BOOL:
	case JV_INT:
		return v->i != 0;
	case JV_FLOAT:
		return v->f != 0;
	case JV_STR:
		return v->n != 0;
	case JV_LIST:
		return v->sub == JL_GEN || v->l->n != 0;
	case JV_DICT:
		return v->d->n != 0;
	default:
		return true;
	}
}

static int put(struct buf *b, const char *s, size_t n, struct jerr *er)
{
	if (er->max_out && b->len + n > er->max_out)
		return jerr_set(er, JINJA_LIMIT, 0, "output limit of %zu bytes exceeded",
				er->max_out);
	if (buf_append(b, s, n))
		return jerr_set(er, JINJA_LIMIT, 0, "out of memory");
	return 0;
}

static int repr_str(struct buf *b, const char *s, size_t n, struct jerr *er)
{
	bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
	char q = sq && !dq ? '"' : '\'';
	size_t i = 0, run = 0;

	if (put(b, &q, 1, er))
		return -1;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		char esc[16];
		size_t l = 1;
		int en = 0;
		uint32_t cp = c;

		if (c >= 0x80)
			cp = utf8_next(s + i, n - i, &l);
		if (c == '\\' || c == (unsigned char)q)
			en = snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c == '\n')
			en = snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\r')
			en = snprintf(esc, sizeof(esc), "\\r");
		else if (c == '\t')
			en = snprintf(esc, sizeof(esc), "\\t");
		else if (!py_isprintable(cp))
			en = snprintf(esc, sizeof(esc),
				      cp < 0x100     ? "\\x%02x"
				      : cp < 0x10000 ? "\\u%04x"
						     : "\\U%08x",
				      cp);
		if (en) {
			if (put(b, s + i - run, run, er) || put(b, esc, (size_t)en, er))
				return -1;
			run = 0;
		} else {
			run += l;
		}
		i += l;
	}
	if (put(b, s + n - run, run, er) || put(b, &q, 1, er))
		return -1;
	return 0;
}

static int print_range(struct buf *b, const struct jlist *l, struct jerr *er)
{
	int rc = l->step == 1
		     ? buf_printf(b, "range(%lld, %lld)", (long long)l->start, (long long)l->stop)
		     : buf_printf(b, "range(%lld, %lld, %lld)", (long long)l->start,
				  (long long)l->stop, (long long)l->step);
	return rc ? jerr_set(er, JINJA_LIMIT, 0, "out of memory") : 0;
}

#define PRINT_DEPTH_MAX 900 /* containers inside each other that repr() prints (Python: ~1,000) */

static int py_print_d(struct buf *b, const struct jv *v, bool repr, struct jerr *er, int depth);

static int py_print(struct buf *b, const struct jv *v, bool repr, struct jerr *er)
{
	return py_print_d(b, v, repr, er, 0);
}

static int py_print_d(struct buf *b, const struct jv *v, bool repr, struct jerr *er, int depth)
{
	char num[40];
	size_t n;

	if (depth > PRINT_DEPTH_MAX)
		return jerr_set(er, JINJA_LIMIT, 0, "containers nested too deep to print");

	switch (v->t) {
	case JV_UNDEF:
		return repr ? put(b, "Undefined", 9, er) : 0;
	case JV_NONE:
		return put(b, "None", 4, er);
	case JV_BOOL:
		return v->i ? put(b, "True", 4, er) : put(b, "False", 5, er);
	case JV_INT:
		n = (size_t)snprintf(num, sizeof(num), "%lld", (long long)v->i);
		return put(b, num, n, er);
	case JV_FLOAT:
		n = py_float_repr(v->f, num);
		return put(b, num, n, er);
	case JV_STR:
		return repr ? repr_str(b, v->s, v->n, er) : put(b, v->s, v->n, er);
	case JV_LIST: {
		const struct jlist *l = v->l;
		const char *open = "[", *close = "]";
		switch (v->sub) {
		case JL_TUPLE:
			open = "(";
			close = l->n == 1 ? ",)" : ")";
			break;
		case JL_GEN:
			return jerr_set(er, JINJA_UNSUPPORTED, 0,
					"printing a generator (Python prints its address)");
		case JL_ITEMS:
			open = "dict_items([";
			close = "])";
			break;
		case JL_KEYS:
			open = "dict_keys([";
			close = "])";
			break;
		case JL_VALUES:
			open = "dict_values([";
			close = "])";
			break;
		case JL_RANGE:
			return print_range(b, l, er);
		}
		if (put(b, open, strlen(open), er))
			return -1;
		for (uint32_t i = 0; i < l->n; i++) {
			if (i && put(b, ", ", 2, er))
				return -1;
			if (py_print_d(b, &l->v[i], true, er, depth + 1))
				return -1;
		}
		return put(b, close, strlen(close), er);
	}
	case JV_DICT:
	case JV_NS: {
		const struct jdict *d = v->d;
		if (v->t == JV_NS && put(b, "<Namespace ", 11, er))
			return -1;
		if (put(b, "{", 1, er))
			return -1;
		for (uint32_t i = 0; i < d->n; i++) {
			if (i && put(b, ", ", 2, er))
				return -1;
			if (py_print_d(b, &d->k[i], true, er, depth + 1) || put(b, ": ", 2, er) ||
			    py_print_d(b, &d->v[i], true, er, depth + 1))
				return -1;
		}
		if (put(b, "}", 1, er))
			return -1;
		return v->t == JV_NS ? put(b, ">", 1, er) : 0;
	}
	case JV_MACRO:
		if (put(b, "<Macro '", 8, er) || put(b, v->m->k.s, v->m->k.n, er) ||
		    put(b, "'>", 2, er))
			return -1;
		return 0;
	case JV_LOOP:
		if (buf_printf(b, "<LoopContext %lld/%lld>", (long long)v->lp->index0 + 1,
			       (long long)v->lp->length))
			return jerr_set(er, JINJA_LIMIT, 0, "out of memory");
		return 0;
	case JV_FUNC:
		return jerr_set(er, JINJA_UNSUPPORTED, 0,
				"printing a function (Python prints its address)");
	}
	return 0;
}

int py_str(struct buf *b, const struct jv *v, struct jerr *er)
{
	return py_print(b, v, false, er);
}

int py_repr(struct buf *b, const struct jv *v, struct jerr *er)
{
	return py_print(b, v, true, er);
}

/* --- equality and order --------------------------------------------------------------------- */

static bool is_num(const struct jv *v)
{
	return v->t == JV_BOOL || v->t == JV_INT || v->t == JV_FLOAT;
}

static bool is_seq(const struct jv *v)
{
	return v->t == JV_LIST && (v->sub == JL_LIST || v->sub == JL_TUPLE);
}

static bool py_eq_d(const struct jv *a, const struct jv *b, int depth);

bool py_eq(const struct jv *a, const struct jv *b)
{
	return py_eq_d(a, b, 0);
}

/* Deeper than PRINT_DEPTH_MAX, Python raises RecursionError; here the answer is false. */
static bool py_eq_d(const struct jv *a, const struct jv *b, int depth)
{
	if (depth > PRINT_DEPTH_MAX)
		return false;
	if (is_num(a) && is_num(b)) {
		if (a->t == JV_FLOAT || b->t == JV_FLOAT) {
			double x = a->t == JV_FLOAT ? a->f : (double)a->i;
			double y = b->t == JV_FLOAT ? b->f : (double)b->i;
			return x == y;
		}
		return a->i == b->i;
	}
	if (a->t != b->t)
		return false;
	switch (a->t) {
	case JV_UNDEF:
	case JV_NONE:
		return true;
	case JV_STR:
		return a->n == b->n && !memcmp(a->s, b->s, a->n);
	case JV_LIST:
		if (a->l == b->l)
			return true;
		if (a->sub != b->sub || !is_seq(a))
			return a->sub == JL_RANGE && b->sub == JL_RANGE && a->l->n == b->l->n &&
			       (a->l->n == 0 || (a->l->start == b->l->start &&
						 (a->l->n == 1 || a->l->step == b->l->step)));
		if (a->l->n != b->l->n)
			return false;
		for (uint32_t i = 0; i < a->l->n; i++)
			if (!py_eq_d(&a->l->v[i], &b->l->v[i], depth + 1))
				return false;
		return true;
	case JV_DICT:
		if (a->d->n != b->d->n)
			return false;
		for (uint32_t i = 0; i < a->d->n; i++) {
			struct jv *o = jd_get(NULL, b->d, a->d->k[i]);
			if (!o || !py_eq_d(&a->d->v[i], o, depth + 1))
				return false;
		}
		return true;
	case JV_NS:
		return a->d == b->d;
	case JV_MACRO:
		return a->m == b->m;
	case JV_LOOP:
		return a->lp == b->lp;
	case JV_FUNC:
		return a->sub == b->sub;
	}
	return false;
}

static int py_order_d(const struct jv *a, const struct jv *b, const char *opname, int *res,
		      struct jerr *er, int depth);

int py_order(const struct jv *a, const struct jv *b, const char *opname, int *res, struct jerr *er)
{
	return py_order_d(a, b, opname, res, er, 0);
}

static int py_order_d(const struct jv *a, const struct jv *b, const char *opname, int *res,
		      struct jerr *er, int depth)
{
	if (depth > PRINT_DEPTH_MAX)
		return jerr_set(er, JINJA_LIMIT, 0, "containers nested too deep to compare");
	if (a->t == JV_UNDEF || b->t == JV_UNDEF)
		return jerr_set(er, JINJA_UNDEFINED, 0, "undefined value compared");
	if (is_num(a) && is_num(b)) {
		if (a->t == JV_FLOAT || b->t == JV_FLOAT) {
			double x = a->t == JV_FLOAT ? a->f : (double)a->i;
			double y = b->t == JV_FLOAT ? b->f : (double)b->i;
			if (isnan(x) || isnan(y))
				*res = 2; /* unordered: every comparison but != is false */
			else
				*res = x < y ? -1 : x > y;
		} else {
			*res = a->i < b->i ? -1 : a->i > b->i;
		}
		return 0;
	}
	if (a->t == JV_STR && b->t == JV_STR) {
		size_t n = a->n < b->n ? a->n : b->n;
		int c = memcmp(a->s, b->s, n);
		*res = c ? (c < 0 ? -1 : 1) : (a->n < b->n ? -1 : a->n > b->n);
		return 0;
	}
	if (is_seq(a) && is_seq(b) && a->sub == b->sub) {
		uint32_t n = a->l->n < b->l->n ? a->l->n : b->l->n;
		for (uint32_t i = 0; i < n; i++) {
			if (py_eq(&a->l->v[i], &b->l->v[i]))
				continue;
			return py_order_d(&a->l->v[i], &b->l->v[i], opname, res, er, depth + 1);
		}
		*res = a->l->n < b->l->n ? -1 : a->l->n > b->l->n;
		return 0;
	}
	return jerr_set(er, JINJA_TYPE, 0, "'%s' not supported between instances of '%s' and '%s'",
			opname, jv_type_name(a), jv_type_name(b));
}

/* --- JSON in ---------------------------------------------------------------------------------- */

struct jreader {
	struct jarena *a;
	const char *s;
	size_t n, i;
	int depth;
	struct jerr *er;
};

#define JV_JSON_DEPTH_MAX 256 /* arrays and objects inside each other in the variables */

static int jr_fail(struct jreader *r, const char *what)
{
	if (r->a->over)
		return jerr_set(r->er, JINJA_LIMIT, 0, "memory limit of the render exceeded");
	return jerr_set(r->er, JINJA_INPUT, 0, "variables: %s at byte %zu", what, r->i);
}

static void jr_ws(struct jreader *r)
{
	while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
			       r->s[r->i] == '\r'))
		r->i++;
}

static int jr_hex4(struct jreader *r, uint32_t *out)
{
	uint32_t v = 0;
	if (r->n - r->i < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		char c = r->s[r->i + (size_t)k];
		int h = (c >= '0' && c <= '9')	 ? c - '0'
			: (c >= 'a' && c <= 'f') ? c - 'a' + 10
			: (c >= 'A' && c <= 'F') ? c - 'A' + 10
						 : -1;
		if (h < 0)
			return -1;
		v = v * 16 + (uint32_t)h;
	}
	r->i += 4;
	*out = v;
	return 0;
}

/* Length of the valid UTF-8 sequence at u[0..n) starting with a byte >= 0x80, 0 if invalid. */
static size_t utf8_seq(const unsigned char *u, size_t n)
{
	unsigned char c = u[0];
	size_t len = c >= 0xC2 && c <= 0xDF   ? 2
		     : c >= 0xE0 && c <= 0xEF ? 3
		     : c >= 0xF0 && c <= 0xF4 ? 4
					      : 0;
	uint32_t cp;

	if (!len || n < len)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((u[k] & 0xC0) != 0x80)
			return 0;
	if (len == 3) {
		cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6);
		if (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))
			return 0;
	} else if (len == 4) {
		cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12);
		if (cp < 0x10000 || cp > 0x10FFFF)
			return 0;
	}
	return len;
}

static int jr_string(struct jreader *r, struct jv *out)
{
	size_t start = ++r->i, j = start;
	char *o;
	size_t k = 0;

	/* fast path, no escapes: 8 bytes at a time while none is '"', '\\', a control or beyond
	 * ASCII; UTF-8 sequences checked as met (the only place JSON text holds them) */
	for (;;) {
		unsigned char c;
		while (j + 8 <= r->n) {
			uint64_t w, q, b, m;
			memcpy(&w, r->s + j, 8);
			q = w ^ 0x2222222222222222ull; /* '"' bytes become 0 */
			b = w ^ 0x5c5c5c5c5c5c5c5cull; /* '\\' bytes become 0 */
			m = ((q - 0x0101010101010101ull) & ~q) |
			    ((b - 0x0101010101010101ull) & ~b) |
			    ((w - 0x2020202020202020ull) & ~w) | w;
			if (m & 0x8080808080808080ull)
				break;
			j += 8;
		}
		if (j >= r->n)
			break;
		c = (unsigned char)r->s[j];
		if (c == '"') {
			*out = jv_str(r->s + start, j - start);
			r->i = j + 1;
			return 0;
		}
		if (c == '\\' || c < 0x20)
			break;
		if (c >= 0x80) {
			size_t l = utf8_seq((const unsigned char *)r->s + j, r->n - j);
			if (!l)
				return jr_fail(r, "a string that is not UTF-8");
			j += l;
		} else {
			j++;
		}
	}
	for (j = start; j < r->n && r->s[j] != '"'; j++)
		if (r->s[j] == '\\')
			j++;
	if (j >= r->n)
		return jr_fail(r, "unterminated string");
	if (!(o = ja_alloc(r->a, j - start + 1)))
		return jr_fail(r, "out of memory");
	while (r->i < r->n) {
		unsigned char c = (unsigned char)r->s[r->i];
		uint32_t cp, lo;
		if (c == '"')
			break;
		if (c < 0x20)
			return jr_fail(r, "a control character in a string");
		if (c >= 0x80) {
			size_t l = utf8_seq((const unsigned char *)r->s + r->i, r->n - r->i);
			if (!l)
				return jr_fail(r, "a string that is not UTF-8");
			memcpy(o + k, r->s + r->i, l);
			k += l;
			r->i += l;
			continue;
		}
		if (c != '\\') {
			o[k++] = (char)c;
			r->i++;
			continue;
		}
		r->i++;
		if (r->i >= r->n)
			return jr_fail(r, "unterminated string");
		c = (unsigned char)r->s[r->i++];
		switch (c) {
		case '"':
		case '\\':
		case '/':
			o[k++] = (char)c;
			break;
		case 'b':
			o[k++] = '\b';
			break;
		case 'f':
			o[k++] = '\f';
			break;
		case 'n':
			o[k++] = '\n';
			break;
		case 'r':
			o[k++] = '\r';
			break;
		case 't':
			o[k++] = '\t';
			break;
		case 'u':
			if (jr_hex4(r, &cp))
				return jr_fail(r, "a bad \\u escape");
			if (cp >= 0xD800 && cp < 0xDC00) {
				if (r->n - r->i < 6 || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u')
					return jr_fail(r, "a lone surrogate");
				r->i += 2;
				if (jr_hex4(r, &lo) || lo < 0xDC00 || lo >= 0xE000)
					return jr_fail(r, "a lone surrogate");
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp < 0xE000) {
				return jr_fail(r, "a lone surrogate");
			}
			k += utf8_put((uint8_t *)o + k, cp);
			break;
		default:
			return jr_fail(r, "a bad escape");
		}
	}
	if (r->i >= r->n)
		return jr_fail(r, "unterminated string");
	r->i++;
	o[k] = 0;
	*out = jv_str(o, k);
	return 0;
}

static int jr_number(struct jreader *r, struct jv *out)
{
	size_t st = r->i, j = r->i;
	bool flt = false;
	char tmp[400];

	if (j < r->n && r->s[j] == '-')
		j++;
	if (j >= r->n || r->s[j] < '0' || r->s[j] > '9')
		return jr_fail(r, "a bad number");
	if (r->s[j] == '0')
		j++;
	else
		while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9')
			j++;
	if (j < r->n && r->s[j] == '.') {
		flt = true;
		j++;
		if (j >= r->n || r->s[j] < '0' || r->s[j] > '9')
			return jr_fail(r, "a bad number");
		while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9')
			j++;
	}
	if (j < r->n && (r->s[j] == 'e' || r->s[j] == 'E')) {
		flt = true;
		j++;
		if (j < r->n && (r->s[j] == '+' || r->s[j] == '-'))
			j++;
		if (j >= r->n || r->s[j] < '0' || r->s[j] > '9')
			return jr_fail(r, "a bad number");
		while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9')
			j++;
	}
	if (j - st >= sizeof(tmp))
		return jerr_set(r->er, JINJA_UNSUPPORTED, 0,
				"variables: a number of %zu characters", j - st);
	memcpy(tmp, r->s + st, j - st);
	tmp[j - st] = 0;
	r->i = j;
	if (flt) {
		*out = jv_float(strtod(tmp, NULL));
		return 0;
	}
	errno = 0;
	{
		long long v = strtoll(tmp, NULL, 10);
		if (errno == ERANGE)
			return jerr_set(r->er, JINJA_UNSUPPORTED, 0,
					"variables: an integer beyond 64 bits (%s)", tmp);
		*out = jv_int(v);
	}
	return 0;
}

static int jr_value(struct jreader *r, struct jv *out)
{
	jr_ws(r);
	if (r->i >= r->n)
		return jr_fail(r, "unexpected end");
	switch (r->s[r->i]) {
	case '"':
		return jr_string(r, out);
	case '{': {
		struct jdict *d;
		if (++r->depth > JV_JSON_DEPTH_MAX)
			return jr_fail(r, "nesting too deep");
		if (!(d = jd_new(r->a, 0)))
			return jr_fail(r, "out of memory");
		r->i++;
		jr_ws(r);
		if (r->i < r->n && r->s[r->i] == '}') {
			r->i++;
		} else {
			for (;;) {
				struct jv k, v;
				jr_ws(r);
				if (r->i >= r->n || r->s[r->i] != '"')
					return jr_fail(r, "expected a key");
				if (jr_string(r, &k))
					return -1;
				jr_ws(r);
				if (r->i >= r->n || r->s[r->i] != ':')
					return jr_fail(r, "expected ':'");
				r->i++;
				if (jr_value(r, &v))
					return -1;
				if (jd_set(r->a, d, k, v))
					return jr_fail(r, "out of memory");
				jr_ws(r);
				if (r->i < r->n && r->s[r->i] == ',') {
					r->i++;
					continue;
				}
				if (r->i < r->n && r->s[r->i] == '}') {
					r->i++;
					break;
				}
				return jr_fail(r, "expected ',' or '}'");
			}
		}
		r->depth--;
		out->t = JV_DICT;
		out->d = d;
		return 0;
	}
	case '[': {
		struct jlist *l;
		if (++r->depth > JV_JSON_DEPTH_MAX)
			return jr_fail(r, "nesting too deep");
		if (!(l = jl_new(r->a, 0)))
			return jr_fail(r, "out of memory");
		r->i++;
		jr_ws(r);
		if (r->i < r->n && r->s[r->i] == ']') {
			r->i++;
		} else {
			for (;;) {
				struct jv v;
				if (jr_value(r, &v))
					return -1;
				if (jl_push(r->a, l, v))
					return jr_fail(r, "out of memory");
				jr_ws(r);
				if (r->i < r->n && r->s[r->i] == ',') {
					r->i++;
					continue;
				}
				if (r->i < r->n && r->s[r->i] == ']') {
					r->i++;
					break;
				}
				return jr_fail(r, "expected ',' or ']'");
			}
		}
		r->depth--;
		out->t = JV_LIST;
		out->sub = JL_LIST;
		out->l = l;
		return 0;
	}
	case 't':
		if (r->n - r->i >= 4 && !memcmp(r->s + r->i, "true", 4)) {
			r->i += 4;
			*out = jv_bool(true);
			return 0;
		}
		break;
	case 'f':
		if (r->n - r->i >= 5 && !memcmp(r->s + r->i, "false", 5)) {
			r->i += 5;
			*out = jv_bool(false);
			return 0;
		}
		break;
	case 'n':
		if (r->n - r->i >= 4 && !memcmp(r->s + r->i, "null", 4)) {
			r->i += 4;
			*out = jv_none();
			return 0;
		}
		break;
	case 'N':
		if (r->n - r->i >= 3 && !memcmp(r->s + r->i, "NaN", 3)) {
			r->i += 3;
			*out = jv_float(NAN);
			return 0;
		}
		break;
	case 'I':
		if (r->n - r->i >= 8 && !memcmp(r->s + r->i, "Infinity", 8)) {
			r->i += 8;
			*out = jv_float(INFINITY);
			return 0;
		}
		break;
	case '-':
		if (r->n - r->i >= 9 && !memcmp(r->s + r->i, "-Infinity", 9)) {
			r->i += 9;
			*out = jv_float(-INFINITY);
			return 0;
		}
		return jr_number(r, out);
	default:
		if (r->s[r->i] >= '0' && r->s[r->i] <= '9')
			return jr_number(r, out);
	}
	return jr_fail(r, "unexpected character");
}

int jv_from_json(struct jarena *a, const char *text, size_t n, struct jv *out, struct jerr *er)
{
	struct jreader r = {.a = a, .s = text, .n = n, .er = er};

	if (jr_value(&r, out)) /* UTF-8 is checked in strings, the only place it can be */
		return -1;
	jr_ws(&r);
	if (r.i != r.n)
		return jr_fail(&r, "extra data");
	return 0;
}

/* --- JSON out ------------------------------------------------------------------------------- */

static int json_str(struct buf *b, const char *s, size_t n, bool ascii, struct jerr *er)
{
	if (!ascii) {
		if (er->max_out && b->len + n > er->max_out)
			return jerr_set(er, JINJA_LIMIT, 0, "output limit of %zu bytes exceeded",
					er->max_out);
		if (buf_json_str(b, s, n))
			return jerr_set(er, JINJA_LIMIT, 0, "out of memory");
		return 0;
	}
	if (put(b, "\"", 1, er))
		return -1;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t l = 1;
		uint32_t cp = c;
		char esc[16];
		int en = 0;
		if (c >= 0x80)
			cp = utf8_next(s + i, n - i, &l);
		if (c == '"')
			en = snprintf(esc, sizeof(esc), "\\\"");
		else if (c == '\\')
			en = snprintf(esc, sizeof(esc), "\\\\");
		else if (c == '\n')
			en = snprintf(esc, sizeof(esc), "\\n");
		else if (c == '\r')
			en = snprintf(esc, sizeof(esc), "\\r");
		else if (c == '\t')
			en = snprintf(esc, sizeof(esc), "\\t");
		else if (c == '\b')
			en = snprintf(esc, sizeof(esc), "\\b");
		else if (c == '\f')
			en = snprintf(esc, sizeof(esc), "\\f");
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0x10000))
			en = snprintf(esc, sizeof(esc), "\\u%04x", cp);
		else if (cp >= 0x10000)
			en = snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
				      0xD800 + ((cp - 0x10000) >> 10),
				      0xDC00 + ((cp - 0x10000) & 0x3FF));
		if (en ? put(b, esc, (size_t)en, er) : put(b, s + i, l, er))
			return -1;
		i += l;
	}
	return put(b, "\"", 1, er);
}

static int json_newline(struct buf *b, const struct json_opts *o, int level, struct jerr *er)
{
	if (put(b, "\n", 1, er))
		return -1;
	for (int i = 0; i < level; i++)
		if (put(b, o->indent, o->indent_n, er))
			return -1;
	return 0;
}

static int json_key(struct buf *b, const struct jv *k, const struct json_opts *o, struct jerr *er)
{
	char num[40];
	size_t n;

	switch (k->t) {
	case JV_STR:
		return json_str(b, k->s, k->n, o->ensure_ascii, er);
	case JV_BOOL:
		return put(b, k->i ? "\"true\"" : "\"false\"", k->i ? 6 : 7, er);
	case JV_NONE:
		return put(b, "\"null\"", 6, er);
	case JV_INT:
		n = (size_t)snprintf(num, sizeof(num), "\"%lld\"", (long long)k->i);
		return put(b, num, n, er);
	case JV_FLOAT:
		num[0] = '"';
		if (isnan(k->f))
			n = 1 + (size_t)sprintf(num + 1, "NaN");
		else if (isinf(k->f))
			n = 1 + (size_t)sprintf(num + 1, k->f < 0 ? "-Infinity" : "Infinity");
		else
			n = 1 + py_float_repr(k->f, num + 1);
		num[n++] = '"';
		return put(b, num, n, er);
	default:
		return jerr_set(er, JINJA_TYPE, 0,
				"keys must be str, int, float, bool or None, not %s",
				jv_type_name(k));
	}
}

static int json_value(struct buf *b, const struct jv *v, const struct json_opts *o, int level,
		      struct jarena *a, struct jerr *er)
{
	char num[40];
	size_t n;

	if (level > JV_JSON_DEPTH_MAX * 2)
		return jerr_set(er, JINJA_LIMIT, 0, "tojson: nesting too deep");
	switch (v->t) {
	case JV_NONE:
		return put(b, "null", 4, er);
	case JV_BOOL:
		return v->i ? put(b, "true", 4, er) : put(b, "false", 5, er);
	case JV_INT:
		n = (size_t)snprintf(num, sizeof(num), "%lld", (long long)v->i);
		return put(b, num, n, er);
	case JV_FLOAT:
		if (isnan(v->f))
			return put(b, "NaN", 3, er);
		if (isinf(v->f))
			return v->f < 0 ? put(b, "-Infinity", 9, er) : put(b, "Infinity", 8, er);
		n = py_float_repr(v->f, num);
		return put(b, num, n, er);
	case JV_STR:
		return json_str(b, v->s, v->n, o->ensure_ascii, er);
	case JV_LIST:
		if (!is_seq(v))
			break;
		if (!v->l->n)
			return put(b, "[]", 2, er);
		if (put(b, "[", 1, er))
			return -1;
		for (uint32_t i = 0; i < v->l->n; i++) {
			if (i && put(b, o->item_sep, o->item_sep_n, er))
				return -1;
			if (o->indent_set && json_newline(b, o, level + 1, er))
				return -1;
			if (json_value(b, &v->l->v[i], o, level + 1, a, er))
				return -1;
		}
		if (o->indent_set && json_newline(b, o, level, er))
			return -1;
		return put(b, "]", 1, er);
	case JV_DICT: {
		const struct jdict *d = v->d;
		uint32_t *order = NULL;
		if (!d->n)
			return put(b, "{}", 2, er);
		if (o->sort_keys) {
			if (!(order = ja_alloc(a, d->n * sizeof(*order))))
				return jerr_set(er, JINJA_LIMIT, 0,
						"memory limit of the render exceeded");
			for (uint32_t i = 0; i < d->n; i++)
				order[i] = i;
			/* insertion sort: stable, as Python's sorted() */
			for (uint32_t i = 1; i < d->n; i++) {
				uint32_t x = order[i], j = i;
				while (j > 0) {
					int c;
					if (py_order(&d->k[x], &d->k[order[j - 1]], "<", &c, er))
						return -1;
					if (c >= 0)
						break;
					order[j] = order[j - 1];
					j--;
				}
				order[j] = x;
			}
		}
		if (put(b, "{", 1, er))
			return -1;
		for (uint32_t i = 0; i < d->n; i++) {
			uint32_t e = order ? order[i] : i;
			if (i && put(b, o->item_sep, o->item_sep_n, er))
				return -1;
			if (o->indent_set && json_newline(b, o, level + 1, er))
				return -1;
			if (json_key(b, &d->k[e], o, er) || put(b, o->key_sep, o->key_sep_n, er) ||
			    json_value(b, &d->v[e], o, level + 1, a, er))
				return -1;
		}
		if (o->indent_set && json_newline(b, o, level, er))
			return -1;
		return put(b, "}", 1, er);
	}
	default:
		break;
	}
	return jerr_set(er, JINJA_TYPE, 0, "Object of type %s is not JSON serializable",
			jv_type_name(v));
}

int py_json(struct buf *b, const struct jv *v, const struct json_opts *o, struct jarena *a,
	    struct jerr *er)
{
	return json_value(b, v, o, 0, a, er);
}
