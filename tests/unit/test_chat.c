// SPDX-License-Identifier: Apache-2.0
/* Unit tests for userspace/prompt/chat: golden renderings of the Qwen3 template as vLLM applies it
 * (each expected string derived by hand from the template text in models/qwen3), the requests
 * that must be refused, and the template check.
 *
 * Also a driver for tests/e2e/test_chat_parity.sh: `test_chat --render` reads one request a line
 * on stdin and writes {"status":"ok","text":...} or {"status":"unsupported"|"invalid","why":...}
 * a line, in order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "prompt/chat.h"
#include "tap.h"

static const char *status_name(int rc)
{
	switch (rc) {
	case CHAT_OK:
		return "ok";
	case CHAT_UNSUPPORTED:
		return "unsupported";
	case CHAT_INVALID:
		return "invalid";
	}
	return "error";
}

static int render_mode(void)
{
	struct buf out = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		struct buf text = {0};
		const char *why = NULL;
		int rc;

		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			n--;
		rc = chat_render_json(line, (size_t)n, NULL, &text, &why);
		buf_reset(&out);
		buf_printf(&out, "{\"status\":\"%s\",", status_name(rc));
		if (rc == CHAT_OK) {
			buf_puts(&out, "\"text\":");
			buf_json_str(&out, text.data ? text.data : "", text.len);
		} else {
			buf_puts(&out, "\"why\":");
			buf_json_str(&out, why ? why : "", why ? strlen(why) : 0);
		}
		buf_puts(&out, "}\n");
		fwrite(out.data, 1, out.len, stdout);
		buf_free(&text);
	}
	free(line);
	buf_free(&out);
	return 0;
}

/* Renders a request given as JSON text; returns the status, *text the rendering (static). */
static int render(const char *json, const char **text, const char **why)
{
	static struct buf out;

	buf_free(&out);
	*why = NULL;
	int rc = chat_render_json(json, strlen(json), NULL, &out, why);
	*text = out.data ? out.data : "";
	return rc;
}

static void expect(const char *what, const char *json, const char *want)
{
	const char *text, *why;
	int rc = render(json, &text, &why);

	if (!CHECK(rc == CHAT_OK && strcmp(text, want) == 0, "%s", what))
		printf("#   rc %d (%s)\n#   got  [%s]\n#   want [%s]\n", rc, why ? why : "", text,
		       want);
}

static void expect_rc(const char *what, const char *json, int want)
{
	const char *text, *why;
	int rc = render(json, &text, &why);

	if (!CHECK(rc == want && (rc == CHAT_OK || (why && *why)), "%s -> %s", what,
		   status_name(want)))
		printf("#   got %s (%s)\n", status_name(rc), why ? why : "");
}

#define SYS_USER "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nUSER<|im_end|>\n"
#define GEN "<|im_start|>assistant\n"
#define NOTHINK "<think>\n\n</think>\n\n"

static void test_basics(void)
{
	const char *su = "[{\"role\":\"system\",\"content\":\"SYS\"},"
			 "{\"role\":\"user\",\"content\":\"USER\"}]";
	char req[512];

	snprintf(req, sizeof(req), "{\"messages\":%s}", su);
	expect("system + user, defaults (vLLM's rendering of it)", req, SYS_USER GEN);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":false}}", su);
	expect("enable_thinking false appends the empty think block", req, SYS_USER GEN NOTHINK);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":true}}", su);
	expect("enable_thinking true adds nothing", req, SYS_USER GEN);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":null}}", su);
	expect("enable_thinking null adds nothing (is false is an identity test)", req,
	       SYS_USER GEN);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":0}}", su);
	expect("enable_thinking 0 adds nothing", req, SYS_USER GEN);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"add_generation_prompt\":false,"
		 "\"chat_template_kwargs\":{\"enable_thinking\":false}}",
		 su);
	expect("add_generation_prompt false: no assistant header, no think block", req, SYS_USER);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":true,"
		 "\"enable_thinking\":false}}",
		 su);
	expect("a repeated key: the last one wins, as in Python", req, SYS_USER GEN NOTHINK);
	snprintf(req, sizeof(req),
		 "{\"messages\":%s,\"chat_template_kwargs\":{\"enable_thinking\":false,"
		 "\"thinking\":true,\"documents\":[]},\"documents\":null,\"tools\":[],"
		 "\"reasoning_effort\":null,\"continue_final_message\":false}",
		 su);
	expect("kwargs the template does not read, empty tools: no effect", req,
	       SYS_USER GEN NOTHINK);
	expect("user only", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
	       "<|im_start|>user\nhi<|im_end|>\n" GEN);
	expect("content null and absent render as empty",
	       "{\"messages\":[{\"role\":\"user\",\"content\":null},{\"role\":\"user\"}]}",
	       "<|im_start|>user\n<|im_end|>\n<|im_start|>user\n<|im_end|>\n" GEN);
}

