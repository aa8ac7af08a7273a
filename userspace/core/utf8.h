/* SPDX-License-Identifier: Apache-2.0 */
/* utf8: one code point written as UTF-8, for the JSON reader and the tokenizer. Header only. */
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

#endif
