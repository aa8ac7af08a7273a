/* SPDX-License-Identifier: Apache-2.0 */
/* utf8: one code point written or read as UTF-8, for the JSON reader, the tokenizer and the regex
 * engine. Header only. */
#ifndef KVS_UTF8_H
#define KVS_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point c (at most 0x10FFFF; surrogates are the caller's business) at o, which has
 * room for 4 bytes. Returns the number of bytes written, 1 to 4. */
static inline size_t utf8_put(uint8_t *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (uint8_t)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (uint8_t)(0xC0 | c >> 6);
		o[1] = (uint8_t)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (uint8_t)(0xE0 | c >> 12);
		o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
		o[2] = (uint8_t)(0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (uint8_t)(0xF0 | c >> 18);
	o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
	o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
	o[3] = (uint8_t)(0x80 | (c & 0x3F));
	return 4;
}

/* Decodes one UTF-8 sequence of s[0..n) (n >= 1) by Unicode's maximal-subpart rule: sets *cp
 * (U+FFFD for an ill-formed subpart) and returns the bytes consumed (>= 1). Reads nothing past n.
 * This is how the tokenizer and the regex engine read text, so both cut ill-formed input alike. */
static inline size_t utf8_get(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0];
	uint8_t lo = 0x80, hi = 0xBF;
	size_t need;
	uint32_t c;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xC2 && b <= 0xDF) {
		need = 1;
		c = b & 0x1F;
	} else if (b >= 0xE0 && b <= 0xEF) {
		need = 2;
		c = b & 0x0F;
		if (b == 0xE0)
			lo = 0xA0;
		else if (b == 0xED)
			hi = 0x9F;
	} else if (b >= 0xF0 && b <= 0xF4) {
		need = 3;
		c = b & 0x07;
		if (b == 0xF0)
			lo = 0x90;
		else if (b == 0xF4)
			hi = 0x8F;
	} else {
		*cp = 0xFFFD;
		return 1;
	}
	for (size_t k = 1; k <= need; k++) {
		if (k >= n || s[k] < lo || s[k] > hi) {
			*cp = 0xFFFD;
			return k;
		}
		c = (c << 6) | (s[k] & 0x3F);
		lo = 0x80;
		hi = 0xBF;
	}
	*cp = c;
	return need + 1;
}

/* The start of the sequence utf8_get reads just before p, reading forward from a sequence start
 * `start` < p: the boundaries are those of utf8_get's reading from start. Why this works without
 * rescanning: a byte that is not a continuation byte (0x80..0xBF) always starts a sequence, and a
 * sequence is at most 4 bytes, so the last such byte in [max(start, p - 4), p) starts the sequence
 * that ends at p, unless that sequence ends before p (then the byte before p is a lone
 * continuation byte, read as one U+FFFD); with none, the byte before p is a lone one too. */
static inline size_t utf8_prev(const uint8_t *s, size_t start, size_t p)
{
	size_t lim = p - start > 4 ? p - 4 : start, j = p - 1;
	uint32_t c;

	if ((s[j] & 0xC0) != 0x80)
		return j;
	while (j > lim && (s[j] & 0xC0) == 0x80)
		j--;
	if ((s[j] & 0xC0) == 0x80 || j + utf8_get(s + j, p - j, &c) != p)
		return p - 1;
	return j;
}

#endif
