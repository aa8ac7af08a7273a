// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "prompt/chat.h"
#include "core/json.h"
#include "prompt/openai.h"
#include "prompt/tokenizer.h"

static bool is_path(const char *path, size_t plen, const char *want)
{
	size_t n = strlen(want);

	/* The path, optionally followed by a query string. */
	return plen >= n && memcmp(path, want, n) == 0 && (plen == n || path[n] == '?');
}

enum openai_endpoint openai_endpoint_of(const char *method, size_t mlen, const char *path,
					size_t plen)
{
	if (mlen != 4 || memcmp(method, "POST", 4) != 0)
		return OPENAI_NONE;
	if (is_path(path, plen, "/v1/completions"))
		return OPENAI_COMPLETIONS;
	if (is_path(path, plen, "/v1/chat/completions"))
		return OPENAI_CHAT;
	return OPENAI_NONE;
}

/* A JSON number that is an integer in [lo, hi]. */
static bool json_int(const cJSON *j, double lo, double hi, int64_t *out)
{
	double v;

	if (!cJSON_IsNumber(j))
		return false;
	v = j->valuedouble;
	if (!isfinite(v) || v != floor(v) || v < lo || v > hi)
		return false;
	*out = (int64_t)v;
	return true;
}

/* The reason given for a prompt of none of the four shapes vLLM's request model accepts. */
#define PROMPT_SHAPE "prompt must be a string, an array of strings, or an array of token ids"

/* Checks one token-id prompt as vLLM does before using it as is: non-empty, integers, inside the
 * vocabulary (bounded by t's vocabulary size, or by 2^32 without a tokenizer). Returns OPENAI_OK
 * or OPENAI_INVALID with *why. */
static int check_ids(const struct tokenizer *t, const cJSON *arr, const char **why)
{
	size_t vocab = t ? tokenizer_vocab_size(t) : UINT32_MAX;
	const cJSON *e;

	if (!arr->child) {
		*why = "The prompt cannot be empty";
		return OPENAI_INVALID;
	}
	cJSON_ArrayForEach(e, arr)
	{
		int64_t id;

		if (!json_int(e, 0, 4294967295.0, &id)) {
			*why = "prompt token ids must be non-negative integers";
			return OPENAI_INVALID;
		}
		if ((uint64_t)id >= vocab) {
			*why = "prompt contains a token id that is out of vocabulary";
			return OPENAI_INVALID;
		}
	}
	return OPENAI_OK;
}

/* Takes a token-id prompt (checked with check_ids) as the engine's prompt, as is. Returns an
 * openai_status or -ENOMEM. */
static int take_ids(const struct tokenizer *t, const cJSON *arr, struct openai_req *r,
		    const char **why)
{
	const cJSON *e;
	int rc = check_ids(t, arr, why);

	if (rc != OPENAI_OK)
		return rc;
	cJSON_ArrayForEach(e, arr)
	{
		if (tok_ids_push(&r->prompt, (uint32_t)e->valuedouble))
			return -ENOMEM;
	}
	r->prompt_was_ids = true;
	return OPENAI_OK;
}

/* A text prompt: tokenized through tc, or with defer kept in r->text for the caller. */
static int take_text(const struct tokenizer *t, struct tok_cache *tc, bool defer, const char *s,
		     size_t n, struct openai_req *r, const char **why)
{
	int rc;

	if (!t) {
		*why = "no tokenizer loaded";
		return OPENAI_UNSUPPORTED;
	}
	if (defer) {
		r->text.len = 0;
		if (buf_append(&r->text, s, n))
			return -ENOMEM;
		r->text_pending = true;
		return OPENAI_OK;
	}
	rc = tokenizer_encode_special(t, tc, s, n, r->add_special_tokens, &r->prompt);
	if (rc == -E2BIG) {
		*why = "the prompt's split ran out of its step budget (not tokenized exactly)";
		return OPENAI_UNSUPPORTED;
	}
	return rc < 0 ? rc : OPENAI_OK;
}

/* Reads "prompt" in any of the four shapes vLLM accepts: a string, a list of strings, a list of
 * token ids, a list of lists of token ids. A batch is read as its first prompt (nprompts says how
 * many there were), but every prompt of it is checked, because vLLM refuses the whole request
 * with a 400 when one of them is bad (another shape than the first, an empty string or id list,
 * an id that is not a non-negative integer or lies outside the vocabulary): routing such a request
 * as if it were fine would count a prefix the engine never sees. Only the first is tokenized: the
 * others cost a walk over the tree, not an encode. Returns an openai_status or -ENOMEM. */
static int parse_prompt(const struct tokenizer *t, struct tok_cache *tc, bool defer, const cJSON *p,
			struct openai_req *r, const char **why)
{
	const cJSON *first, *e;
	size_t n = 0;
	int rc;