static void test_content_parts(void)
{
	expect("text parts are joined with \\n",
	       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
	       "{\"type\":\"text\",\"text\":\"b\"}]}]}",
	       "<|im_start|>user\na\nb<|im_end|>\n" GEN);
	expect("empty and null texts are dropped before joining; strings, input_text, refusal, "
	       "thinking parts count",
	       "{\"messages\":[{\"role\":\"user\",\"content\":[\"s\",{\"type\":\"text\",\"text\":"
	       "\"\"},"
	       "{\"type\":\"text\",\"text\":null},{\"type\":\"text\"},"
	       "{\"type\":\"input_text\",\"text\":\"i\"},{\"type\":\"refusal\",\"refusal\":\"r\"},"
	       "{\"type\":\"thinking\",\"thinking\":\"t\",\"closed\":true},\"\","
	       "{\"type\":\"output_text\",\"text\":\"o\",\"cache_control\":{}}]}]}",
	       "<|im_start|>user\ns\ni\nr\nt\no<|im_end|>\n" GEN);
	expect("an empty list renders as empty content",
	       "{\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
	       "<|im_start|>user\n<|im_end|>\n" GEN);
	expect(
	    "a joined system message renders at the top",
	    "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"S1\"},"
	    "{\"type\":\"text\",\"text\":\"S2\"}]},{\"role\":\"user\",\"content\":\"u\"}]}",
	    "<|im_start|>system\nS1\nS2<|im_end|>\n<|im_start|>user\nu<|im_end|>\n" GEN);
}

static void test_roles(void)
{
	expect("a later system message renders in place",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"u\"},"
	       "{\"role\":\"system\",\"content\":\"s\"}]}",
	       "<|im_start|>user\nu<|im_end|>\n<|im_start|>system\ns<|im_end|>\n" GEN);
	expect("other roles (developer, function, User) render nothing, as in the template",
	       "{\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},"
	       "{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"User\",\"content\":\"x\"},"
	       "{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"function\",\"content\":\"f\"}]}",
	       "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n" GEN);
	expect("consecutive tool messages share one user turn",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[]},"
	       "{\"role\":\"tool\",\"content\":\"r1\",\"tool_call_id\":\"a\"},"
	       "{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"r2\"}]},"
	       "{\"role\":\"assistant\",\"content\":\"done\"},{\"role\":\"tool\",\"content\":"
	       "\"r3\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n"
	       "<|im_start|>assistant\n<|im_end|>\n"
	       "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
	       "</tool_response><|im_end|>\n"
	       "<|im_start|>assistant\ndone<|im_end|>\n"
	       "<|im_start|>user\n<tool_response>\nr3\n</tool_response><|im_end|>\n" GEN);
}

static void test_reasoning(void)
{
	/* Before the last user query: reasoning dropped. After it: kept for the last message, and
	 * for earlier ones only when non-empty. */
	expect("reasoning in content: removed before the last query, kept after it",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q1\"},"
	       "{\"role\":\"assistant\",\"content\":\"<think>\\nr1\\n</think>\\n\\na1\"},"
	       "{\"role\":\"user\",\"content\":\"q2\"},"
	       "{\"role\":\"assistant\",\"content\":\"<think>r2</think>a2\"}],"
	       "\"add_generation_prompt\":false}",
	       "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
	       "<|im_start|>user\nq2<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\nr2\n</think>\n\na2<|im_end|>\n");
	expect("the reasoning field is used, reasoning_content as its fallback",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"a1\",\"reasoning\":\"R1\","
	       "\"reasoning_content\":\"X\"},"
	       "{\"role\":\"assistant\",\"content\":\"a2\",\"reasoning\":null,"
	       "\"reasoning_content\":\"R2\"},"
	       "{\"role\":\"assistant\",\"content\":\"a3\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\nR1\n</think>\n\na1<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\nR2\n</think>\n\na2<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\n\n</think>\n\na3<|im_end|>\n" GEN);
	expect("an empty reasoning field stops the split of </think> in content",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"x</think>y\",\"reasoning\":\"\"},"
	       "{\"role\":\"user\",\"content\":\"q2\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nx</think>y<|im_end|>\n"
	       "<|im_start|>user\nq2<|im_end|>\n" GEN);
	expect("strip('\\n') strips only newlines (spaces stay)",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"<think>\\n \\tr \\n\\n</think>\\n\\n  a "
	       "\\n\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\n \tr \n</think>\n\n  a \n<|im_end|>\n" GEN);
	expect("several think blocks: split on the last </think>, first part's last <think>",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"p<think>A<think>B</think>C</think>D\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\nB\n</think>\n\nD<|im_end|>\n" GEN);
	expect("a user turn wrapped in tool_response is not a query",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
	       "{\"role\":\"assistant\",\"content\":\"<think>r</think>a\"},"
	       "{\"role\":\"user\",\"content\":\"<tool_response>x</tool_response>\"},"
	       "{\"role\":\"assistant\",\"content\":\"b\"}]}",
	       "<|im_start|>user\nq<|im_end|>\n"
	       "<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n"
	       "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n"
	       "<|im_start|>assistant\n<think>\n\n</think>\n\nb<|im_end|>\n" GEN);
	expect("no user query at all: the query index is the last message, so no reasoning stays",
	       "{\"messages\":[{\"role\":\"assistant\",\"content\":\"<think>r</think>a\"},"
	       "{\"role\":\"assistant\",\"content\":\"<think>s</think>b\"}]}",
	       "<|im_start|>assistant\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n" GEN);
}

