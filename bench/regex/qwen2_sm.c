// SPDX-License-Identifier: Apache-2.0
/* The tokenizer's hand-written Qwen2 split (split_next, file-static in
 * userspace/prompt/tokenizer.c), reached by compiling tokenizer.c into the bench: the regex bench
 * measures the state machine it may replace on the same text. If tokenizer.c drops split_next, drop
 * this file and the column. */
#include "prompt/tokenizer.c"

#include "qwen2_sm.h"

size_t qwen2_sm_pieces(const uint8_t *s, size_t n, size_t *bytes_check)
{
	size_t i = 0, k = 0, sum = 0;

	while (i < n) {
		size_t e = split_next(s, n, i, 1); /* 1: Qwen2's \p{N} */
		sum += e - i;
		i = e;
		k++;
	}
	*bytes_check = sum;
	return k;
}
