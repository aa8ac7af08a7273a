// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/jinja: parse and render arbitrary input under small
 * bounds. The input is TEMPLATE, or TEMPLATE NUL VARIABLES (JSON text); without variables a
 * fixed object of every value type is used, so templates reach attribute, item, filter and
 * method paths. Each template is rendered twice (the tree is read only: the same result both
 * times). Checked: no crash or sanitizer report, a known status, out untouched on an error,
 * the output within its bound, and the load errors carrying a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt/jinja.h"

static const char default_vars[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S é\"},{\"role\":\"user\",\"content\":"
    "\"hi\\n<think>x</think>\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
    "\"abcdefghi\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1.5,"
    "\"b\":[1,true,null]}}}]},{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":"
    "\"abcdefghi\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"}}}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\","
    "\"a\":3,\"b\":1.0,\"s\":\"a,b c\",\"l\":[1,\"x\",[2]],\"d\":{\"k\":\"v\",\"items\":2},"
    "\"n\":null,\"f\":false,\"big\":9223372036854775807,\"inf\":Infinity}";

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_jinja: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *src = (const char *)data, *vars = default_vars;
	size_t n = size, vn = sizeof(default_vars) - 1;
	const uint8_t *nul = memchr(data, 0, size);
	struct jinja_limits lim;
	struct jinja_clock clock = {1700000000, 3600};
	struct jinja_template *t = NULL;
	struct jinja_error e;
	struct buf out = {0}, again = {0};
	int rc, rc2;

	if (nul) {
		n = (size_t)(nul - data);
		vars = (const char *)nul + 1;
		vn = size - n - 1;
	}
	rc = jinja_load(src, n, &t, &e);
	if (rc) {
		if (rc != JINJA_SYNTAX && rc != JINJA_UNSUPPORTED && rc != -12)
			fail("load: unknown status");
		if (rc > 0 && (!e.msg[0] || e.status != rc))
			fail("load: an error without a message");
		if (t)
			fail("load: a template on error");
		return 0;
	}
	jinja_limits_default(&lim);
	lim.steps = 20000;
	lim.loop_iters = 2000;
	lim.out_bytes = 16 << 10;
	lim.mem_bytes = 2 << 20;
	lim.depth = 48;
	buf_puts(&out, "#");
	rc = jinja_render(t, vars, vn, &lim, &clock, &out, &e);
	if (rc < -12 || rc > JINJA_INPUT)
		fail("render: unknown status");
	if (rc && (out.len != 1 || out.data[0] != '#'))
		fail("render: out changed on an error");
	if (rc > 0 && !e.msg[0] && rc != JINJA_RAISED)
		fail("render: an error without a message");
	if (!rc && out.len - 1 > lim.out_bytes)
		fail("render: output beyond its bound");
	buf_puts(&again, "#");
	rc2 = jinja_render(t, vars, vn, &lim, &clock, &again, &e);
	if (rc2 != rc || again.len != out.len || memcmp(again.data, out.data, out.len))
		fail("render: a second render differs");
	buf_free(&out);
	buf_free(&again);
	jinja_free(t);
	return 0;
}