static void test_refused(void)
{
	const char *u = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
	char req[1024];

#define REQ(...) (snprintf(req, sizeof(req), __VA_ARGS__), req)
	expect_rc("image part",
		  "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
		  "\"image_url\":{\"url\":\"http://x\"}}]}]}",
		  CHAT_UNSUPPORTED);
	expect_rc(
	    "text part with a uuid",
	    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
	    "\"uuid\":\"u\"}]}]}",
	    CHAT_UNSUPPORTED);
	expect_rc("continue_final_message with add_generation_prompt (vLLM: 400)",
		  REQ("{%s,\"continue_final_message\":true}", u), CHAT_INVALID);
	expect_rc("continue_final_message (the interpreter renders it)",
		  REQ("{%s,\"continue_final_message\":true,\"add_generation_prompt\":false}", u),
		  CHAT_UNSUPPORTED);
	expect_rc("documents that are not string maps", REQ("{%s,\"documents\":[{\"a\":1}]}", u),
		  CHAT_INVALID);
	expect_rc("documents that are not a list", REQ("{%s,\"documents\":\"d\"}", u),
		  CHAT_INVALID);
	expect_rc("a request chat_template (vLLM refuses it untrusted)",
		  REQ("{%s,\"chat_template\":\"{{ 1 }}\"}", u), CHAT_INVALID);
	expect_rc("add_generation_prompt in chat_template_kwargs",
		  REQ("{%s,\"chat_template_kwargs\":{\"add_generation_prompt\":false}}", u),
		  CHAT_UNSUPPORTED);
	expect_rc("tools in chat_template_kwargs",
		  REQ("{%s,\"chat_template_kwargs\":{\"tools\":[]}}", u), CHAT_UNSUPPORTED);
	expect_rc("system text with the billing header",
		  "{\"messages\":[{\"role\":\"system\",\"content\":\"x-anthropic-billing-header: "
		  "cch=1\\nS\"},{\"role\":\"user\",\"content\":\"u\"}]}",
		  CHAT_UNSUPPORTED);
	expect_rc("a \\u0000 escape",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}",
		  CHAT_UNSUPPORTED);
	expect_rc("add_generation_prompt as a string",
		  REQ("{%s,\"add_generation_prompt\":\"true\"}", u), CHAT_UNSUPPORTED);
	expect_rc("non-string reasoning",
		  "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\",\"reasoning\":1}]}",
		  CHAT_UNSUPPORTED);

	expect_rc("not JSON", "{\"messages\":[", CHAT_INVALID);
	expect_rc("not an object", "[1]", CHAT_INVALID);
	expect_rc("no messages", "{}", CHAT_INVALID);
	expect_rc("empty messages", "{\"messages\":[]}", CHAT_INVALID);
	expect_rc("message without role", "{\"messages\":[{\"content\":\"x\"}]}", CHAT_INVALID);
	expect_rc("role not a string", "{\"messages\":[{\"role\":1,\"content\":\"x\"}]}",
		  CHAT_INVALID);
	expect_rc("content a number", "{\"messages\":[{\"role\":\"user\",\"content\":1}]}",
		  CHAT_INVALID);
	expect_rc("part a number", "{\"messages\":[{\"role\":\"user\",\"content\":[1]}]}",
		  CHAT_INVALID);
	expect_rc("unknown part type",
		  "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"bogus\"}]}]}",
		  CHAT_INVALID);
	expect_rc(
	    "text not a string",
	    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":2}]}]}",
	    CHAT_INVALID);
	expect_rc("chat_template_kwargs not an object", REQ("{%s,\"chat_template_kwargs\":[]}", u),
		  CHAT_INVALID);
	expect_rc("unknown reasoning_effort", REQ("{%s,\"reasoning_effort\":\"huge\"}", u),
		  CHAT_INVALID);
	expect_rc("reasoning_effort high with enable_thinking false",
		  REQ("{%s,\"reasoning_effort\":\"high\","
		      "\"chat_template_kwargs\":{\"enable_thinking\":false}}",
		      u),
		  CHAT_OK);
	expect_rc("an escaped backslash before u0000 is plain text",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\\\u0000b\"}]}", CHAT_OK);
	expect_rc("a \\u0000 escape after an escaped backslash",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\\\\\u0000b\"}]}",
		  CHAT_UNSUPPORTED);
	expect_rc("a \\u0000 escape in a field after the messages",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"x\":\"\\u0000\"}",
		  CHAT_UNSUPPORTED);
#undef REQ
}

#define TOOLS_HEAD                                                                                 \
	"# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are " \
	"provided with function signatures within <tools></tools> XML tags:\n<tools>"
#define TOOLS_TAIL                                                                                 \
	"\n</tools>\n\nFor each function call, return a json object with function name and "       \
	"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "             \
	"<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"