	r->nprompts = 1;
	if (cJSON_IsString(p)) {
		if (!p->valuestring[0]) {
			*why = "The prompt cannot be empty";
			return OPENAI_INVALID;
		}
		return take_text(t, tc, defer, p->valuestring, strlen(p->valuestring), r, why);
	}
	if (!cJSON_IsArray(p)) {
		*why = PROMPT_SHAPE;
		return OPENAI_INVALID;
	}
	first = p->child;
	if (!first) {
		*why = "The prompt cannot be empty";
		return OPENAI_INVALID;
	}
	/* One prompt of ids: a non-number in it is refused by take_ids. */
	if (cJSON_IsNumber(first))
		return take_ids(t, p, r, why);
	if (!cJSON_IsString(first) && !cJSON_IsArray(first)) {
		*why = PROMPT_SHAPE;
		return OPENAI_INVALID;
	}
	/* A batch: every element the same kind as the first, each a valid prompt of its own. */
	cJSON_ArrayForEach(e, p)
	{
		n++;
		if (cJSON_IsString(first)) {
			if (!cJSON_IsString(e)) {
				*why = PROMPT_SHAPE;
				return OPENAI_INVALID;
			}
			if (!e->valuestring[0]) {
				*why = "The prompt cannot be empty";
				return OPENAI_INVALID;
			}
			continue;
		}
		if (!cJSON_IsArray(e)) {
			*why = PROMPT_SHAPE;
			return OPENAI_INVALID;
		}
		rc = check_ids(t, e, why);
		if (rc != OPENAI_OK)
			return rc;
	}
	r->nprompts = n;
	if (cJSON_IsString(first))
		return take_text(t, tc, defer, first->valuestring, strlen(first->valuestring), r,
				 why);
	return take_ids(t, first, r, why);
}

static int parse_common(const cJSON *root, struct openai_req *r, const char **why)
{
	const cJSON *j;
	int64_t v;

	j = json_get(root, "model");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsString(j)) {
			*why = "model must be a string";
			return OPENAI_INVALID;
		}
		r->model = strdup(j->valuestring);
		if (!r->model)
			return -ENOMEM;
	}
	j = json_get(root, "stream");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsBool(j)) {
			*why = "stream must be a boolean";
			return OPENAI_INVALID;
		}
		r->stream = cJSON_IsTrue(j);
	}
	j = json_get(root, "stream_options");
	if (j && !cJSON_IsNull(j)) {
		const cJSON *u = json_get(j, "include_usage");

		if (!cJSON_IsObject(j) || (u && !cJSON_IsNull(u) && !cJSON_IsBool(u))) {
			*why = "stream_options must be an object with a boolean include_usage";
			return OPENAI_INVALID;
		}
		if (!r->stream) {
			*why = "Stream options can only be defined when `stream=True`.";
			return OPENAI_INVALID;
		}
		r->include_usage = cJSON_IsTrue(u);
	}
	r->max_tokens = -1;
	j = json_get(root, "max_completion_tokens");
	if (!j || cJSON_IsNull(j) || r->endpoint != OPENAI_CHAT)
		j = json_get(root, "max_tokens");
	if (j && !cJSON_IsNull(j)) {
		if (!json_int(j, -9e15, 9e15, &v)) {
			*why = "max_tokens must be an integer";
			return OPENAI_INVALID;
		}
		if (v < 1) {
			*why = "max_tokens must be at least 1";
			return OPENAI_INVALID;
		}
		r->max_tokens = v;
	}
	r->seed = -1;
	j = json_get(root, "seed");
	if (j && !cJSON_IsNull(j)) {
		if (!json_int(j, -9.2e18, 9.2e18, &v)) {
			*why = "seed must be an integer";
			return OPENAI_INVALID;
		}
		r->seed = v;
	}
	j = json_get(root, "n");
	if (j && !cJSON_IsNull(j) && (!json_int(j, 1, 1e9, &v))) {
		*why = "n must be a positive integer";
		return OPENAI_INVALID;
	}
	/* vLLM's defaults: true for /v1/completions (the post-processor adds BOS where the model
	 * has one), false for chat (the template writes its own BOS). */
	r->add_special_tokens = r->endpoint == OPENAI_COMPLETIONS;
	j = json_get(root, "add_special_tokens");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsBool(j)) {
			*why = "add_special_tokens must be a boolean";
			return OPENAI_INVALID;
		}
		r->add_special_tokens = cJSON_IsTrue(j);
	}
	j = json_get(root, "cache_salt");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsString(j) || !j->valuestring[0]) {
			*why = "cache_salt must be a non-empty string";
			return OPENAI_INVALID;
		}
		r->cache_salt = strdup(j->valuestring);
		if (!r->cache_salt)
			return -ENOMEM;
	}
	if (json_get(root, "prompt_embeds")) {
		*why = "prompt_embeds";
		return OPENAI_UNSUPPORTED;
	}
	return OPENAI_OK;
}

