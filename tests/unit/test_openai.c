// SPDX-License-Identifier: Apache-2.0
/* openai: request bodies to the engine's prompt token ids, as vLLM's frontend reads them, on the
 * real Qwen3 tokenizer and chat renderer (every prompt shape a golden row); the usage scanner on
 * response bodies, each row fed whole, a byte at a time and split in two at every byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "prompt/chat.h"
#include "prompt/openai.h"
#include "tap.h"
#include "prompt/tokenizer.h"

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
	      "string prompt: the tokenizer's ids (add_special_tokens makes no difference for "
	      "Qwen3)");
	CHECK(r.model && !strcmp(r.model, "m") && r.stream && r.include_usage &&
		  r.max_tokens == 7 && r.seed == 3 && !r.prompt_was_ids,
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

/* Prompt shapes. OK rows: the first prompt is text (its ids are the tokenizer's) or ids. */
struct prompt_case {
	const char *body;
	int status;
	const char *text; /* OK and a text prompt: the first prompt's text */
	uint32_t ids[4];  /* OK and an id prompt (text NULL): the first prompt's ids */
	size_t nids;
	size_t nprompts;
	const char *desc;
};

static const struct prompt_case prompt_cases[] = {
    {"{\"prompt\":\"Hello world\"}", OPENAI_OK, "Hello world", {0}, 0, 1, "a string"},
    {"{\"prompt\":[\"Hello world\"]}", OPENAI_OK, "Hello world", {0}, 0, 1, "a list of one string"},
    {"{\"prompt\":[\"Hello world\",\"Second prompt\",\"x\"]}",
     OPENAI_OK,
     "Hello world",
     {0},
     0,
     3,
     "a batch of strings: the first, nprompts 3"},
    {"{\"prompt\":[\"caf\\u00e9 \\\"q\\\"\",\"b\"]}",
     OPENAI_OK,
     "caf\xc3\xa9 \"q\"",
     {0},
     0,
     2,
     "a batch of strings with escapes: the first decoded"},
    {"{\"prompt\":[5,6,151643]}", OPENAI_OK, NULL, {5, 6, 151643}, 3, 1, "a list of token ids"},
    {"{\"prompt\":[1.0,2]}",
     OPENAI_OK,
     NULL,
     {1, 2},
     2,
     1,
     "ids written as integral floats (pydantic takes 1.0 as 1)"},
    {"{\"prompt\":[[9,8]]}", OPENAI_OK, NULL, {9, 8}, 2, 1, "a list of one id list"},
    {"{\"prompt\":[[9,8],[1,2,3],[7]]}",
     OPENAI_OK,
     NULL,
     {9, 8},
     2,
     3,
     "a batch of id lists: the first, nprompts 3"},
    {"{\"prompt\":[[151668],[0]]}",
     OPENAI_OK,
     NULL,
     {151668},
     1,
     2,
     "a batch of id lists at the vocabulary's ends"},
    {"{\"prompt\":\"\"}", OPENAI_INVALID, NULL, {0}, 0, 0, "an empty string"},
    {"{\"prompt\":[]}", OPENAI_INVALID, NULL, {0}, 0, 0, "an empty list"},
    {"{\"prompt\":[\"\"]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a list of one empty string"},
    {"{\"prompt\":[\"a\",\"\"]}",
     OPENAI_INVALID,
     NULL,
     {0},
     0,
     0,
     "a batch with a later empty string"},
    {"{\"prompt\":[[]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a nested empty list"},
    {"{\"prompt\":[[],[1]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a batch whose first list is empty"},
    {"{\"prompt\":[[1],[]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a batch with a later empty list"},
    {"{\"prompt\":[\"a\",1]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed batch: string, number"},
    {"{\"prompt\":[\"a\",[1]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed batch: string, list"},
    {"{\"prompt\":[1,\"a\"]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed: number, string"},
    {"{\"prompt\":[1,[2]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed: number, list"},
    {"{\"prompt\":[[1],\"a\"]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed batch: list, string"},
    {"{\"prompt\":[[1],2]}", OPENAI_INVALID, NULL, {0}, 0, 0, "mixed batch: list, number"},
    {"{\"prompt\":[\"a\",null]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a batch with a null"},
    {"{\"prompt\":[null]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a list of null"},
    {"{\"prompt\":[{}]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a list of an object"},
    {"{\"prompt\":[[1],[\"a\"]]}",
     OPENAI_INVALID,
     NULL,
     {0},
     0,
     0,
     "a later id list holding a string"},
    {"{\"prompt\":[[\"a\"]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a list of a list of strings"},
    {"{\"prompt\":[[[1]]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "three levels of lists"},
    {"{\"prompt\":[[1,[2]]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a list inside an id list"},
    {"{\"prompt\":[[1],[2.5]]}",
     OPENAI_INVALID,
     NULL,
     {0},
     0,
     0,
     "a fractional id in a later list"},
    {"{\"prompt\":[[1],[-1]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a negative id in a later list"},
    {"{\"prompt\":[[1],[1e20]]}", OPENAI_INVALID, NULL, {0}, 0, 0, "a huge id in a later list"},
    {"{\"prompt\":[[1],[151669]]}",
     OPENAI_INVALID,
     NULL,
     {0},
     0,
     0,
     "an id past the vocabulary in a later list"},
    {"{\"prompt\":5}", OPENAI_INVALID, NULL, {0}, 0, 0, "a number"},
    {"{\"prompt\":{}}", OPENAI_INVALID, NULL, {0}, 0, 0, "an object"},
    {"{\"prompt\":true}", OPENAI_INVALID, NULL, {0}, 0, 0, "a boolean"},
};

static void test_prompt_shapes(void)
{
	for (size_t i = 0; i < sizeof(prompt_cases) / sizeof(prompt_cases[0]); i++) {
		const struct prompt_case *c = &prompt_cases[i];
		struct openai_req r;
		struct tok_ids want = {0};
		const char *why = NULL;
		int rc = parse(OPENAI_COMPLETIONS, c->body, &r, &why);

		if (c->status != OPENAI_OK) {
			CHECK(rc == c->status && why, "%s: refused (rc %d, why: %s)", c->desc, rc,
			      why ? why : "-");
			openai_req_free(&r);
			continue;
		}
		if (c->text) {
			tokenizer_encode(T, c->text, strlen(c->text), &want);
		} else {
			for (size_t k = 0; k < c->nids; k++)
				tok_ids_push(&want, c->ids[k]);
		}
		CHECK(rc == OPENAI_OK && r.prompt.n == want.n && want.n > 0 &&
			  memcmp(r.prompt.v, want.v, want.n * sizeof(want.v[0])) == 0 &&
			  r.nprompts == c->nprompts && r.prompt_was_ids == !c->text,
		      "%s (rc %d, %zu ids, nprompts %zu, why: %s)", c->desc, rc, r.prompt.n,
		      r.nprompts, why ? why : "-");
		tok_ids_free(&want);
		openai_req_free(&r);
	}
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
	CHECK_EQ(r.nprompts, 1, "chat: one prompt");
	openai_req_free(&r);
	/* A tool definition holding numbers: json.dumps prints 1 and 1.0 differently, which only
	 * the body text tells, so it renders from the text (chat_render on the tree alone refuses
	 * it). */
	expect_status(
	    OPENAI_CHAT,
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":"
	    "\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
	    "\"properties\":{\"n\":{\"type\":\"number\",\"maximum\":1.0}}}}}]}",
	    OPENAI_OK, "tools with numbers render exactly from the body text");
	expect_status(OPENAI_CHAT, "{\"messages\":\"hi\"}", OPENAI_INVALID,
		      "messages not an array");
	expect_status(OPENAI_CHAT, "{\"prompt\":\"hi\"}", OPENAI_INVALID, "chat without messages");
	/* \u0000: cJSON would cut the string there, so the strict reader declines it and the raw
	 * check refuses it (routed on the approximate view, never rendered short); an escaped
	 * backslash before u0000 is plain text, read by the strict reader */
	expect_status(OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}",
		      OPENAI_UNSUPPORTED, "chat with a \\u0000 escape: not exact");
	expect_status(OPENAI_CHAT,
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"x\":\"\\u0000\"}",
		      OPENAI_UNSUPPORTED, "chat with \\u0000 in another field: not exact");
	expect_status(OPENAI_CHAT,
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\\\u0000b\"}]}", OPENAI_OK,
		      "chat with an escaped backslash before u0000: exact");
	expect_status(OPENAI_CHAT,
		      "\xef\xbb\xbf{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}",
		      OPENAI_UNSUPPORTED,
		      "a body cJSON reads (a byte order mark) still checked raw");
	cJSON_Delete(j);
	buf_free(&text);
	tok_ids_free(&ref);
}