static void test_tools(void)
{
	const char *tools_req =
	    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":"
	    "\"u\"}],"
	    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
	    "\"type\":"
	    "\"object\",\"properties\":{\"n\":{\"minimum\":1.0,\"maximum\":10}}}}},"
	    "{\"function\":{\"description\":\"d\\u00e9\\n\",\"name\":\"g\",\"strict\":true}}]}";
	const char *tools_want =
	    "<|im_start|>system\nS\n\n" TOOLS_HEAD
	    "\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": null, "
	    "\"parameters\": {\"type\": \"object\", \"properties\": {\"n\": {\"minimum\": 1.0, "
	    "\"maximum\": 10}}}}}"
	    "\n{\"type\": \"function\", \"function\": {\"name\": \"g\", \"description\": "
	    "\"d\u00e9\\n\", "
	    "\"parameters\": null, \"strict\": true}}" TOOLS_TAIL
	    "<|im_start|>user\nu<|im_end|>\n" GEN;
	struct buf out = {0};
	const char *why = NULL;
	cJSON *tree = cJSON_Parse(tools_req);
	int rc;

	expect(
	    "tools: model_dump field order, description null, number spelling kept, system merged",
	    tools_req, tools_want);
	rc = chat_render(tree, &out, &why);
	CHECK(rc == CHAT_UNSUPPORTED && why,
	      "tools with numbers from a cJSON tree: unsupported (1 and 1.0 are lost) -> %s",
	      why ? why : "");
	cJSON_Delete(tree);
	buf_free(&out);
	expect(
	    "tool calls: arguments through json.loads/json.dumps, empty arguments as {}",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
	    "\"content\":\"\","
	    "\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
	    "\"arguments\":"
	    "\"{\\\"a\\\": 1.0, \\\"b\\\":1e-5,\\\"a\\\":2,\\\"c\\\":\\\"\\\\u00e9\\\\t\\\"}\"}},"
	    "{\"id\":\"2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]"
	    "},"
	    "{\"role\":\"tool\",\"content\":\"r\"}]}",
	    "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", "
	    "\"arguments\": {\"a\": 2, \"b\": 1e-05, \"c\": "
	    "\"\u00e9\\t\"}}\n</tool_call>\n<tool_call>\n"
	    "{\"name\": \"g\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
	    "<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n" GEN);
	expect("floats print as Python's repr, ints keep their digits, a JSON string prints raw",
	       "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
	       "\"content\":\"c\","
	       "\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
	       "\"arguments\":"
	       "\"[0.1, 1e16, 1e15, 1e-4, 1e-5, 5e-324, -0.0, -0, 2.675, 1.7976931348623157e308, "
	       "123456789012345678901234567890, 12.50, "
	       "1E2]\"}},{\"id\":\"2\",\"type\":\"function\",\"function\":"
	       "{\"name\":\"g\",\"arguments\":\"\\\"raw "
	       "text\\\"\"}}]}],\"add_generation_prompt\":false}",
	       "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</"
	       "think>\n\nc\n<tool_call>\n"
	       "{\"name\": \"f\", \"arguments\": [0.1, 1e+16, 1000000000000000.0, 0.0001, 1e-05, "
	       "5e-324, "
	       "-0.0, 0, 2.675, 1.7976931348623157e+308, 123456789012345678901234567890, 12.5, "
	       "100.0]}\n"
	       "</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": raw "
	       "text}\n</tool_call><|im_end|>\n");
	expect_rc(
	    "tool call arguments that are not JSON",
	    "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"1\","
	    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]}",
	    CHAT_UNSUPPORTED);
	expect_rc(
	    "tool call arguments with NaN",
	    "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"1\","
	    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[NaN]\"}}]}]}",
	    CHAT_UNSUPPORTED);
	expect_rc("a tool call without id",
		  "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{"
		  "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
		  CHAT_INVALID);
	expect_rc("strict null (dumped by older vLLM, dropped by newer)",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
		  "\"function\","
		  "\"function\":{\"name\":\"f\",\"strict\":null}}]}",
		  CHAT_UNSUPPORTED);
	expect_rc("a tool field outside the reproduced set",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
		  "\"function\","
		  "\"function\":{\"name\":\"f\"},\"defer_loading\":true}]}",
		  CHAT_UNSUPPORTED);
	expect_rc("a tool function without a name",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
		  "\"function\","
		  "\"function\":{\"description\":\"x\"}}]}",
		  CHAT_INVALID);
	expect_rc("a number overflowing a double in tools",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
		  "\"function\","
		  "\"function\":{\"name\":\"f\",\"parameters\":{\"m\":1e999}}}]}",
		  CHAT_UNSUPPORTED);
}

