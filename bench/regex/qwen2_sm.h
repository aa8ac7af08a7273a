/* SPDX-License-Identifier: Apache-2.0 */
/* qwen2_sm: the tokenizer's Qwen2 split state machine, for the regex bench (qwen2_sm.c). */
#ifndef KVS_BENCH_QWEN2_SM_H
#define KVS_BENCH_QWEN2_SM_H

#include <stddef.h>
#include <stdint.h>

/* Cuts valid UTF-8 s[0..n) as tokenizer.c's split_next does: returns the number of pieces, and
 * in *bytes_check the bytes they cover (n). */
size_t qwen2_sm_pieces(const uint8_t *s, size_t n, size_t *bytes_check);

#endif