/* A repeated key: vLLM's frontend reads the body with Python's json, which keeps the last one, so
 * that is the one tokenized and read (cJSON_GetObjectItem would give the first). */
static void test_repeated_keys(void)
{
	const char *last = "the second prompt, the one vLLM reads";
	struct tok_ids ref = {0};
	struct openai_req r;
	const char *why;
	char body[512];
	int rc;

	tokenizer_encode(T, last, strlen(last), &ref);
	snprintf(
	    body, sizeof(body),
	    "{\"model\":\"a\",\"prompt\":\"the first prompt\",\"max_tokens\":5,\"model\":\"b\","
	    "\"prompt\":\"%s\",\"max_tokens\":6,\"stream\":true,\"stream\":false}",
	    last);
	rc = parse(OPENAI_COMPLETIONS, body, &r, &why);
	CHECK(rc == OPENAI_OK && r.prompt.n == ref.n &&
		  memcmp(r.prompt.v, ref.v, ref.n * sizeof(*ref.v)) == 0,
	      "repeated prompt: the last one's ids");
	CHECK(r.model && strcmp(r.model, "b") == 0 && r.max_tokens == 6 && !r.stream,
	      "repeated model, max_tokens, stream: the last of each");
	openai_req_free(&r);
	expect_status(OPENAI_COMPLETIONS, "{\"prompt\":\"hi\",\"prompt\":null}", OPENAI_INVALID,
		      "a prompt repeated as null: no prompt, as vLLM says");
	expect_status(OPENAI_CHAT,
		      "{\"messages\":\"hi\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
		      OPENAI_OK, "messages repeated: the last, a list, is read");
	tok_ids_free(&ref);
}

