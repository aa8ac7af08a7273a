// SPDX-License-Identifier: Apache-2.0
/* json.h: what the strict reader takes and what it leaves to cJSON, and that what it takes is
 * cJSON's tree (json_same.h). Rows of {input, taken?, why}; every row is also read cut at every
 * byte, where a taken prefix must again be cJSON's tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "json_same.h"
#include "tap.h"

struct row {
	const char *in;
	size_t len; /* 0: strlen(in) */
	int taken;  /* 1: json_parse_strict reads it; 0: it declines */
	const char *what;
};

static const struct row rows[] = {
    {"{}", 0, 1, "an empty object"},
    {"[]", 0, 1, "an empty array"},
    {" \t\r\n{ \"a\" : 1 ,\"b\":[ 2 , 3 ] } \n", 0, 1, "JSON white space everywhere"},
    {"\"x\"", 0, 1, "a string alone"},
    {"0", 0, 1, "zero"},
    {"-0", 0, 1, "minus zero (a -0.0 double, as strtod gives)"},
    {"[1,22,-333,123456789012345,-999999999999999]", 0, 1, "integers of up to 15 digits"},
    {"[1234567890123456,12345678901234567890123]", 0, 1, "longer integers (strtod)"},
    {"[1.5,-2.5E-3,1e5,1E+2,0.1,3e-400]", 0, 1, "fractions and exponents"},
    {"[1e400,-1e400,2147483647,2147483648,-2147483648,-2147483649]", 0, 1,
     "overflow to infinity; valueint saturated"},
    {"[true,false,null]", 0, 1, "literals"},
    {"{\"a\":1,\"a\":2}", 0, 1, "a repeated key: both kept, in order"},
    {"{\"s\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}", 0, 1, "the short escapes"},
    {"\"\\u00e9\\u4E2D\\uD83D\\uDE00\\u0041\"", 0, 1, "\\u escapes: 2, 3, 4 bytes, a pair, ASCII"},
    {"\"caf\xc3\xa9 \xe4\xb8\xad \xff\xfe\"", 0, 1, "raw UTF-8, and bytes that are not, copied"},
    {"[[[[[[[[[[{\"a\":[{}]}]]]]]]]]]]", 0, 1, "nesting"},
    {"\"0123456789abcdef0123456789\\\"abcdef0123456789\"", 0, 1, "an escaped quote past 8 bytes"},
    {"", 0, 0, "empty input"},
    {"   ", 0, 0, "white space only"},
    {"\xef\xbb\xbf{}", 0, 0, "a byte order mark (cJSON skips it)"},
    {"{} x", 0, 0, "text after the value (cJSON stops reading; Python refuses)"},
    {"{}\0", 3, 0, "a NUL after the value"},
    {"\f{}", 0, 0, "form feed as white space (cJSON skips any byte <= 32)"},
    {"{\"a\":1,}", 0, 0, "a trailing comma in an object"},
    {"[1,]", 0, 0, "a trailing comma in an array"},
    {"[01]", 0, 0, "a leading zero"},
    {"[1.]", 0, 0, "a fraction without digits"},
    {"[.5]", 0, 0, "a fraction without an integer"},
    {"[+1]", 0, 0, "a plus sign"},
    {"[1e]", 0, 0, "an exponent without digits"},
    {"[-]", 0, 0, "a minus alone"},
    {"[1234567890123456789012345678901234567890123456789]", 0, 0,
     "a number longer than JSON_NUM_MAX"},
    {"\"a\\u0000b\"", 0, 0, "\\u0000 (cJSON ends the string there)"},
    {"\"\\uD800\"", 0, 0, "a lone high surrogate"},
    {"\"\\uDC00\"", 0, 0, "a lone low surrogate"},
    {"\"\\uD800\\u0041\"", 0, 0, "a high surrogate before a non-surrogate"},
    {"\"\\u12G4\"", 0, 0, "\\u with a non-hex digit (cJSON writes U+0000)"},
    {"\"\\u12\"", 0, 0, "\\u cut short"},
    {"\"\\q\"", 0, 0, "an unknown escape"},
    {"\"a\x01z\"", 0, 0, "a raw control byte in a string (cJSON keeps it)"},
    {"\"abc", 0, 0, "an unterminated string"},
    {"\"abc\\", 0, 0, "a backslash at the end"},
    {"[nul]", 0, 0, "a cut literal"},
    {"{\"a\" 1}", 0, 0, "a missing colon"},
    {"{1:2}", 0, 0, "a key that is not a string"},
    {"[1 2]", 0, 0, "a missing comma"},
};

