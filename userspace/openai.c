// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "chat.h"
#include "openai.h"
#include "tokenizer.h"

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

static int take_ids(const struct tokenizer *t, const cJSON *arr, struct openai_req *r,
		    const char **why)
{
	size_t vocab = t ? tokenizer_vocab_size(t) : UINT32_MAX;
	const cJSON *e;

	if (cJSON_GetArraySize(arr) == 0) {
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
		if (tok_ids_push(&r->prompt, (uint32_t)id))
			return -ENOMEM;
	}
	r->prompt_was_ids = true;
	return OPENAI_OK;
}

static int take_text(const struct tokenizer *t, const char *s, size_t n, struct openai_req *r,
		     const char **why)
{
	if (!t) {
		*why = "no tokenizer loaded";
		return OPENAI_UNSUPPORTED;
	}
	if (tokenizer_encode(t, s, n, &r->prompt))
		return -ENOMEM;
	return OPENAI_OK;
}

static int parse_prompt(const struct tokenizer *t, const cJSON *p, struct openai_req *r,
			const char **why)
{
	const cJSON *first;

	if (cJSON_IsString(p)) {
		if (!p->valuestring[0]) {
			*why = "The prompt cannot be empty";
			return OPENAI_INVALID;
		}
		return take_text(t, p->valuestring, strlen(p->valuestring), r, why);
	}
	if (!cJSON_IsArray(p)) {
		*why = "prompt must be a string, an array of strings, or an array of token ids";
		return OPENAI_INVALID;
	}
	first = p->child;
	if (!first) {
		*why = "The prompt cannot be empty";
		return OPENAI_INVALID;
	}
	if (cJSON_IsNumber(first))
		return take_ids(t, p, r, why);
	if (first->next) {
		*why = "batched prompts (more than one prompt in a request)";
		return cJSON_IsString(first) || cJSON_IsArray(first) ? OPENAI_UNSUPPORTED
								     : OPENAI_INVALID;
	}
	if (cJSON_IsString(first)) {
		if (!first->valuestring[0]) {
			*why = "The prompt cannot be empty";
			return OPENAI_INVALID;
		}
		return take_text(t, first->valuestring, strlen(first->valuestring), r, why);
	}
	if (cJSON_IsArray(first))
		return take_ids(t, first, r, why);
	*why = "prompt must be a string, an array of strings, or an array of token ids";
	return OPENAI_INVALID;
}

static int parse_common(const cJSON *root, struct openai_req *r, const char **why)
{
	const cJSON *j;
	int64_t v;

	j = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsString(j)) {
			*why = "model must be a string";
			return OPENAI_INVALID;
		}
		r->model = strdup(j->valuestring);
		if (!r->model)
			return -ENOMEM;
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "stream");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsBool(j)) {
			*why = "stream must be a boolean";
			return OPENAI_INVALID;
		}
		r->stream = cJSON_IsTrue(j);
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
	if (j && !cJSON_IsNull(j)) {
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "include_usage");

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
	j = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens");
	if (!j || cJSON_IsNull(j) || r->endpoint != OPENAI_CHAT)
		j = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
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
	j = cJSON_GetObjectItemCaseSensitive(root, "seed");
	if (j && !cJSON_IsNull(j)) {
		if (!json_int(j, -9.2e18, 9.2e18, &v)) {
			*why = "seed must be an integer";
			return OPENAI_INVALID;
		}
		r->seed = v;
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "n");
	if (j && !cJSON_IsNull(j) && (!json_int(j, 1, 1e9, &v))) {
		*why = "n must be a positive integer";
		return OPENAI_INVALID;
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "cache_salt");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsString(j) || !j->valuestring[0]) {
			*why = "cache_salt must be a non-empty string";
			return OPENAI_INVALID;
		}
		r->cache_salt = strdup(j->valuestring);
		if (!r->cache_salt)
			return -ENOMEM;
	}
	if (cJSON_GetObjectItemCaseSensitive(root, "prompt_embeds")) {
		*why = "prompt_embeds";
		return OPENAI_UNSUPPORTED;
	}
	return OPENAI_OK;
}

int openai_parse(const struct tokenizer *t, enum openai_endpoint ep, const char *body, size_t len,
		 struct openai_req *r, const char **why)
{
	cJSON *root = NULL;
	struct buf text = {0};
	const cJSON *j;
	int rc;

	*why = NULL;
	r->endpoint = ep;
	r->max_tokens = -1;
	r->seed = -1;
	if (ep != OPENAI_COMPLETIONS && ep != OPENAI_CHAT) {
		*why = "not an OpenAI completions endpoint";
		return OPENAI_UNSUPPORTED;
	}
	if (ep == OPENAI_CHAT && (rc = chat_raw_check(body, len, why)) != CHAT_OK) {
		rc = rc < 0 ? rc : OPENAI_UNSUPPORTED;
		goto cleanup;
	}
	root = cJSON_ParseWithLength(body, len);
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
		j = cJSON_GetObjectItemCaseSensitive(root, "prompt");
		if (!j || cJSON_IsNull(j)) {
			*why = "Either prompt or prompt_embeds must be provided and non-empty.";
			rc = OPENAI_INVALID;
			goto cleanup;
		}
		rc = parse_prompt(t, j, r, why);
		goto cleanup;
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "messages");
	if (!cJSON_IsArray(j)) {
		*why = "messages must be an array";
		rc = OPENAI_INVALID;
		goto cleanup;
	}
	rc = chat_render_parsed(root, body, len, NULL, &text, why);
	if (rc != CHAT_OK) {
		rc = rc < 0 ? rc : rc == CHAT_UNSUPPORTED ? OPENAI_UNSUPPORTED : OPENAI_INVALID;
		goto cleanup;
	}
	rc = take_text(t, text.data ? text.data : "", text.len, r, why);
cleanup:
	buf_free(&text);
	cJSON_Delete(root);
	return rc;
}

void openai_req_free(struct openai_req *r)
{
	free(r->model);
	free(r->cache_salt);
	tok_ids_free(&r->prompt);
	memset(r, 0, sizeof(*r));
	r->max_tokens = -1;
	r->seed = -1;
}