static void test_out_buffer(void)
{
	struct buf out = {0};
	const char *why = NULL;
	cJSON *ok = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	cJSON *bad = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
				 "{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
				 "\"image_url\":{\"url\":\"x\"}}]}]}");
	int rc;

	buf_puts(&out, "PREFIX");
	rc = chat_render(ok, &out, &why);
	CHECK(rc == CHAT_OK && strcmp(out.data, "PREFIX<|im_start|>user\nhi<|im_end|>\n" GEN) == 0,
	      "chat_render appends to out");
	rc = chat_render(bad, &out, &why);
	CHECK(rc == CHAT_UNSUPPORTED &&
		  strcmp(out.data, "PREFIX<|im_start|>user\nhi<|im_end|>\n" GEN) == 0,
	      "a refused request leaves out as it was");
	rc = chat_render(ok, &out, NULL);
	CHECK(rc == CHAT_OK, "why may be NULL");
	buf_free(&out);
	cJSON_Delete(ok);
	cJSON_Delete(bad);
}

static void test_server_kwargs(void)
{
	cJSON *def = cJSON_Parse("{\"enable_thinking\":false}");
	struct buf out = {0};
	const char *why;
	const char *base = "{\"role\":\"user\",\"content\":\"u\"}";
	char req[256];
	int rc;

	snprintf(req, sizeof(req), "{\"messages\":[%s]}", base);
	rc = chat_render_json(req, strlen(req), def, &out, &why);
	CHECK(rc == CHAT_OK && strstr(out.data, NOTHINK), "server default enable_thinking false");
	buf_reset(&out);
	snprintf(req, sizeof(req),
		 "{\"messages\":[%s],\"chat_template_kwargs\":{\"enable_thinking\":true}}", base);
	rc = chat_render_json(req, strlen(req), def, &out, &why);
	CHECK(rc == CHAT_OK && !strstr(out.data, NOTHINK), "request kwargs override the server's");
	buf_reset(&out);
	snprintf(req, sizeof(req),
		 "{\"messages\":[%s],\"chat_template_kwargs\":{\"enable_thinking\":null}}", base);
	rc = chat_render_json(req, strlen(req), def, &out, &why);
	CHECK(rc == CHAT_OK && strstr(out.data, NOTHINK),
	      "a null request value does not override the server default (merge_kwargs)");
	buf_reset(&out);
	snprintf(req, sizeof(req), "{\"messages\":[%s],\"reasoning_effort\":\"low\"}", base);
	rc = chat_render_json(req, strlen(req), def, &out, &why);
	CHECK(rc == CHAT_OK && !strstr(out.data, NOTHINK),
	      "reasoning_effort low: enable_thinking true over the server's false");
	buf_reset(&out);
	snprintf(req, sizeof(req), "{\"messages\":[%s],\"reasoning_effort\":\"none\"}", base);
	rc = chat_render_json(req, strlen(req), NULL, &out, &why);
	CHECK(rc == CHAT_OK && strstr(out.data, NOTHINK),
	      "reasoning_effort none: enable_thinking false (build_chat_params)");
	buf_reset(&out);
	snprintf(req, sizeof(req),
		 "{\"messages\":[%s],\"reasoning_effort\":\"none\",\"chat_template_kwargs\":"
		 "{\"enable_thinking\":null}}",
		 base);
	rc = chat_render_json(req, strlen(req), NULL, &out, &why);
	CHECK(rc == CHAT_OK && !strstr(out.data, NOTHINK),
	      "reasoning_effort none with enable_thinking named (null) in the kwargs: not derived");
	buf_free(&out);
	cJSON_Delete(def);
}

/* A template (its text in a temporary tokenizer_config.json) through chat_tmpl_render. */
struct tmpl_case {
	struct chat_tmpl *t;
	char path[64];
};

static int tmpl_open(struct tmpl_case *c, const char *tmpl)
{
	cJSON *cfg = cJSON_CreateObject();
	char err[256], *text;
	FILE *f;
	int fd, rc;

	snprintf(c->path, sizeof(c->path), "/tmp/kvs-test-tmpl-XXXXXX");
	c->t = NULL;
	cJSON_AddStringToObject(cfg, "chat_template", tmpl);
	text = cJSON_PrintUnformatted(cfg);
	fd = mkstemp(c->path);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		free(text);
		cJSON_Delete(cfg);
		return -1;
	}
	fputs(text, f);
	fclose(f);
	free(text);
	cJSON_Delete(cfg);
	rc = chat_tmpl_load(c->path, &c->t, err, sizeof(err));
	unlink(c->path);
	if (rc)
		printf("#   load: %s\n", err);
	return rc;
}

/* Renders request json with t; returns the status and *text (static) or *why. */
static int tmpl_run(const struct chat_tmpl *t, const char *json, const cJSON *server,
		    const char **text, const char **why)
{
	static struct buf out;
	cJSON *req = cJSON_Parse(json);
	int rc;

	buf_free(&out);
	*why = NULL;
	rc = chat_tmpl_render(t, req, json, strlen(json), server, &out, why);
	cJSON_Delete(req);
	*text = out.data ? out.data : "";
	return rc;
}

static void tmpl_expect(const struct chat_tmpl *t, const char *what, const char *json,
			const cJSON *server, int want_rc, const char *want)
{
	const char *text, *why;
	int rc = tmpl_run(t, json, server, &text, &why);

	if (!CHECK(rc == want_rc && (rc != CHAT_OK || strcmp(text, want) == 0) &&
		       (rc == CHAT_OK || (why && *why)),
		   "%s -> %s", what, want_rc == CHAT_OK ? want : status_name(want_rc)))
		printf("#   got %s (%s) [%s]\n", status_name(rc), why ? why : "", text);
}

