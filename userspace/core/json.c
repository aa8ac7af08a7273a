// SPDX-License-Identifier: Apache-2.0
/* json.c: the strict reader in front of cJSON (json.h says what it reads and what it leaves). */
#include "core/json.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/utf8.h"

enum { J_OK = 0, J_DECLINE = 1, J_NOMEM = 2 };

struct jp {
	const uint8_t *p, *end;
	uint8_t *scratch; /* a string's bytes as read: room for the whole input and 16 more */
	int err;
};

/* The scratch a string is read into: kept by each thread up to JSON_SCRATCH_KEEP bytes (freed
 * when the thread ends), since a large malloc per parse makes glibc consolidate the small chunks
 * the previous tree freed (a 3,000-id prompt took 128 µs instead of 86). Larger inputs get one of
 * their own. */
#define JSON_SCRATCH_KEEP (256u << 10)
static __thread uint8_t *tl_scratch;
static __thread size_t tl_scratch_cap;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_key_make(void)
{
	(void)pthread_key_create(&scratch_key, free);
}

static uint8_t *scratch_get(size_t n)
{
	size_t cap = tl_scratch_cap ? tl_scratch_cap : 4096;
	uint8_t *p;

	if (n > JSON_SCRATCH_KEEP)
		return malloc(n);
	if (n <= tl_scratch_cap)
		return tl_scratch;
	while (cap < n)
		cap *= 2;
	if (cap > JSON_SCRATCH_KEEP)
		cap = JSON_SCRATCH_KEEP;
	pthread_once(&scratch_once, scratch_key_make);
	if (!(p = realloc(tl_scratch, cap)))
		return NULL;
	tl_scratch = p;
	tl_scratch_cap = cap;
	(void)pthread_setspecific(scratch_key, p);
	return p;
}

static void scratch_put(uint8_t *p)
{
	if (p != tl_scratch)
		free(p);
}

static inline bool is_ws(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline void skip_ws(struct jp *j)
{
	while (j->p < j->end && is_ws(*j->p))
		j->p++;
}

static cJSON *item_new(struct jp *j)
{
	cJSON *c = cJSON_malloc(sizeof(*c));

	if (!c) {
		j->err = J_NOMEM;
		return NULL;
	}
	memset(c, 0, sizeof(*c));
	return c;
}

/* Copies the plain run at s (up to '"', '\\' or a control byte, or e) to o; returns its length.
 * o has 16 bytes of room past what it receives. 16 bytes at a time with SSE2, each block stored
 * whole before its match is looked for; elsewhere byte by byte. */
static inline size_t copy_run(const uint8_t *s, const uint8_t *e, uint8_t *o)
{
	const uint8_t *s0 = s;

#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
		      ctl = _mm_set1_epi8(0x1F);

	while (e - s >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)s);
		__m128i m =
		    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
				 _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
		int bits = _mm_movemask_epi8(m);

		_mm_storeu_si128((__m128i *)(o + (s - s0)), v);
		if (bits)
			return (size_t)(s - s0) + (unsigned)__builtin_ctz((unsigned)bits);
		s += 16;
	}
#endif
	while (s < e && *s != '"' && *s != '\\' && *s >= 0x20) {
		o[s - s0] = *s;
		s++;
	}
	return (size_t)(s - s0);
}