/* The usage scanner: {response body, prompt_tokens, cached_tokens, description}. */
struct usage_case {
	const char *in;
	int64_t prompt, cached;
	const char *desc;
};

#define USAGE_FULL                                                                                 \
	"\"usage\":{\"prompt_tokens\":2371,\"total_tokens\":2435,\"completion_tokens\":64,"        \
	"\"prompt_tokens_details\":{\"cached_tokens\":2032}}"
#define SSE_CHUNK(text)                                                                            \
	"data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"       \
	"\"text\":\"" text "\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"

static const struct usage_case usage_cases[] = {
    {"{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":"
     "\"Hello\",\"finish_reason\":\"length\"}]," USAGE_FULL "}",
     2371, 2032, "JSON response"},
    {SSE_CHUNK("Hel") SSE_CHUNK("lo") "data: {\"id\":\"cmpl-1\",\"choices\":[]," USAGE_FULL
				      "}\n\ndata: [DONE]\n\n",
     2371, 2032, "SSE stream, usage in the last chunk"},
    {SSE_CHUNK("Hel") SSE_CHUNK("lo") "data: [DONE]\n\n", -1, -1, "SSE stream without usage"},
    {"", -1, -1, "empty body"},
    {"{\"choices\":[{\"text\":\"{\\\"usage\\\": {\\\"prompt_tokens\\\": 99, "
     "\\\"cached_tokens\\\": 5}}\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1}}",
     7, -1, "escaped fake usage in the text is not usage"},
    {SSE_CHUNK("\\\"cached_tokens\\\": 5, \\\"prompt_tokens\\\":6") "data: [DONE]\n\n", -1, -1,
     "escaped fake usage in a stream, and no real one"},
    {"{\"choices\":[{\"text\":\"a\\\\\"}],\"prompt_tokens\":4}", 4, -1,
     "an escaped backslash ends the text: the key after it counts"},
    {"{\"text\":\"\\u0022prompt_tokens\\u0022: 3, \\u005c\\\" x\","
     "\"usage\":{\"prompt_tokens\":8}}",
     8, -1, "unicode escapes (of a quote, a backslash) stay inside the string"},
    {"{\"text\":\"caf\xc3\xa9 \xe6\xbc\xa2 \\ud83d\\ude00\",\"usage\":{\"prompt_tokens\":9,"
     "\"prompt_tokens_details\":{\"cached_tokens\":3}}}",
     9, 3, "UTF-8 and surrogate escapes in the text"},
    {"{\"usage\":{\"prompt_tokens\":12,"
     "\"prompt_tokens_details\":{\"cached_tokens\":null}}}",
     12, -1, "null cached_tokens"},
    {"{\"usage\":{\"prompt_tokens\":12,\"prompt_tokens_details\":null}}", 12, -1,
     "null prompt_tokens_details"},
    {"{\n  \"usage\": {\n    \"prompt_tokens\" \t:\r\n 42 ,\n    \"prompt_tokens_details\": {\n"
     "      \"cached_tokens\" : 16\n    }\n  }\n}\n",
     42, 16, "pretty-printed: whitespace around the colon"},
    {"data: {\"usage\":{\"prompt_tokens\":5,"
     "\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n"
     "data: {\"usage\":{\"prompt_tokens\":5,"
     "\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n",
     5, 4, "continuous usage: the last value is kept"},
    {"{\"prompt_tokens\":5} {\"prompt_tokens\":-1,\"cached_tokens\":-2}", 5, -1,
     "a negative value is ignored (the earlier one stays)"},
    {"{\"prompt_tokens\":12.5,\"cached_tokens\":1e3}", -1, -1, "non-integer values are ignored"},
    {"{\"prompt_tokens\":12345678901234567890,\"cached_tokens\":1000000000000000000}", -1, -1,
     "values of more than 18 digits are ignored"},
    {"{\"prompt_tokens\":999999999999999999,\"cached_tokens\":0}", 999999999999999999LL, 0,
     "18 digits and zero are read"},
    {"{\"prompt_tokens\":\"12\",\"cached_tokens\":[3]}", -1, -1, "a string or list value is not"},
    {"{\"a\":\"prompt_tokens\",\"b\":5,\"c\":[\"cached_tokens\",6]}", -1, -1,
     "the key's name as a string value is not a key"},
    {"{\"xprompt_tokens\":3,\"prompt_tokensx\":4,\"cached_token\":5,"
     "\"prompt_tokens_details_\":6}",
     -1, -1, "longer, shorter and prefixed keys are not matched"},
    {"{\"prompt\\u005ftokens\":3}", -1, -1, "a key spelled with escapes is not matched"},
    {"{\"prompt_\\ttokens\":3}", -1, -1, "an escaped tab inside a key-like string is a byte of it"},
    {"oops \" stray quote\n\ndata: {\"usage\":{\"prompt_tokens\":3}}\n\n", 3, -1,
     "a raw newline ends a stray string: the next event is read"},
};

