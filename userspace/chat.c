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
 * - Assistant tool_calls: [] or null render nothing; a non-empty list -> UNSUPPORTED (arguments
 *   are re-serialised by Python's json.dumps, not reproduced here). Request "tools" non-empty ->
 *   UNSUPPORTED. continue_final_message true -> UNSUPPORTED. A request "chat_template" other
 *   than this template -> UNSUPPORTED.
 * - Roles: user/system/assistant/tool are rendered as the template does; any other role string
 *   (e.g. "developer") is accepted by vLLM and the template renders nothing for it, so neither
 *   do we.
 * - Kwargs: add_generation_prompt is the request field (default true). enable_thinking comes
 *   from chat_template_kwargs, else (newest vLLM) from reasoning_effort (!= "none"), else from
 *   the server's --default-chat-template-kwargs; only a JSON false adds "<think>\n\n</think>\n\n"
 *   (jinja's "is false" is an identity test). Where vLLM versions disagree (reasoning_effort
 *   "none", kwargs that shadow request fields) -> UNSUPPORTED. Other kwargs the template does not
 *   read have no effect.
 * - JSON objects with a repeated key: Python keeps the LAST value, so every lookup here does too.
 * - String methods follow Python: strip('\n') strips only '\n' (note: @huggingface/jinja 0.5.11
 *   ignores the argument and strips all whitespace; tests/js/ref_chat.mjs corrects that).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "chat.h"

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
};

#define BILLING_HEADER "x-anthropic-billing-header"

/* The last member named key (Python's json keeps the last of repeated keys), or NULL. */
static const cJSON *obj_get(const cJSON *obj, const char *key)
{
	const cJSON *it, *found = NULL;

	if (!cJSON_IsObject(obj))
		return NULL;
	for (it = obj->child; it; it = it->next)
		if (it->string && strcmp(it->string, key) == 0)
			found = it;
	return found;
}

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

/* Keys whose presence in a content part makes vLLM treat it as media (MM_PARSER_MAP minus the
 * text types), whatever its "type". */
static const char *const media_keys[] = {
	"image_url",	 "input_image", "image_embeds", "audio_embeds", "video_embeds",
	"prompt_embeds", "image_pil",	"audio_url",	"input_audio",	"video_url",
	"tool_reference",
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
		if (obj_get(part, media_keys[i])) {
			*why = "non-text content part (image, audio, video, embeddings, tool_reference)";
			return CHAT_UNSUPPORTED;
		}
	}
	if (!is_null_or_absent(obj_get(part, "uuid"))) {
		*why = "content part with a uuid";
		return CHAT_UNSUPPORTED;
	}
	type = obj_get(part, "type");
	if (is_null_or_absent(type)) {
		*why = "content part without a type";
		return CHAT_INVALID;
	}
	if (!cJSON_IsString(type)) {
		*why = "content part type is not a string";
		return CHAT_INVALID;
	}
	if (strcmp(type->valuestring, "text") == 0 || strcmp(type->valuestring, "input_text") == 0 ||
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
	val = obj_get(part, key);
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
		*why = "system text starting with x-anthropic-billing-header (vLLM versions differ)";
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
			*why = "system text starting with x-anthropic-billing-header (vLLM versions "
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
	role = obj_get(msg, "role");
	if (!cJSON_IsString(role)) {
		*why = "a message has no string role";
		return CHAT_INVALID;
	}
	m->role_name = role->valuestring;
	m->role = role_of(role->valuestring);
	rc = content_flatten(obj_get(msg, "content"), m, m->role == ROLE_SYSTEM, scratch, why);
	if (rc != CHAT_OK)
		return rc;
	if (m->role != ROLE_ASSISTANT)
		return CHAT_OK;

	calls = obj_get(msg, "tool_calls");
	if (!is_null_or_absent(calls)) {
		if (!cJSON_IsArray(calls)) {
			*why = "assistant tool_calls is not a list";
			return CHAT_INVALID;
		}
		if (cJSON_GetArraySize(calls) > 0) {
			*why = "assistant message with tool_calls";
			return CHAT_UNSUPPORTED;
		}
	}
	/* protocol.py: reasoning_content is renamed to reasoning unless reasoning is set. */
	reasoning = obj_get(msg, "reasoning");
	if (is_null_or_absent(reasoning))
		reasoning = obj_get(msg, "reasoning_content");
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
	"add_generation_prompt", "continue_final_message", "tools",	     "messages",
	"namespace",		 "chat_template",	   "tokenize",	     "conversation",
	"padding",		 "truncation",		   "max_length",     "return_tensors",
	"return_dict",		 "return_assistant_tokens_mask", "tokenizer_kwargs", "processor_kwargs",
};

