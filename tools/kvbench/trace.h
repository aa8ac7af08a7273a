/* SPDX-License-Identifier: Apache-2.0 */
/* trace: a request trace in the Mooncake / aiperf `mooncake_trace` JSONL format, and the prompts
 * kvbench replays from it.
 *
 * Format: one JSON object a line: "timestamp" (arrival, ms from the trace's start),
 * "input_length" and "output_length" (tokens), "hash_ids" (one id per 512-token block of the
 * input; equal ids mean equal content, a shared leading run a shared prefix; the last block may be
 * partial). Other fields are ignored; blank lines are skipped but counted in line numbers.
 *
 * Prompts: each hash id stands for B token ids (B = --trace-block-tokens, 512 for a faithful
 * replay, smaller to shrink the trace), token i of id h being trace_token(h, i): a fixed function
 * of (h, i), so equal ids give equal tokens in every run, on every worker, for any B (the tokens
 * of a block of B are the first B tokens of the block of 512). Lengths scale by B/512.
 *
 * Stateless apart from struct trace; thread-compatible (a trace is read-only once loaded). */
#ifndef KVS_TRACE_H
#define KVS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef TRACE_FORMAT_BLOCK
#define TRACE_FORMAT_BLOCK 512 /* tokens: what one hash id stands for in the trace format */
#endif
#ifndef TRACE_TOKEN_FIRST
#define TRACE_TOKEN_FIRST 1000 /* token id: the lowest a prompt uses */
#endif
#ifndef TRACE_TOKEN_COUNT
/* token ids: how many a prompt draws from, [TRACE_TOKEN_FIRST, TRACE_TOKEN_FIRST + this). Qwen3's
 * ordinary vocabulary is ids 0..151642; 151643 on are special and added tokens, never used. */
#define TRACE_TOKEN_COUNT 150000
#endif
#ifndef TRACE_MAX_LENGTH
#define TRACE_MAX_LENGTH (1u << 30) /* tokens: the largest input_length or output_length read */
#endif

struct trace_row {
	double t_ms;		/* "timestamp", ms */
	uint64_t input_length;	/* tokens, at 512 per hash id */
	uint64_t output_length; /* tokens */
	size_t ids_off;		/* its hash ids: trace.ids[ids_off .. ids_off + nids) */
	size_t nids;
	uint32_t line; /* 1-based line of the file */
};

struct trace {
	struct trace_row *rows; /* the kept rows, in file order (timestamps never decrease) */
	size_t n;
	uint64_t *ids; /* every kept row's hash ids, back to back */
	size_t nids;
	uint32_t lines; /* lines read (up to the last kept row when a limit stopped the read) */
};

/* Reads the JSONL text[0..len) into *t (zeroed here; free with trace_free, also on failure).
 * Rows (non-blank lines) before index skip are checked but not kept; reading stops once limit rows
 * are kept (0: no limit). Returns 0, -ENOMEM, or -EINVAL with "line N: problem" in err for: text
 * that is not one JSON object (bad JSON names a column near the fault), a missing field, a field of
 * the wrong type (a non-number timestamp, a length or hash id that is not a non-negative integer,
 * hash_ids not an array), a negative length, a length above TRACE_MAX_LENGTH, empty hash_ids with
 * input_length > 0, an empty prompt (input_length 0: vLLM refuses it), a timestamp below the
 * previous row's (traces come sorted; this reader does not sort them). */
int trace_parse(const char *text, size_t len, size_t skip, size_t limit, struct trace *t, char *err,
		size_t errlen);

/* trace_parse on the file at path, read a line at a time (a limit stops the read). Returns as
 * trace_parse with "PATH: line N: problem" in err, or -errno with "PATH: reason" when the file
 * cannot be read. */
int trace_load(const char *path, size_t skip, size_t limit, struct trace *t, char *err,
	       size_t errlen);

/* Frees what t holds and zeroes it (a zeroed or already freed trace is fine). */
void trace_free(struct trace *t);

/* The token at position pos (0..TRACE_FORMAT_BLOCK - 1) of the block of hash id id: a fixed
 * function of both (splitmix64 of the two), in [TRACE_TOKEN_FIRST, TRACE_TOKEN_FIRST +
 * TRACE_TOKEN_COUNT). Ids whose tokens happen to coincide (1 in TRACE_TOKEN_COUNT per token) are
 * not told apart by trace_ideal, which goes by ids. */
uint32_t trace_token(uint64_t id, uint32_t pos);

/* The number of tokens of block i of row r's prompt with bt tokens per hash id (1..512): bt for
 * every block but the last, which is cut to the row's scaled length (trace_prompt_len). 0 when i
 * is past the last block. */
uint32_t trace_block_len(const struct trace_row *r, uint32_t bt, size_t i);

/* The length of row r's prompt with bt tokens per hash id (1..512): round(input_length * bt / 512)
 * with the last block cut to fit, clamped to whole blocks of 1..bt tokens each (see trace.c).
 * *clamped (may be NULL) says whether the clamp changed it. */
uint64_t trace_prompt_len(const struct trace_row *r, uint32_t bt, bool *clamped);

/* Writes row r's prompt, trace_prompt_len(r, bt) token ids, to out (room for that many). */
void trace_prompt(const struct trace *t, const struct trace_row *r, uint32_t bt, uint32_t *out);

/* The max_tokens row r asks for: max(1, round(output_length * bt / 512)), at most cap (0: none). */
uint32_t trace_max_tokens(const struct trace_row *r, uint32_t bt, uint32_t cap);

/* What the trace itself can reuse: an infinite prefix cache on one worker that receives every row
 * in order, each finishing before the next, counted as vLLM counts (whole kv_block-token blocks,
 * at most prompt - 1 tokens): a row's cached tokens are its longest common token prefix with any
 * earlier row, rounded down to whole blocks. */
struct trace_reuse {
	uint64_t prompt_tokens; /* the rows' prompt lengths, summed */
	uint64_t cached_tokens; /* their cached tokens, summed */
	size_t hit_rows;	/* rows with cached tokens > 0 */
	double ratio;		/* cached_tokens / prompt_tokens (0 for no tokens) */
};

/* Fills *out for the rows of t with bt tokens per hash id (1..512) and kv_block-token cache
 * blocks (> 0); row_cached (NULL, or room for t->n) gets each row's cached tokens. Returns 0, or
 * -ENOMEM. */
int trace_ideal(const struct trace *t, uint32_t bt, uint32_t kv_block, struct trace_reuse *out,
		uint64_t *row_cached);

#endif
