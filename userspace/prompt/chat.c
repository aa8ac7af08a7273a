// SPDX-License-Identifier: Apache-2.0
/*
 * chat: the Qwen3 chat template (models/qwen3/tokenizer_config.json, SHA-256 in chat.h) rendered
 * in C, plus the request handling vLLM does before and around the template. The sources read
 * (vllm-project/vllm, 2026): vllm/entrypoints/openai/chat_completion/protocol.py
 * (ChatCompletionRequest, build_chat_params, the "before" validator renaming reasoning_content),
 * vllm/renderers/chat_utils/parse_chat_message_content.py (content flattening),
 * vllm/renderers/params.py (merge_kwargs), vllm/renderers/hf.py (resolve_chat_template_kwargs,
 * content-format detection).
 *
 * What vLLM hands the template, and what this file does about it:
 * - Content format: vLLM detects "string" for this template (it never loops over
 *   message.content), so every message's content reaches the template as ONE string:
 *   null/absent -> ""; a string as is; a list of parts -> the texts joined with "\n", where a
 *   part is a plain string, or {"type": "text"|"input_text"|"output_text", "text": s},
 *   {"type": "refusal", "refusal": s}, {"type": "thinking", "thinking": s}. Parts whose text is
 *   null/absent or "" are dropped BEFORE joining (vLLM keeps only truthy results).
 *   Image/audio/video/embeds/tool_reference parts, or parts with a "uuid" -> UNSUPPORTED.
 * - Newest vLLM drops a system text part starting with "x-anthropic-billing-header" (its first
 *   line); older ones do not -> UNSUPPORTED.
 * - Assistant reasoning: the request field "reasoning" (or the deprecated "reasoning_content",
 *   used when "reasoning" is null/absent) becomes the template's message.reasoning_content.
 * - Tools: each request tool reaches the template as ChatCompletionToolsParam.model_dump(), i.e.
 *   {"type": "function", "function": {"name", "description" (null if absent), "parameters" (null
 *   if absent), "strict" (only if a boolean)}}, printed by transformers' tojson = Python
 *   json.dumps(ensure_ascii=False). Python re-serialises what json.loads made of the text: ints
 *   keep their digits, floats print as repr(float), a repeated key keeps its first place and last
 *   value. cJSON loses 1 vs 1.0, so tool definitions are re-read from the request text
 *   (chat_render_json); from a bare cJSON tree, tools holding numbers -> UNSUPPORTED. Fields
 *   vLLM versions dump differently (extra keys, defer_loading, strict null) -> UNSUPPORTED.
 * - Assistant tool_calls (id, type "function", function {name, arguments}): arguments go through
 *   json.loads and back through tojson (a JSON string result prints raw); "" becomes {}.
 *   Arguments that are not JSON (older vLLM fails, newer uses {}), NaN/Infinity, lone
 *   surrogates -> UNSUPPORTED. [] or null render nothing.
 * - continue_final_message true -> UNSUPPORTED here; chat_tmpl_render hands such requests (and
 *   documents) to the interpreter. A request "chat_template" -> INVALID: vLLM refuses it unless
 *   started with --trust-request-chat-template (chat_server_configure), and then the
 *   interpreter renders the request's template.
 * - Roles: user/system/assistant/tool are rendered as the template does; any other role string
 *   (e.g. "developer") is accepted by vLLM and the template renders nothing for it, so neither
 *   do we.
 * - Kwargs: add_generation_prompt is the request field (default true). enable_thinking comes
 *   from chat_template_kwargs, else from reasoning_effort (!= "none"; vLLM's build_chat_params,
 *   whose releases before it ignored reasoning_effort), else from the server's
 *   --default-chat-template-kwargs; only a JSON false adds "<think>\n\n</think>\n\n" (jinja's
 *   "is false" is an identity test). Kwargs that shadow request fields -> UNSUPPORTED. Other
 *   kwargs the template does not read have no effect. The interpreter's templates get
 *   reasoning_effort itself too.
 * - JSON objects with a repeated key: Python keeps the LAST value, so every lookup here does too.
 * - String methods follow Python: strip('\n') strips only '\n' (note: @huggingface/jinja 0.5.11
 *   ignores the argument and strips all whitespace; tests/js/ref_chat.mjs corrects that).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "core/ascii.h"
#include "prompt/chat.h"
#include "prompt/jinja.h"
#include "core/json.h"
#include "core/utf8.h"

/* What the workers' vLLM was started with (chat_server_configure). */
static cJSON *server_kwargs_cfg;     /* --default-chat-template-kwargs, or NULL */
static bool trust_request_templates; /* --trust-request-chat-template */

enum role { ROLE_OTHER, ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };

struct span {
	const char *p;
	size_t n;
};

/* One message as the template sees it. Joined content lives in a scratch buffer that may move
 * while messages are parsed, so it is kept as an offset until all are parsed. */
struct cmsg {
	enum role role;
	const char *role_name;
	struct span content;
	size_t joined_off; /* offset in scratch when joined */
	bool joined;
	bool has_reasoning;
	struct span reasoning;
	const cJSON *tool_calls; /* assistant: a validated, non-empty list, or NULL */
};

#define BILLING_HEADER "x-anthropic-billing-header"