static void usage_run(const char *in, size_t n, size_t split, bool bytewise, int64_t *prompt,
		      int64_t *cached)
{
	struct openai_usage u = {0};

	openai_usage_init(&u);
	if (bytewise) {
		for (size_t k = 0; k < n; k++)
			openai_usage_feed(&u, in + k, 1);
	} else {
		openai_usage_feed(&u, in, split);
		openai_usage_feed(&u, in + split, 0);
		openai_usage_feed(&u, in + split, n - split);
	}
	*prompt = u.prompt_tokens;
	*cached = u.cached_tokens;
}

static void test_usage(void)
{
	for (size_t i = 0; i < sizeof(usage_cases) / sizeof(usage_cases[0]); i++) {
		const struct usage_case *c = &usage_cases[i];
		size_t n = strlen(c->in);
		int64_t p, ca;
		int bad = 0;

		usage_run(c->in, n, n, false, &p, &ca);
		CHECK(p == c->prompt && ca == c->cached, "usage: %s (got %lld/%lld)", c->desc,
		      (long long)p, (long long)ca);
		usage_run(c->in, n, 0, true, &p, &ca);
		if (p != c->prompt || ca != c->cached)
			bad++;
		for (size_t k = 0; k <= n; k++) {
			usage_run(c->in, n, k, false, &p, &ca);
			if (p != c->prompt || ca != c->cached)
				bad++;
		}
		CHECK_EQ(bad, 0, "usage: byte at a time and split at every byte give the same");
	}
}

