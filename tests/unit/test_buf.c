// SPDX-License-Identifier: Apache-2.0
#include <stdlib.h>

#include "core/buf.h"
#include "tap.h"

static void test_append_consume(void)
{
	struct buf b = {0};

	CHECK(buf_puts(&b, "hello ") == 0, "append");
	CHECK(buf_printf(&b, "%s %d", "world", 42) == 0, "printf");
	CHECK_STREQ(buf_rptr(&b), "hello world 42", "content is NUL-terminated text");
	buf_consume(&b, 6);
	CHECK_EQ(buf_unread(&b), 8, "consume moves the read offset");
	buf_consume(&b, 8);
	CHECK_EQ(b.len, 0, "consuming everything resets the buffer");
	buf_free(&b);
}

/* An empty buffer (data NULL) reads as NULL with nothing unread, without NULL + 0 (UBSan). */
static void test_empty(void)
{
	struct buf b = {0};

	CHECK(buf_rptr(&b) == NULL && buf_unread(&b) == 0, "an empty buffer: no bytes, no pointer");
}

static void test_grow_slides(void)
{
	struct buf b = {0};
	char chunk[100];

	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 100; i++)
		buf_append(&b, chunk, sizeof(chunk));
	CHECK_EQ(buf_unread(&b), 10000, "10000 bytes appended");
	buf_consume(&b, 9990);
	size_t cap = b.cap;
	buf_append(&b, chunk, 50);
	CHECK_EQ(b.cap, cap, "room at the front is reused before growing");
	CHECK_EQ(buf_unread(&b), 60, "unread bytes kept");
	buf_free(&b);
}

static void test_json_str(void)
{
	struct buf b = {0};

	buf_json_str(&b, "a\"b\\c\n\x01\xc3\xa9\b\f\x7f", 12);
	CHECK_STREQ(b.data, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\b\\f\x7f\"",
		    "JSON escaping as json.dumps(ensure_ascii=False)");
	buf_free(&b);
}

int main(void)
{
	test_append_consume();
	test_empty();
	test_grow_slides();
	test_json_str();
	return tap_done();
}