static bool is_null_or_absent(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

static struct span span_str(const char *s)
{
	return (struct span){s, strlen(s)};
}

static bool span_starts(struct span s, const char *pre)
{
	size_t n = strlen(pre);

	return s.n >= n && memcmp(s.p, pre, n) == 0;
}

static bool span_ends(struct span s, const char *suf)
{
	size_t n = strlen(suf);

	return s.n >= n && memcmp(s.p + s.n - n, suf, n) == 0;
}

static int put(struct buf *out, struct span s)
{
	return buf_append(out, s.p, s.n);
}

/* Python str.lstrip('\n') / rstrip('\n') / strip('\n'). */
static struct span lstrip_nl(struct span s)
{
	while (s.n && *s.p == '\n')
		s.p++, s.n--;
	return s;
}

static struct span rstrip_nl(struct span s)
{
	while (s.n && s.p[s.n - 1] == '\n')
		s.n--;
	return s;
}

static struct span strip_nl(struct span s)
{
	return rstrip_nl(lstrip_nl(s));
}

/* Position of the first / last occurrence of needle in s, or NULL. */
static const char *span_find(struct span s, const char *needle)
{
	return memmem(s.p, s.n, needle, strlen(needle));
}

static const char *span_rfind(struct span s, const char *needle)
{
	size_t n = strlen(needle), i;

	if (s.n < n)
		return NULL;
	for (i = s.n - n + 1; i-- > 0;)
		if (s.p[i] == needle[0] && memcmp(s.p + i, needle, n) == 0)
			return s.p + i;
	return NULL;
}

/* s.split(sep)[-1]: what follows the last sep (all of s if none). */
static struct span after_last(struct span s, const char *sep)
{
	const char *at = span_rfind(s, sep);
	size_t k;

	if (!at)
		return s;
	k = (size_t)(at - s.p) + strlen(sep);
	return (struct span){s.p + k, s.n - k};
}

/* s.split(sep)[0]: what precedes the first sep (all of s if none). */
static struct span before_first(struct span s, const char *sep)
{
	const char *at = span_find(s, sep);

	return at ? (struct span){s.p, (size_t)(at - s.p)} : s;
}

static enum role role_of(const char *r)
{
	if (strcmp(r, "user") == 0)
		return ROLE_USER;
	if (strcmp(r, "assistant") == 0)
		return ROLE_ASSISTANT;
	if (strcmp(r, "system") == 0)
		return ROLE_SYSTEM;
	if (strcmp(r, "tool") == 0)
		return ROLE_TOOL;
	return ROLE_OTHER;
}

/* ---- Python's json, for tool definitions and tool-call arguments -------------------------------
 * The template prints them with transformers' tojson, i.e. Python json.dumps(x,
 * ensure_ascii=False) of what json.loads made of the request: ints keep their digits, floats are
 * printed as repr(float), a repeated key keeps its first position and its last value. cJSON
 * cannot tell 1 from 1.0, so these values are parsed here from their text. */

enum pj_type { PJ_NULL, PJ_FALSE, PJ_TRUE, PJ_INT, PJ_FLOAT, PJ_STR, PJ_ARR, PJ_OBJ };

struct pj {
	enum pj_type t;
	char *s; /* INT: digits as written; STR: decoded UTF-8; OBJ member: key in k */
	size_t n;
	double d; /* FLOAT */
	char *k;  /* key of an object member */
	size_t kn;
	struct pj *child, *last, *next;
	size_t count;
};

#define PJ_MAX_DEPTH 200    /* deeper values: not reproduced (Python's own limit is ~1000) */
#define PJ_MAX_MEMBERS 4096 /* per object: repeated-key lookup is linear */
#define PJ_MAX_INT_DIGITS                                                                          \
	4300 /* Python refuses longer ints (sys.int_info.default_max_str_digits) */

static void pj_free(struct pj *v)
{
	struct pj *c, *nx;

	if (!v)
		return;
	for (c = v->child; c; c = nx) {
		nx = c->next;
		pj_free(c);
	}
	free(v->s);
	free(v->k);
	free(v);
}

struct pj_in {
	const char *p, *end;
	const char *why;
	int rc; /* CHAT_UNSUPPORTED (not reproduced) or -ENOMEM on failure */
};

static int pj_fail(struct pj_in *in, int rc, const char *why)
{
	if (!in->rc) {
		in->rc = rc;
		in->why = why;
	}
	return -1;
}

static void pj_ws(struct pj_in *in)
{
	while (in->p < in->end &&
	       (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r'))
		in->p++;
}

static int hex4(const char *p)
{
	int v = 0, i;

	for (i = 0; i < 4; i++) {
		int h = hex_digit(p[i]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static int put_utf8(struct buf *b, unsigned cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return buf_append(b, u, n);
}

/* A JSON string at in->p (on the opening quote), decoded as Python's json does (strict: raw
 * control characters refused). Lone surrogates: Python keeps them, UTF-8 cannot -> refused. */
static int pj_string(struct pj_in *in, char **s, size_t *n)
{
	struct buf b = {0};
	const char *p = in->p + 1;

	for (;;) {
		const char *run = p;

		while (p < in->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
			p++;
		if (buf_append(&b, run, (size_t)(p - run)))
			goto nomem;
		if (p >= in->end || (unsigned char)*p < 0x20) {
			buf_free(&b);
			return pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: bad string");
		}
		if (*p == '"')
			break;
		if (p + 1 >= in->end)
			goto bad;
		p++;
		switch (*p) {
		case '"':
		case '\\':
		case '/':
			if (buf_append(&b, p, 1))
				goto nomem;
			p++;
			break;
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't': {
			char c = *p == 'b'   ? '\b'
				 : *p == 'f' ? '\f'
				 : *p == 'n' ? '\n'
				 : *p == 'r' ? '\r'
					     : '\t';
			if (buf_append(&b, &c, 1))
				goto nomem;
			p++;
			break;
		}
		case 'u': {
			int cp, lo;

			if (in->end - p < 5 || (cp = hex4(p + 1)) < 0)
				goto bad;
			p += 5;
			if (cp >= 0xd800 && cp < 0xdc00 && in->end - p >= 6 && p[0] == '\\' &&
			    p[1] == 'u' && (lo = hex4(p + 2)) >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				buf_free(&b);
				return pj_fail(in, CHAT_UNSUPPORTED,
					       "tool JSON: lone surrogate escape");
			}
			if (put_utf8(&b, (unsigned)cp))
				goto nomem;
			break;
		}
		default:
			goto bad;
		}
	}
	in->p = p + 1;
	if (buf_reserve(&b, 0))
		goto nomem;
	*s = b.data;
	*n = b.len;
	return 0;
bad:
	buf_free(&b);
	return pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: bad string escape");
nomem:
	buf_free(&b);
	return pj_fail(in, -ENOMEM, "out of memory");
}

static int pj_number(struct pj_in *in, struct pj *v)
{
	const char *p = in->p, *start = p;
	bool is_float = false;

	if (p < in->end && *p == '-')
		p++;
	if (p < in->end && *p == '0') {
		p++;
	} else if (p < in->end && *p >= '1' && *p <= '9') {
		while (p < in->end && *p >= '0' && *p <= '9')
			p++;
	} else {
		return pj_fail(in, CHAT_UNSUPPORTED,
			       "tool JSON: not JSON (NaN/Infinity or bad value)");
	}
	if (p + 1 < in->end && *p == '.' && p[1] >= '0' && p[1] <= '9') {
		is_float = true;
		for (p++; p < in->end && *p >= '0' && *p <= '9';)
			p++;
	}
	if (p < in->end && (*p == 'e' || *p == 'E')) {
		const char *q = p + 1;
		if (q < in->end && (*q == '+' || *q == '-'))
			q++;
		if (q < in->end && *q >= '0' && *q <= '9') {
			is_float = true;
			for (p = q; p < in->end && *p >= '0' && *p <= '9';)
				p++;
		}
	}
	v->s = strndup(start, (size_t)(p - start));
	if (!v->s)
		return pj_fail(in, -ENOMEM, "out of memory");
	v->n = (size_t)(p - start);
	in->p = p;
	if (!is_float) {
		v->t = PJ_INT;
		if (v->n - (start[0] == '-') > PJ_MAX_INT_DIGITS)
			return pj_fail(in, CHAT_UNSUPPORTED,
				       "tool JSON: integer too long for Python");
		return 0;
	}
	v->t = PJ_FLOAT;
	v->d = strtod(v->s, NULL);
	if (v->d - v->d != 0) /* inf: Python prints Infinity, which is not JSON */
		return pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: number overflows a double");
	return 0;
}

static int pj_value(struct pj_in *in, struct pj **out, int depth);

/* Adds member m (key set) to object o with Python dict semantics. */
static int pj_obj_put(struct pj_in *in, struct pj *o, struct pj *m)
{
	struct pj **pp, *c;

	for (pp = &o->child; (c = *pp); pp = &c->next) {
		if (c->kn == m->kn && memcmp(c->k, m->k, m->kn) == 0) {
			/* first position, last value */
			m->next = c->next;
			*pp = m;
			if (o->last == c)
				o->last = m;
			c->next = NULL;
			pj_free(c);
			return 0;
		}
	}
	if (o->count >= PJ_MAX_MEMBERS) {
		pj_free(m);
		return pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: object too large");
	}
	if (o->last)
		o->last->next = m;
	else
		o->child = m;
	o->last = m;
	o->count++;
	return 0;
}

static int pj_value(struct pj_in *in, struct pj **out, int depth)
{
	struct pj *v = calloc(1, sizeof(*v)), *m;
	char *k;
	size_t kn;

	*out = NULL;
	if (!v)
		return pj_fail(in, -ENOMEM, "out of memory");
	if (depth > PJ_MAX_DEPTH) {
		free(v);
		return pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: nested too deep");
	}
	pj_ws(in);
	if (in->p >= in->end)
		goto bad;
	switch (*in->p) {
	case '"':
		v->t = PJ_STR;
		if (pj_string(in, &v->s, &v->n))
			goto fail;
		break;
	case 'n':
	case 't':
	case 'f': {
		static const char *const lit[] = {"null", "true", "false"};
		int i = *in->p == 'n' ? 0 : *in->p == 't' ? 1 : 2;
		size_t l = strlen(lit[i]);

		if ((size_t)(in->end - in->p) < l || memcmp(in->p, lit[i], l))
			goto bad;
		v->t = i == 0 ? PJ_NULL : i == 1 ? PJ_TRUE : PJ_FALSE;
		in->p += l;
		break;
	}
	case '[':
		v->t = PJ_ARR;
		in->p++;
		pj_ws(in);
		if (in->p < in->end && *in->p == ']') {
			in->p++;
			break;
		}
		for (;;) {
			if (pj_value(in, &m, depth + 1))
				goto fail;
			if (v->last)
				v->last->next = m;
			else
				v->child = m;
			v->last = m;
			pj_ws(in);
			if (in->p < in->end && *in->p == ',') {
				in->p++;
				continue;
			}
			if (in->p < in->end && *in->p == ']') {
				in->p++;
				break;
			}
			goto bad;
		}
		break;
	case '{':
		v->t = PJ_OBJ;
		in->p++;
		pj_ws(in);
		if (in->p < in->end && *in->p == '}') {
			in->p++;
			break;
		}
		for (;;) {
			pj_ws(in);
			if (in->p >= in->end || *in->p != '"')
				goto bad;
			if (pj_string(in, &k, &kn))
				goto fail;
			pj_ws(in);
			if (in->p >= in->end || *in->p != ':') {
				free(k);
				goto bad;
			}
			in->p++;
			if (pj_value(in, &m, depth + 1)) {
				free(k);
				goto fail;
			}
			m->k = k;
			m->kn = kn;
			if (pj_obj_put(in, v, m))
				goto fail;
			pj_ws(in);
			if (in->p < in->end && *in->p == ',') {
				in->p++;
				continue;
			}
			if (in->p < in->end && *in->p == '}') {
				in->p++;
				break;
			}
			goto bad;
		}
		break;
	default:
		if (pj_number(in, v))
			goto fail;
	}
	*out = v;
	return 0;
bad:
	pj_fail(in, CHAT_UNSUPPORTED, "tool JSON: not valid JSON");
fail:
	pj_free(v);
	return -1;
}

/* Python json.loads of s[0..n). Returns CHAT_OK with *out, CHAT_UNSUPPORTED (*why), -ENOMEM. */
static int pj_parse(const char *s, size_t n, struct pj **out, const char **why)
{
	struct pj_in in = {s, s + n, NULL, 0};

	*out = NULL;
	if (pj_value(&in, out, 0) == 0) {
		pj_ws(&in);
		if (in.p == in.end)
			return CHAT_OK;
		pj_fail(&in, CHAT_UNSUPPORTED, "tool JSON: not valid JSON");
		pj_free(*out);
		*out = NULL;
	}
	*why = in.why;
	return in.rc;
}

/* repr(float) for a finite double: the shortest digits that read back to d (the nearest such
 * string), positional for exponents -4..15, else d.ddde+XX. */
static int pj_float_repr(struct buf *out, double d)
{
	char tmp[64], digits[32], cand[64];
	int prec, exp10 = 0, nd = 0, i, rc = 0;

	if (d == 0)
		return buf_puts(out, signbit(d) ? "-0.0" : "0.0");
	for (prec = 1; prec <= 17; prec++) {
		char *e;
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
		if (strtod(tmp, NULL) == d)
			break;
		/* The correctly rounded string can miss where the rounding interval is lopsided
		 * (d a power of two); its decimal neighbour on the far side may still hit. */
		e = strchr(tmp, 'e');
		if (e && prec > 1) {
			int j;
			char *m = tmp + (tmp[0] == '-');
			for (j = 0; j < 2; j++) {
				size_t len = (size_t)(e - tmp);
				int carry = j == 0 ? 1 : -1, q;
				memcpy(cand, tmp, len);
				cand[len] = '\0';
				for (q = (int)len - 1; q >= (int)(m - tmp) && carry; q--) {
					if (cand[q] == '.')
						continue;
					cand[q] = (char)(cand[q] + carry);
					if (cand[q] > '9') {
						cand[q] = '0';
					} else if (cand[q] < '0') {
						cand[q] = '9';
					} else {
						carry = 0;
					}
				}
				if (carry || cand[m - tmp] == '0')
					continue;
				snprintf(cand + len, sizeof(cand) - len, "%s", e);
				if (strtod(cand, NULL) == d) {
					memcpy(tmp, cand, sizeof(tmp));
					goto found;
				}
			}
		}
	}
found:
	/* tmp = [-]D.DDDe[+-]XX */
	{
		const char *p = tmp;
		if (*p == '-') {
			rc |= buf_append(out, "-", 1);
			p++;
		}
		for (; *p && *p != 'e'; p++)
			if (*p != '.')
				digits[nd++] = *p;
		exp10 = atoi(p + 1);
		while (nd > 1 && digits[nd - 1] == '0')
			nd--;
	}
	if (exp10 >= -4 && exp10 < 16) {
		if (exp10 < 0) {
			rc |= buf_puts(out, "0.");
			for (i = 0; i < -exp10 - 1; i++)
				rc |= buf_append(out, "0", 1);
			rc |= buf_append(out, digits, (size_t)nd);
		} else {
			for (i = 0; i <= exp10; i++)
				rc |= buf_append(out, i < nd ? &digits[i] : "0", 1);
			rc |= buf_append(out, ".", 1);
			if (nd > exp10 + 1)
				rc |= buf_append(out, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
			else
				rc |= buf_append(out, "0", 1);
		}
	} else {
		rc |= buf_append(out, digits, 1);
		if (nd > 1) {
			rc |= buf_append(out, ".", 1);
			rc |= buf_append(out, digits + 1, (size_t)(nd - 1));
		}
		rc |= buf_printf(out, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
	}
	return rc ? -ENOMEM : 0;
}

/* json.dumps(s, ensure_ascii=False) of a string: buf_json_str escapes exactly as it does. */
static int pj_dump_str(struct buf *out, const char *s, size_t n)
{
	return buf_json_str(out, s, n);
}

/* json.dumps(v, ensure_ascii=False) with the default separators ", " and ": ". */
static int pj_dump(struct buf *out, const struct pj *v)
{
	const struct pj *c;
	int rc = 0;

	switch (v->t) {
	case PJ_NULL:
		return buf_puts(out, "null");
	case PJ_TRUE:
		return buf_puts(out, "true");
	case PJ_FALSE:
		return buf_puts(out, "false");
	case PJ_INT:
		/* Python's int drops the sign of zero */
		if (strcmp(v->s, "-0") == 0)
			return buf_puts(out, "0");
		return buf_append(out, v->s, v->n);
	case PJ_FLOAT:
		return pj_float_repr(out, v->d);
	case PJ_STR:
		return pj_dump_str(out, v->s, v->n);
	case PJ_ARR:
	case PJ_OBJ:
		rc |= buf_append(out, v->t == PJ_ARR ? "[" : "{", 1);
		for (c = v->child; c; c = c->next) {
			if (c != v->child)
				rc |= buf_append(out, ", ", 2);
			if (v->t == PJ_OBJ) {
				rc |= pj_dump_str(out, c->k, c->kn);
				rc |= buf_append(out, ": ", 2);
			}
			rc |= pj_dump(out, c);
		}
		rc |= buf_append(out, v->t == PJ_ARR ? "]" : "}", 1);
		return rc ? -ENOMEM : 0;
	}
	return 0;
}

/* The last member named key of a pj object, or NULL. */
static const struct pj *pj_get(const struct pj *o, const char *key)
{
	const struct pj *c;
	size_t n = strlen(key);

	if (!o || o->t != PJ_OBJ)
		return NULL;
	for (c = o->child; c; c = c->next)
		if (c->kn == n && memcmp(c->k, key, n) == 0)
			return c;
	return NULL;
}

/* Keys whose presence in a content part makes vLLM treat it as media (MM_PARSER_MAP minus the
 * text types), whatever its "type". */
static const char *const media_keys[] = {
    "image_url", "input_image", "image_embeds", "audio_embeds", "video_embeds",	  "prompt_embeds",
    "image_pil", "audio_url",	"input_audio",	"video_url",	"tool_reference",
};

/* Text of one content part: *text set (NULL when vLLM drops the part). Returns a chat_status. */
static int part_text(const cJSON *part, bool system, const char **text, const char **why)
{
	const cJSON *type, *val;
	const char *key;
	size_t i;

	*text = NULL;
	if (cJSON_IsString(part)) {
		*text = part->valuestring;
		goto check_billing;
	}
	if (!cJSON_IsObject(part)) {
		*why = "a content part is neither a string nor an object";
		return CHAT_INVALID;
	}
	for (i = 0; i < sizeof(media_keys) / sizeof(media_keys[0]); i++) {
		if (json_get(part, media_keys[i])) {
			*why = "non-text content part (image, audio, video, embeddings, "
			       "tool_reference)";
			return CHAT_UNSUPPORTED;
		}
	}
	if (!is_null_or_absent(json_get(part, "uuid"))) {
		*why = "content part with a uuid";
		return CHAT_UNSUPPORTED;
	}
	type = json_get(part, "type");
	if (is_null_or_absent(type)) {
		*why = "content part without a type";
		return CHAT_INVALID;
	}
	if (!cJSON_IsString(type)) {
		*why = "content part type is not a string";
		return CHAT_INVALID;
	}
	if (strcmp(type->valuestring, "text") == 0 ||
	    strcmp(type->valuestring, "input_text") == 0 ||
	    strcmp(type->valuestring, "output_text") == 0)
		key = "text";
	else if (strcmp(type->valuestring, "refusal") == 0)
		key = "refusal";
	else if (strcmp(type->valuestring, "thinking") == 0)
		key = "thinking";
	else {
		for (i = 0; i < sizeof(media_keys) / sizeof(media_keys[0]); i++) {
			if (strcmp(type->valuestring, media_keys[i]) == 0) {
				*why = "non-text content part (image, audio, video, embeddings, "
				       "tool_reference)";
				return CHAT_UNSUPPORTED;
			}
		}
		/* vLLM refuses it ("Unsupported chat content part type"). */
		*why = "unknown content part type";
		return CHAT_INVALID;
	}
	val = json_get(part, key);
	if (is_null_or_absent(val))
		return CHAT_OK; /* vLLM skips it */
	if (!cJSON_IsString(val)) {
		*why = "content part text is not a string";
		return CHAT_INVALID;
	}
	*text = val->valuestring;
	if (strcmp(key, "text") != 0 || strcmp(type->valuestring, "text") != 0)
		return CHAT_OK;
check_billing:
	/* Newest vLLM rewrites such system parts, older ones keep them: not reproducible. */
	if (system && strncmp(*text, BILLING_HEADER, strlen(BILLING_HEADER)) == 0) {
		*why =
		    "system text starting with x-anthropic-billing-header (vLLM versions differ)";
		return CHAT_UNSUPPORTED;
	}
	return CHAT_OK;
}

/* Fills m->content from a message's "content" as vLLM's string content format does. */
static int content_flatten(const cJSON *content, struct cmsg *m, bool system, struct buf *scratch,
			   const char **why)
{
	const cJSON *part;
	const char *text;
	size_t start = scratch->len;
	bool first = true;
	int rc;

	if (is_null_or_absent(content)) {
		m->content = span_str("");
		return CHAT_OK;
	}
	if (cJSON_IsString(content)) {
		m->content = span_str(content->valuestring);
		if (system && span_starts(m->content, BILLING_HEADER)) {
			*why =
			    "system text starting with x-anthropic-billing-header (vLLM versions "
			    "differ)";
			return CHAT_UNSUPPORTED;
		}
		return CHAT_OK;
	}
	if (!cJSON_IsArray(content)) {
		*why = "message content is neither a string, a list of parts nor null";
		return CHAT_INVALID;
	}
	cJSON_ArrayForEach(part, content)
	{
		rc = part_text(part, system, &text, why);
		if (rc != CHAT_OK)
			return rc;
		if (!text || !*text)
			continue;
		if (!first && buf_append(scratch, "\n", 1))
			return -ENOMEM;
		if (buf_puts(scratch, text))
			return -ENOMEM;
		first = false;
	}
	m->joined = true;
	m->joined_off = start;
	m->content.n = scratch->len - start;
	return CHAT_OK;
}

/* Assistant tool_calls as vLLM validates them (ChatCompletionMessageToolCallParam: id, type
 * "function", function {name, arguments: strings}). */
static int tool_calls_check(const cJSON *calls, const char **why)
{
	const cJSON *c, *fn, *type;

	cJSON_ArrayForEach(c, calls)
	{
		fn = json_get(c, "function");
		type = json_get(c, "type");
		if (!cJSON_IsObject(c) || !cJSON_IsString(json_get(c, "id")) ||
		    !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0 ||
		    !cJSON_IsObject(fn) || !cJSON_IsString(json_get(fn, "name")) ||
		    !cJSON_IsString(json_get(fn, "arguments"))) {
			*why =
			    "a tool call is not {id, type: function, function: {name, arguments}}";
			return CHAT_INVALID;
		}
	}
	return CHAT_OK;
}

/* One assistant tool call as the template prints it, arguments as vLLM re-serialises them
 * (json.loads, then tojson unless the result is a string). */
static int tool_call_render(struct buf *out, const cJSON *call, bool newline, const char **why)
{
	const cJSON *fn = json_get(call, "function");
	const char *args = json_get(fn, "arguments")->valuestring;
	struct pj *v = NULL;
	int rc = 0;

	if (newline)
		rc |= buf_append(out, "\n", 1);
	rc |= buf_puts(out, "<tool_call>\n{\"name\": \"");
	rc |= buf_puts(out, json_get(fn, "name")->valuestring);
	rc |= buf_puts(out, "\", \"arguments\": ");
	if (rc)
		return -ENOMEM;
	if (!*args) {
		rc = buf_puts(out, "{}"); /* vLLM: empty arguments become {} */
	} else {
		rc = pj_parse(args, strlen(args), &v, why);
		if (rc == CHAT_UNSUPPORTED)
			*why = "tool call arguments that are not JSON (vLLM versions differ)";
		if (rc != CHAT_OK)
			return rc;
		rc = v->t == PJ_STR ? buf_append(out, v->s, v->n) : pj_dump(out, v);
		pj_free(v);
	}
	rc |= buf_puts(out, "}\n</tool_call>");
	return rc ? -ENOMEM : CHAT_OK;
}

/* A cJSON value as a pj. Numbers are refused: cJSON has lost whether they were written 1 or
 * 1.0, which json.dumps would print differently. */
static int pj_from_cjson(const cJSON *c, struct pj **out, const char **why, int depth)
{
	struct pj *v = calloc(1, sizeof(*v)), *m;
	const cJSON *it;
	int rc;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	if (depth > PJ_MAX_DEPTH) {
		rc = CHAT_UNSUPPORTED;
		*why = "tool JSON: nested too deep";
		goto fail;
	}
	if (cJSON_IsNull(c)) {
		v->t = PJ_NULL;
	} else if (cJSON_IsBool(c)) {
		v->t = cJSON_IsTrue(c) ? PJ_TRUE : PJ_FALSE;
	} else if (cJSON_IsString(c)) {
		v->t = PJ_STR;
		v->n = strlen(c->valuestring);
		if (!(v->s = strdup(c->valuestring))) {
			rc = -ENOMEM;
			goto fail;
		}
	} else if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
		struct pj_in in = {0};
		v->t = cJSON_IsArray(c) ? PJ_ARR : PJ_OBJ;
		cJSON_ArrayForEach(it, c)
		{
			rc = pj_from_cjson(it, &m, why, depth + 1);
			if (rc != CHAT_OK)
				goto fail;
			if (v->t == PJ_ARR) {
				if (v->last)
					v->last->next = m;
				else
					v->child = m;
				v->last = m;
				continue;
			}
			m->kn = strlen(it->string ? it->string : "");
			if (!(m->k = strdup(it->string ? it->string : ""))) {
				pj_free(m);
				rc = -ENOMEM;
				goto fail;
			}
			if (pj_obj_put(&in, v, m)) {
				rc = in.rc;
				*why = in.why;
				goto fail;
			}
		}
	} else {
		rc = CHAT_UNSUPPORTED;
		*why = "numbers in tools need the request text (chat_render_json)";
		goto fail;
	}
	*out = v;
	return CHAT_OK;
fail:
	pj_free(v);
	return rc;
}

/* The template's tools block: each tool as vLLM hands it over (ChatCompletionToolsParam
 * .model_dump(): {"type": "function", "function": {name, description, parameters[, strict]}})
 * through tojson. Fields that vLLM versions dump differently are refused. */
static int tools_render(struct buf *out, const struct pj *tools, const struct cmsg *first,
			const char **why)
{
	static const char *const tool_keys[] = {"type", "function"};
	static const char *const fn_keys[] = {"name", "description", "parameters", "strict"};
	const struct pj *t, *c, *fn, *type, *name, *desc, *params, *strict;
	int rc = 0;
	size_t i;

	if (tools->t != PJ_ARR) {
		*why = "tools is not a list";
		return CHAT_INVALID;
	}
	rc |= buf_puts(out, "<|im_start|>system\n");
	if (first->role == ROLE_SYSTEM) {
		rc |= put(out, first->content);
		rc |= buf_puts(out, "\n\n");
	}
	rc |= buf_puts(out,
		       "# Tools\n\nYou may call one or more functions to assist with the user "
		       "query.\n\nYou are provided with function signatures within <tools></tools> "
		       "XML tags:\n<tools>");
	for (t = tools->child; t && !rc; t = t->next) {
		if (t->t != PJ_OBJ || (fn = pj_get(t, "function")) == NULL || fn->t != PJ_OBJ) {
			*why = "a tool is not {type: function, function: {...}}";
			return CHAT_INVALID;
		}
		for (c = t->child; c; c = c->next) {
			for (i = 0; i < 2 && (c->kn != strlen(tool_keys[i]) ||
					      memcmp(c->k, tool_keys[i], c->kn));
			     i++)
				;
			if (i == 2)
				goto versions;
		}
		for (c = fn->child; c; c = c->next) {
			for (i = 0; i < 4 && (c->kn != strlen(fn_keys[i]) ||
					      memcmp(c->k, fn_keys[i], c->kn));
			     i++)
				;
			if (i == 4)
				goto versions;
		}
		type = pj_get(t, "type");
		name = pj_get(fn, "name");
		desc = pj_get(fn, "description");
		params = pj_get(fn, "parameters");
		strict = pj_get(fn, "strict");
		if ((type && (type->t != PJ_STR || strcmp(type->s, "function"))) || !name ||
		    name->t != PJ_STR || (desc && desc->t != PJ_STR && desc->t != PJ_NULL) ||
		    (params && params->t != PJ_OBJ && params->t != PJ_NULL) ||
		    (strict && strict->t != PJ_TRUE && strict->t != PJ_FALSE &&
		     strict->t != PJ_NULL)) {
			*why = "a tool function is not {name, description, parameters, strict} as "
			       "typed";
			return CHAT_INVALID;
		}
		if (strict && strict->t == PJ_NULL)
			goto versions;
		rc |= buf_puts(out, "\n{\"type\": \"function\", \"function\": {\"name\": ");
		rc |= pj_dump_str(out, name->s, name->n);
		rc |= buf_puts(out, ", \"description\": ");
		rc |= desc && desc->t == PJ_STR ? pj_dump_str(out, desc->s, desc->n)
						: buf_puts(out, "null");
		rc |= buf_puts(out, ", \"parameters\": ");
		rc |= params && params->t == PJ_OBJ ? pj_dump(out, params) : buf_puts(out, "null");
		if (strict)
			rc |= buf_puts(out, strict->t == PJ_TRUE ? ", \"strict\": true"
								 : ", \"strict\": false");
		rc |= buf_puts(out, "}}");
	}
	rc |= buf_puts(out, "\n</tools>\n\nFor each function call, return a json object with "
			    "function name and arguments within <tool_call></tool_call> XML tags:\n"
			    "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
			    "<args-json-object>}\n</tool_call><|im_end|>\n");
	return rc ? -ENOMEM : CHAT_OK;
versions:
	*why = "tool fields that vLLM versions dump differently (only type, function{name, "
	       "description, parameters, strict} are reproduced)";
	return CHAT_UNSUPPORTED;
}

/* Parses one message into m. Returns a chat_status or -ENOMEM. */
static int message_parse(const cJSON *msg, struct cmsg *m, struct buf *scratch, const char **why)
{
	const cJSON *role, *calls, *reasoning;
	int rc;

	memset(m, 0, sizeof(*m));
	if (!cJSON_IsObject(msg)) {
		*why = "a message is not an object";
		return CHAT_INVALID;
	}
	role = json_get(msg, "role");
	if (!cJSON_IsString(role)) {
		*why = "a message has no string role";
		return CHAT_INVALID;
	}
	m->role_name = role->valuestring;
	m->role = role_of(role->valuestring);
	rc = content_flatten(json_get(msg, "content"), m, m->role == ROLE_SYSTEM, scratch, why);
	if (rc != CHAT_OK)
		return rc;
	if (m->role != ROLE_ASSISTANT)
		return CHAT_OK;

	calls = json_get(msg, "tool_calls");
	if (!is_null_or_absent(calls)) {
		if (!cJSON_IsArray(calls)) {
			*why = "assistant tool_calls is not a list";
			return CHAT_INVALID;
		}
		rc = tool_calls_check(calls, why);
		if (rc != CHAT_OK)
			return rc;
		if (cJSON_GetArraySize(calls) > 0)
			m->tool_calls = calls;
	}
	/* protocol.py: reasoning_content is renamed to reasoning unless reasoning is set. */
	reasoning = json_get(msg, "reasoning");
	if (is_null_or_absent(reasoning))
		reasoning = json_get(msg, "reasoning_content");
	if (!is_null_or_absent(reasoning)) {
		if (!cJSON_IsString(reasoning)) {
			*why = "assistant reasoning is not a string";
			return CHAT_UNSUPPORTED;
		}
		m->has_reasoning = true;
		m->reasoning = span_str(reasoning->valuestring);
	}
	return CHAT_OK;
}

/* Names that change the rendering when passed in chat_template_kwargs (template variables
 * other than enable_thinking, parameters of transformers' apply_chat_template, names vLLM
 * rejects or overrides differently across versions). Any other kwarg is not read by the
 * template and has no effect. */
static const char *const kwargs_deny[] = {
    "add_generation_prompt",
    "continue_final_message",
    "tools",
    "messages",
    "namespace",
    "chat_template",
    "tokenize",
    "conversation",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
    "processor_kwargs",
};

static int kwargs_check(const cJSON *kw, const char **why)
{
	size_t i;

	for (i = 0; i < sizeof(kwargs_deny) / sizeof(kwargs_deny[0]); i++) {
		if (json_get(kw, kwargs_deny[i])) {
			*why = "chat_template_kwargs sets a field the renderer does not reproduce "
			       "(add_generation_prompt, tools, messages, ...)";
			return CHAT_UNSUPPORTED;
		}
	}
	return CHAT_OK;
}

static bool is_auto(const cJSON *v)
{
	return cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0;
}

/* The index of reasoning_effort value x among vLLM's values ("none" is 0), or -1. */
static int effort_index(const cJSON *x)
{
	static const char *const efforts[] = {"none", "minimal", "low", "medium",
					      "high", "xhigh",	 "max"};

	for (size_t i = 0; cJSON_IsString(x) && i < sizeof(efforts) / sizeof(efforts[0]); i++)
		if (strcmp(x->valuestring, efforts[i]) == 0)
			return (int)i;
	return -1;
}

/* What vLLM answers (400) to a request's own chat_template unless started with
 * --trust-request-chat-template. */
#define UNTRUSTED_TEMPLATE                                                                         \
	"Chat template is passed with request, but --trust-request-chat-template is not set"

/* Resolves the template's enable_thinking: *think_off is true when it is a JSON false. */
static int thinking_resolve(const cJSON *req, const cJSON *user_kw, const cJSON *server_kw,
			    bool *think_off, const char **why)
{
	const cJSON *user = json_get(user_kw, "enable_thinking");
	const cJSON *server = json_get(server_kw, "enable_thinking");
	const cJSON *effort = json_get(req, "reasoning_effort");
	const cJSON *v;
	int i;

	*think_off = false;
	if (!is_null_or_absent(effort)) {
		if ((i = effort_index(effort)) < 0) {
			*why = "reasoning_effort is not a known value";
			return CHAT_INVALID;
		}
		if (!user) {
			/* build_chat_params derives enable_thinking = effort != "none", over the
			 * server's default (releases before it ignored reasoning_effort) */
			*think_off = i == 0;
			return CHAT_OK;
		}
	}
	/* merge_kwargs: the server default is overridden unless the request value is null/"auto".
	 */
	v = user;
	if (server && (!user || cJSON_IsNull(user) || is_auto(user)))
		v = server;
	*think_off = v && cJSON_IsFalse(v);
	return CHAT_OK;
}

/* vLLM's documents: null, or a list of objects whose values are strings (its pydantic type;
 * anything else is a 400). Both renderers check them here; the interpreter's variables dump
 * them from the request's text. */
static int documents_check(const cJSON *v, const char **why)
{
	const cJSON *d, *f;

	if (is_null_or_absent(v))
		return CHAT_OK;
	if (!cJSON_IsArray(v))
		goto bad;
	cJSON_ArrayForEach(d, v)
	{
		if (!cJSON_IsObject(d))
			goto bad;
		/* of a repeated key, Python keeps (and pydantic checks) the last value only */
		cJSON_ArrayForEach(f, d) if (!cJSON_IsString(f) &&
					     json_get(d, f->string) == f) goto bad;
	}
	return CHAT_OK;
bad:
	*why = "documents is not a list of objects of strings";
	return CHAT_INVALID;
}

/* Request-level fields. Returns a chat_status; *gen_prompt, *think_off set on CHAT_OK. */
static int request_check(const cJSON *req, const cJSON *server_kw, bool *gen_prompt,
			 bool *think_off, const char **why)
{
	const cJSON *v, *kw;
	int rc;

	v = json_get(req, "add_generation_prompt");
	*gen_prompt = true;
	if (v) {
		if (!cJSON_IsBool(v)) {
			*why = "add_generation_prompt is not a JSON boolean";
			return cJSON_IsNull(v) ? CHAT_INVALID : CHAT_UNSUPPORTED;
		}
		*gen_prompt = cJSON_IsTrue(v);
	}
	v = json_get(req, "continue_final_message");
	if (v && !cJSON_IsFalse(v)) {
		if (cJSON_IsTrue(v) && *gen_prompt) {
			*why =
			    "continue_final_message and add_generation_prompt are not compatible";
			return CHAT_INVALID;
		}
		*why = "continue_final_message";
		return cJSON_IsNull(v) ? CHAT_INVALID : CHAT_UNSUPPORTED;
	}
	if ((rc = documents_check(json_get(req, "documents"), why)) != CHAT_OK)
		return rc;
	v = json_get(req, "tools");
	if (!is_null_or_absent(v)) {
		if (!cJSON_IsArray(v)) {
			*why = "tools is not a list";
			return CHAT_INVALID;
		}
	}
	v = json_get(req, "chat_template");
	if (!is_null_or_absent(v)) {
		if (!cJSON_IsString(v)) {
			*why = "chat_template is not a string";
			return CHAT_INVALID;
		}
		/* vLLM without --trust-request-chat-template answers 400, whatever the template;
		 * with it, "" is the model's template (`request.chat_template or default`) and any
		 * other is rendered by the interpreter (chat_tmpl_render) */
		if (!trust_request_templates || v->valuestring[0]) {
			*why = UNTRUSTED_TEMPLATE;
			return CHAT_INVALID;
		}
	}
	kw = json_get(req, "chat_template_kwargs");
	if (is_null_or_absent(kw)) {
		kw = NULL;
	} else if (!cJSON_IsObject(kw)) {
		*why = "chat_template_kwargs is not an object";
		return CHAT_INVALID;
	}
	if (!cJSON_IsObject(server_kw))
		server_kw = NULL;
	rc = kwargs_check(kw, why);
	if (rc == CHAT_OK)
		rc = kwargs_check(server_kw, why);
	if (rc != CHAT_OK)
		return rc;
	return thinking_resolve(req, kw, server_kw, think_off, why);
}

/* The template's assistant branch for message i. Returns a chat_status or -ENOMEM. */
static int render_assistant(struct buf *out, const struct cmsg *m, bool after_query, bool last,
			    const char **why)
{
	struct span content = m->content, reasoning = span_str("");
	const cJSON *call;
	int rc = 0;

	if (m->has_reasoning) {
		reasoning = m->reasoning;
	} else if (span_find(content, "</think>")) {
		content = lstrip_nl(after_last(m->content, "</think>"));
		reasoning = lstrip_nl(
		    after_last(rstrip_nl(before_first(m->content, "</think>")), "<think>"));
	}
	if (after_query && (last || reasoning.n > 0)) {
		rc |= buf_puts(out, "<|im_start|>assistant\n<think>\n");
		rc |= put(out, strip_nl(reasoning));
		rc |= buf_puts(out, "\n</think>\n\n");
		rc |= put(out, lstrip_nl(content));
	} else {
		rc |= buf_puts(out, "<|im_start|>assistant\n");
		rc |= put(out, content);
	}
	if (rc)
		return -ENOMEM;
	if (m->tool_calls) {
		cJSON_ArrayForEach(call, m->tool_calls)
		{
			/* '\n' before every call but a first one that follows empty content */
			rc = tool_call_render(out, call,
					      call != m->tool_calls->child || content.n > 0, why);
			if (rc != CHAT_OK)
				return rc;
		}
	}
	return buf_puts(out, "<|im_end|>\n") ? -ENOMEM : CHAT_OK;
}

/* The template body over parsed messages (tools: a non-empty list, or NULL). Returns a
 * chat_status or -ENOMEM. */
static int render(struct buf *out, const struct cmsg *ms, size_t n, const struct pj *tools,
		  bool gen_prompt, bool think_off, const char **why)
{
	size_t i, last_query = n - 1;
	int rc = 0;

	if (tools) {
		rc = tools_render(out, tools, &ms[0], why);
		if (rc != CHAT_OK)
			return rc;
	} else if (ms[0].role == ROLE_SYSTEM) {
		rc |= buf_puts(out, "<|im_start|>system\n");
		rc |= put(out, ms[0].content);
		rc |= buf_puts(out, "<|im_end|>\n");
	}
	/* The last user turn that is not a wrapped tool response ("multi_step_tool"). */
	for (i = n; i-- > 0;) {
		if (ms[i].role == ROLE_USER && !(span_starts(ms[i].content, "<tool_response>") &&
						 span_ends(ms[i].content, "</tool_response>"))) {
			last_query = i;
			break;
		}
	}
	for (i = 0; i < n && !rc; i++) {
		const struct cmsg *m = &ms[i];

		switch (m->role) {
		case ROLE_SYSTEM:
			if (i == 0)
				break;
			/* fallthrough */
		case ROLE_USER:
			rc |= buf_puts(out, "<|im_start|>");
			rc |= buf_puts(out, m->role_name);
			rc |= buf_puts(out, "\n");
			rc |= put(out, m->content);
			rc |= buf_puts(out, "<|im_end|>\n");
			break;
		case ROLE_ASSISTANT:
			rc = render_assistant(out, m, i > last_query, i == n - 1, why);
			if (rc != CHAT_OK)
				return rc;
			break;
		case ROLE_TOOL:
			if (i == 0 || ms[i - 1].role != ROLE_TOOL)
				rc |= buf_puts(out, "<|im_start|>user");
			rc |= buf_puts(out, "\n<tool_response>\n");
			rc |= put(out, m->content);
			rc |= buf_puts(out, "\n</tool_response>");
			if (i == n - 1 || ms[i + 1].role != ROLE_TOOL)
				rc |= buf_puts(out, "<|im_end|>\n");
			break;
		case ROLE_OTHER:
			break; /* the template has no branch for it */
		}
	}
	if (gen_prompt) {
		rc |= buf_puts(out, "<|im_start|>assistant\n");
		if (think_off)
			rc |= buf_puts(out, "<think>\n\n</think>\n\n");
	}
	return rc ? -ENOMEM : 0;
}

/* chat_render_with, given the request's tools already parsed from its text (raw_tools, NULL:
 * taken from the cJSON tree). */
static int render_request(const cJSON *request, const struct pj *raw_tools,
			  const cJSON *server_kwargs, struct buf *out, const char **why)
{
	struct buf scratch = {0};
	struct cmsg *ms = NULL;
	struct pj *own_tools = NULL;
	const struct pj *tools = NULL;
	const cJSON *messages, *msg, *ctools;
	size_t n = 0, i, out_len = out->len;
	bool gen_prompt, think_off;
	const char *dummy;
	int rc;

	if (!why)
		why = &dummy;
	if (!cJSON_IsObject(request)) {
		*why = "request is not a JSON object";
		return CHAT_INVALID;
	}
	rc = request_check(request, server_kwargs, &gen_prompt, &think_off, why);
	if (rc != CHAT_OK)
		return rc;
	messages = json_get(request, "messages");
	if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
		*why = "messages is not a non-empty list";
		return CHAT_INVALID;
	}
	ms = calloc((size_t)cJSON_GetArraySize(messages), sizeof(*ms));
	if (!ms)
		return -ENOMEM;
	cJSON_ArrayForEach(msg, messages)
	{
		rc = message_parse(msg, &ms[n], &scratch, why);
		if (rc != CHAT_OK)
			goto cleanup;
		n++;
	}
	for (i = 0; i < n; i++)
		if (ms[i].joined)
			ms[i].content.p = scratch.data ? scratch.data + ms[i].joined_off : "";
	ctools = json_get(request, "tools");
	if (cJSON_IsArray(ctools) && cJSON_GetArraySize(ctools) > 0) {
		tools = raw_tools;
		if (!tools) {
			rc = pj_from_cjson(ctools, &own_tools, why, 0);
			if (rc != CHAT_OK)
				goto cleanup;
			tools = own_tools;
		}
	}
	rc = render(out, ms, n, tools, gen_prompt, think_off, why);
cleanup:
	if (rc != CHAT_OK && out->len > out_len) {
		out->len = out_len;
		out->data[out_len] = '\0';
	}
	pj_free(own_tools);
	buf_free(&scratch);
	free(ms);
	return rc;
}

int chat_render_with(const cJSON *request, const cJSON *server_kwargs, struct buf *out,
		     const char **why)
{
	return render_request(request, NULL, server_kwargs, out, why);
}

int chat_render(const cJSON *request, struct buf *out, const char **why)
{
	return chat_render_with(request, NULL, out, why);
}

int chat_raw_check(const char *json, size_t len, const char **why)
{
	const char *p;
	size_t i;

	/* memchr to each backslash: a byte loop cost ~4 µs on a 10 KB chat body (and twice that
	 * with an unlucky code alignment), more than the rest of this check */
	i = 0;
	while (i + 1 < len && (p = memchr(json + i, '\\', len - 1 - i))) {
		i = (size_t)(p - json);
		/* An escape: \u0000 is the one cJSON cannot keep; skip the escaped char either way.
		 */
		if (json[i + 1] == 'u' && i + 5 < len && hex_digit(json[i + 2]) == 0 &&
		    hex_digit(json[i + 3]) == 0 && hex_digit(json[i + 4]) == 0 &&
		    hex_digit(json[i + 5]) == 0) {
			if (why)
				*why = "a string holds U+0000, which cJSON cannot carry";
			return CHAT_UNSUPPORTED;
		}
		i += 2; /* the backslash and the escaped char */
	}
	return CHAT_OK;
}

int chat_render_parsed(const cJSON *req, const char *json, size_t len, const cJSON *server_kwargs,
		       struct buf *out, const char **why)
{
	const cJSON *tools = json_get(req, "tools");
	struct pj *raw = NULL;
	const char *dummy;
	int rc;

	if (cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) {
		/* Tool definitions are printed by json.dumps: take them from the text (numbers). */
		rc = pj_parse(json, len, &raw, why ? why : &dummy);
		if (rc != CHAT_OK)
			return rc;
	}
	rc = render_request(req, raw ? pj_get(raw, "tools") : NULL, server_kwargs, out, why);
	pj_free(raw);
	return rc;
}

int chat_render_json(const char *json, size_t len, const cJSON *server_kwargs, struct buf *out,
		     const char **why)
{
	cJSON *req;
	int rc;

	rc = chat_raw_check(json, len, why);
	if (rc != CHAT_OK)
		return rc;
	req = json_parse(json, len);
	if (!req) {
		if (why)
			*why = "request is not valid JSON";
		return CHAT_INVALID;
	}
	rc = chat_render_parsed(req, json, len, server_kwargs, out, why);
	cJSON_Delete(req);
	return rc;
}

int chat_template_check(const char *tmpl, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	char txt[2 * EVP_MAX_MD_SIZE + 1];
	unsigned int mdlen = 0, i;

	if (!EVP_Digest(tmpl, len, md, &mdlen, EVP_sha256(), NULL))
		return -ENOMEM;
	for (i = 0; i < mdlen; i++) {
		txt[2 * i] = hex[md[i] >> 4];
		txt[2 * i + 1] = hex[md[i] & 15];
	}
	txt[2 * mdlen] = '\0';
	return strcmp(txt, CHAT_QWEN3_TEMPLATE_SHA256) == 0 ? 0 : -ENOTSUP;
}

int chat_config_check(const char *path, const char **why)
{
	const char *dummy;
	const cJSON *tmpl;
	cJSON *cfg = NULL;
	struct stat st;
	char *text = NULL;
	ssize_t got;
	size_t off = 0;
	int fd, rc;

	if (!why)
		why = &dummy;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*why = "cannot open the tokenizer_config.json";
		return -errno;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		*why = "cannot stat the tokenizer_config.json";
		goto cleanup;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = -ENOMEM;
		*why = "out of memory";
		goto cleanup;
	}
	while (off < (size_t)st.st_size) {
		got = read(fd, text + off, (size_t)st.st_size - off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO;
			*why = "cannot read the tokenizer_config.json";
			goto cleanup;
		}
		off += (size_t)got;
	}
	cfg = cJSON_ParseWithLength(text, off);
	tmpl = json_get(cfg, "chat_template");
	if (!cJSON_IsString(tmpl)) {
		rc = -EINVAL;
		*why = cfg ? "tokenizer_config.json has no string chat_template"
			   : "tokenizer_config.json is not JSON";
		goto cleanup;
	}
	rc = chat_template_check(tmpl->valuestring, strlen(tmpl->valuestring));
	if (rc == -ENOTSUP)
		*why = "chat_template is not the Qwen3 template this renderer reproduces";
	else if (rc)
		*why = "out of memory";
cleanup:
	cJSON_Delete(cfg);
	free(text);
	close(fd);
	return rc;
}

/* ---- Any model's template: the Jinja interpreter ------------------------------------------------
 * vLLM hands the template what transformers' apply_chat_template does (tests/e2e/ref_chat.py
 * rebuilds it in Python): the conversation as parse_chat_message_content makes it (above: the
 * content flattened for the "string" format; for the "openai" format each text part wrapped as
 * {"type": "text", "text": ...}), the tools as ChatCompletionToolsParam.model_dump(), the
 * tool-call arguments through json.loads, add_generation_prompt, the kwargs, and the tokenizer's
 * special tokens (bos_token, eos_token, unk_token, pad_token). Here that is written as one JSON
 * object from the request's own text (pj: numbers keep their spelling) and rendered by
 * prompt/jinja. The Qwen3 template keeps the hand-written renderer above (same text, faster). */

struct chat_tmpl {
	struct jinja_template *def; /* the default template */
	struct jinja_template
	    *tool_use;	  /* a named "tool_use" template, chosen when tools are sent */
	char *special[4]; /* bos, eos, unk, pad token strings, or NULL */
	bool openai;	  /* content format "openai": the template loops over content */
	bool qwen3;	  /* the template the hand-written renderer reproduces */
};

static const char *const special_names[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};

static char *file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n) {
		s[n] = '\0';
		*len = (size_t)n;
	} else {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* vLLM's content-format detection, on the template's text: "openai" when a for loop iterates
 * over a message's content (Gemma 3's `for item in message['content']`), else "string". */
static bool loops_over_content(const char *src)
{
	const char *p = src;

	while ((p = strstr(p, "{%"))) {
		const char *end = strstr(p, "%}"), *q = p + 2;

		if (!end)
			break;
		while (q < end && (*q == '-' || *q == '+' || *q == ' ' || *q == '\n' || *q == '\t'))
			q++;
		if (end - q > 4 && !strncmp(q, "for ", 4)) {
			const char *in = strstr(q, " in ");

			if (in && in < end) {
				size_t n = (size_t)(end - in);
				char tmp[256];

				if (n >= sizeof(tmp))
					n = sizeof(tmp) - 1;
				memcpy(tmp, in, n);
				tmp[n] = '\0';
				if (strstr(tmp, "content"))
					return true;
			}
		}
		p = end;
	}
	return false;
}

static int tmpl_compile(const char *src, struct jinja_template **out, char *err, size_t errlen)
{
	struct jinja_error je;
	int rc = jinja_load(src, strlen(src), out, &je);

	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc)
		snprintf(err, errlen, "chat template: %s (line %d): %s", jinja_status_name(rc),
			 je.line, je.msg);
	return rc;
}

void chat_tmpl_free(struct chat_tmpl *t)
{
	if (!t)
		return;
	jinja_free(t->def);
	jinja_free(t->tool_use);
	for (int i = 0; i < 4; i++)
		free(t->special[i]);
	free(t);
}

int chat_tmpl_load(const char *config_path, struct chat_tmpl **out, char *err, size_t errlen)
{
	return chat_tmpl_load_with(config_path, NULL, out, err, errlen);
}

int chat_tmpl_load_with(const char *config_path, const char *template_path, struct chat_tmpl **out,
			char *err, size_t errlen)
{
	struct chat_tmpl *t = calloc(1, sizeof(*t));
	const cJSON *ct, *it;
	const char *def = NULL, *tool = NULL;
	cJSON *cfg = NULL;
	size_t len = 0, flen = 0;
	char *text = NULL, *ftext = NULL;
	int rc = -EINVAL;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	if (template_path) {
		/* vLLM's --chat-template: the file's text replaces the config's templates (no
		 * tool_use choice); the config still gives the special tokens, when there is one */
		if (!(ftext = file_read(template_path, &flen))) {
			snprintf(err, errlen, "cannot read the chat template %s", template_path);
			goto fail;
		}
		if (strlen(ftext) != flen) {
			snprintf(err, errlen, "the chat template %s holds a NUL byte",
				 template_path);
			goto fail;
		}
		/* read as Python's open() does in text mode: "\r\n" and a lone "\r" become "\n" */
		{
			size_t o = 0;

			for (size_t i = 0; i < flen; i++) {
				if (ftext[i] == '\r' && i + 1 < flen && ftext[i + 1] == '\n')
					continue;
				ftext[o++] = ftext[i] == '\r' ? '\n' : ftext[i];
			}
			ftext[o] = '\0';
		}
		def = ftext;
	}
	text = file_read(config_path, &len);
	if (!text && !template_path) {
		snprintf(err, errlen, "cannot read %s", config_path);
		goto fail;
	}
	cfg = text ? cJSON_ParseWithLength(text, len) : cJSON_CreateObject();
	if (!cJSON_IsObject(cfg)) {
		snprintf(err, errlen, "%s is not a JSON object", config_path);
		goto fail;
	}
	ct = json_get(cfg, "chat_template");
	if (template_path) {
		/* the file's template, chosen above */
	} else if (cJSON_IsString(ct)) {
		def = ct->valuestring;
	} else if (cJSON_IsArray(ct)) {
		cJSON_ArrayForEach(it, ct)
		{
			const cJSON *name = json_get(it, "name"), *src = json_get(it, "template");

			if (!cJSON_IsString(name) || !cJSON_IsString(src))
				continue;
			if (!strcmp(name->valuestring, "default"))
				def = src->valuestring;
			else if (!strcmp(name->valuestring, "tool_use"))
				tool = src->valuestring;
		}
	}
	if (!def && !tool) {
		snprintf(err, errlen, "%s has no chat_template", config_path);
		rc = -ENOENT;
		goto fail;
	}
	for (int i = 0; i < 4; i++) {
		const cJSON *v = json_get(cfg, special_names[i]);

		if (cJSON_IsObject(v))
			v = json_get(v, "content");
		if (cJSON_IsString(v) && !(t->special[i] = strdup(v->valuestring))) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	t->qwen3 = def && !tool && chat_template_check(def, strlen(def)) == 0;
	t->openai = loops_over_content(def ? def : tool);
	/* Qwen3's template is compiled too: the interpreter renders what the hand-written renderer
	 * does not (continue_final_message, documents) */
	if ((def && (rc = tmpl_compile(def, &t->def, err, errlen))) ||
	    (tool && (rc = tmpl_compile(tool, &t->tool_use, err, errlen))))
		goto fail;
	rc = 0;
	*out = t;
	t = NULL;
fail:
	cJSON_Delete(cfg);
	free(text);
	free(ftext);
	chat_tmpl_free(t);
	return rc;
}

/* The pj member named key of object o (the last of repeated keys), or NULL. */
static const struct pj *pj_member(const struct pj *o, const char *key)
{
	return pj_get(o, key);
}

/* One content part in the "openai" format (wrap_dicts): text parts as {"type": "text", "text":
 * s}; refusal/thinking parts and media are not reproduced here. */
static int openai_part(struct buf *v, const cJSON *part, bool system, const char **why)
{
	const cJSON *type;
	const char *text;
	int rc;

	type = json_get(part, "type");
	if (cJSON_IsObject(part) && cJSON_IsString(type) &&
	    (!strcmp(type->valuestring, "refusal") || !strcmp(type->valuestring, "thinking"))) {
		*why = "a refusal or thinking part in the openai content format";
		return CHAT_UNSUPPORTED;
	}
	rc = part_text(part, system, &text, why);
	if (rc != CHAT_OK)
		return rc;
	if (buf_puts(v, "{\"type\": \"text\", \"text\": ") ||
	    (text ? buf_json_str(v, text, strlen(text)) : buf_puts(v, "null")) || buf_puts(v, "}"))
		return -ENOMEM;
	return CHAT_OK;
}

/* The tool calls of an assistant message as vLLM hands them over: the client's objects in their
 * order, with function.arguments made by json.loads ("" or null: {}). */
static int vars_tool_calls(struct buf *v, const struct pj *calls, const char **why)
{
	const struct pj *c, *f, *m;
	int rc = 0;

	rc |= buf_puts(v, "[");
	for (c = calls->child; c; c = c->next) {
		if (c != calls->child)
			rc |= buf_puts(v, ", ");
		if (c->t != PJ_OBJ) {
			*why = "a tool call is not an object";
			return CHAT_INVALID;
		}
		rc |= buf_puts(v, "{");
		for (m = c->child; m; m = m->next) {
			if (m != c->child)
				rc |= buf_puts(v, ", ");
			rc |= pj_dump_str(v, m->k, m->kn);
			rc |= buf_puts(v, ": ");
			if (m->kn != 8 || memcmp(m->k, "function", 8) || m->t != PJ_OBJ) {
				rc |= pj_dump(v, m);
				continue;
			}
			rc |= buf_puts(v, "{");
			for (f = m->child; f; f = f->next) {
				if (f != m->child)
					rc |= buf_puts(v, ", ");
				rc |= pj_dump_str(v, f->k, f->kn);
				rc |= buf_puts(v, ": ");
				if (f->kn == 9 && !memcmp(f->k, "arguments", 9) &&
				    (f->t == PJ_STR || f->t == PJ_NULL)) {
					struct pj *args = NULL;
					int prc;

					if (f->t == PJ_NULL || f->n == 0) {
						rc |= buf_puts(v, "{}");
						continue;
					}
					prc = pj_parse(f->s, f->n, &args, why);
					if (prc != CHAT_OK) {
						*why = "tool call arguments are not JSON";
						return prc < 0 ? prc : CHAT_UNSUPPORTED;
					}
					rc |= pj_dump(v, args);
					pj_free(args);
					continue;
				}
				rc |= pj_dump(v, f);
			}
			rc |= buf_puts(v, "}");
		}
		rc |= buf_puts(v, "}");
	}
	rc |= buf_puts(v, "]");
	return rc ? -ENOMEM : CHAT_OK;
}

/* The tools as ChatCompletionToolsParam.model_dump() dumps them. */
static int vars_tools(struct buf *v, const struct pj *tools, const char **why)
{
	const struct pj *t, *fn, *x;
	int rc = 0;

	rc |= buf_puts(v, "[");
	for (t = tools->child; t; t = t->next) {
		fn = pj_member(t, "function");
		x = pj_member(t, "type");
		if (t->t != PJ_OBJ || !fn || fn->t != PJ_OBJ || !pj_member(fn, "name") ||
		    pj_member(fn, "name")->t != PJ_STR) {
			*why = "a tool is not {type: function, function: {name, ...}}";
			return CHAT_INVALID;
		}
		if (x && (x->t != PJ_STR || x->n != 8 || memcmp(x->s, "function", 8))) {
			*why = "a tool whose type is not function";
			return CHAT_UNSUPPORTED;
		}
		if (t != tools->child)
			rc |= buf_puts(v, ", ");
		rc |= buf_puts(v, "{\"type\": \"function\", \"function\": {\"name\": ");
		rc |= pj_dump(v, pj_member(fn, "name"));
		rc |= buf_puts(v, ", \"description\": ");
		rc |= (x = pj_member(fn, "description")) ? pj_dump(v, x) : buf_puts(v, "null");
		rc |= buf_puts(v, ", \"parameters\": ");
		rc |= (x = pj_member(fn, "parameters")) ? pj_dump(v, x) : buf_puts(v, "null");
		x = pj_member(fn, "strict");
		if (x && (x->t == PJ_TRUE || x->t == PJ_FALSE)) {
			rc |= buf_puts(v, ", \"strict\": ");
			rc |= pj_dump(v, x);
		}
		rc |= buf_puts(v, "}}");
	}
	rc |= buf_puts(v, "]");
	return rc ? -ENOMEM : CHAT_OK;
}

/* json.dumps of a cJSON value (the server's --default-chat-template-kwargs). Numbers are refused:
 * cJSON does not keep their spelling (1 and 1.0 print differently in Python). */
static int cjson_dump(struct buf *v, const cJSON *x, const char **why)
{
	const cJSON *c;
	int rc = 0;

	if (cJSON_IsNull(x))
		return buf_puts(v, "null") ? -ENOMEM : CHAT_OK;
	if (cJSON_IsBool(x))
		return buf_puts(v, cJSON_IsTrue(x) ? "true" : "false") ? -ENOMEM : CHAT_OK;
	if (cJSON_IsString(x))
		return buf_json_str(v, x->valuestring, strlen(x->valuestring)) ? -ENOMEM : CHAT_OK;
	if (!cJSON_IsArray(x) && !cJSON_IsObject(x)) {
		*why = "--default-chat-template-kwargs holds a number (its spelling is not kept)";
		return CHAT_UNSUPPORTED;
	}
	rc |= buf_puts(v, cJSON_IsArray(x) ? "[" : "{");
	cJSON_ArrayForEach(c, x)
	{
		int crc;

		if (c != x->child)
			rc |= buf_puts(v, ", ");
		if (cJSON_IsObject(x)) {
			rc |= buf_json_str(v, c->string, strlen(c->string));
			rc |= buf_puts(v, ": ");
		}
		if ((crc = cjson_dump(v, c, why)) != CHAT_OK)
			return crc;
	}
	rc |= buf_puts(v, cJSON_IsArray(x) ? "]" : "}");
	return rc ? -ENOMEM : CHAT_OK;
}

static bool pj_unset(const struct pj *x)
{
	return !x || x->t == PJ_NULL || (x->t == PJ_STR && x->n == 4 && !memcmp(x->s, "auto", 4));
}

/* The kwargs vLLM hands the template (vars members, each after ", "): the server's
 * --default-chat-template-kwargs, overridden by the request's chat_template_kwargs except where
 * the request's value is null or "auto" (merge_kwargs). Python keeps a repeated key's last
 * value, so that value decides. */
static int vars_kwargs_merged(struct buf *v, const struct pj *kw, const cJSON *server,
			      const char **why)
{
	const cJSON *s;
	const struct pj *m;
	int rc = 0, crc;

	if (kw && kw->t != PJ_OBJ)
		kw = NULL;
	cJSON_ArrayForEach(s, server)
	{
		if (kw && !pj_unset(pj_member(kw, s->string)))
			continue;
		rc |= buf_puts(v, ", ");
		rc |= buf_json_str(v, s->string, strlen(s->string));
		rc |= buf_puts(v, ": ");
		if ((crc = cjson_dump(v, s, why)) != CHAT_OK)
			return crc;
	}
	for (m = kw ? kw->child : NULL; m; m = m->next) {
		/* with server kwargs, ChatParams.with_defaults drops every unset request value,
		 * whether the server names that key or not; without, the request's kwargs reach
		 * the template as they are (a null as None). (The parsed tree keeps one member per
		 * key: its last value.) */
		if (server && server->child && pj_unset(m))
			continue;
		rc |= buf_puts(v, ", ");
		rc |= pj_dump_str(v, m->k, m->kn);
		rc |= buf_puts(v, ": ");
		rc |= pj_dump(v, m);
	}
	return rc ? -ENOMEM : CHAT_OK;
}

/* continue_final_message: the final message's text as transformers picks it (the content string
 * in the "string" format; in the "openai" format the last part's text), copied into final. */
static int final_text(const struct chat_tmpl *t, const cJSON *msg, const struct cmsg *m,
		      struct buf *final, const char **why)
{
	const cJSON *c = json_get(msg, "content"), *last;
	const char *text = NULL;
	int rc;

	final->len = 0;
	if (!t->openai)
		return buf_append(final, m->content.p, m->content.n) ? -ENOMEM : CHAT_OK;
	if (cJSON_IsString(c)) {
		text = c->valuestring;
	} else if (cJSON_IsArray(c) && (last = cJSON_GetArrayItem(c, cJSON_GetArraySize(c) - 1))) {
		rc = part_text(last, m->role == ROLE_SYSTEM, &text, why);
		if (rc != CHAT_OK)
			return rc;
	}
	if (!text) {
		*why =
		    "continue_final_message is set but we could not find any text to continue in "
		    "the final message!";
		return CHAT_INVALID;
	}
	return buf_puts(final, text) ? -ENOMEM : CHAT_OK;
}

/* The template's variables (one JSON object) for request req, whose text is json[0..len).
 * *cont: continue_final_message; then final holds the text transformers continues (the last
 * message's content as the template saw it, in the content format). */
static int vars_build(const struct chat_tmpl *t, const cJSON *req, const struct pj *raw,
		      const cJSON *server_kw, struct buf *v, bool *tools_given, bool *cont,
		      struct buf *final, const char **why)
{
	const cJSON *messages = json_get(req, "messages"), *msg, *x, *kw, *effort;
	const struct pj *pmsgs = pj_member(raw, "messages"), *pm, *ptools, *docs, *pkw;
	struct buf scratch = {0};
	bool gen_prompt = true, first = true, gen_given = false;
	int rc = 0;

	*cont = false;
	x = json_get(req, "add_generation_prompt");
	if (x) {
		if (!cJSON_IsBool(x)) {
			*why = "add_generation_prompt is not a JSON boolean";
			return cJSON_IsNull(x) ? CHAT_INVALID : CHAT_UNSUPPORTED;
		}
		gen_prompt = cJSON_IsTrue(x);
		gen_given = true;
	}
	x = json_get(req, "continue_final_message");
	if (x) {
		if (!cJSON_IsBool(x)) {
			*why = "continue_final_message is not a JSON boolean";
			return cJSON_IsNull(x) ? CHAT_INVALID : CHAT_UNSUPPORTED;
		}
		*cont = cJSON_IsTrue(x);
	}
	if (*cont && gen_prompt) {
		/* vLLM's request validator (add_generation_prompt given), else transformers */
		*why = gen_given
			   ? "Cannot set both `continue_final_message` and "
			     "`add_generation_prompt` to True."
			   : "continue_final_message and add_generation_prompt are not compatible";
		return CHAT_INVALID;
	}
	if (!trust_request_templates && !is_null_or_absent(json_get(req, "chat_template"))) {
		/* vLLM without --trust-request-chat-template answers 400 */
		*why = UNTRUSTED_TEMPLATE;
		return CHAT_INVALID;
	}
	effort = json_get(req, "reasoning_effort");
	if (is_null_or_absent(effort)) {
		effort = NULL;
	} else if (effort_index(effort) < 0) {
		*why = "reasoning_effort is not a known value";
		return CHAT_INVALID;
	}
	if ((rc = documents_check(json_get(req, "documents"), why)) != CHAT_OK)
		return rc;
	docs = pj_member(raw, "documents");
	kw = json_get(req, "chat_template_kwargs");
	if (!is_null_or_absent(kw) && !cJSON_IsObject(kw)) {
		*why = "chat_template_kwargs is not an object";
		return CHAT_INVALID;
	}
	if (!cJSON_IsObject(server_kw))
		server_kw = NULL;
	if ((rc = kwargs_check(is_null_or_absent(kw) ? NULL : kw, why)) != CHAT_OK ||
	    (rc = kwargs_check(server_kw, why)) != CHAT_OK)
		return rc;
	if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0 || !pmsgs ||
	    pmsgs->t != PJ_ARR) {
		*why = "messages is not a non-empty list";
		return CHAT_INVALID;
	}

	rc = 0;
	for (int i = 0; i < 4; i++) {
		rc |= buf_puts(v, first ? "{" : ", ");
		first = false;
		rc |= buf_json_str(v, special_names[i], strlen(special_names[i]));
		rc |= buf_puts(v, ": ");
		rc |= t->special[i] ? buf_json_str(v, t->special[i], strlen(t->special[i]))
				    : buf_puts(v, "null");
	}
	rc |= buf_puts(v, ", \"messages\": [");
	if (rc)
		return -ENOMEM;
	pm = pmsgs->child;
	cJSON_ArrayForEach(msg, messages)
	{
		struct cmsg m;
		const struct pj *calls, *id, *name;

		if (!pm) {
			*why = "messages differ between readers";
			rc = CHAT_UNSUPPORTED;
			goto out;
		}
		scratch.len = 0;
		if ((rc = message_parse(msg, &m, &scratch, why)) != CHAT_OK)
			goto out;
		if (m.joined)
			m.content.p = scratch.data ? scratch.data : "";
		if (*cont && !msg->next && (rc = final_text(t, msg, &m, final, why)) != CHAT_OK)
			goto out;
		if (msg != messages->child)
			rc |= buf_puts(v, ", ");
		rc |= buf_puts(v, "{\"role\": ");
		rc |= buf_json_str(v, m.role_name, strlen(m.role_name));
		rc |= buf_puts(v, ", \"content\": ");
		if (!t->openai) {
			rc |= buf_json_str(v, m.content.p, m.content.n);
		} else {
			const cJSON *c = json_get(msg, "content"), *part;
			bool pfirst = true;

			rc |= buf_puts(v, "[");
			if (cJSON_IsString(c)) {
				rc |= buf_puts(v, "{\"type\": \"text\", \"text\": ");
				rc |= buf_json_str(v, c->valuestring, strlen(c->valuestring));
				rc |= buf_puts(v, "}");
			} else if (cJSON_IsArray(c)) {
				cJSON_ArrayForEach(part, c)
				{
					int prc;

					if (!pfirst)
						rc |= buf_puts(v, ", ");
					pfirst = false;
					prc = openai_part(v, part, m.role == ROLE_SYSTEM, why);
					if (prc != CHAT_OK) {
						rc = prc;
						goto out;
					}
				}
			}
			rc |= buf_puts(v, "]");
		}
		if (rc) {
			rc = -ENOMEM;
			goto out;
		}
		if (m.role == ROLE_ASSISTANT) {
			calls = pj_member(pm, "tool_calls");
			if (m.tool_calls && calls && calls->t == PJ_ARR && calls->child) {
				rc |= buf_puts(v, ", \"tool_calls\": ");
				if ((rc = vars_tool_calls(v, calls, why)) != CHAT_OK)
					goto out;
			}
			if (m.has_reasoning) {
				rc |= buf_puts(v, ", \"reasoning\": ");
				rc |= buf_json_str(v, m.reasoning.p, m.reasoning.n);
				rc |= buf_puts(v, ", \"reasoning_content\": ");
				rc |= buf_json_str(v, m.reasoning.p, m.reasoning.n);
			}
		} else if (m.role == ROLE_TOOL && (id = pj_member(pm, "tool_call_id"))) {
			rc |= buf_puts(v, ", \"tool_call_id\": ");
			rc |= pj_dump(v, id);
		}
		if ((name = pj_member(pm, "name")) && name->t == PJ_STR) {
			rc |= buf_puts(v, ", \"name\": ");
			rc |= pj_dump(v, name);
		}
		rc |= buf_puts(v, "}");
		if (rc) {
			rc = -ENOMEM;
			goto out;
		}
		pm = pm->next;
	}
	rc |= buf_puts(v, "], \"tools\": ");
	ptools = pj_member(raw, "tools");
	*tools_given = ptools && ptools->t == PJ_ARR && ptools->child;
	if (*tools_given) {
		if ((rc = vars_tools(v, ptools, why)) != CHAT_OK)
			goto out;
	} else if (ptools && ptools->t != PJ_NULL && ptools->t != PJ_ARR) {
		*why = "tools is not a list";
		rc = CHAT_INVALID;
		goto out;
	} else {
		rc |= buf_puts(v, "null");
	}
	rc |= buf_puts(v, ", \"documents\": ");
	rc |= docs ? pj_dump(v, docs) : buf_puts(v, "null");
	rc |= buf_printf(v, ", \"add_generation_prompt\": %s", gen_prompt ? "true" : "false");
	if (rc) {
		rc = -ENOMEM;
		goto out;
	}
	pkw = pj_member(raw, "chat_template_kwargs");
	if ((rc = vars_kwargs_merged(v, pkw, server_kw, why)) != CHAT_OK)
		goto out;
	if (docs && docs->t != PJ_NULL) {
		/* build_chat_params puts the request's documents over the kwargs' (merge_kwargs) */
		rc |= buf_puts(v, ", \"documents\": ");
		rc |= pj_dump(v, docs);
	}
	if (effort) {
		/* build_chat_params: reasoning_effort reaches the template, and unless the
		 * request's chat_template_kwargs names enable_thinking, enable_thinking = effort !=
		 * "none"; both override the kwargs (the last of repeated keys wins) */
		rc |= buf_puts(v, ", \"reasoning_effort\": ");
		rc |= buf_json_str(v, effort->valuestring, strlen(effort->valuestring));
		if (!(pkw && pkw->t == PJ_OBJ && pj_member(pkw, "enable_thinking")))
			rc |= buf_printf(v, ", \"enable_thinking\": %s",
					 effort_index(effort) ? "true" : "false");
	}
	rc |= buf_puts(v, "}");
	rc = rc ? -ENOMEM : CHAT_OK;
out:
	buf_free(&scratch);
	return rc;
}

/* Per thread: the message of the last template that raised, for *why. */
static __thread char raised_msg[600];

/* transformers' continue_final_message: the rendering ends where the final message's text does
 * (the last place its stripped text occurs), so the model continues it. out[base..) is the
 * rendering; the final text must appear in it, else transformers raises (vLLM: 400). */
static int continue_final(struct buf *out, size_t base, const struct buf *final, const char **why)
{
	const char *f = final->data ? final->data : "", *r = out->data + base;
	size_t fn = final->len, rn = out->len - base, sb, se, lb, le, loc = 0, keep;
	bool found = false;

	py_strip(f, fn, NULL, 0, true, true, &sb, &se);
	py_strip(f, fn, NULL, 0, true, false, &lb, &le);
	for (size_t i = rn >= se - sb ? rn - (se - sb) + 1 : 0; i-- > 0;) {
		if (!memcmp(r + i, f + sb, se - sb)) {
			loc = i;
			found = true;
			break;
		}
	}
	if (!found) {
		*why = "continue_final_message is set but the final message does not appear in the "
		       "chat after applying the chat template!";
		return CHAT_INVALID;
	}
	/* the template kept the message's spacing (or it has none): up to its lstripped end */
	if (loc + (le - lb) <= rn && le - lb == fn && !memcmp(r + loc, f, fn))
		keep = loc + fn;
	else
		keep = loc + (se - sb);
	out->len = base + keep;
	out->data[out->len] = '\0'; /* buf's contract */
	return CHAT_OK;
}

/* --- what the workers' vLLM was started with (chat_server_configure) ------------------------ */

int chat_server_configure(const char *default_kwargs_json, bool trust_request_chat_template,
			  char *err, size_t errlen)
{
	cJSON *kw = NULL;

	if (default_kwargs_json) {
		kw = cJSON_Parse(default_kwargs_json);
		if (!cJSON_IsObject(kw)) {
			cJSON_Delete(kw);
			snprintf(err, errlen,
				 "--default-chat-template-kwargs is not a JSON object");
			return -EINVAL;
		}
	}
	cJSON_Delete(server_kwargs_cfg);
	server_kwargs_cfg = kw;
	trust_request_templates = trust_request_chat_template;
	return 0;
}

/* --- a request's own chat_template, compiled once -------------------------------------------- */

/* Compiled request templates, shared by every thread: clients that send a template send the
 * same one with every request, and compiling costs more than rendering. A few, least recently
 * used out; an entry lives while the cache or a render holds it. */
#define REQ_TMPL_SLOTS 16

struct req_tmpl {
	char *src;
	size_t len;
	uint64_t h;
	struct jinja_template *tm;
	bool openai; /* its content format */
	unsigned refs;
	uint64_t used;
};

static pthread_mutex_t req_tmpl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct req_tmpl *req_tmpl_slot[REQ_TMPL_SLOTS];
static uint64_t req_tmpl_tick;
static struct chat_req_tmpl_stats req_tmpl_st;

static void req_tmpl_destroy(struct req_tmpl *r)
{
	if (r) {
		jinja_free(r->tm);
		free(r->src);
		free(r);
	}
}

/* Drops a reference; returns r when that was the last (the caller destroys it unlocked). */
static struct req_tmpl *req_tmpl_unref_locked(struct req_tmpl *r)
{
	return r && --r->refs == 0 ? r : NULL;
}

static void req_tmpl_put(struct req_tmpl *r)
{
	pthread_mutex_lock(&req_tmpl_lock);
	r = req_tmpl_unref_locked(r);
	pthread_mutex_unlock(&req_tmpl_lock);
	req_tmpl_destroy(r);
}

void chat_req_tmpl_stats(struct chat_req_tmpl_stats *st)
{
	pthread_mutex_lock(&req_tmpl_lock);
	*st = req_tmpl_st;
	pthread_mutex_unlock(&req_tmpl_lock);
}

void chat_req_tmpl_clear(void)
{
	struct req_tmpl *dead[REQ_TMPL_SLOTS];

	pthread_mutex_lock(&req_tmpl_lock);
	for (int i = 0; i < REQ_TMPL_SLOTS; i++) {
		dead[i] = req_tmpl_unref_locked(req_tmpl_slot[i]);
		req_tmpl_slot[i] = NULL;
	}
	pthread_mutex_unlock(&req_tmpl_lock);
	for (int i = 0; i < REQ_TMPL_SLOTS; i++)
		req_tmpl_destroy(dead[i]);
}

/* The cached template of src[0..len) (hash h), held (one reference more, marked used), or NULL.
 * Under req_tmpl_lock. */
static struct req_tmpl *req_tmpl_find_locked(const char *src, size_t len, uint64_t h)
{
	for (int i = 0; i < REQ_TMPL_SLOTS; i++) {
		struct req_tmpl *e = req_tmpl_slot[i];

		if (e && e->h == h && e->len == len && memcmp(e->src, src, len) == 0) {
			e->refs++;
			e->used = ++req_tmpl_tick;
			return e;
		}
	}
	return NULL;
}

/* The compiled template of src[0..len) (held: req_tmpl_put it), from the cache or compiled
 * now. Returns CHAT_OK, CHAT_INVALID (a syntax error: jinja2's TemplateSyntaxError, vLLM's 400),
 * CHAT_UNSUPPORTED (valid Jinja the interpreter refuses) with *why, or -ENOMEM. */
static int req_tmpl_get(const char *src, size_t len, struct req_tmpl **out, const char **why)
{
	uint64_t h = XXH3_64bits(src, len);
	struct req_tmpl *r = NULL, **slot = NULL, *dead;
	struct jinja_error je;
	int rc;

	pthread_mutex_lock(&req_tmpl_lock);
	if ((r = req_tmpl_find_locked(src, len, h))) {
		req_tmpl_st.hits++;
		pthread_mutex_unlock(&req_tmpl_lock);
		*out = r;
		return CHAT_OK;
	}
	pthread_mutex_unlock(&req_tmpl_lock);

	/* compiled outside the lock: another thread may compile the same text meanwhile; the
	 * later one to finish finds the first's in the cache and uses it */
	if (!(r = calloc(1, sizeof(*r))) || !(r->src = malloc(len + 1))) {
		free(r);
		return -ENOMEM;
	}
	memcpy(r->src, src, len);
	r->src[len] = '\0';
	r->len = len;
	r->h = h;
	rc = jinja_load(r->src, len, &r->tm, &je);
	if (rc) {
		free(r->src);
		free(r);
		if (rc == -ENOMEM)
			return rc;
		pthread_mutex_lock(&req_tmpl_lock);
		req_tmpl_st.refused++;
		pthread_mutex_unlock(&req_tmpl_lock);
		snprintf(raised_msg, sizeof(raised_msg),
			 "the request's chat_template: %s (line %d): %s", jinja_status_name(rc),
			 je.line, je.msg);
		*why = raised_msg;
		return rc == JINJA_SYNTAX ? CHAT_INVALID : CHAT_UNSUPPORTED;
	}
	r->openai = loops_over_content(r->src);
	r->refs = 2; /* the cache's and the caller's */
	pthread_mutex_lock(&req_tmpl_lock);
	req_tmpl_st.compiles++;
	if ((dead = req_tmpl_find_locked(src, len, h))) {
		/* another thread compiled it meanwhile: use that one, drop this */
		pthread_mutex_unlock(&req_tmpl_lock);
		req_tmpl_destroy(r);
		*out = dead;
		return CHAT_OK;
	}
	for (int i = 0; i < REQ_TMPL_SLOTS; i++) {
		if (!req_tmpl_slot[i]) {
			slot = &req_tmpl_slot[i];
			break;
		}
		if (!slot || req_tmpl_slot[i]->used < (*slot)->used)
			slot = &req_tmpl_slot[i];
	}
	dead = req_tmpl_unref_locked(*slot);
	*slot = r;
	r->used = ++req_tmpl_tick;
	pthread_mutex_unlock(&req_tmpl_lock);
	req_tmpl_destroy(dead);
	*out = r;
	return CHAT_OK;
}

int chat_tmpl_render(const struct chat_tmpl *t, const cJSON *req, const char *json, size_t len,
		     const cJSON *server_kwargs, struct buf *out, const char **why)
{
	struct buf vars = {0}, final = {0};
	struct pj *raw = NULL;
	struct jinja_error je;
	const struct jinja_template *tm;
	const cJSON *own;
	struct req_tmpl *rt = NULL;
	struct chat_tmpl view;
	bool tools_given = false, cont = false;
	size_t base = out->len;
	const char *dummy;
	int rc;

	if (!why)
		why = &dummy;
	if (!server_kwargs)
		server_kwargs = server_kwargs_cfg;
	own = json_get(req, "chat_template");
	if (is_null_or_absent(own) || !trust_request_templates) {
		own = NULL;
	} else if (cJSON_IsString(own) && !own->valuestring[0]) {
		own = NULL; /* `request.chat_template or default_template`: "" is the model's */
	} else if (!cJSON_IsString(own)) {
		*why = "chat_template is not a string";
		return CHAT_INVALID;
	} else if (!t) {
		*why = "a request's chat_template for a model without tokenizer_config.json (its "
		       "special tokens are not known)";
		return CHAT_UNSUPPORTED;
	}
	if (!t)
		return chat_render_parsed(req, json, len, server_kwargs, out, why);
	/* the hand-written Qwen3 renderer, unless the request asks for what only the interpreter
	 * renders */
	if (t->qwen3 && !own && !cJSON_IsTrue(json_get(req, "continue_final_message")) &&
	    is_null_or_absent(json_get(req, "documents")))
		return chat_render_parsed(req, json, len, server_kwargs, out, why);
	if (!cJSON_IsObject(req)) {
		*why = "request is not a JSON object";
		return CHAT_INVALID;
	}
	if (own) {
		/* vLLM's --trust-request-chat-template: the request's template replaces the model's
		 * (no tool_use choice), with its own content format; the special tokens stay */
		rc = req_tmpl_get(own->valuestring, strlen(own->valuestring), &rt, why);
		if (rc != CHAT_OK)
			return rc;
		view = *t;
		view.def = rt->tm;
		view.tool_use = NULL;
		view.openai = rt->openai;
		view.qwen3 = false;
		t = &view;
	}
	rc = pj_parse(json, len, &raw, why);
	if (rc != CHAT_OK)
		goto out;
	rc = vars_build(t, req, raw, server_kwargs, &vars, &tools_given, &cont, &final, why);
	if (rc != CHAT_OK)
		goto out;
	tm = tools_given && t->tool_use ? t->tool_use : t->def ? t->def : t->tool_use;
	rc = jinja_render(tm, vars.data, vars.len, NULL, NULL, out, &je);
	if (rc == -ENOMEM)
		goto out;
	switch (rc) {
	case JINJA_OK:
		rc = cont ? continue_final(out, base, &final, why) : CHAT_OK;
		if (rc != CHAT_OK && out->data) {
			out->len = base;
			out->data[base] = '\0';
		}
		break;
	case JINJA_RAISED:
	case JINJA_UNDEFINED:
	case JINJA_TYPE:
		/* the template raised: vLLM answers 400 with its message */
		snprintf(raised_msg, sizeof(raised_msg), "chat template error: %s", je.msg);
		*why = raised_msg;
		rc = CHAT_INVALID;
		break;
	default:
		snprintf(raised_msg, sizeof(raised_msg), "chat template not rendered here (%s): %s",
			 jinja_status_name(rc), je.msg);
		*why = raised_msg;
		rc = CHAT_UNSUPPORTED;
		break;
	}
out:
	buf_free(&vars);
	buf_free(&final);
	pj_free(raw);
	if (rt)
		req_tmpl_put(rt);
	return rc;
}
