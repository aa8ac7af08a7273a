// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

int buf_reserve(struct buf *b, size_t n)
{
	size_t need = b->len + n + 1, cap;
	char *p;

	if (need <= b->cap)
		return 0;
	if (b->off > 0 && b->len - b->off + n + 1 <= b->cap) {
		/* Room exists at the front: slide the unread bytes down instead of growing. */
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		b->data[b->len] = '\0';
		return 0;
	}
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n))
		return -ENOMEM;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n))
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int buf_json_str(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, run = 0;

	if (buf_append(b, "\"", 1))
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		const char *rep = NULL;
		size_t rlen = 2;

		switch (c) {
		case '"':
			rep = "\\\"";
			break;
		case '\\':
			rep = "\\\\";
			break;
		case '\n':
			rep = "\\n";
			break;
		case '\r':
			rep = "\\r";
			break;
		case '\t':
			rep = "\\t";
			break;
		case '\b':
			rep = "\\b";
			break;
		case '\f':
			rep = "\\f";
			break;
		default:
			if (c < 0x20) {
				rep = esc;
				rlen = 6;
			}
		}
		if (!rep)
			continue;
		if (buf_append(b, s + run, i - run) || buf_append(b, rep, rlen))
			return -ENOMEM;
		run = i + 1;
	}
	if (buf_append(b, s + run, n - run) || buf_append(b, "\"", 1))
		return -ENOMEM;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len)
		buf_reset(b);
}

void buf_reset(struct buf *b)
{
	b->len = b->off = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->off = b->cap = 0;
}
