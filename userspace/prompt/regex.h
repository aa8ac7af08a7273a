/* SPDX-License-Identifier: Apache-2.0 */
/* regex: the split-regex engine of the tokenizer's Split pre-tokenizer. It matches exactly as the
 * reference (Hugging Face tokenizers, which runs Oniguruma on Unicode 16.0) does for the subset of
 * Oniguruma syntax the model families' Split patterns use: alternation, groups (capturing or not,
 * `(?i:...)` with simple case folding), lookahead `(?=...)` `(?!...)`, greedy and lazy
 * `? * + {m,n} {m} {m,} {,n}`, `.`, character classes with ranges and negation, `\p{..}` `\P{..}`
 * of every General_Category value (short and long names), `\s \S \d \D \w \W` with Oniguruma's
 * Unicode meaning, and the usual escapes. Everything else (anchors, backreferences, lookbehind,
 * atomic groups, possessive quantifiers, nested classes, scripts, ...) is refused at compile time,
 * naming the construct, so that a pattern either matches as the reference does or is not taken.
 * Unicode data: unicode_tables (Unicode 16.0.0, the reference's). */
#ifndef KVS_REGEX_H
#define KVS_REGEX_H

#include <stddef.h>
#include <stdint.h>

/* The step budget of one regex_search: REGEX_STEPS_BASE + REGEX_STEPS_PER_BYTE * (n - from) steps
 * (one step: one instruction, one backtrack, or one byte consumed by a repetition). The
 * families' patterns take a few steps a byte; a search that would take more returns -E2BIG. */
#ifndef REGEX_STEPS_BASE
#define REGEX_STEPS_BASE (1u << 16)
#endif
#ifndef REGEX_STEPS_PER_BYTE
#define REGEX_STEPS_PER_BYTE 64u
#endif
/* Backtracking entries one search may hold at once (on the C stack, 24 bytes each); a search
 * that needs more returns -E2BIG. */
#ifndef REGEX_STACK_MAX
#define REGEX_STACK_MAX 512
#endif

struct regex; /* compiled; read-only after compile: any threads may match at once */

/* Compiles pattern pat[0..len) (Oniguruma syntax, as HF tokenizers reads a Split "Regex").
 * Returns NULL with a message in err naming the unsupported construct or the syntax error. */
struct regex *regex_compile(const char *pat, size_t len, char *err, size_t errlen);
void regex_free(struct regex *re);

/* regex_compile with options: REGEX_PROGRAM_ONLY matches every alternative with the general
 * program instead of the direct backtracker that simple alternatives get (same matches, slower:
 * for tests comparing the two). */
#define REGEX_PROGRAM_ONLY 1u
struct regex *regex_compile_opts(const char *pat, size_t len, unsigned opts, char *err,
				 size_t errlen);

/* The leftmost match in s[0..n) starting at or after byte from (Oniguruma's search: leftmost start;
 * at that start, the match its backtracking order finds first: alternatives in order, greedy
 * quantifiers longest first). Returns 1 and sets *ms, *me (byte offsets; an empty match has
 * *ms == *me), 0 when there is none. s is UTF-8; an ill-formed sequence is read as U+FFFD of the
 * length the tokenizer reads it (utf8_get() of core/utf8.h). Never allocates; stack use bounded.
 * Returns -E2BIG when the search would exceed its step budget or backtracking stack (see
 * REGEX_STEPS_BASE, REGEX_STACK_MAX): the caller falls back, the split is never wrong. */
int regex_search(const struct regex *re, const uint8_t *s, size_t n, size_t from, size_t *ms,
		 size_t *me);

/* Iteration over the matches of s[0..n) as the reference iterates them (the onig crate's
 * find_iter): each search starts where the previous match ended; an empty match right at the end
 * of the previous match is skipped (the search moves on one code point). Start with
 * struct regex_iter it = {0}. */
struct regex_iter {
	size_t pos;	 /* where the next search starts */
	size_t last_end; /* end of the previous match, if have_last */
	int have_last;
};

/* The next match: 1 and *ms, *me; 0 when there is no more; -E2BIG as regex_search. */
int regex_next(const struct regex *re, const uint8_t *s, size_t n, struct regex_iter *it,
	       size_t *ms, size_t *me);

/* The bytes of the compiled form (for memory accounting). */
size_t regex_memory(const struct regex *re);

#endif