/* Checks one row (prefix: a cut of one, reported only when wrong). Returns whether it held. */
static bool check_row(const char *in, size_t len, int want, const char *what, bool prefix)
{
	cJSON *ref = cJSON_ParseWithLength(in, len), *fast = (cJSON *)1, *any;
	int rc = json_parse_strict(in, len, &fast);
	bool same = rc == 1 ? json_same(fast, ref, 0) : fast == NULL, held;

	any = json_parse(in, len);
	held = (prefix ? rc >= 0 : rc == want) && same && json_same(any, ref, 0);
	if (!prefix)
		CHECK(held, "%s: %s%s", what,
		      want ? "read, cJSON's tree" : "declined, cJSON's answer",
		      !want && ref ? " (cJSON takes it)" : "");
	else if (!held)
		CHECK(0, "%s, cut to %zu bytes: rc %d", what, len, rc);
	cJSON_Delete(any);
	cJSON_Delete(fast);
	cJSON_Delete(ref);
	return held;
}

static void test_rows(void)
{
	size_t cuts = 0, bad = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t len = rows[i].len ? rows[i].len : strlen(rows[i].in);

		check_row(rows[i].in, len, rows[i].taken, rows[i].what, false);
		for (size_t k = 0; k < len; k++, cuts++)
			bad += !check_row(rows[i].in, k, -1, rows[i].what, true);
	}
	CHECK(cuts > 0 && bad == 0,
	      "every row cut at every byte: a prefix read is cJSON's tree (%zu cuts, %zu wrong)",
	      cuts, bad);
}

/* Values the tree must hold, beyond sameness with cJSON. */
static void test_values(void)
{
	const char *in = "{\"n\":[-0,1e400,2147483648,-7],\"s\":\"\\u00e9\\uD83D\\uDE00\"}";
	cJSON *j = NULL;
	const cJSON *n, *s;

	CHECK(json_parse_strict(in, strlen(in), &j) == 1, "a request-like object read");
	n = cJSON_GetObjectItem(j, "n");
	s = cJSON_GetObjectItem(j, "s");
	CHECK(cJSON_GetArraySize(n) == 4 && n->child->prev == n->child->next->next->next,
	      "4 numbers; the first item's prev is the last, as cJSON links them");
	CHECK(cJSON_GetArrayItem(n, 0)->valuedouble == 0 &&
		  __builtin_signbit(cJSON_GetArrayItem(n, 0)->valuedouble),
	      "-0 is a negative zero");
	CHECK(cJSON_GetArrayItem(n, 1)->valueint == 2147483647 &&
		  cJSON_GetArrayItem(n, 2)->valueint == 2147483647 &&
		  cJSON_GetArrayItem(n, 3)->valueint == -7,
	      "valueint saturates at INT_MAX");
	CHECK_STREQ(s->valuestring, "\xc3\xa9\xf0\x9f\x98\x80", "é and U+1F600 from their escapes");
	cJSON_Delete(j);
	in = "{\"a\":1,\"b\":2,\"a\":3}";
	j = json_parse(in, strlen(in));
	CHECK(json_get(j, "a")->valueint == 3 && cJSON_GetObjectItem(j, "a")->valueint == 1 &&
		  json_get(j, "b")->valueint == 2 && !json_get(j, "c") &&
		  !json_get(cJSON_GetObjectItem(j, "b"), "a"),
	      "json_get: the last of a repeated key (as Python keeps it), none, not an object");
	cJSON_Delete(j);
}

static void test_depth(void)
{
	size_t n = JSON_DEPTH_MAX + 1;
	char *deep = malloc(2 * n);

	memset(deep, '[', n);
	memset(deep + n, ']', n);
	check_row(deep, 2 * n, 0, "nesting one deeper than JSON_DEPTH_MAX", false);
	check_row(deep + 1, 2 * n - 2, 1, "nesting at JSON_DEPTH_MAX", false);
	free(deep);
}

int main(void)
{
	test_rows();
	test_values();
	test_depth();
	return tap_done();
}