int openai_parse(const struct tokenizer *t, enum openai_endpoint ep, const char *body, size_t len,
		 struct openai_req *r, const char **why)
{
	return openai_parse_cached(t, NULL, ep, body, len, r, why);
}

static int parse_body(const struct tokenizer *t, const struct chat_tmpl *chat, struct tok_cache *tc,
		      bool defer, enum openai_endpoint ep, const char *body, size_t len,
		      struct openai_req *r, const char **why)
{
	cJSON *root = NULL;
	struct buf text = {0};
	const cJSON *j;
	bool strict;
	int rc;

	*why = NULL;
	r->endpoint = ep;
	r->max_tokens = -1;
	r->seed = -1;
	if (ep != OPENAI_COMPLETIONS && ep != OPENAI_CHAT) {
		*why = "not an OpenAI completions endpoint";
		return OPENAI_UNSUPPORTED;
	}
	root = json_parse_reader(body, len, &strict);
	/* \u0000, the escape cJSON cuts a string at: the strict reader declines it, so only a chat
	 * body cJSON read (or none could) is looked through for one */
	if (ep == OPENAI_CHAT && !strict && (rc = chat_raw_check(body, len, why)) != CHAT_OK) {
		rc = rc < 0 ? rc : OPENAI_UNSUPPORTED;
		goto cleanup;
	}
	if (!root) {
		*why = "the request body is not valid JSON";
		rc = OPENAI_INVALID;
		goto cleanup;
	}
	if (!cJSON_IsObject(root)) {
		*why = "the request body must be a JSON object";
		rc = OPENAI_INVALID;
		goto cleanup;
	}
	rc = parse_common(root, r, why);
	if (rc != OPENAI_OK)
		goto cleanup;
	if (ep == OPENAI_COMPLETIONS) {
		j = json_get(root, "prompt");
		if (!j || cJSON_IsNull(j)) {
			*why = "Either prompt or prompt_embeds must be provided and non-empty.";
			rc = OPENAI_INVALID;
			goto cleanup;
		}
		rc = parse_prompt(t, tc, defer, j, r, why);
		goto cleanup;
	}
	j = json_get(root, "messages");
	if (!cJSON_IsArray(j)) {
		*why = "messages must be an array";
		rc = OPENAI_INVALID;
		goto cleanup;
	}
	r->nprompts = 1;
	rc = chat_tmpl_render(chat, root, body, len, NULL, &text, why);
	if (rc != CHAT_OK) {
		rc = rc < 0 ? rc : rc == CHAT_UNSUPPORTED ? OPENAI_UNSUPPORTED : OPENAI_INVALID;
		goto cleanup;
	}
	if (defer && t) { /* the rendered text is the prompt: handed over, not copied */
		buf_free(&r->text);
		r->text = text;
		text = (struct buf){0};
		r->text_pending = true;
		rc = OPENAI_OK;
	} else {
		rc = take_text(t, tc, false, text.data ? text.data : "", text.len, r, why);
	}
cleanup:
	buf_free(&text);
	cJSON_Delete(root);
	return rc;
}

int openai_parse_cached(const struct tokenizer *t, struct tok_cache *tc, enum openai_endpoint ep,
			const char *body, size_t len, struct openai_req *r, const char **why)
{
	return parse_body(t, NULL, tc, false, ep, body, len, r, why);
}

int openai_parse_text(const struct tokenizer *t, struct tok_cache *tc, enum openai_endpoint ep,
		      const char *body, size_t len, struct openai_req *r, const char **why)
{
	return parse_body(t, NULL, tc, true, ep, body, len, r, why);
}

int openai_parse_with(const struct tokenizer *t, const struct chat_tmpl *chat, struct tok_cache *tc,
		      bool defer, enum openai_endpoint ep, const char *body, size_t len,
		      struct openai_req *r, const char **why)
{
	return parse_body(t, chat, tc, defer, ep, body, len, r, why);
}

void openai_req_free(struct openai_req *r)
{
	free(r->model);
	free(r->cache_salt);
	tok_ids_free(&r->prompt);
	buf_free(&r->text);
	memset(r, 0, sizeof(*r));
	r->max_tokens = -1;
	r->seed = -1;
}

/* The usage scanner. Why a byte-level scanner and not a JSON parser: the proxy relays the response
 * as it comes and must not hold it (a long completion, or a stream that lasts minutes), so the
 * figures are picked up as the bytes pass, in a few bytes of state. Why it follows strings: the
 * completion text is model output, and a model asked to write about the OpenAI API writes
 * "cached_tokens": 5 (escaped, inside a string); only a key outside every string counts. A key is
 * a string followed by ':', which in valid JSON only an object key is. A raw newline never occurs
 * inside a JSON string (it is written \n), so one ends the string: a body that is not JSON (an
 * error page with a stray quote) cannot leave the scanner inside a string for the rest of a
 * stream, since SSE events end with a newline. */