/* add_special_tokens as vLLM reads it, on Llama 3.2 (whose post-processor adds BOS, id 128000):
 * true by default for completions, false for chat; the request's value wins; a token-id prompt
 * is used as is. */
static void test_add_special_tokens(void)
{
	char err[256];
	struct tokenizer *l = tokenizer_load("models/llama3_2", err, sizeof(err));
	struct openai_req r;
	const char *why = NULL;
	static const struct {
		const char *body;
		long first; /* the first id, or -1 when the prompt must not start with BOS */
	} rows[] = {
	    {"{\"prompt\":\"Hello world\"}", 128000},
	    {"{\"prompt\":\"Hello world\",\"add_special_tokens\":true}", 128000},
	    {"{\"prompt\":\"Hello world\",\"add_special_tokens\":false}", -1},
	    {"{\"prompt\":\"Hello world\",\"add_special_tokens\":null}", 128000},
	    {"{\"prompt\":[9906,1917]}", -1},
	};

	if (!l) {
		CHECK(0, "load models/llama3_2: %s", err);
		return;
	}
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int rc;

		memset(&r, 0, sizeof(r));
		rc = openai_parse(l, OPENAI_COMPLETIONS, rows[i].body, strlen(rows[i].body), &r,
				  &why);
		CHECK(rc == OPENAI_OK && r.prompt.n >= 2 &&
			  (rows[i].first < 0 ? r.prompt.v[0] != 128000
					     : r.prompt.v[0] == (uint32_t)rows[i].first),
		      "llama3_2 completions %s: first id %ld (rc %d)", rows[i].body,
		      r.prompt.n ? (long)r.prompt.v[0] : -1L, rc);
		openai_req_free(&r);
	}
	memset(&r, 0, sizeof(r));
	CHECK_EQ(openai_parse(l, OPENAI_COMPLETIONS, "{\"prompt\":\"x\",\"add_special_tokens\":1}",
			      37, &r, &why),
		 OPENAI_INVALID, "add_special_tokens must be a boolean");
	openai_req_free(&r);
	/* Qwen3 has no BOS: the same ids either way */
	{
		struct openai_req a, b;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		openai_parse(T, OPENAI_COMPLETIONS, "{\"prompt\":\"Hello\"}", 18, &a, &why);
		openai_parse(T, OPENAI_COMPLETIONS,
			     "{\"prompt\":\"Hello\",\"add_special_tokens\":false}", 45, &b, &why);
		CHECK(a.prompt.n == b.prompt.n && a.prompt.n > 0 &&
			  !memcmp(a.prompt.v, b.prompt.v, a.prompt.n * sizeof(uint32_t)),
		      "qwen3: add_special_tokens changes nothing (%zu ids)", a.prompt.n);
		openai_req_free(&a);
		openai_req_free(&b);
	}
	tokenizer_free(l);
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
	test_prompt_shapes();
	test_chat();
	test_repeated_keys();
	test_usage();
	test_add_special_tokens();
	tokenizer_free(t);
	return tap_done();
}