static inline int hex1(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The value of 4 hex digits at s, or -1. */
static inline int hex4(const uint8_t *s)
{
	int v = 0;

	for (int i = 0; i < 4; i++) {
		int d = hex1(s[i]);

		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* Reads the string at j->p (its opening quote) into a new NUL-terminated copy, in one pass
 * through j->scratch. Where it is read, cJSON finds the same end (an escape's byte is never the
 * end, and a \\u escape taken has only hex digits) and the same bytes. */
static char *read_str(struct jp *j)
{
	const uint8_t *s = j->p + 1, *e = j->end;
	uint8_t *o = j->scratch;
	char *out;
	int cp, lo;

	for (;;) {
		size_t k = copy_run(s, e, o);

		s += k;
		o += k;
		if (s >= e || *s < 0x20)
			goto decline; /* unterminated, or a control byte (cJSON keeps it) */
		if (*s == '"')
			break;
		if (e - s < 2)
			goto decline;
		switch (s[1]) {
		case '"':
		case '\\':
		case '/':
			*o++ = s[1];
			break;
		case 'b':
			*o++ = '\b';
			break;
		case 'f':
			*o++ = '\f';
			break;
		case 'n':
			*o++ = '\n';
			break;
		case 'r':
			*o++ = '\r';
			break;
		case 't':
			*o++ = '\t';
			break;
		case 'u':
			/* short, not hex, U+0000 (cJSON ends a string there), lone low half */
			if (e - s < 6 || (cp = hex4(s + 2)) <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
				goto decline;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				if (e - s < 12 || s[6] != '\\' || s[7] != 'u' ||
				    (lo = hex4(s + 8)) < 0xDC00 || lo > 0xDFFF)
					goto decline;
				cp = 0x10000 + (((cp & 0x3FF) << 10) | (lo & 0x3FF));
				s += 6;
			}
			o += utf8_put(o, (uint32_t)cp);
			s += 4;
			break;
		default:
			goto decline;
		}
		s += 2;
	}
	out = cJSON_malloc((size_t)(o - j->scratch) + 1);
	if (!out) {
		j->err = J_NOMEM;
		return NULL;
	}
	memcpy(out, j->scratch, (size_t)(o - j->scratch));
	out[o - j->scratch] = '\0';
	j->p = s + 1;
	return out;
decline:
	j->err = J_DECLINE;
	return NULL;
}

static inline bool is_digit(uint8_t c)
{
	return c >= '0' && c <= '9';
}

/* Reads the number at j->p into it, as cJSON's parse_number would: strtod of its text, and
 * valueint saturated. Integers of up to 15 digits are exact doubles, so they skip strtod. */
static void read_num(struct jp *j, cJSON *it)
{
	const uint8_t *s = j->p, *p = s, *e = j->end;
	bool neg = false, plain = true;
	uint64_t v = 0;
	double d;

	if (*p == '-')
		neg = true, p++;
	if (p < e && *p == '0') {
		p++;
	} else if (p < e && *p >= '1' && *p <= '9') {
		while (p < e && is_digit(*p))
			v = v * 10 + (uint64_t)(*p++ - '0');
	} else {
		j->err = J_DECLINE;
		return;
	}
	if (p - s - neg > 15)
		plain = false; /* v may have wrapped; strtod reads the text below */
	if (p < e && *p == '.') {
		plain = false;
		if (++p >= e || !is_digit(*p)) {
			j->err = J_DECLINE;
			return;
		}
		while (p < e && is_digit(*p))
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		plain = false;
		if (++p < e && (*p == '+' || *p == '-'))
			p++;
		if (p >= e || !is_digit(*p)) {
			j->err = J_DECLINE;
			return;
		}
		while (p < e && is_digit(*p))
			p++;
	}
	if (p - s > JSON_NUM_MAX) {
		j->err = J_DECLINE;
		return;
	}
	if (plain) {
		d = neg ? -(double)v : (double)v;
	} else {
		char text[JSON_NUM_MAX + 1];

		memcpy(text, s, (size_t)(p - s));
		text[p - s] = '\0';
		d = strtod(text, NULL);
	}
	it->type = cJSON_Number;
	it->valuedouble = d;
	it->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
	j->p = p;
}

static void read_value(struct jp *j, cJSON *it, int depth);

/* Reads the array or object at j->p into it (its items linked as cJSON links them: next, prev,
 * and the first item's prev at the last). */
static void read_container(struct jp *j, cJSON *it, int depth)
{
	bool obj = *j->p == '{';
	uint8_t close = obj ? '}' : ']';
	cJSON *last = NULL;

	if (depth >= JSON_DEPTH_MAX) {
		j->err = J_DECLINE;
		return;
	}
	it->type = obj ? cJSON_Object : cJSON_Array;
	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return;
	}
	for (;;) {
		cJSON *c = item_new(j);

		if (!c)
			return;
		if (last) {
			last->next = c;
			c->prev = last;
		} else {
			it->child = c;
		}
		last = c;
		it->child->prev = c;
		if (obj) {
			if (j->p >= j->end || *j->p != '"') {
				j->err = J_DECLINE;
				return;
			}
			if (!(c->string = read_str(j)))
				return;
			skip_ws(j);
			if (j->p >= j->end || *j->p != ':') {
				j->err = J_DECLINE;
				return;
			}
			j->p++;
			skip_ws(j);
		}
		read_value(j, c, depth + 1);
		if (j->err)
			return;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			skip_ws(j);
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return;
		}
		j->err = J_DECLINE;
		return;
	}
}

/* The literal w (true, false or null) at j->p, as cJSON stores it (valueint 1 for true). */
static bool read_word(struct jp *j, cJSON *it, const char *w, int type)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
		return false;
	it->type = type;
	it->valueint = type == cJSON_True;
	j->p += n;
	return true;
}

static void read_value(struct jp *j, cJSON *it, int depth)
{
	const uint8_t *p = j->p;
	size_t left = (size_t)(j->end - p);

	if (!left) {
		j->err = J_DECLINE;
		return;
	}
	switch (*p) {
	case '"':
		it->type = cJSON_String;
		it->valuestring = read_str(j);
		return;
	case '{':
	case '[':
		read_container(j, it, depth);
		return;
	case 't':
		if (read_word(j, it, "true", cJSON_True))
			return;
		break;
	case 'f':
		if (read_word(j, it, "false", cJSON_False))
			return;
		break;
	case 'n':
		if (read_word(j, it, "null", cJSON_NULL))
			return;
		break;
	default:
		if (*p == '-' || is_digit(*p)) {
			read_num(j, it);
			return;
		}
	}
	j->err = J_DECLINE;
}

int json_parse_strict(const char *s, size_t n, cJSON **out)
{
	struct jp j = {.p = (const uint8_t *)s, .end = (const uint8_t *)s + n};
	cJSON *root;

	*out = NULL;
	if (!s)
		return 0;
	if (!(j.scratch = scratch_get(n + 16)))
		return -ENOMEM;
	if (!(root = item_new(&j))) {
		scratch_put(j.scratch);
		return -ENOMEM;
	}
	skip_ws(&j);
	read_value(&j, root, 0);
	if (!j.err) {
		skip_ws(&j);
		if (j.p != j.end)
			j.err = J_DECLINE; /* more after the value: cJSON stops reading, Python
					      refuses */
	}
	scratch_put(j.scratch);
	if (j.err) {
		cJSON_Delete(root);
		return j.err == J_NOMEM ? -ENOMEM : 0;
	}
	*out = root;
	return 1;
}

cJSON *json_parse_reader(const char *s, size_t n, bool *strict)
{
	cJSON *root;

	*strict = json_parse_strict(s, n, &root) == 1;
	return *strict ? root : cJSON_ParseWithLength(s, n);
}

cJSON *json_parse(const char *s, size_t n)
{
	bool strict;

	return json_parse_reader(s, n, &strict);
}

const cJSON *json_get(const cJSON *obj, const char *key)
{
	const cJSON *found = NULL;

	if (!cJSON_IsObject(obj))
		return NULL;
	for (const cJSON *it = obj->child; it; it = it->next)
		if (it->string && strcmp(it->string, key) == 0)
			found = it;
	return found;
}
