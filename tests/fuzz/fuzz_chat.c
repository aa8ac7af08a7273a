// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/chat. Input starting with '{' or '[' is a request as JSON
 * text (chat_render_json: raw check, cJSON parse, render). Any other input drives a small builder
 * that assembles a well-formed request from the bytes (roles, string/list/null content made of
 * template-relevant fragments and raw bytes, reasoning fields, tools, tool calls with JSON-ish
 * arguments, kwargs), so the deep paths of the
 * renderer are reached. Checked: no crash or sanitizer report, a known status, out untouched on
 * refusal, and the generation prompt at the end of an accepted rendering. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "prompt/chat.h"

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static const char *const frags[] = {
    "<think>",
    "</think>",
    "\n",
    "\n\n",
    " ",
    "\t",
    "<tool_response>",
    "</tool_response>",
    "<|im_start|>",
    "<|im_end|>",
    "x-anthropic-billing-header",
    "a",
    "é",
    "🤖",
    "\r\n",
    "",
};

/* A string of up to 8 fragments or raw bytes (NUL excluded: cJSON strings end there). */
static char *text(struct in *in)
{
	char *s = calloc(1, 8 * 32 + 1);
	unsigned i, k = take(in) % 9;

	for (i = 0; s && i < k; i++) {
		unsigned b = take(in);
		if (b < 0xc0) {
			strcat(s, frags[b % (sizeof(frags) / sizeof(frags[0]))]);
		} else {
			char raw[2] = {(char)(take(in) | 1), 0};
			strcat(s, raw);
		}
	}
	return s;
}

static void add_text(cJSON *obj, const char *key, struct in *in)
{
	char *s = text(in);

	if (s)
		cJSON_AddStringToObject(obj, key, s);
	free(s);
}

static const char *const jfrags[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"k\"",
    "1",
    "1.0",
    "-0",
    "1e5",
    "2.5e-300",
    "\"s\"",
    "null",
    "true",
    "\"\\u00e9\"",
    "\"\\ud83d\"",
    " ",
    "123456789012345678901234567890",
    "1e999",
};

/* JSON-ish text (valid or not) for tool-call arguments. */
static char *json_text(struct in *in)
{
	char *s = calloc(1, 16 * 32 + 1);
	unsigned i, k = take(in) % 17;

	for (i = 0; s && i < k; i++)
		strcat(s, jfrags[take(in) % (sizeof(jfrags) / sizeof(jfrags[0]))]);
	return s;
}

static cJSON *content(struct in *in)
{
	static const char *const types[] = {"text",	"input_text", "output_text", "refusal",
					    "thinking", "image_url",  "bogus"};
	unsigned k = take(in) % 5, i, n;
	cJSON *list, *part;
	char *s;

	if (k == 0)
		return cJSON_CreateNull();
	if (k < 3) {
		s = text(in);
		list = cJSON_CreateString(s ? s : "");
		free(s);
		return list;
	}
	list = cJSON_CreateArray();
	n = take(in) % 5;
	for (i = 0; i < n; i++) {
		unsigned t = take(in) % 8;
		if (t == 7) {
			s = text(in);
			cJSON_AddItemToArray(list, cJSON_CreateString(s ? s : ""));
			free(s);
			continue;
		}
		part = cJSON_CreateObject();
		cJSON_AddStringToObject(part, "type", types[t]);
		add_text(part, t == 3 ? "refusal" : t == 4 ? "thinking" : "text", in);
		cJSON_AddItemToArray(list, part);
	}
	return list;
}

static cJSON *build(struct in *in)
{
	static const char *const roles[] = {"system", "user",	   "assistant",
					    "tool",   "developer", "x"};
	cJSON *req = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(req, "messages"), *m, *kw;
	unsigned flags = take(in), n = take(in) % 12, i;

	for (i = 0; i < n; i++) {
		unsigned r = take(in);
		m = cJSON_CreateObject();
		cJSON_AddStringToObject(m, "role", roles[r % 6]);
		cJSON_AddItemToObject(m, "content", content(in));
		if (r & 0x40)
			add_text(m, "reasoning", in);
		if (r & 0x80)
			add_text(m, "reasoning_content", in);
		if ((r & 0x38) == 0x38) {
			cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls"), *c, *fn;
			unsigned j, nc = take(in) % 3;
			for (j = 0; j < nc; j++) {
				char *a = json_text(in);
				c = cJSON_CreateObject();
				cJSON_AddStringToObject(c, "id", "c");
				cJSON_AddStringToObject(c, "type", "function");
				fn = cJSON_AddObjectToObject(c, "function");
				add_text(fn, "name", in);
				cJSON_AddStringToObject(fn, "arguments", a ? a : "");
				free(a);
				cJSON_AddItemToArray(calls, c);
			}
		}
		cJSON_AddItemToArray(msgs, m);
	}
	if (flags & 1)
		cJSON_AddBoolToObject(req, "add_generation_prompt", flags & 2);
	if (flags & 4) {
		kw = cJSON_AddObjectToObject(req, "chat_template_kwargs");
		if (flags & 8)
			cJSON_AddBoolToObject(kw, "enable_thinking", flags & 16);
		else
			cJSON_AddNullToObject(kw, "enable_thinking");
	}
	if (flags & 128) {
		cJSON *tools = cJSON_AddArrayToObject(req, "tools"), *t = cJSON_CreateObject(), *fn;
		cJSON_AddStringToObject(t, "type", "function");
		fn = cJSON_AddObjectToObject(t, "function");
		add_text(fn, "name", in);
		cJSON_AddItemToObject(fn, "parameters", content(in)); /* any JSON value */
		cJSON_AddItemToArray(tools, t);
	}
	if (flags & 32)
		cJSON_AddStringToObject(req, "reasoning_effort", flags & 64 ? "none" : "high");
	return req;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf out = {0};
	const char *why = NULL;
	struct in in = {data, size};
	cJSON *req;
	int rc;

	buf_puts(&out, "P");
	if (size && (data[0] == '{' || data[0] == '[')) {
		rc = chat_render_json((const char *)data, size, NULL, &out, &why);
	} else {
		req = build(&in);
		rc = chat_render(req, &out, &why);
		if (rc == CHAT_OK &&
		    !cJSON_IsFalse(cJSON_GetObjectItem(req, "add_generation_prompt"))) {
			size_t n = strlen("<|im_start|>assistant\n"),
			       m = strlen("<think>\n\n</think>\n\n");
			if (!((out.len >= n &&
			       !memcmp(out.data + out.len - n, "<|im_start|>assistant\n", n)) ||
			      (out.len >= m &&
			       !memcmp(out.data + out.len - m, "<think>\n\n</think>\n\n", m))))
				abort();
		}
		cJSON_Delete(req);
	}
	if (rc != CHAT_OK && rc != CHAT_UNSUPPORTED && rc != CHAT_INVALID)
		abort();
	if (rc != CHAT_OK && (out.len != 1 || !why || !*why))
		abort();
	buf_free(&out);
	return 0;
}