#define UA(a)                                                                                      \
	"{\"messages\":[{\"role\":\"user\",\"content\":\"abc\"},{\"role\":\"assistant\","          \
	"\"content\":\"" a "\"}],\"add_generation_prompt\":false,\"continue_final_message\":true}"

/* transformers' continue_final_message, documents, merged kwargs and reasoning_effort, on the
 * interpreter's path; each expected string follows by hand from transformers' rule. */
static void test_interpreter_requests(void)
{
	struct tmpl_case keep, trim, drop, docs, kw, think, effort, qwen;
	cJSON *server;
	char err[256];

	if (tmpl_open(&keep, "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
			     "{% endfor %}{% if add_generation_prompt %}<gen>{% endif %}") ||
	    tmpl_open(&trim, "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</x>"
			     "{% endfor %}") ||
	    tmpl_open(&drop, "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}"
			     "{% endif %}{% endfor %}") ||
	    tmpl_open(&docs, "{% for d in documents %}[{{ d.title }}]{% endfor %}"
			     "{{ messages[0].content }}") ||
	    tmpl_open(&kw, "{{ foo }}|{{ bar }}|{{ baz is defined }}") ||
	    tmpl_open(&think,
		      "{{ messages[0].content }}{% if enable_thinking is false %}!{% endif %}") ||
	    tmpl_open(&effort, "{{ reasoning_effort }}|{{ enable_thinking is defined }}")) {
		CHECK(0, "the test templates load");
		return;
	}
	tmpl_expect(keep.t, "continue: cut after the last message", UA("Hello"), NULL, CHAT_OK,
		    "<user>abc</user><assistant>Hello");
	tmpl_expect(keep.t, "continue: the last occurrence", UA("abc"), NULL, CHAT_OK,
		    "<user>abc</user><assistant>abc");
	tmpl_expect(keep.t, "continue: trailing spaces the template keeps", UA("Hello  "), NULL,
		    CHAT_OK, "<user>abc</user><assistant>Hello  ");
	tmpl_expect(trim.t, "continue: trailing spaces the template trims", UA("Hello \\n"), NULL,
		    CHAT_OK, "<user>abc</x><assistant>Hello");
	tmpl_expect(keep.t, "continue: leading spaces (cut after the stripped text)", UA("  Hi  "),
		    NULL, CHAT_OK, "<user>abc</user><assistant>  Hi");
	tmpl_expect(keep.t, "continue: Unicode whitespace is Python's", UA("Hi\u3000"), NULL,
		    CHAT_OK, "<user>abc</user><assistant>Hi\u3000");
	tmpl_expect(keep.t, "continue: an empty final message", UA(""), NULL, CHAT_OK,
		    "<user>abc</user><assistant></assistant>");
	tmpl_expect(drop.t, "continue: the template drops the final text (transformers raises)",
		    UA("zzz"), NULL, CHAT_INVALID, NULL);
	tmpl_expect(keep.t, "continue with add_generation_prompt left true",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
		    "\"continue_final_message\":true}",
		    NULL, CHAT_INVALID, NULL);
	tmpl_expect(
	    keep.t, "a request chat_template (untrusted)",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"chat_template\":\"x\"}", NULL,
	    CHAT_INVALID, NULL);
	tmpl_expect(docs.t, "documents reach the template",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"documents\":"
		    "[{\"title\":\"a\",\"text\":\"t\"},{\"title\":\"b\"}]}",
		    NULL, CHAT_OK, "[a][b]q");
	tmpl_expect(
	    docs.t, "the request's documents over a kwarg of that name (merge_kwargs)",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"documents\":"
	    "[{\"title\":\"r\"}],\"chat_template_kwargs\":{\"documents\":[{\"title\":\"k\"}]}}",
	    NULL, CHAT_OK, "[r]q");
	tmpl_expect(docs.t, "without request documents, the kwarg's",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
		    "\"chat_template_kwargs\":{\"documents\":[{\"title\":\"k\"}]}}",
		    NULL, CHAT_OK, "[k]q");
	tmpl_expect(docs.t, "a document's repeated key: its last value is checked (a string: fine)",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"documents\":"
		    "[{\"title\":1,\"title\":\"t\"}]}",
		    NULL, CHAT_OK, "[t]q");
	tmpl_expect(docs.t, "documents with a number (vLLM: 400)",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"documents\":"
		    "[{\"title\":1}]}",
		    NULL, CHAT_INVALID, NULL);
	server = cJSON_Parse("{\"foo\":\"S\",\"bar\":\"S2\"}");
	tmpl_expect(
	    kw.t, "server kwargs, overridden by the request except null and auto",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"chat_template_kwargs\":"
	    "{\"foo\":\"R\",\"bar\":null,\"baz\":1}}",
	    server, CHAT_OK, "R|S2|True");
	tmpl_expect(
	    kw.t, "a repeated request key: its last value decides",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"chat_template_kwargs\":"
	    "{\"foo\":\"R\",\"foo\":\"auto\"}}",
	    server, CHAT_OK, "S|S2|False");
	cJSON_Delete(server);
	server = cJSON_Parse("{\"foo\":1}");
	tmpl_expect(kw.t, "a server kwarg that is a number (spelling lost)",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", server,
		    CHAT_UNSUPPORTED, NULL);
	cJSON_Delete(server);
	tmpl_expect(
	    drop.t, "reasoning_effort with a template that reads neither name",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":\"low\"}",
	    NULL, CHAT_OK, "q");
	tmpl_expect(
	    drop.t, "an unknown reasoning_effort",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":\"x\"}",
	    NULL, CHAT_INVALID, NULL);
	tmpl_expect(
	    think.t, "reasoning_effort low: enable_thinking true",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":\"low\"}",
	    NULL, CHAT_OK, "q");
	tmpl_expect(
	    think.t, "reasoning_effort none: enable_thinking false",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":\"none\"}",
	    NULL, CHAT_OK, "q!");
	tmpl_expect(think.t,
		    "reasoning_effort high under kwargs enable_thinking false: not derived",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":"
		    "\"high\",\"chat_template_kwargs\":{\"enable_thinking\":false}}",
		    NULL, CHAT_OK, "q!");
	tmpl_expect(effort.t, "reasoning_effort reaches the template, over a kwarg of that name",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":"
		    "\"max\",\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}}",
		    NULL, CHAT_OK, "max|True");
	tmpl_expect(effort.t, "without reasoning_effort, the kwarg of that name",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
		    "\"chat_template_kwargs\":{\"reasoning_effort\":\"low\"}}",
		    NULL, CHAT_OK, "low|False");
	server = cJSON_Parse("{\"foo\":\"S\"}");
	tmpl_expect(kw.t, "with server kwargs, a null request value is dropped (with_defaults)",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
		    "\"chat_template_kwargs\":{\"baz\":null}}",
		    server, CHAT_OK, "S||False");
	cJSON_Delete(server);
	tmpl_expect(kw.t, "without server kwargs, a null request value reaches the template",
		    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
		    "\"chat_template_kwargs\":{\"baz\":null}}",
		    NULL, CHAT_OK, "||True");
	if (CHECK(chat_tmpl_load("models/qwen3/tokenizer_config.json", &qwen.t, err, sizeof(err)) ==
		      0,
		  "models/qwen3 loads")) {
		tmpl_expect(qwen.t, "Qwen3: continue_final_message through the interpreter",
			    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":"
			    "\"assistant\",\"content\":\"Hello\"}],\"add_generation_prompt\":false,"
			    "\"continue_final_message\":true}",
			    NULL, CHAT_OK,
			    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
			    "</think>\n\nHello");
		chat_tmpl_free(qwen.t);
	}
	chat_tmpl_free(keep.t);
	chat_tmpl_free(trim.t);
	chat_tmpl_free(drop.t);
	chat_tmpl_free(docs.t);
	chat_tmpl_free(kw.t);
	chat_tmpl_free(think.t);
	chat_tmpl_free(effort.t);
}