static int kwargs_check(const cJSON *kw, const char **why)
{
	size_t i;

	for (i = 0; i < sizeof(kwargs_deny) / sizeof(kwargs_deny[0]); i++) {
		if (obj_get(kw, kwargs_deny[i])) {
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

/* Resolves the template's enable_thinking: *think_off is true when it is a JSON false. */
static int thinking_resolve(const cJSON *req, const cJSON *user_kw, const cJSON *server_kw,
			    bool *think_off, const char **why)
{
	static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh",
					      "max"};
	const cJSON *user = obj_get(user_kw, "enable_thinking");
	const cJSON *server = obj_get(server_kw, "enable_thinking");
	const cJSON *effort = obj_get(req, "reasoning_effort");
	const cJSON *v;
	size_t i;

	*think_off = false;
	if (!is_null_or_absent(effort)) {
		for (i = 0; i < sizeof(efforts) / sizeof(efforts[0]); i++)
			if (cJSON_IsString(effort) && strcmp(effort->valuestring, efforts[i]) == 0)
				break;
		if (i == sizeof(efforts) / sizeof(efforts[0])) {
			*why = "reasoning_effort is not a known value";
			return CHAT_INVALID;
		}
		if (!user) {
			/* Newest vLLM derives enable_thinking from it, older ones ignore it. */
			if (i == 0 || (server && cJSON_IsFalse(server))) {
				*why = "reasoning_effort without chat_template_kwargs.enable_thinking "
				       "(vLLM versions differ)";
				return CHAT_UNSUPPORTED;
			}
			return CHAT_OK; /* true or the server's non-false default: no suffix */
		}
	}
	/* merge_kwargs: the server default is overridden unless the request value is null/"auto". */
	v = user;
	if (server && (!user || cJSON_IsNull(user) || is_auto(user)))
		v = server;
	*think_off = v && cJSON_IsFalse(v);
	return CHAT_OK;
}

/* Request-level fields. Returns a chat_status; *gen_prompt, *think_off set on CHAT_OK. */
static int request_check(const cJSON *req, const cJSON *server_kw, bool *gen_prompt,
			 bool *think_off, const char **why)
{
	const cJSON *v, *kw;
	int rc;

	v = obj_get(req, "add_generation_prompt");
	*gen_prompt = true;
	if (v) {
		if (!cJSON_IsBool(v)) {
			*why = "add_generation_prompt is not a JSON boolean";
			return cJSON_IsNull(v) ? CHAT_INVALID : CHAT_UNSUPPORTED;
		}
		*gen_prompt = cJSON_IsTrue(v);
	}
	v = obj_get(req, "continue_final_message");
	if (v && !cJSON_IsFalse(v)) {
		*why = "continue_final_message";
		return CHAT_UNSUPPORTED;
	}
	v = obj_get(req, "tools");
	if (!is_null_or_absent(v)) {
		if (!cJSON_IsArray(v)) {
			*why = "tools is not a list";
			return CHAT_INVALID;
		}
		if (cJSON_GetArraySize(v) > 0) {
			*why = "request with tools";
			return CHAT_UNSUPPORTED;
		}
	}
	v = obj_get(req, "chat_template");
	if (!is_null_or_absent(v)) {
		if (!cJSON_IsString(v)) {
			*why = "chat_template is not a string";
			return CHAT_INVALID;
		}
		rc = chat_template_check(v->valuestring, strlen(v->valuestring));
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			*why = "request chat_template differs from the Qwen3 template";
			return CHAT_UNSUPPORTED;
		}
	}
	kw = obj_get(req, "chat_template_kwargs");
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

static int put(struct buf *out, struct span s)
{
	return buf_append(out, s.p, s.n);
}

/* The template's assistant branch for message i. */
static int render_assistant(struct buf *out, const struct cmsg *m, bool after_query, bool last)
{
	struct span content = m->content, reasoning = span_str("");
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
	rc |= buf_puts(out, "<|im_end|>\n");
	return rc ? -ENOMEM : 0;
}

/* The template body over parsed messages. Returns 0 or -ENOMEM. */
static int render(struct buf *out, const struct cmsg *ms, size_t n, bool gen_prompt,
		  bool think_off)
{
	size_t i, last_query = n - 1;
	int rc = 0;

	if (ms[0].role == ROLE_SYSTEM) {
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
			rc |= render_assistant(out, m, i > last_query, i == n - 1);
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

int chat_render_with(const cJSON *request, const cJSON *server_kwargs, struct buf *out,
		     const char **why)
{
	struct buf scratch = {0};
	struct cmsg *ms = NULL;
	const cJSON *messages, *msg;
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
	messages = obj_get(request, "messages");
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
	rc = render(out, ms, n, gen_prompt, think_off);
cleanup:
	if (rc != CHAT_OK && out->len > out_len) {
		out->len = out_len;
		out->data[out_len] = '\0';
	}
	buf_free(&scratch);
	free(ms);
	return rc;
}

int chat_render(const cJSON *request, struct buf *out, const char **why)
{
	return chat_render_with(request, NULL, out, why);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int chat_raw_check(const char *json, size_t len, const char **why)
{
	size_t i;

	for (i = 0; i + 1 < len; i++) {
		if (json[i] != '\\')
			continue;
		/* An escape: \u0000 is the one cJSON cannot keep; skip the escaped char either way. */
		if (json[i + 1] == 'u' && i + 5 < len && hexval(json[i + 2]) == 0 &&
		    hexval(json[i + 3]) == 0 && hexval(json[i + 4]) == 0 &&
		    hexval(json[i + 5]) == 0) {
			if (why)
				*why = "a string holds U+0000, which cJSON cannot carry";
			return CHAT_UNSUPPORTED;
		}
		i++;
	}
	return CHAT_OK;
}

int chat_render_json(const char *json, size_t len, const cJSON *server_kwargs, struct buf *out,
		     const char **why)
{
	cJSON *req;
	int rc;

	rc = chat_raw_check(json, len, why);
	if (rc != CHAT_OK)
		return rc;
	req = cJSON_ParseWithLength(json, len);
	if (!req) {
		if (why)
			*why = "request is not valid JSON";
		return CHAT_INVALID;
	}
	rc = chat_render_with(req, server_kwargs, out, why);
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
	tmpl = obj_get(cfg, "chat_template");
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
