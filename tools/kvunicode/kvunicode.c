// SPDX-License-Identifier: Apache-2.0
/* kvunicode: dumps the tokenizer's Unicode tables (userspace/prompt/unicode_tables) for
 * verification scripts (tests/js/verify_unicode.mjs): writes to stdout 0x110000 bytes of class
 * (UCLS_* with the UCLS_NFC flag) then 0x110000 bytes of the ASCII letter each code point
 * case-folds to (0 if none), one per code point U+0000..U+10FFFF. Usage: build/kvunicode >
 * tables.bin */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "prompt/unicode_tables.h"

int main(int argc, char **argv)
{
	static uint8_t out[2 * 0x110000];

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: kvunicode > tables.bin\n");
		return 2;
	}
	for (uint32_t c = 0; c < 0x110000; c++) {
		out[c] = unicode_cls(c);
		if (c < 0x80)
			out[0x110000 + c] = (c >= 'A' && c <= 'Z')   ? (uint8_t)(c + 32)
					    : (c >= 'a' && c <= 'z') ? (uint8_t)c
								     : 0;
		else
			out[0x110000 + c] = (uint8_t)unicode_fold_ascii(c);
	}
	if (fwrite(out, 1, sizeof(out), stdout) != sizeof(out) || fflush(stdout)) {
		perror("kvunicode");
		return 1;
	}
	return 0;
}