enum usage_state {
	US_OUT = 0,    /* outside any string: only '"' matters */
	US_STR,	       /* inside a string */
	US_AFTER_KEY,  /* after a string spelling a wanted key: ':' makes it a key */
	US_BEFORE_NUM, /* after the key's ':': the value starts */
	US_NUM,	       /* in the digits of the value */
};

/* The wanted keys, all USAGE_KEYLEN bytes long; bit i of keymask is usage_keys[i]. */
#define USAGE_KEYLEN 13
static const char usage_keys[][USAGE_KEYLEN + 1] = {"prompt_tokens", "cached_tokens"};
#define USAGE_NKEYS (sizeof(usage_keys) / sizeof(usage_keys[0]))
/* Most digits of a value kept (10^18 - 1 fits an int64_t); a longer value is ignored. */
#define USAGE_MAXDIG 18

/* The bytes that end a run of plain string bytes: quote, backslash, raw newline. */
static const bool usage_str_stop[256] = {['"'] = true, ['\\'] = true, ['\n'] = true};

static bool usage_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void openai_usage_init(struct openai_usage *u)
{
	memset(u, 0, sizeof(*u));
	u->prompt_tokens = -1;
	u->cached_tokens = -1;
	u->st = US_OUT;
}

/* Feeds body bytes p[0..n) (any split; n may be 0). Each byte is looked at once: outside strings
 * by memchr for '"', inside a string that can no longer be a wanted key by one table load. A state
 * that the byte does not continue falls back to US_OUT and looks at the same byte again. */
void openai_usage_feed(struct openai_usage *u, const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)p[i];
		const char *q;

		switch (u->st) {
		case US_OUT:
			q = memchr(p + i, '"', n - i);
			if (!q)
				return;
			i = (size_t)(q - p) + 1;
			u->st = US_STR;
			u->esc = false;
			u->keypos = 0;
			u->keymask = (1u << USAGE_NKEYS) - 1;
			continue;
		case US_STR:
			if (u->esc) {
				/* an escaped byte (\" \\ \n \uXXXX...): text, but a key written
				 * with escapes is not matched */
				u->esc = false;
				u->keymask = 0;
				if (c == '\n')
					u->st = US_OUT;
				i++;
				continue;
			}
			if (!u->keymask) {
				while (i < n && !usage_str_stop[(unsigned char)p[i]])
					i++;
				if (i == n)
					return;
				c = (unsigned char)p[i];
			}
			if (c == '"') {
				u->st =
				    u->keymask && u->keypos == USAGE_KEYLEN ? US_AFTER_KEY : US_OUT;
			} else if (c == '\\') {
				u->esc = true;
			} else if (c == '\n') {
				u->st = US_OUT;
			} else if (u->keypos < USAGE_KEYLEN) {
				for (size_t k = 0; k < USAGE_NKEYS; k++)
					if (c != (unsigned char)usage_keys[k][u->keypos])
						u->keymask &= (uint8_t) ~(1u << k);
				u->keypos++;
			} else {
				u->keymask = 0;
			}
			i++;
			continue;
		case US_AFTER_KEY:
			if (usage_ws(c)) {
				i++;
			} else if (c == ':') {
				u->st = US_BEFORE_NUM;
				i++;
			} else {
				u->st = US_OUT; /* a string value, not a key */
			}
			continue;
		case US_BEFORE_NUM:
			if (usage_ws(c)) {
				i++;
			} else if (c >= '0' && c <= '9') {
				u->num = c - '0';
				u->ndig = 1;
				u->st = US_NUM;
				i++;
			} else {
				u->st = US_OUT; /* null, a negative number, a string, an object:
						   ignored */
			}
			continue;
		case US_NUM:
			if (c >= '0' && c <= '9') {
				if (u->ndig < USAGE_MAXDIG)
					u->num = u->num * 10 + (c - '0');
				u->ndig = u->ndig < USAGE_MAXDIG ? u->ndig + 1 : USAGE_MAXDIG + 1;
				i++;
				continue;
			}
			/* the value ends here; a fraction or an exponent makes it no integer */
			if (c != '.' && c != 'e' && c != 'E' && u->ndig <= USAGE_MAXDIG) {
				if (u->keymask & 1u)
					u->prompt_tokens = u->num;
				else
					u->cached_tokens = u->num;
			}
			u->st = US_OUT;
			continue;
		default:
			u->st = US_OUT;
			continue;
		}
	}
}
