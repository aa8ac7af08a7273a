// SPDX-License-Identifier: Apache-2.0
/* openai: request bodies to the engine's prompt token ids, as vLLM's frontend reads them, on the
 * real Qwen3 tokenizer and chat renderer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "chat.h"
#include "openai.h"
#include "tap.h"
#include "tokenizer.h"

static const struct tokenizer *T;

static int parse(enum openai_endpoint ep, const char *body, struct openai_req *r, const char **why)
{
	memset(r, 0, sizeof(*r));
	return openai_parse(T, ep, body, strlen(body), r, why);
}

static void expect_status(enum openai_endpoint ep, const char *body, int want, const char *what)
{
	struct openai_req r;
	const char *why = NULL;
	int rc = parse(ep, body, &r, &why);

	CHECK(rc == want && (want == OPENAI_OK || why), "%s (rc %d, why: %s)", what, rc,
	      why ? why : "-");
	openai_req_free(&r);
}

static void test_endpoints(void)
{
	CHECK_EQ(openai_endpoint_of("POST", 4, "/v1/completions", 15), OPENAI_COMPLETIONS,
		 "POST /v1/completions");
	CHECK_EQ(openai_endpoint_of("POST", 4, "/v1/chat/completions?x=1", 24), OPENAI_CHAT,
		 "POST /v1/chat/completions with a query");
	CHECK_EQ(openai_endpoint_of("GET", 3, "/v1/completions", 15), OPENAI_NONE, "GET is not");
	CHECK_EQ(openai_endpoint_of("POST", 4, "/v1/completionsX", 16), OPENAI_NONE,
		 "a longer path is not");
}

static void test_completions(void)
{
	struct openai_req r;
	struct tok_ids ref = {0};
	const char *why;
	const char *text = "Hello world, the cache of the model.";
	char body[256];
	int rc;

	tokenizer_encode(T, text, strlen(text), &ref);
	snprintf(body, sizeof(body),
		 "{\"model\":\"m\",\"prompt\":\"%s\",\"max_tokens\":7,\"stream\":true,"
		 "\"stream_options\":{\"include_usage\":true},\"seed\":3}",
		 text);
	rc = parse(OPENAI_COMPLETIONS, body, &r, &why);
	CHECK_EQ(rc, OPENAI_OK, "string prompt parsed");
	CHECK(r.prompt.n == ref.n && memcmp(r.prompt.v, ref.v, ref.n * 4) == 0,
	      "string prompt: the tokenizer's ids (add_special_tokens makes no difference for Qwen3)");
	CHECK(r.model && !strcmp(r.model, "m") && r.stream && r.include_usage && r.max_tokens == 7 &&
		      r.seed == 3 && !r.prompt_was_ids,
	      "model, stream, include_usage, max_tokens, seed");
	openai_req_free(&r);
	rc = parse(OPENAI_COMPLETIONS, "{\"prompt\":[5,6,151643]}", &r, &why);
	CHECK(rc == OPENAI_OK && r.prompt.n == 3 && r.prompt.v[2] == 151643 && r.prompt_was_ids &&
		      r.max_tokens == -1 && !r.model,
	      "token-id prompt used as is; max_tokens absent = -1; model optional");
	openai_req_free(&r);
	rc = parse(OPENAI_COMPLETIONS, "{\"prompt\":[[9,8]]}", &r, &why);
	CHECK(rc == OPENAI_OK && r.prompt.n == 2 && r.prompt.v[0] == 9, "[[ids]] with one prompt");
	openai_req_free(&r);
	snprintf(body, sizeof(body), "{\"prompt\":[\"%s\"]}", text);
	rc = parse(OPENAI_COMPLETIONS, body, &r, &why);
	CHECK(rc == OPENAI_OK && r.prompt.n == ref.n, "[\"string\"] with one prompt");
	openai_req_free(&r);
	tok_ids_free(&ref);
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[\"a\",\"b\"]}", OPENAI_UNSUPPORTED,
		      "batched string prompts: unsupported");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[[1],[2]]}", OPENAI_UNSUPPORTED,
		      "batched id prompts: unsupported");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"prompt_embeds\":\"...\"}",
		      OPENAI_UNSUPPORTED, "prompt_embeds: unsupported");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"\"}", OPENAI_INVALID, "empty prompt");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[]}", OPENAI_INVALID, "empty id list");
	expect_status(OPENAI_COMPLETIONS, "{\"max_tokens\":3}", OPENAI_INVALID, "no prompt");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[1,-2]}", OPENAI_INVALID, "negative id");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[1,2.5]}", OPENAI_INVALID, "fractional id");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":[151669]}", OPENAI_INVALID,
		      "id past the vocabulary");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":0}", OPENAI_INVALID,
		      "max_tokens 0");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":\"5\"}", OPENAI_INVALID,
		      "max_tokens as a string");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"stream\":\"yes\"}", OPENAI_INVALID,
		      "stream not a boolean");
	expect_status(OPENAI_COMPLETIONS,
		      "{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}",
		      OPENAI_INVALID, "stream_options without stream (vLLM refuses)");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"x\"", OPENAI_INVALID, "truncated JSON");
	expect_status(OPENAI_COMPLETIONS, "[1,2]", OPENAI_INVALID, "not an object");
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":5}", OPENAI_INVALID, "number prompt");
}

static void test_chat(void)
{
	const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be "
			   "brief.\"},{\"role\":\"user\",\"content\":\"Hi there\"}],"
			   "\"max_completion_tokens\":9,\"max_tokens\":3}";
	struct openai_req r;
	struct buf text = {0};
	struct tok_ids ref = {0};
	const char *why;
	cJSON *j = cJSON_Parse(body);
	int rc;

	chat_render(j, &text, &why);
	tokenizer_encode(T, text.data, text.len, &ref);
	rc = parse(OPENAI_CHAT, body, &r, &why);
	CHECK_EQ(rc, OPENAI_OK, "chat request parsed");
	CHECK(r.prompt.n == ref.n && memcmp(r.prompt.v, ref.v, ref.n * 4) == 0,
	      "chat: the rendered template's ids");
	CHECK(strstr(text.data, "<|im_start|>assistant\n") != NULL, "generation prompt rendered");
	CHECK_EQ(r.max_tokens, 9, "max_completion_tokens wins over max_tokens for chat");
	openai_req_free(&r);
	/* A tool definition holding numbers: json.dumps prints 1 and 1.0 differently, which only the
	 * body text tells, so it renders from the text (chat_render on the tree alone refuses it). */
	expect_status(OPENAI_CHAT,
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":"
		      "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
		      "\"properties\":{\"n\":{\"type\":\"number\",\"maximum\":1.0}}}}}]}",
		      OPENAI_OK, "tools with numbers render exactly from the body text");
	expect_status(OPENAI_CHAT, "{\"messages\":\"hi\"}", OPENAI_INVALID, "messages not an array");
	expect_status(OPENAI_CHAT, "{\"prompt\":\"hi\"}", OPENAI_INVALID, "chat without messages");
	cJSON_Delete(j);
	buf_free(&text);
	tok_ids_free(&ref);
}

int main(void)
{
	char err[256];
	struct tokenizer *t = tokenizer_load("models/qwen3/tokenizer.json", err, sizeof(err));

	if (!t) {
		printf("not ok - load models/qwen3/tokenizer.json: %s\n", err);
		return 1;
	}
	T = t;
	test_endpoints();
	test_completions();
	test_chat();
	tokenizer_free(t);
	return tap_done();
}
