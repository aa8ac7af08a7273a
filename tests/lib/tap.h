/* SPDX-License-Identifier: Apache-2.0 */
/* TAP helpers for the C unit tests: CHECK(cond, "what %d", x) prints "ok - what" or
 * "not ok - what (file:line: cond)"; main() returns tap_done(). tests/run.sh counts the lines. */
#ifndef KVS_TAP_H
#define KVS_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_failed;

__attribute__((format(printf, 5, 6))) static inline int
tap_check(int pass, const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", pass ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (!pass) {
		printf(" (%s:%d: %s)", file, line, expr);
		tap_failed++;
	}
	printf("\n");
	fflush(stdout);
	return pass;
}

#define CHECK(cond, ...) tap_check(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)
/* Each argument is evaluated once, so calls with side effects are fine. */
#define CHECK_EQ(a, b, what)                                                                       \
	({                                                                                         \
		long long tap_a_ = (long long)(a), tap_b_ = (long long)(b);                        \
		tap_check(tap_a_ == tap_b_, __FILE__, __LINE__, #a " == " #b,                      \
			  "%s (got %lld, want %lld)", what, tap_a_, tap_b_);                       \
	})
#define CHECK_STREQ(a, b, what)                                                                    \
	tap_check(strcmp((a), (b)) == 0, __FILE__, __LINE__, #a " == " #b, "%s", what)

static inline int tap_done(void)
{
	return tap_failed ? 1 : 0;
}

#endif