/* --trust-request-chat-template: a request's own template rendered instead of the model's,
 * compiled once and kept among the last few. */
static void test_request_templates(void)
{
	struct tmpl_case base, qwen = {0};
	struct chat_req_tmpl_stats st0, st;
	char err[256], req[512];
	const char *text, *why;
	int rc;

	if (!CHECK(tmpl_open(&base, "{{ bos_token }}<model>{{ messages[0].content }}") == 0,
		   "the model's template loads"))
		return;
#define RT(tmpl) "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"chat_template\":" tmpl "}"
	tmpl_expect(base.t, "untrusted: a request template is vLLM's 400",
		    RT("\"<req>{{ messages[0].content }}\""), NULL, CHAT_INVALID, NULL);
	CHECK(chat_server_configure(NULL, true, err, sizeof(err)) == 0, "trust request templates");
	chat_req_tmpl_clear();
	chat_req_tmpl_stats(&st0);
	tmpl_expect(base.t, "trusted: the request's template replaces the model's",
		    RT("\"<req>{{ messages[0].content }}{{ add_generation_prompt }}\""), NULL,
		    CHAT_OK, "<req>qTrue");
	tmpl_expect(base.t, "trusted: the same template again",
		    RT("\"<req>{{ messages[0].content }}{{ add_generation_prompt }}\""), NULL,
		    CHAT_OK, "<req>qTrue");
	chat_req_tmpl_stats(&st);
	CHECK(st.compiles - st0.compiles == 1 && st.hits - st0.hits == 1,
	      "compiled once, found the second time (%llu compiles, %llu hits)",
	      (unsigned long long)(st.compiles - st0.compiles),
	      (unsigned long long)(st.hits - st0.hits));
	tmpl_expect(
	    base.t, "trusted: its content format is its own (openai: it loops over content)",
	    RT("\"{% for p in messages[0].content %}{{ p.type }}:{{ p.text }}{% endfor %}\""), NULL,
	    CHAT_OK, "text:q");
	tmpl_expect(base.t, "trusted: a null chat_template is the model's", RT("null"), NULL,
		    CHAT_OK, "None<model>q");
	tmpl_expect(base.t, "trusted: an empty chat_template is the model's (request or default)",
		    RT("\"\""), NULL, CHAT_OK, "None<model>q");
	tmpl_expect(base.t, "trusted: a template with a syntax error is vLLM's 400",
		    RT("\"{% for m in messages %}\""), NULL, CHAT_INVALID, NULL);
	tmpl_expect(base.t, "trusted: a chat_template that is not a string", RT("7"), NULL,
		    CHAT_INVALID, NULL);
	tmpl_expect(base.t, "trusted: a template that raises",
		    RT("\"{{ raise_exception('no') }}\""), NULL, CHAT_INVALID, NULL);
	tmpl_expect(base.t, "trusted: valid Jinja the interpreter does not implement",
		    RT("\"{% filter upper %}x{% endfilter %}\""), NULL, CHAT_UNSUPPORTED, NULL);
	tmpl_expect(base.t, "trusted: a template that runs past the step bound",
		    RT("\"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
		       "{% endfor %}\""),
		    NULL, CHAT_UNSUPPORTED, NULL);
	/* 20 templates through 16 slots: the oldest are compiled again, the newest found */
	chat_req_tmpl_clear();
	chat_req_tmpl_stats(&st0);
	for (int i = 0; i < 20; i++) {
		snprintf(req, sizeof(req), RT("\"t%d\""), i);
		rc = tmpl_run(base.t, req, NULL, &text, &why);
		CHECK(rc == CHAT_OK && atoi(text + 1) == i, "template %d rendered", i);
	}
	snprintf(req, sizeof(req), RT("\"t%d\""), 19);
	rc = tmpl_run(base.t, req, NULL, &text, &why);
	snprintf(req, sizeof(req), RT("\"t%d\""), 0);
	rc |= tmpl_run(base.t, req, NULL, &text, &why);
	chat_req_tmpl_stats(&st);
	CHECK(rc == CHAT_OK && st.compiles - st0.compiles == 21 && st.hits - st0.hits == 1,
	      "least recently used out: t19 found, t0 compiled again (%llu compiles, %llu hits)",
	      (unsigned long long)(st.compiles - st0.compiles),
	      (unsigned long long)(st.hits - st0.hits));
	if (CHECK(chat_tmpl_load("models/qwen3/tokenizer_config.json", &qwen.t, err, sizeof(err)) ==
		      0,
		  "models/qwen3 loads"))
		tmpl_expect(qwen.t, "trusted: Qwen3's model renders a request's template too",
			    RT("\"{{ eos_token }}{{ messages[0].content }}\""), NULL, CHAT_OK,
			    "<|im_end|>q");
#undef RT
	chat_tmpl_free(qwen.t);
	chat_tmpl_free(base.t);
	chat_req_tmpl_clear();
	CHECK(chat_server_configure("[1]", false, err, sizeof(err)) == -EINVAL,
	      "server kwargs that are not an object: refused (%s)", err);
	CHECK(chat_server_configure(NULL, false, err, sizeof(err)) == 0, "back to untrusted");
}

static void test_template_check(void)
{
	const char *why = NULL;
	FILE *f;
	char path[] = "/tmp/kvs-test-chat-XXXXXX";
	int fd, rc;

	rc = chat_config_check("models/qwen3/tokenizer_config.json", &why);
	CHECK_EQ(rc, 0, "models/qwen3/tokenizer_config.json holds the template chat.c renders");
	CHECK_EQ(chat_template_check("{{ messages }}", 14), -ENOTSUP, "another template differs");
	rc = chat_config_check("/nonexistent/tokenizer_config.json", &why);
	CHECK(rc == -ENOENT && why, "missing file: -ENOENT with a reason");
	fd = mkstemp(path);
	if (fd >= 0) {
		f = fdopen(fd, "w");
		fputs("{\"chat_template\":\"{% for m in messages %}{{ m.content }}{% endfor %}\"}",
		      f);
		fclose(f);
		rc = chat_config_check(path, &why);
		CHECK(rc == -ENOTSUP && why, "a config with another template: -ENOTSUP");
		f = fopen(path, "w");
		fputs("{\"bos_token\":null}", f);
		fclose(f);
		rc = chat_config_check(path, &why);
		CHECK(rc == -EINVAL && why, "a config without chat_template: -EINVAL");
		f = fopen(path, "w");
		fputs("not json", f);
		fclose(f);
		rc = chat_config_check(path, &why);
		CHECK(rc == -EINVAL && why, "a config that is not JSON: -EINVAL");
		unlink(path);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--render") == 0)
		return render_mode();
	test_basics();
	test_content_parts();
	test_roles();
	test_reasoning();
	test_refused();
	test_tools();
	test_out_buffer();
	test_server_kwargs();
	test_template_check();
	test_interpreter_requests();
	test_request_templates();
	return tap_done();
}
