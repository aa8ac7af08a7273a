// SPDX-License-Identifier: Apache-2.0
/* tokenizer: Hugging Face byte-level BPE (Qwen2/Qwen3 family) in C, id-for-id equal to the
 * reference `tokenizers` 0.22. The pipeline, for each encode:
 *   1. added tokens are found in the raw text (leftmost, longest; all of them, special or not);
 *   2. each segment between them: invalid UTF-8 becomes U+FFFD, then NFC (Unicode 9.0 data, as the
 *      reference's normalizer) when the quick check says the segment may change;
 *   3. the Qwen2 split regex, as a hand-written state machine (Unicode 16.0 classes);
 *   4. each piece, as bytes: its vocab id when the whole piece is a token whose own merges lead
 *      back to it (checked at load), else rank-ordered BPE merges with a heap (n log n), starting
 *      from whole characters where that is sure to give the same ids (char_rules_build).
 * All work is in byte space: vocab tokens are stored as the bytes they stand for, so no byte-level
 * characters are ever built while encoding. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "prompt/regex.h"
#include "prompt/tokenizer.h"
#include "prompt/unicode_tables.h"
#include "core/utf8.h"

/* The split regexes this module implements as a state machine (tokenizer.json spelling): Qwen2's,
 * and Llama 3's, which differs only in taking up to 3 digits a piece. */
#define QWEN2_SPLIT_REGEX                                                                          \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                      \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"                                                           \
	"\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_SPLIT_REGEX                                                                         \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                 \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"                                                           \
	"\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* gpt-oss's split regex (o200k's) and Mistral-Nemo's (the same shape without the contractions,
 * one digit a piece), implemented by split_o200k. */
#define GPTOSS_SPLIT_REGEX                                                                         \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"        \
	"\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{"   \
	"Lo}"                                                                                      \
	"\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "        \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define NEMO_SPLIT_REGEX                                                                           \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"        \
	"\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}"      \
	"\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* DeepSeek V3's three Splits (split_deepseek). */
#define DEEPSEEK_B1_REGEX "\\p{N}{1,3}"
#define DEEPSEEK_B2_REGEX "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
#define DEEPSEEK_B3_REGEX                                                                          \
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"  \
	"\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"

/* Pieces up to this many bytes are merged with stack scratch; longer ones use the heap. */
#ifndef TOK_STACK_PIECE
#define TOK_STACK_PIECE 256
#endif

#define NO_ID UINT32_MAX

/* Character-level pieces of up to this many symbols are merged by a scan for the lowest rank (no
 * heap: cheaper for the short words most pieces are). */
#ifndef TOK_SCAN_SYMS
#define TOK_SCAN_SYMS 16
#endif

struct merge_slot {
	uint64_t key; /* (left id << 32 | right id) + 1; 0 = empty */
	uint32_t rank;
	uint32_t id;
};

/* A vocab hash slot carries what a lookup compares: a token of up to 8 bytes (most pieces of
 * text) is found or refused from the slot alone, with no read of the arena. */
struct vslot {
	uint64_t head; /* the token's first 8 bytes (bytes_head) */
	uint32_t id;   /* NO_ID: empty */
	uint32_t len;  /* bytes, | VSLOT_WHOLE when BPE of the bytes gives this token itself */
};

#define VSLOT_WHOLE 0x80000000u
#define VSLOT_LEN 0x7fffffffu

struct pair {
	uint32_t rank; /* UINT32_MAX: no merge */
	uint32_t id;
};

/* A character BPE may start from whole (char_rules_build), with the tokens that, next to it,
 * forbid that: when the text before it ends with a left danger token's bytes, or the text after
 * it starts with a right one's, it starts as bytes. */
struct char_rule {
	uint32_t key;	 /* the character's UTF-8 bytes, little-endian; 0: empty slot */
	uint32_t id;	 /* its token */
	uint32_t danger; /* its left then right danger tokens start at t->danger[danger] */
	uint16_t n_left, n_right;
};

struct added_tok {
	const uint8_t *s; /* into the arena (a normalized one: its normalized content, in pat) */
	uint32_t len;
	uint32_t id;
	bool lstrip, rstrip, single_word, normalized, special;
};

/* Added tokens as a byte trie: edges in a hash by (node << 8 | byte) + 1. */
struct trie_slot {
	uint32_t key; /* 0: empty */
	uint32_t child;
};
struct added_trie {
	struct trie_slot *tab;
	uint32_t mask;
	int32_t *tok; /* node -> index in t->added of the token ending there, or -1 */
	uint32_t n_nodes, cap_nodes;
	uint8_t first[256]; /* bytes that start a token */
	int one_first;	    /* the only first byte when all share it, else -1 */
	uint32_t n;	    /* tokens in it */
};

/* Normalizer steps. */
enum { NORM_NFC, NORM_REPLACE, NORM_PREPEND };
struct norm_step {
	int kind;
	char *pat, *with; /* Replace: literal pattern, content; Prepend: with */
	size_t pat_len, with_len;
};

/* Pre-tokenizer splitting steps (ByteLevel's own regex is one, Isolated). */
enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
struct split_step {
	char *lit; /* a literal pattern (NULL: a regex) */
	size_t lit_len;
	struct regex *re; /* the compiled regex (NULL: lit) */
	int behavior;
	bool invert;
};

struct tokenizer {
	uint8_t *arena;	     /* bytes of every id, back to back */
	uint32_t *tok_off;   /* id -> arena offset; tok_off[n_ids] = arena length */
	uint32_t n_ids;	     /* vocab and added tokens */
	struct vslot *vhash; /* open addressing, vocab ids by bytes, id NO_ID = empty */
	struct pair *bytes2; /* the merge of the byte tokens of (a, b), at a << 8 | b */
	uint32_t vmask;
	struct merge_slot *mtab;
	uint32_t mmask;
	uint32_t n_merges;
	uint32_t byte_id[256];
	struct added_tok *added;
	uint32_t n_added;
	struct added_trie trie_raw;  /* non-normalized added tokens, matched on the raw text */
	struct added_trie trie_norm; /* normalized ones, on the normalized text */
	uint8_t *added_pat;	     /* normalized contents of the normalized added tokens */
	uint32_t max_tok_len;
	struct char_rule *crules; /* open addressing by key, key 0 = empty; NULL: none */
	uint32_t cmask;
	uint32_t *danger; /* the neighbours of char_rule, by id */
	bool nfc;	  /* the normalizer is NFC alone */
	bool norm_simple; /* the normalizer is none or NFC alone: segments may stream */
	struct norm_step *norm;
	uint32_t n_norm;
	bool byte_level; /* ByteLevel pre-tokenizer: tokens are bytes in the byte-level alphabet */
	int fast_split;	 /* the state machine: 1 (Qwen2's regex), 3 (Llama 3's), 4 (gpt-oss's),
			  * 5 (Mistral-Nemo's), 6 (DeepSeek V3's three); 0: steps */
	struct split_step *split;
	uint32_t n_split;
	bool byte_fallback, fuse_unk;
	uint32_t unk_id;	/* NO_ID: none */
	uint32_t byte_tok[256]; /* <0xXX> tokens (byte_fallback), NO_ID: missing */
	uint32_t ascii_id[128]; /* character-level: the token of each ASCII character, or NO_ID */
	uint8_t *tok_byte;	/* character-level: id -> 1 + the byte of a <0xXX> token, 0: none */
	bool cut_ok;		/* a word may be cut before "▁" (word_cuts) */
	uint32_t *pre_cut; /* sorted: the characters some vocab token holds right before "▁" */
	uint32_t n_pre_cut;
	bool dec_space;	       /* decoding: "▁" is a space */
	bool dec_strip;	       /* decoding: one leading space stripped */
	uint32_t *special_ids; /* add_special_tokens: n_before ids, then n_after */
	uint32_t n_before, n_after;
	int64_t bos_id;
	size_t mem;
};

/* --- small helpers -------------------------------------------------------------------------- */

int tok_ids_push(struct tok_ids *ids, uint32_t id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		uint32_t *v = realloc(ids->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

/* tok_ids_push, inline while there is room (one call per token of the text). */
static inline int ids_push(struct tok_ids *ids, uint32_t id)
{
	if (ids->n < ids->cap) {
		ids->v[ids->n++] = id;
		return 0;
	}
	return tok_ids_push(ids, id);
}

/* Appends ids[0..n). 0 or -ENOMEM. */
static int tok_ids_append(struct tok_ids *out, const uint32_t *ids, size_t n)
{
	if (out->n + n > out->cap) {
		size_t cap = out->cap ? out->cap : 64;
		uint32_t *v;

		while (cap < out->n + n)
			cap *= 2;
		v = realloc(out->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		out->v = v;
		out->cap = cap;
	}
	memcpy(out->v + out->n, ids, n * sizeof(*ids));
	out->n += n;
	return 0;
}

void tok_ids_free(struct tok_ids *ids)
{
	free(ids->v);
	ids->v = NULL;
	ids->n = ids->cap = 0;
}

static void *grow(void **p, size_t *cap, size_t need)
{
	size_t c;
	void *q;

	if (need <= *cap)
		return *p;
	c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	q = realloc(*p, c);
	if (!q)
		return NULL;
	*p = q;
	*cap = c;
	return q;
}

/* Frees w's scratch (struct tok_work, tokenizer.h: it grows, reused by every piece of an encode)
 * and leaves it empty. */
static void work_free(struct tok_work *w)
{
	free(w->norm);
	free(w->cps);
	free(w->bpe);
	free(w->norm2);
	*w = (struct tok_work){0};
}

static inline uint64_t load64le(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint64_t load32le(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

/* The first min(n, 8) bytes of s as a little-endian number (byte i in bits 8i..8i+7), the rest
 * zero: equal heads of equal lengths mean equal bytes up to 8. Reads nothing past s + n (a piece
 * may end the caller's buffer): short lengths are two overlapping loads. */
static inline uint64_t bytes_head(const uint8_t *s, size_t n)
{
	if (n >= 8)
		return load64le(s);
	if (n >= 4)
		return load32le(s) | load32le(s + n - 4) << (8 * (n - 4));
	if (n)
		return s[0] | (uint64_t)s[n >> 1] << (8 * (n >> 1)) |
		       (uint64_t)s[n - 1] << (8 * (n - 1));
	return 0;
}

/* Hash of the token s[0..n) whose head is head, for the vocab table: inline, a few
 * multiplications for the short pieces of text (a call to XXH3 cost more than the probe). */
static inline uint64_t hash_token(const uint8_t *s, size_t n, uint64_t head)
{
	uint64_t h = head ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull);

	for (size_t i = 8; i < n; i += 8) {
		h = (h ^ load64le(n - i >= 8 ? s + i : s + n - 8)) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	h ^= h >> 32;
	h *= 0xD6E8FEB86659FD93ull;
	h ^= h >> 32;
	return h;
}

static inline uint32_t hash_pair(uint64_t key)
{
	key *= 0x9E3779B97F4A7C15ull;
	return (uint32_t)(key >> 32);
}

/* GPT-2 byte-level alphabet: byte -> code point, and the inverse. */
static void byte_level_map(uint32_t b2u[256], int16_t u2b[512])
{
	int n = 0;

	for (int i = 0; i < 512; i++)
		u2b[i] = -1;
	for (int b = 0; b < 256; b++) {
		bool printable =
		    (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
		b2u[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
		u2b[b2u[b]] = (int16_t)b;
	}
}

/* --- lookups -------------------------------------------------------------------------------- */

/* The vocab slot of the token whose bytes are s[0..n), or NULL, given its head and its home
 * slot h (hash_token & vmask). */
static inline const struct vslot *vocab_probe(const struct tokenizer *t, const uint8_t *s, size_t n,
					      uint64_t head, uint32_t h)
{
	for (;;) {
		const struct vslot *v = &t->vhash[h];
		if (v->id == NO_ID)
			return NULL;
		if (v->head == head && (v->len & VSLOT_LEN) == n &&
		    (n <= 8 || memcmp(t->arena + t->tok_off[v->id] + 8, s + 8, n - 8) == 0))
			return v;
		h = (h + 1) & t->vmask;
	}
}

/* The vocab slot of the token whose bytes are s[0..n), or NULL. */
static inline const struct vslot *vocab_slot(const struct tokenizer *t, const uint8_t *s, size_t n)
{
	uint64_t head = bytes_head(s, n);

	return vocab_probe(t, s, n, head, (uint32_t)hash_token(s, n, head) & t->vmask);
}

static inline uint32_t vocab_find(const struct tokenizer *t, const uint8_t *s, size_t n)
{
	const struct vslot *v = vocab_slot(t, s, n);

	return v ? v->id : NO_ID;
}

/* The merge of (a, b): sets *id and returns its rank, or returns UINT32_MAX. */
static inline uint32_t merge_find(const struct tokenizer *t, uint32_t a, uint32_t b, uint32_t *id)
{
	uint64_t key = (((uint64_t)a << 32) | b) + 1;
	uint32_t h = hash_pair(key) & t->mmask;

	for (;;) {
		const struct merge_slot *m = &t->mtab[h];
		if (m->key == key) {
			*id = m->id;
			return m->rank;
		}
		if (!m->key)
			return UINT32_MAX;
		h = (h + 1) & t->mmask;
	}
}

/* --- BPE ------------------------------------------------------------------------------------ */

/* A symbol of a piece being merged. It keeps the rank and the result of the pair it starts, so a
 * merge looks up only the two pairs it makes. */
struct sym {
	uint32_t id;   /* NO_ID: merged into the symbol before it */
	uint32_t rank; /* of the pair (this, next), UINT32_MAX: none */
	uint32_t mid;  /* what that pair merges to */
	int32_t prev, next;
};

/* Min-heap of (rank << 32 | position): lowest rank first, leftmost first among equal ranks, as
 * the reference merges. */
static inline void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
	size_t i = (*n)++;

	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= v)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], v = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1] < h[c])
			c++;
		if (v <= h[c])
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = v;
	return top;
}

/* Sets the pair symbol i starts now that its next is j (< 0: none), and queues it. */
static inline void sym_pair(const struct tokenizer *t, struct sym *syms, int32_t i, int32_t j,
			    uint64_t *heap, size_t *hn)
{
	syms[i].rank = j < 0 ? UINT32_MAX : merge_find(t, syms[i].id, syms[j].id, &syms[i].mid);
	if (syms[i].rank != UINT32_MAX)
		heap_push(heap, hn, ((uint64_t)syms[i].rank << 32) | (uint32_t)i);
}

/* Is token id in s[0..n), ending at offset at (left) or starting there (!left)? */
static inline bool tok_at(const struct tokenizer *t, uint32_t id, const uint8_t *s, size_t n,
			  size_t at, bool left)
{
	size_t m = t->tok_off[id + 1] - t->tok_off[id];

	if (left)
		return m <= at && memcmp(s + at - m, t->arena + t->tok_off[id], m) == 0;
	return m <= n - at && memcmp(s + at, t->arena + t->tok_off[id], m) == 0;
}

/* The token to start BPE from for the character of l bytes at s[i] (in the piece s[0..n)), or
 * NO_ID: start from its bytes. */
static inline uint32_t char_whole(const struct tokenizer *t, const uint8_t *s, size_t n, size_t i,
				  size_t l)
{
	uint32_t key = (uint32_t)bytes_head(s + i, l), h = hash_pair(key) & t->cmask;
	const struct char_rule *r;

	while ((r = &t->crules[h])->key != key) {
		if (!r->key)
			return NO_ID;
		h = (h + 1) & t->cmask;
	}
	for (uint32_t k = 0; k < r->n_left; k++)
		if (tok_at(t, t->danger[r->danger + k], s, n, i, true))
			return NO_ID;
	for (uint32_t k = r->n_left; k < r->n_left + r->n_right; k++)
		if (tok_at(t, t->danger[r->danger + k], s, n, i + l, false))
			return NO_ID;
	return r->id;
}

/* Merges the bytes s[0..n) (n >= 2) with the BPE rules into syms; returns the first symbol index.
 * syms holds n entries and heap 3 n.
 * A queued entry is current while its symbol still starts a pair of that rank: a rank names one
 * pair, and a symbol never starts a pair again once it changed (both its sides only grow). */
/* The first symbols of a piece of a character-level vocabulary, as the reference's merge_word
 * makes them: a character's token; else its bytes' <0xXX> tokens (byte_fallback, when all exist);
 * else the unk token (consecutive ones fused into one with fuse_unk; a pending unk goes in only
 * before the next character found in the vocabulary or at the end, as the reference does); else
 * nothing. Returns the number of symbols (<= n). */
static size_t bpe_init_chars(const struct tokenizer *t, const uint8_t *s, size_t n,
			     struct sym *syms)
{
	size_t m = 0;
	bool unk = false;
	uint32_t c;

	for (size_t i = 0, l; i < n; i += l) {
		uint32_t id;

		l = utf8_get(s + i, n - i, &c);
		if (s[i] < 0x80)
			id = t->ascii_id[s[i]];
		else
			id = l <= t->max_tok_len ? vocab_find(t, s + i, l) : NO_ID;
		if (id != NO_ID) {
			if (unk)
				syms[m++].id = t->unk_id;
			unk = false;
			syms[m++].id = id;
			continue;
		}
		if (t->byte_fallback) {
			size_t k = 0;

			while (k < l && t->byte_tok[s[i + k]] != NO_ID)
				k++;
			if (k == l) {
				for (k = 0; k < l; k++)
					syms[m++].id = t->byte_tok[s[i + k]];
				continue;
			}
		}
		if (t->unk_id != NO_ID) {
			if (unk && !t->fuse_unk)
				syms[m++].id = t->unk_id;
			unk = true;
		}
	}
	if (unk)
		syms[m++].id = t->unk_id;
	return m;
}

static int32_t bpe_merge(const struct tokenizer *t, const uint8_t *s, size_t n, struct sym *syms,
			 uint64_t *heap)
{
	size_t hn = 0, m = 0;
	bool byte = false; /* the symbol before is one byte */

	if (!t->byte_level) {
		m = bpe_init_chars(t, s, n, syms);
		if (!m)
			return -1;
		if (m <= TOK_SCAN_SYMS) {
			/* few symbols: the lowest rank (leftmost of equal ones, as the heap
			 * orders them) found by a scan, no heap */
			for (size_t k = 0; k < m; k++) {
				syms[k].next = k + 1 < m ? (int32_t)k + 1 : -1;
				syms[k].rank = k + 1 < m ? merge_find(t, syms[k].id, syms[k + 1].id,
								      &syms[k].mid)
							 : UINT32_MAX;
			}
			for (;;) {
				int32_t bi = -1, prev = -1, bprev = -1;
				uint32_t best = UINT32_MAX;
				for (int32_t k = 0; k >= 0; prev = k, k = syms[k].next)
					if (syms[k].rank < best) {
						best = syms[k].rank;
						bi = k;
						bprev = prev;
					}
				if (bi < 0)
					return 0;
				int32_t nx = syms[bi].next;
				syms[bi].id = syms[bi].mid;
				syms[bi].next = syms[nx].next;
				syms[bi].rank =
				    syms[bi].next < 0
					? UINT32_MAX
					: merge_find(t, syms[bi].id, syms[syms[bi].next].id,
						     &syms[bi].mid);
				if (bprev >= 0)
					syms[bprev].rank = merge_find(
					    t, syms[bprev].id, syms[bi].id, &syms[bprev].mid);
			}
		}
		for (size_t k = 0; k < m; k++) {
			syms[k].prev = (int32_t)k - 1;
			syms[k].next = k + 1 < m ? (int32_t)k + 1 : -1;
			syms[k].rank = UINT32_MAX;
			if (k)
				sym_pair(t, syms, (int32_t)k - 1, (int32_t)k, heap, &hn);
		}
		goto merge;
	}
	/* one symbol a byte, or a whole character; each pair's merge (both bytes: bytes2) */
	for (size_t i = 0, l; i < n; i += l, m++) {
		uint32_t id = NO_ID;

		l = s[i] < 0xC2 ? 1 : s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : 4;
		if (l > 1 && t->crules && l <= n - i)
			id = char_whole(t, s, n, i, l);
		if (id == NO_ID) {
			id = t->byte_id[s[i]];
			l = 1;
		}
		syms[m].id = id;
		syms[m].prev = (int32_t)m - 1;
		syms[m].next = -1;
		syms[m].rank = UINT32_MAX;
		if (m) {
			struct sym *p = &syms[m - 1];

			p->next = (int32_t)m;
			if (byte && l == 1) {
				p->rank = t->bytes2[s[i - 1] << 8 | s[i]].rank;
				p->mid = t->bytes2[s[i - 1] << 8 | s[i]].id;
			} else {
				p->rank = merge_find(t, p->id, id, &p->mid);
			}
			if (p->rank != UINT32_MAX)
				heap_push(heap, &hn, ((uint64_t)p->rank << 32) | (m - 1));
		}
		byte = l == 1;
	}
merge:
	while (hn) {
		uint64_t top = heap_pop(heap, &hn);
		int32_t pos = (int32_t)(uint32_t)top, nx;

		if (syms[pos].id == NO_ID || syms[pos].rank != (uint32_t)(top >> 32))
			continue; /* the pair at pos changed since this entry was queued */
		nx = syms[pos].next;
		syms[pos].id = syms[pos].mid;
		syms[nx].id = NO_ID;
		syms[pos].next = syms[nx].next;
		if (syms[pos].next >= 0)
			syms[syms[pos].next].prev = pos;
		if (syms[pos].prev >= 0)
			sym_pair(t, syms, syms[pos].prev, pos, heap, &hn);
		sym_pair(t, syms, pos, syms[pos].next, heap, &hn);
	}
	return 0;
}

/* --- encoding cache (tok_cache) ------------------------------------------------------------- */

/* Segments shorter than this are encoded, not looked up (bytes). */
#ifndef TOK_CACHE_MIN_SEGMENT
#define TOK_CACHE_MIN_SEGMENT 32
#endif
/* BPE pieces longer than this are not cached (bytes). */
#ifndef TOK_CACHE_MAX_PIECE
#define TOK_CACHE_MAX_PIECE 128
#endif

enum { TC_SEGMENT = 0, TC_PIECE = 1 };

/* One cached encoding: key bytes then ids, in one allocation. */
struct tc_entry {
	uint64_t h; /* 0: empty slot */
	uint32_t klen, nids;
	uint8_t kind;
	void *mem; /* klen key bytes, then nids ids (aligned) */
};

struct tc_gen {
	struct tc_entry *e;
	size_t cap, n, bytes;
};

struct tok_cache {
	struct tc_gen g[2]; /* g[0] the newer generation */
	size_t max_bytes;
	struct tok_cache_stats st;
};

static inline uint32_t *tc_ids(const struct tc_entry *e)
{
	return (uint32_t *)((uint8_t *)e->mem + ((e->klen + 3u) & ~3u));
}

static void tc_gen_free(struct tc_gen *g)
{
	for (size_t i = 0; i < g->cap; i++)
		free(g->e[i].mem);
	free(g->e);
	memset(g, 0, sizeof(*g));
}

struct tok_cache *tok_cache_new(size_t max_bytes)
{
	struct tok_cache *c = calloc(1, sizeof(*c));

	if (c)
		c->max_bytes = max_bytes;
	return c;
}

void tok_cache_free(struct tok_cache *c)
{
	if (!c)
		return;
	tc_gen_free(&c->g[0]);
	tc_gen_free(&c->g[1]);
	free(c);
}

void tok_cache_stats(const struct tok_cache *c, struct tok_cache_stats *st)
{
	*st = c->st;
	st->bytes = c->g[0].bytes + c->g[1].bytes;
	st->entries = c->g[0].n + c->g[1].n;
}

static inline uint64_t tc_hash(int kind, const uint8_t *s, size_t n)
{
	uint64_t h = XXH3_64bits_withSeed(s, n, (uint64_t)kind + 1);

	return h ? h : 1;
}

/* The entry for (kind, s[0..n)) in g, or NULL. */
static const struct tc_entry *tc_find(const struct tc_gen *g, uint64_t h, int kind,
				      const uint8_t *s, size_t n)
{
	if (!g->cap)
		return NULL;
	for (size_t i = h & (g->cap - 1);; i = (i + 1) & (g->cap - 1)) {
		const struct tc_entry *e = &g->e[i];

		if (!e->h)
			return NULL;
		if (e->h == h && e->kind == kind && e->klen == n && memcmp(e->mem, s, n) == 0)
			return e;
	}
}

/* Stores ids[0..nids) for (kind, s[0..n)) in the newer generation; when it holds more than half
 * the bound, the older generation is dropped and the newer becomes the older. Best effort: on
 * ENOMEM nothing is stored. */
static void tc_put(struct tok_cache *c, uint64_t h, int kind, const uint8_t *s, size_t n,
		   const uint32_t *ids, size_t nids)
{
	struct tc_gen *g = &c->g[0];
	size_t koff = (n + 3u) & ~(size_t)3u, cost = koff + nids * 4 + 2 * sizeof(struct tc_entry);
	struct tc_entry *e;
	void *mem;

	if (n > UINT32_MAX || nids > UINT32_MAX || cost > c->max_bytes / 4)
		return;
	if (g->bytes + cost > c->max_bytes / 2) {
		tc_gen_free(&c->g[1]);
		c->g[1] = c->g[0];
		memset(&c->g[0], 0, sizeof(c->g[0]));
		c->st.drops++;
	}
	if ((g->n + 1) * 2 > g->cap) {
		struct tc_gen ng = {.cap = g->cap ? g->cap * 2 : 64, .n = g->n, .bytes = g->bytes};

		ng.e = calloc(ng.cap, sizeof(*ng.e));
		if (!ng.e)
			return;
		for (size_t i = 0; i < g->cap; i++) {
			size_t j;

			if (!g->e[i].h)
				continue;
			for (j = g->e[i].h & (ng.cap - 1); ng.e[j].h; j = (j + 1) & (ng.cap - 1))
				;
			ng.e[j] = g->e[i];
		}
		ng.bytes += (ng.cap - g->cap) * sizeof(struct tc_entry);
		free(g->e);
		*g = ng;
	}
	mem = malloc(koff + nids * 4 + 1);
	if (!mem)
		return;
	memcpy(mem, s, n);
	memcpy((uint8_t *)mem + koff, ids, nids * 4);
	for (size_t i = h & (g->cap - 1);; i = (i + 1) & (g->cap - 1)) {
		e = &g->e[i];
		if (!e->h)
			break;
	}
	*e = (struct tc_entry){
	    .h = h, .klen = (uint32_t)n, .nids = (uint32_t)nids, .kind = (uint8_t)kind, .mem = mem};
	g->n++;
	g->bytes += koff + nids * 4;
}

/* Looks (kind, s[0..n)) up in both generations; a hit in the older one is copied into the newer
 * (so what is used survives the next drop) and appended to out. Returns 1 on a hit, 0 on a miss,
 * -ENOMEM. */
static int tc_get(struct tok_cache *c, uint64_t h, int kind, const uint8_t *s, size_t n,
		  struct tok_ids *out)
{
	const struct tc_entry *e = tc_find(&c->g[0], h, kind, s, n);
	size_t n0 = out->n;

	if (!e && (e = tc_find(&c->g[1], h, kind, s, n))) {
		if (tok_ids_append(out, tc_ids(e), e->nids))
			return -ENOMEM;
		/* copy from out: tc_put may drop the generation e lives in */
		tc_put(c, h, kind, s, n, out->v + n0, out->n - n0);
		return 1;
	}
	if (!e)
		return 0;
	return tok_ids_append(out, tc_ids(e), e->nids) ? -ENOMEM : 1;
}

/* Appends the ids of a piece of n >= 2 bytes that is not one whole token: from the cache, else
 * merged (and cached). Returns 0 or -ENOMEM. */
static int bpe_piece_merge(const struct tokenizer *t, const uint8_t *s, size_t n,
			   struct tok_ids *out, struct tok_work *w)
{
	struct sym stack_syms[TOK_STACK_PIECE];
	uint64_t stack_heap[3 * TOK_STACK_PIECE];
	struct sym *syms = stack_syms;
	uint64_t *heap = stack_heap;
	size_t n0 = out->n;
	uint64_t h = 0;
	int err;

	if (w->cache && n <= TOK_CACHE_MAX_PIECE) {
		h = tc_hash(TC_PIECE, s, n);
		err = tc_get(w->cache, h, TC_PIECE, s, n, out);
		if (err < 0)
			return err;
		if (err) {
			w->cache->st.piece_hits++;
			return 0;
		}
		w->cache->st.piece_misses++;
	}
	if (n > TOK_STACK_PIECE) {
		if (!grow(&w->bpe, &w->bpe_cap, n * (sizeof(struct sym) + 3 * sizeof(uint64_t))))
			return -ENOMEM;
		heap = w->bpe;
		syms = (struct sym *)(heap + 3 * n);
	}
	for (int32_t i = bpe_merge(t, s, n, syms, heap); i >= 0; i = syms[i].next)
		if ((err = ids_push(out, syms[i].id)))
			return err;
	if (h)
		tc_put(w->cache, h, TC_PIECE, s, n, out->v + n0, out->n - n0);
	return 0;
}

static int bpe_piece1(const struct tokenizer *t, const uint8_t *s, size_t n, struct tok_ids *out,
		      struct tok_work *w);

/* Is c one of the characters some vocab token holds right before "▁"? */
static bool in_pre_cut(const struct tokenizer *t, uint32_t c)
{
	size_t lo = 0, hi = t->n_pre_cut;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->pre_cut[mid] == c)
			return true;
		if (t->pre_cut[mid] < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* A character-level word (Gemma 3's or Llama 2's text between added tokens is ONE word: the
 * normalizer turns spaces into "▁" and nothing splits) is encoded in parts cut before "▁", where
 * that cannot change the ids: a cut between characters x and "▁" that are both vocab tokens, when
 * no vocab token holds "x▁", can be crossed by no merge (a merge makes a vocab token, and one over
 * the cut would hold "x▁"); BPE of the parts then merges each part as the whole would (merges of
 * one part never meet another's), and no unk is pending at x. Not with ignore_merges (the whole
 * word's vocab hit goes first). The parts go through the piece cache and the whole-token lookup:
 * a 10 KB word costs what its words cost. */
static int word_cuts(const struct tokenizer *t, const uint8_t *s, size_t n, struct tok_ids *out,
		     struct tok_work *w)
{
	size_t start = 0;
	int err;

	for (size_t i = 1; i + 3 <= n; i++) {
		const uint8_t *p = memchr(s + i, 0xE2, n - i);
		size_t j;
		uint32_t x;

		if (!p)
			break;
		i = (size_t)(p - s);
		if (i + 3 > n || p[1] != 0x96 || p[2] != 0x81)
			continue;
		j = i - 1;
		while (j > start && (s[j] & 0xC0) == 0x80)
			j--;
		if (j < start || utf8_get(s + j, i - j, &x) != i - j || in_pre_cut(t, x) ||
		    (x < 0x80 ? t->ascii_id[x] : vocab_find(t, s + j, i - j)) == NO_ID)
			continue;
		if ((err = bpe_piece1(t, s + start, i - start, out, w)))
			return err;
		start = i;
	}
	return bpe_piece1(t, s + start, n - start, out, w);
}

/* Appends the ids of one piece. Returns 0 or -ENOMEM. */
static int bpe_piece(const struct tokenizer *t, const uint8_t *s, size_t n, struct tok_ids *out,
		     struct tok_work *w)
{
	if (t->cut_ok && n > 3)
		return word_cuts(t, s, n, out, w);
	return bpe_piece1(t, s, n, out, w);
}

/* bpe_piece without cuts. */
static int bpe_piece1(const struct tokenizer *t, const uint8_t *s, size_t n, struct tok_ids *out,
		      struct tok_work *w)
{
	if (n == 1 && t->byte_level)
		return ids_push(out, t->byte_id[s[0]]);
	if (n == 1 && s[0] < 0x80 && t->ascii_id[s[0]] != NO_ID)
		return ids_push(out, t->ascii_id[s[0]]);
	if (n <= t->max_tok_len) {
		const struct vslot *v = vocab_slot(t, s, n);
		if (v && (v->len & VSLOT_WHOLE))
			return ids_push(out, v->id);
	}
	return bpe_piece_merge(t, s, n, out, w);
}

/* --- pre-tokenizer: the Qwen2 split regex as a state machine ------------------------------- */

/* The regex classes of ASCII (Unicode's, checked against unicode_tables at load): most text is
 * ASCII, read here with one load a byte instead of a decode and a two-level table. */
/* clang-format off */
static const uint8_t ascii_cls[128] = {
	['\t' ... '\r'] = UCLS_SPACE, [' '] = UCLS_SPACE, /* White_Space */
	['0' ... '9'] = UCLS_NUMBER,
	['A' ... 'Z'] = UCLS_LETTER, ['a' ... 'z'] = UCLS_LETTER,
	/* the rest: UCLS_OTHER */
};
/* clang-format on */

static inline int cls_of(uint32_t c)
{
	return c < 0x80 ? ascii_cls[c] : unicode_cls(c) & UCLS_MASK;
}

/* The next code point at s[i] (valid UTF-8, i < n): class, and its length in *len. */
static inline int next_cls(const uint8_t *s, size_t n, size_t i, uint32_t *cp, size_t *len)
{
	*len = utf8_get(s + i, n - i, cp);
	return cls_of(*cp);
}

/* End of the run of class k that starts at i. */
static inline size_t run_end(const uint8_t *s, size_t n, size_t i, int k)
{
	uint32_t c;
	size_t l;

	while (i < n) {
		if (s[i] < 0x80) {
			if (ascii_cls[s[i]] != k)
				break;
			i++;
			continue;
		}
		if (next_cls(s, n, i, &c, &l) != k)
			break;
		i += l;
	}
	return i;
}

#define BYTES8(b) (0x0101010101010101ull * (b))

/* End of the run of letters that starts at i: ASCII 8 bytes at a time (a word's end is found
 * without a branch per byte), then run_end from the first non-ASCII byte. */
static inline size_t letters_end(const uint8_t *s, size_t n, size_t i)
{
	while (i + 8 <= n) {
		uint64_t x = load64le(s + i), t = (x & BYTES8(0x7f)) | BYTES8(0x20);
		/* bit 7 of a byte set unless it is an ASCII letter (t in 'a'..'z', x < 0x80) */
		uint64_t stop =
		    ~((t + BYTES8(0x80 - 'a')) & ~(t + BYTES8(0x80 - 'z' - 1)) & ~x) & BYTES8(0x80);

		if (stop) {
			i += (size_t)__builtin_ctzll(stop) / 8;
			if (s[i] < 0x80)
				return i;
			break;
		}
		i += 8;
	}
	return run_end(s, n, i, UCLS_LETTER);
}

static inline uint32_t fold_ascii(uint32_t c)
{
	if (c < 0x80)
		return (c >= 'A' && c <= 'Z') ? c + 32 : c;
	return unicode_fold_ascii(c);
}

/* Matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (s[i] is '\''): returns the end, or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i)
{
	uint32_t c2, c3;
	size_t j = i + 1, l2, l3;

	if (j >= n)
		return 0;
	l2 = utf8_get(s + j, n - j, &c2);
	c2 = fold_ascii(c2);
	if (c2 == 's' || c2 == 't' || c2 == 'm' || c2 == 'd')
		return j + l2;
	if (c2 != 'r' && c2 != 'v' && c2 != 'l')
		return 0;
	if (j + l2 >= n)
		return 0;
	l3 = utf8_get(s + j + l2, n - j - l2, &c3);
	c3 = fold_ascii(c3);
	if ((c2 == 'l' && c3 == 'l') || (c2 != 'l' && c3 == 'e'))
		return j + l2 + l3;
	return 0;
}

/* End of \p{N}{1,nd} at i (s[i] starts a number). */
static inline size_t digits_end(const uint8_t *s, size_t n, size_t i, int nd)
{
	uint32_t c;
	size_t l;

	for (int k = 0; k < nd && i < n; k++) {
		if (s[i] < 0x80) {
			if (ascii_cls[s[i]] != UCLS_NUMBER)
				break;
			i++;
			continue;
		}
		if (next_cls(s, n, i, &c, &l) != UCLS_NUMBER)
			break;
		i += l;
	}
	return i;
}

/* split_next for any text (below: the ASCII shortcut in front of it). */
static size_t split_general(const uint8_t *s, size_t n, size_t i, int nd)
{
	uint32_t c, c2;
	size_t l, l2, j, e, last_nl;
	int k, k2;

	k = next_cls(s, n, i, &c, &l);
	/* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
	if (c == '\'' && (e = contraction(s, n, i)))
		return e;
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (k == UCLS_LETTER)
		return run_end(s, n, i + l, UCLS_LETTER);
	if (k != UCLS_NUMBER && c != '\r' && c != '\n' && i + l < n &&
	    next_cls(s, n, i + l, &c2, &l2) == UCLS_LETTER)
		return run_end(s, n, i + l + l2, UCLS_LETTER);
	/* \p{N} or \p{N}{1,3} */
	if (k == UCLS_NUMBER)
		return nd == 1 ? i + l : digits_end(s, n, i, nd);
	/* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
	j = i;
	if (c == ' ' && i + 1 < n && next_cls(s, n, i + 1, &c2, &l2) == UCLS_OTHER)
		j = i + 1;
	if (j > i || k == UCLS_OTHER) {
		j = run_end(s, n, j, UCLS_OTHER);
		while (j < n && (s[j] == '\r' || s[j] == '\n'))
			j++;
		return j;
	}
	/* c is White_Space from here. \s*[\r\n]+ : up to the last \r or \n of the run. */
	last_nl = 0;
	for (e = i; e < n;) {
		if (s[e] == '\r' || s[e] == '\n') {
			e++;
			last_nl = e;
			continue;
		}
		k2 = next_cls(s, n, e, &c2, &l2);
		if (k2 != UCLS_SPACE)
			break;
		e += l2;
	}
	if (last_nl)
		return last_nl;
	/* \s+(?!\S) : the whole run at the end of text, else all but its last character. */
	if (e == n)
		return e;
	if (e > i + l) {
		/* step back one character from e */
		j = e - 1;
		while ((s[j] & 0xC0) == 0x80)
			j--;
		return j;
	}
	/* \s+ */
	return e;
}

/* The end of the regex match that starts at i (< n) in valid UTF-8 s[0..n). The alternatives are
 * tried in the regex's order, each with the backtracking the regex engine would do.
 * Here the cases of ASCII that decide from s[i] and s[i + 1] alone (a word, a space or other
 * character before a word, a digit, punctuation); the rest, split_general. */
static inline __attribute__((always_inline)) size_t split_next(const uint8_t *s, size_t n, size_t i,
							       int nd)
{
	uint8_t c = s[i], c2;
	size_t e, last_nl = 0;
	int k;

	if (c >= 0x80)
		return split_general(s, n, i, nd);
	k = ascii_cls[c];
	/* [^\r\n\p{L}\p{N}]?\p{L}+ without its optional character */
	if (k == UCLS_LETTER)
		return letters_end(s, n, i + 1);
	/* \p{N} or \p{N}{1,3} (no alternative before it matches at a digit) */
	if (k == UCLS_NUMBER)
		return nd == 1 ? i + 1 : digits_end(s, n, i, nd);
	/* the contractions, and a character followed by non-ASCII: split_general */
	if (c == '\'')
		return split_general(s, n, i, nd);
	if (c != '\r' && c != '\n') {
		if (i + 1 >= n || (c2 = s[i + 1]) >= 0x80)
			return split_general(s, n, i, nd);
		/* [^\r\n\p{L}\p{N}]?\p{L}+ with c as its optional character */
		if (ascii_cls[c2] == UCLS_LETTER)
			return letters_end(s, n, i + 2);
		/* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
		if (k == UCLS_OTHER || (c == ' ' && ascii_cls[c2] == UCLS_OTHER)) {
			i = run_end(s, n, i + 1, UCLS_OTHER);
			while (i < n && (s[i] == '\r' || s[i] == '\n'))
				i++;
			return i;
		}
	}
	/* c is white space: \s*[\r\n]+ (up to the run's last \r or \n), else \s+(?!\S) (the run
	 * but its last character, unless the run ends the text), else \s+ (one character). A run
	 * that goes on into non-ASCII: split_general. */
	for (e = i; e < n && s[e] < 0x80 && ascii_cls[s[e]] == UCLS_SPACE; e++)
		if (s[e] == '\r' || s[e] == '\n')
			last_nl = e + 1;
	if (e < n && s[e] >= 0x80)
		return split_general(s, n, i, nd);
	if (last_nl)
		return last_nl;
	return e == n || e == i + 1 ? e : e - 1;
}

/* --- pre-tokenizer: gpt-oss's and Mistral-Nemo's split regex as a state machine ------------ */

/* The classes of those regexes a code point is in: OU [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (a word's
 * head), OW [\p{Ll}\p{Lm}\p{Lo}\p{M}] (its tail), OL \p{L}, ON \p{N}, OS \s (White_Space). Lm, Lo
 * and the marks are in both OU and OW; a mark is neither a letter nor a number. */
enum { OU = 1, OW = 2, OL = 4, ON = 8, OS = 16 };

/* clang-format off */
static const uint8_t o_gc[UGC_COUNT] = {
	[UGC_LU] = OU | OL, [UGC_LT] = OU | OL, [UGC_LL] = OW | OL,
	[UGC_LM] = OU | OW | OL, [UGC_LO] = OU | OW | OL,
	[UGC_MN] = OU | OW, [UGC_MC] = OU | OW, [UGC_ME] = OU | OW,
	[UGC_ND] = ON, [UGC_NL] = ON, [UGC_NO] = ON,
};
static const uint8_t o_ascii[128] = {
	['\t' ... '\r'] = OS, [' '] = OS, ['0' ... '9'] = ON,
	['A' ... 'Z'] = OU | OL, ['a' ... 'z'] = OW | OL,
};
/* clang-format on */

/* The classes of the code point at s[i] (i < n), its length in *len. */
static inline unsigned o_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
	uint32_t c;
	uint8_t p;

	if (s[i] < 0x80) {
		*len = 1;
		return o_ascii[s[i]];
	}
	*len = utf8_get(s + i, n - i, &c);
	p = unicode_prop(c);
	return o_gc[p & UPROP_GC_MASK] | ((p & UPROP_SPACE) ? OS : 0);
}

/* End of the run from i of code points in class b (any == true) or in none of the classes b. */
static inline size_t o_run(const uint8_t *s, size_t n, size_t i, unsigned b, bool any)
{
	size_t l;

	while (i < n) {
		/* ASCII lowercase, the bulk of a word's tail: 8 bytes at a time */
		if (any && b == OW) {
			while (i + 8 <= n) {
				uint64_t x = load64le(s + i);
				uint64_t stop = ~((x + BYTES8(0x80 - 'a')) &
						  ~(x + BYTES8(0x80 - 'z' - 1)) & ~x) &
						BYTES8(0x80);

				if (stop) {
					i += (size_t)__builtin_ctzll(stop) / 8;
					break;
				}
				i += 8;
			}
			if (i >= n)
				break;
		}
		if (((o_at(s, n, i, &l) & b) != 0) != any)
			break;
		i += l;
	}
	return i;
}

/* [OU]*[OW]+ from j, with the regex's backtracking: the longest head run, then back to the last
 * place in it (or just after it) where a tail character stands, and the longest tail from
 * there. Returns the end, or 0 when there is no tail character. */
static inline size_t o_word_tail(const uint8_t *s, size_t n, size_t j)
{
	size_t l, w = SIZE_MAX;
	unsigned k;

	while (j < n) {
		k = o_at(s, n, j, &l);
		if (k & OW)
			w = j;
		if (!(k & OU))
			break;
		j += l;
	}
	return w == SIZE_MAX ? 0 : o_run(s, n, w, OW, true);
}

/* [OU]+[OW]* from j: the end, or 0. */
static inline size_t o_word_head(const uint8_t *s, size_t n, size_t j)
{
	size_t l;

	if (j >= n || !(o_at(s, n, j, &l) & OU))
		return 0;
	return o_run(s, n, o_run(s, n, j + l, OU, true), OW, true);
}

/* The end of the match at i (< n) in valid UTF-8 s[0..n) of gpt-oss's regex (kind 4) or
 * Mistral-Nemo's (kind 5), the alternatives in order, each with the engine's backtracking:
 *   [^\r\n\p{L}\p{N}]?[OU]*[OW]+C? | [^\r\n\p{L}\p{N}]?[OU]+[OW]*C? | \p{N}{1,3} (\p{N}) |
 *    ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * where C is (?i:'s|'t|'re|'ve|'m|'ll|'d), kind 4 only. Every character starts some match. */
__attribute__((noinline)) static size_t split_o200k(const uint8_t *s, size_t n, size_t i, int kind)
{
	size_t l, l2, e, j, last_nl = 0;
	unsigned k = o_at(s, n, i, &l);
	/* s[i] can be the optional leading character; a mark can also be a word's head */
	bool lead = !(k & (OL | ON)) && s[i] != '\r' && s[i] != '\n' && i + l < n;

	if (k & (OU | OW) || lead) {
		if ((lead && (e = o_word_tail(s, n, i + l))) ||
		    ((k & (OU | OW)) && (e = o_word_tail(s, n, i))) ||
		    (lead && (e = o_word_head(s, n, i + l))) ||
		    ((k & OU) && (e = o_word_head(s, n, i)))) {
			if (kind == 4 && e < n && s[e] == '\'' && (j = contraction(s, n, e)))
				e = j;
			return e;
		}
	}
	if (k & ON)
		return kind == 4 ? digits_end(s, n, i, 3) : i + l;
	/* ' ?[^\s\p{L}\p{N}]+[\r\n/]*' */
	j = i;
	if (s[i] == ' ' && i + 1 < n && !(o_at(s, n, i + 1, &l2) & (OS | OL | ON)))
		j = i + 1;
	if (j > i || !(k & OS)) {
		j = o_run(s, n, j, OS | OL | ON, false);
		while (j < n && (s[j] == '\r' || s[j] == '\n' || s[j] == '/'))
			j++;
		return j;
	}
	/* white space: \s*[\r\n]+ up to the run's last \r or \n; else \s+(?!\S): the run, but its
	 * last character unless the run ends the text; else \s+ */
	for (e = i; e < n;) {
		if (s[e] == '\r' || s[e] == '\n') {
			last_nl = ++e;
			continue;
		}
		if (!(o_at(s, n, e, &l2) & OS))
			break;
		e += l2;
	}
	if (last_nl)
		return last_nl;
	if (e == n || e == i + l)
		return e;
	j = e - 1;
	while ((s[j] & 0xC0) == 0x80)
		j--;
	return j;
}

/* --- pre-tokenizer: DeepSeek V3's three Splits in turn, as a state machine ------------------ */

/* DeepSeek V3's pre-tokenizer is a Sequence: B1 \p{N}{1,3}, then B2 [一-龥\u3040-ゟ゠-ヿ]+ on each
 * piece, then B3 on each of those (all Isolated), then ByteLevel. A piece of B1 is a chunk of up
 * to 3 numbers (which B2 and B3 leave whole: neither matches in it) or a run without numbers;
 * B2 cuts such a run into runs of those CJK ranges and the rest; B3 runs on each of those as its
 * own text (its lookahead stops at the piece's end). st holds the ends of the B1 and B2 pieces
 * the cut is in. */
enum { DL = 1, DM = 2, DN = 4, DP = 8, DS = 16, DW = 32 };

/* clang-format off */
static const uint8_t d_gc[UGC_COUNT] = {
	[UGC_LU] = DL, [UGC_LL] = DL, [UGC_LT] = DL, [UGC_LM] = DL, [UGC_LO] = DL,
	[UGC_MN] = DM, [UGC_MC] = DM, [UGC_ME] = DM,
	[UGC_ND] = DN, [UGC_NL] = DN, [UGC_NO] = DN,
	[UGC_PC] = DP, [UGC_PD] = DP, [UGC_PS] = DP, [UGC_PE] = DP, [UGC_PI] = DP, [UGC_PF] = DP,
	[UGC_PO] = DP, [UGC_SM] = DS, [UGC_SC] = DS, [UGC_SK] = DS, [UGC_SO] = DS,
};
/* clang-format on */

/* Classes of the code point at s[i] (i < n): DL \p{L}, DM \p{M}, DN \p{N}, DP \p{P}, DS \p{S},
 * DW \s; its value in *cp and length in *len. */
/* clang-format off */
static const uint8_t d_ascii[128] = {
	['\t' ... '\r'] = DW, [' '] = DW, ['0' ... '9'] = DN,
	['A' ... 'Z'] = DL, ['a' ... 'z'] = DL,
	['!'] = DP, ['"'] = DP, ['#'] = DP, ['%'] = DP, ['&'] = DP, ['\''] = DP, ['('] = DP,
	[')'] = DP, ['*'] = DP, [','] = DP, ['-'] = DP, ['.'] = DP, ['/'] = DP, [':'] = DP,
	[';'] = DP, ['?'] = DP, ['@'] = DP, ['['] = DP, ['\\'] = DP, [']'] = DP, ['_'] = DP,
	['{'] = DP, ['}'] = DP,
	['$'] = DS, ['+'] = DS, ['<'] = DS, ['='] = DS, ['>'] = DS, ['^'] = DS, ['`'] = DS,
	['|'] = DS, ['~'] = DS,
};
/* clang-format on */

static inline unsigned d_at(const uint8_t *s, size_t n, size_t i, uint32_t *cp, size_t *len)
{
	uint8_t p;

	if (s[i] < 0x80) {
		*cp = s[i];
		*len = 1;
		return d_ascii[s[i]];
	}
	*len = utf8_get(s + i, n - i, cp);
	p = unicode_prop(*cp);
	return d_gc[p & UPROP_GC_MASK] | ((p & UPROP_SPACE) ? DW : 0);
}

static inline bool d_cjk(uint32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
}

static inline bool ascii_alpha(uint8_t c)
{
	return (uint8_t)((c | 0x20) - 'a') < 26;
}

/* End of the run from i (< e) of code points with a class in b. */
static inline size_t d_run(const uint8_t *s, size_t e, size_t i, unsigned b)
{
	uint32_t c;
	size_t l;

	while (i < e && (d_at(s, e, i, &c, &l) & b))
		i += l;
	return i;
}

/* B3's match at i in the piece s[..e) (i < e), the alternatives in order:
 *   [!-/:-@[-`{-~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ | ?[\p{P}\p{S}]+[\r\n]* |
 *   \s*[\r\n]+ | \s+(?!\S) | \s+
 * Returns its end, or 0 when none matches at i. */
static size_t d_b3(const uint8_t *s, size_t e, size_t i)
{
	uint32_t c, c2;
	size_t l, l2 = 0, j, last_nl = 0;
	unsigned k = d_at(s, e, i, &c, &l), k2 = 0;

	if (i + l < e)
		k2 = d_at(s, e, i + l, &c2, &l2);
	if (c < 0x80 && (k & (DP | DS)) && i + 1 < e && ascii_alpha(s[i + 1])) {
		for (j = i + 2; j < e && ascii_alpha(s[j]);)
			j++;
		return j;
	}
	if (!(k & (DL | DP | DS)) && c != '\r' && c != '\n' && (k2 & (DL | DM)))
		return d_run(s, e, i + l + l2, DL | DM);
	if (k & (DL | DM))
		return d_run(s, e, i + l, DL | DM);
	if (c == ' ' && (k2 & (DP | DS)))
		j = d_run(s, e, i + l + l2, DP | DS);
	else if (k & (DP | DS))
		j = d_run(s, e, i + l, DP | DS);
	else
		j = 0;
	if (j) {
		while (j < e && (s[j] == '\r' || s[j] == '\n'))
			j++;
		return j;
	}
	if (!(k & DW))
		return 0;
	for (j = i; j < e;) {
		if (s[j] == '\r' || s[j] == '\n') {
			last_nl = ++j;
			continue;
		}
		if (!(d_at(s, e, j, &c, &l2) & DW))
			break;
		j += l2;
	}
	if (last_nl)
		return last_nl;
	if (j == e || j == i + l)
		return j;
	while ((s[--j] & 0xC0) == 0x80)
		;
	return j;
}

__attribute__((noinline)) static size_t split_deepseek(const uint8_t *s, size_t n, size_t i,
						       struct tok_split_state *st)
{
	uint32_t c0, c;
	size_t l0, l, j, e;

	if (d_at(s, n, i, &c0, &l0) & DN) /* a B1 chunk */
		return digits_end(s, n, i, 3);
	if (i >= st->e1) { /* the B1 run: up to the next number */
		for (j = i + l0; j < n;) {
			if (s[j] < 0x80) {
				if ((uint8_t)(s[j] - '0') < 10)
					break;
				j++;
				continue;
			}
			if (d_at(s, n, j, &c, &l) & DN)
				break;
			j += l;
		}
		st->e1 = j;
		st->e2 = 0;
	}
	if (i >= st->e2) { /* the B2 piece: a run of those CJK ranges, or up to the next one */
		bool in = d_cjk(c0);

		for (j = i + l0; j < st->e1;) {
			if (s[j] < 0x80 && !in) {
				j++;
				continue;
			}
			l = utf8_get(s + j, st->e1 - j, &c);
			if (d_cjk(c) != in)
				break;
			j += l;
		}
		st->e2 = j;
	}
	e = st->e2;
	if ((j = d_b3(s, e, i)))
		return j;
	/* a gap of B3: up to the next place one of its alternatives matches */
	for (j = i + l0; j < e && !d_b3(s, e, j);)
		j += utf8_get(s + j, e - j, &c);
	return j;
}

/* The state machine of kind t->fast_split at i. */
static inline size_t split_fast(const uint8_t *s, size_t n, size_t i, int kind,
				struct tok_split_state *st)
{
	if (__builtin_expect(kind <= 3, 1))
		return split_next(s, n, i, kind);
	return kind == 6 ? split_deepseek(s, n, i, st) : split_o200k(s, n, i, kind);
}

size_t tok_split_fast(int kind, const uint8_t *s, size_t n, size_t i, struct tok_split_state *st)
{
	return split_fast(s, n, i, kind, st);
}

/* --- NFC ------------------------------------------------------------------------------------ */

#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_LC 19u
#define HANGUL_VC 21u
#define HANGUL_TC 28u
#define HANGUL_NC (HANGUL_VC * HANGUL_TC)
#define HANGUL_SC (HANGUL_LC * HANGUL_NC)

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
	if (a - HANGUL_L < HANGUL_LC && b - HANGUL_V < HANGUL_VC)
		return HANGUL_S + ((a - HANGUL_L) * HANGUL_VC + (b - HANGUL_V)) * HANGUL_TC;
	if (a - HANGUL_S < HANGUL_SC && (a - HANGUL_S) % HANGUL_TC == 0 &&
	    b - HANGUL_T - 1 < HANGUL_TC - 1)
		return a + (b - HANGUL_T);
	return unicode_compose(a, b);
}

/* Appends the canonical decomposition of c to v (room for 7 more); canonical_order() sorts. */
static size_t decompose_push(uint32_t *v, size_t n, uint32_t c)
{
	const uint32_t *seq;
	int len;

	if (c - HANGUL_S < HANGUL_SC) {
		uint32_t si = c - HANGUL_S;
		v[n++] = HANGUL_L + si / HANGUL_NC;
		v[n++] = HANGUL_V + (si % HANGUL_NC) / HANGUL_TC;
		if (si % HANGUL_TC)
			v[n++] = HANGUL_T + si % HANGUL_TC;
		return n;
	}
	if (!(len = unicode_decompose(c, &seq))) {
		v[n++] = c;
		return n;
	}
	for (int k = 0; k < len; k++)
		v[n++] = seq[k];
	return n;
}

/* Canonical ordering: a stable sort by combining class of every run of non-starters. Long runs
 * are counting-sorted (tmp has room for n), so a hostile run of marks stays linear; an insertion
 * sort would be quadratic there. */
static void canonical_order(uint32_t *v, size_t n, uint32_t *tmp)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && unicode_ccc(v[j]))
			j++;
		if (j - i >= 2 && j - i <= 16) {
			for (size_t a = i + 1; a < j; a++) {
				uint32_t x = v[a];
				uint8_t cc = unicode_ccc(x);
				size_t p = a;
				while (p > i && unicode_ccc(v[p - 1]) > cc) {
					v[p] = v[p - 1];
					p--;
				}
				v[p] = x;
			}
		} else if (j - i > 16) {
			size_t count[257] = {0};
			for (size_t a = i; a < j; a++)
				count[unicode_ccc(v[a]) + 1]++;
			for (int r = 1; r < 257; r++)
				count[r] += count[r - 1];
			for (size_t a = i; a < j; a++)
				tmp[count[unicode_ccc(v[a])]++] = v[a];
			memcpy(v + i, tmp, (j - i) * sizeof(*v));
		}
		i = j > i ? j : i + 1;
	}
}

/* Canonical composition of v[0..n) in place; returns the new length. */
static size_t compose_all(uint32_t *v, size_t n)
{
	size_t starter = 0, o = 1;
	int last;

	if (!n)
		return 0;
	last = unicode_ccc(v[0]) ? 256 : 0;
	for (size_t i = 1; i < n; i++) {
		uint32_t c = v[i], comp;
		int cc = unicode_ccc(c);
		if ((last == 0 || last < cc) && last != 256 &&
		    (comp = compose_pair(v[starter], c))) {
			v[starter] = comp;
			continue;
		}
		if (cc == 0) {
			starter = o;
			last = 0;
		} else if (last != 256) {
			last = cc;
		}
		v[o++] = c;
	}
	return o;
}

/* Appends the normalization of the region s[0..n) (U+FFFD for ill-formed UTF-8; NFC when nfc)
 * to w->norm at *o. Returns 0 or -ENOMEM. */
static int normalize_region(bool nfc, const uint8_t *s, size_t n, struct tok_work *w, uint8_t **dst,
			    size_t *dcap, size_t *o)
{
	size_t m = 0;
	uint32_t c;

	/* at most 4 code points per input byte after decomposition (a decomposition has <= 7 code
	 * points and comes from >= 2 bytes), and as much again as scratch for sorting */
	if (!grow((void **)&w->cps, &w->cps_cap, 2 * (n * 4 + 8) * sizeof(uint32_t)))
		return -ENOMEM;
	for (size_t i = 0; i < n;) {
		i += utf8_get(s + i, n - i, &c);
		if (nfc)
			m = decompose_push(w->cps, m, c);
		else
			w->cps[m++] = c;
	}
	if (nfc) {
		canonical_order(w->cps, m, w->cps + n * 4 + 8);
		m = compose_all(w->cps, m);
	}
	if (!grow((void **)dst, dcap, *o + m * 4 + 1))
		return -ENOMEM;
	for (size_t i = 0; i < m; i++)
		*o += utf8_put(*dst + *o, w->cps[i]);
	return 0;
}

/* Does the code point at s[0..n) (l bytes, decoded as c) need normalize_region? */
static inline bool needs_norm(bool nfc, const uint8_t *s, size_t l, uint32_t c)
{
	/* ill-formed (U+FFFD decoded from anything but EF BF BD; a 3-byte ill-formed subpart never
	 * starts with EF), or a code point NFC may change */
	return (c == 0xFFFD && (l != 3 || s[0] != 0xEF)) || (nfc && (unicode_cls(c) & UCLS_NFC));
}

/* Writes the segment s[0..n) with invalid UTF-8 replaced by U+FFFD and, when nfc, in NFC, to
 * w->norm; returns its length, or -ENOMEM.
 * Only the regions around code points that need it are normalized: a code point that NFC leaves
 * alone in any context (combining class 0, NFC_QC=Yes) neither composes with what precedes it nor
 * lets a mark move across it, so the text splits there. A region starts at the last such starter
 * before a flagged code point (it may compose with the marks after it) and ends before the next
 * one; scratch memory follows the region, not the segment. */
static ssize_t normalize(bool nfc, const uint8_t *s, size_t n, struct tok_work *w, uint8_t **dst,
			 size_t *dcap)
{
	size_t o = 0, i = 0, j, k, last, l;
	uint32_t c;
	int err;

	while (i < n) {
		for (j = i, last = i; j < n; j += l) {
			l = utf8_get(s + j, n - j, &c);
			if (needs_norm(nfc, s + j, l, c))
				break;
			last = j;
		}
		if (j > i && j < n)
			j = last; /* the starter before may compose with what follows */
		if (!grow((void **)dst, dcap, o + (j - i) + 1))
			return -ENOMEM;
		memcpy(*dst + o, s + i, j - i);
		o += j - i;
		if (j == n)
			break;
		for (k = j; k < n; k += l) {
			l = utf8_get(s + k, n - k, &c);
			if (k > j && !needs_norm(nfc, s + k, l, c))
				break;
		}
		if ((err = normalize_region(nfc, s + j, k - j, w, dst, dcap, &o)))
			return err;
		i = k;
	}
	return (ssize_t)o;
}

/* --- encode --------------------------------------------------------------------------------- */

/* Pieces cut ahead of their encoding: the vocab slot of each is read while the pieces before it
 * are encoded, not waited for (a lookup of a piece otherwise waits on a cache miss). */
#ifndef TOK_AHEAD
#define TOK_AHEAD 16
#endif

/* A piece cut and not yet encoded. */
struct piece {
	size_t off, len;
	uint64_t head; /* bytes_head, when 2 <= len <= max_tok_len */
	uint32_t slot; /* its home slot in the vocab hash, idem */
};

/* Does the segment s[0..n) need normalize (ill-formed UTF-8, or a code point NFC may change)? */
static bool segment_needs_norm(bool nfc, const uint8_t *s, size_t n)
{
	uint32_t c;
	size_t l;

	for (size_t i = 0; i < n;) {
		if (i + 8 <= n && !(load64le(s + i) & BYTES8(0x80))) {
			i += 8; /* 8 ASCII bytes: nothing to normalize */
			continue;
		}
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		l = utf8_get(s + i, n - i, &c);
		if (needs_norm(nfc, s + i, l, c))
			return true;
		i += l;
	}
	return false;
}

/* Appends the ids of the pieces of the segment s[0..n) from *at (where a piece starts) on, and
 * moves *at past them: to n, or to the end of the first piece after which out holds stop ids.
 * Each piece is cut by split_next over the whole segment (its lookahead reads past the piece), so
 * going on from *at in a later call, with the same s and n, gives the ids going on now would.
 * The stop costs a compare a piece: this is the loop every encode runs. Returns 0 or -ENOMEM. */
static inline __attribute__((always_inline)) int
encode_pieces_with(const struct tokenizer *t, const uint8_t *s, size_t n, size_t *at, size_t stop,
		   struct tok_ids *out, struct tok_work *w, const bool qwen2)
{
	struct tok_split_state st = {0};
	int err;

	for (size_t i = *at; i < n;) {
		struct piece p[TOK_AHEAD];
		size_t np = 0;

		/* cut up to TOK_AHEAD pieces, starting the read of each one's vocab slot */
		for (; np < TOK_AHEAD && i < n; np++) {
			size_t e = qwen2		? split_next(s, n, i, t->fast_split)
				   : t->fast_split == 6 ? split_deepseek(s, n, i, &st)
							: split_o200k(s, n, i, t->fast_split);
			p[np].off = i;
			p[np].len = e - i;
			if (p[np].len >= 2 && p[np].len <= t->max_tok_len) {
				p[np].head = bytes_head(s + i, p[np].len);
				p[np].slot =
				    (uint32_t)hash_token(s + i, p[np].len, p[np].head) & t->vmask;
				__builtin_prefetch(&t->vhash[p[np].slot]);
			}
			i = e;
		}
		for (size_t k = 0; k < np; k++) {
			const uint8_t *ps = s + p[k].off;
			const struct vslot *v;

			if (p[k].len == 1) {
				err = ids_push(out, t->byte_id[ps[0]]);
			} else if (p[k].len <= t->max_tok_len &&
				   (v = vocab_probe(t, ps, p[k].len, p[k].head, p[k].slot)) &&
				   (v->len & VSLOT_WHOLE)) {
				err = ids_push(out, v->id);
			} else {
				err = bpe_piece_merge(t, ps, p[k].len, out, w);
			}
			if (err)
				return err;
			if (out->n >= stop) {
				/* the pieces cut after it are cut again by the next call */
				*at = p[k].off + p[k].len;
				return 0;
			}
		}
	}
	*at = n;
	return 0;
}

/* The loop twice over: Qwen2's and Llama 3's machine inlined alone (the one most encodes run, kept
 * as lean as before the other machines came), and the others through split_fast. */
__attribute__((noinline, hot)) static int
encode_pieces_qwen2(const struct tokenizer *t, const uint8_t *s, size_t n, size_t *at, size_t stop,
		    struct tok_ids *out, struct tok_work *w)
{
	return encode_pieces_with(t, s, n, at, stop, out, w, true);
}

__attribute__((noinline)) static int encode_pieces_other(const struct tokenizer *t,
							 const uint8_t *s, size_t n, size_t *at,
							 size_t stop, struct tok_ids *out,
							 struct tok_work *w)
{
	return encode_pieces_with(t, s, n, at, stop, out, w, false);
}

static inline int encode_pieces(const struct tokenizer *t, const uint8_t *s, size_t n, size_t *at,
				size_t stop, struct tok_ids *out, struct tok_work *w)
{
	return t->fast_split <= 3 ? encode_pieces_qwen2(t, s, n, at, stop, out, w)
				  : encode_pieces_other(t, s, n, at, stop, out, w);
}

/* --- added tokens --------------------------------------------------------------------------- */

static inline int32_t trie_child(const struct added_trie *tr, uint32_t node, uint8_t b)
{
	uint32_t key = (node << 8 | b) + 1, h = hash_pair(key) & tr->mask;

	for (;;) {
		const struct trie_slot *e = &tr->tab[h];
		if (e->key == key)
			return (int32_t)e->child;
		if (!e->key)
			return -1;
		h = (h + 1) & tr->mask;
	}
}

/* Is the character ending at s[at) (at > 0) a word character (a letter, a number or '_': the
 * reference asks Rust's char::is_alphanumeric, whose Alphabetic this reads as \p{L})? And the
 * one starting at s[at] (at < n)? */
static bool word_before(const uint8_t *s, size_t at)
{
	size_t j = at - 1;
	uint32_t c;

	while (j > 0 && (s[j] & 0xC0) == 0x80)
		j--;
	utf8_get(s + j, at - j, &c);
	return c == '_' || cls_of(c) == UCLS_LETTER || cls_of(c) == UCLS_NUMBER;
}

static bool word_after(const uint8_t *s, size_t n, size_t at)
{
	uint32_t c;

	utf8_get(s + at, n - at, &c);
	return c == '_' || cls_of(c) == UCLS_LETTER || cls_of(c) == UCLS_NUMBER;
}

/* The next added token of trie tr in s[from..n), as the reference's split_with_indices finds it:
 * leftmost-longest matches, one after the other (a match refused by single_word is skipped
 * whole); lstrip takes the white space before it back to lo (where the text before it begins),
 * rstrip the white space after it. Sets [*ts, *te) to the token's span (with what it strips) and
 * returns its index in t->added, or -1. */
static int added_next(const struct tokenizer *t, const struct added_trie *tr, const uint8_t *s,
		      size_t n, size_t lo, size_t from, size_t *ts, size_t *te)
{
	for (size_t i = from; i < n; i++) {
		int32_t node = 0, best = -1;
		size_t end = 0;

		if (tr->one_first >= 0) {
			const uint8_t *p = memchr(s + i, tr->one_first, n - i);
			if (!p)
				return -1;
			i = (size_t)(p - s);
		} else if (!tr->first[s[i]]) {
			continue;
		}
		for (size_t j = i; j < n && (node = trie_child(tr, (uint32_t)node, s[j])) >= 0; j++)
			if (tr->tok[node] >= 0) {
				best = tr->tok[node];
				end = j + 1;
			}
		if (best < 0)
			continue;
		const struct added_tok *a = &t->added[best];
		if (a->single_word &&
		    ((i > 0 && word_before(s, i)) || (end < n && word_after(s, n, end)))) {
			i = end - 1; /* the search goes on after the refused match */
			continue;
		}
		*ts = i;
		*te = end;
		if (a->lstrip) {
			size_t k = i;
			while (k > lo) {
				size_t j = k - 1;
				uint32_t c;
				while (j > lo && (s[j] & 0xC0) == 0x80)
					j--;
				utf8_get(s + j, k - j, &c);
				if (cls_of(c) != UCLS_SPACE)
					break;
				k = j;
			}
			*ts = k;
		}
		if (a->rstrip) {
			size_t k = end, l;
			uint32_t c;
			while (k < n && (l = utf8_get(s + k, n - k, &c)) && cls_of(c) == UCLS_SPACE)
				k += l;
			*te = k;
		}
		return best;
	}
	return -1;
}

/* --- pre-tokenizer: splitting steps --------------------------------------------------------- */

/* The leftmost match of step sp in T[a..b) at or after from: 1 (sets [*ms, *me)), 0 none, or
 * -E2BIG (the regex ran out of its budget). */
static int step_find(const struct split_step *sp, const uint8_t *T, size_t a, size_t b, size_t from,
		     size_t *ms, size_t *me)
{
	const uint8_t *p;

	if (sp->lit) {
		if (!sp->lit_len || from > b || b - from < sp->lit_len)
			return 0;
		if (!(p = memmem(T + from, b - from, sp->lit, sp->lit_len)))
			return 0;
		*ms = (size_t)(p - T);
		*me = *ms + sp->lit_len;
		return 1;
	}
	{
		size_t s0, e0;
		int r = regex_search(sp->re, T + a, b - a, from - a, &s0, &e0);
		if (r <= 0)
			return r == 0 ? 0 : -E2BIG;
		*ms = a + s0;
		*me = a + e0;
		return 1;
	}
}

static void level_init(struct tok_split_lv *lv, size_t a, size_t b)
{
	*lv = (struct tok_split_lv){.a = a, .b = b, .prev = a, .from = a};
}

/* The next element of the piece lv splits: a match or the gap before it, as the reference's
 * find_matches lists them (an empty match right after the previous match is skipped, the search
 * moving on one character). Sets [*s, *e) and *m (is a match, after invert). 1, 0 (none left),
 * -E2BIG. */
static int elem_next(const struct split_step *sp, const uint8_t *T, struct tok_split_lv *lv,
		     size_t *s, size_t *e, bool *m)
{
	size_t ms = 0, me = 0;
	int r = 0;

	if (lv->has_m) {
		*s = lv->ms;
		*e = lv->me;
		*m = true;
		lv->has_m = 0;
		lv->prev = lv->me;
		goto out;
	}
	if (lv->done)
		return 0;
	while (lv->from <= lv->b) {
		if ((r = step_find(sp, T, lv->a, lv->b, lv->from, &ms, &me)) < 0)
			return r;
		if (!r)
			break;
		if (ms == me && lv->last_me == me + 1) {
			uint32_t c;
			lv->from +=
			    lv->from < lv->b ? utf8_get(T + lv->from, lv->b - lv->from, &c) : 1;
			r = 0;
			continue;
		}
		lv->from = me;
		lv->last_me = me + 1;
		break;
	}
	if (!r) {
		lv->done = 1;
		if (lv->prev >= lv->b)
			return 0;
		*s = lv->prev;
		*e = lv->b;
		*m = false;
		lv->prev = lv->b;
		goto out;
	}
	if (lv->prev != ms) {
		*s = lv->prev;
		*e = ms;
		*m = false;
		lv->ms = ms;
		lv->me = me;
		lv->has_m = 1;
		goto out;
	}
	*s = ms;
	*e = me;
	*m = true;
	lv->prev = me;
out:
	if (sp->invert)
		*m = !*m;
	return 1;
}

/* elem_next through lv's one-element lookahead. */
static int elem_get(const struct split_step *sp, const uint8_t *T, struct tok_split_lv *lv,
		    size_t *s, size_t *e, bool *m)
{
	if (lv->has_p) {
		lv->has_p = 0;
		*s = lv->ps;
		*e = lv->pe;
		*m = lv->p_match;
		return 1;
	}
	return elem_next(sp, T, lv, s, e, m);
}

static int elem_peek(const struct split_step *sp, const uint8_t *T, struct tok_split_lv *lv)
{
	size_t s, e;
	bool m;
	int r;

	if (lv->has_p)
		return 1;
	if ((r = elem_next(sp, T, lv, &s, &e, &m)) <= 0)
		return r;
	lv->ps = s;
	lv->pe = e;
	lv->p_match = m;
	lv->has_p = 1;
	return 1;
}

/* The next non-empty piece of step sp's split of lv's piece, by its behavior (the reference's
 * SplitDelimiterBehavior: Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous).
 * 1, 0 (none left), -E2BIG. */
static int split_piece(const struct split_step *sp, const uint8_t *T, struct tok_split_lv *lv,
		       size_t *s, size_t *e)
{
	bool m;
	int r;

	for (;;) {
		if ((r = elem_get(sp, T, lv, s, e, &m)) <= 0)
			return r;
		switch (sp->behavior) {
		case SPLIT_REMOVED:
			if (m)
				continue;
			break;
		case SPLIT_MERGED_PREV:
			if (!m) {
				if ((r = elem_peek(sp, T, lv)) < 0)
					return r;
				if (r && lv->p_match) {
					*e = lv->pe;
					lv->has_p = 0;
				}
			}
			break;
		case SPLIT_MERGED_NEXT:
			if (m) {
				if ((r = elem_peek(sp, T, lv)) < 0)
					return r;
				if (r && !lv->p_match) {
					*e = lv->pe;
					lv->has_p = 0;
				}
			}
			break;
		case SPLIT_CONTIGUOUS:
			for (;;) {
				if ((r = elem_peek(sp, T, lv)) < 0)
					return r;
				if (!r || lv->p_match != m)
					break;
				*e = lv->pe;
				lv->has_p = 0;
			}
			break;
		default:
			break;
		}
		if (*e > *s)
			return 1;
	}
}

/* The next piece of the sub-segment cur splits, through every step (each splits the pieces of
 * the one before). 1, 0 (none left), -E2BIG. */
static int pretok_next(const struct tokenizer *t, const uint8_t *T, struct tok_cursor *cur,
		       size_t *s, size_t *e)
{
	int k = cur->depth, r;

	for (;;) {
		if ((r = split_piece(&t->split[k], T, &cur->lv[k], s, e)) < 0)
			return r;
		if (!r) {
			if (k == 0)
				return 0;
			cur->depth = --k;
			continue;
		}
		if (k == (int)t->n_split - 1)
			return 1;
		cur->depth = ++k;
		level_init(&cur->lv[k], *s, *e);
	}
}

/* --- normalizer steps ----------------------------------------------------------------------- */

/* Appends src[0..n) to *dst at *o. */
static int put_bytes(uint8_t **dst, size_t *cap, size_t *o, const void *src, size_t n)
{
	if (!grow((void **)dst, cap, *o + n + 1))
		return -ENOMEM;
	memcpy(*dst + *o, src, n);
	*o += n;
	return 0;
}

/* Normalizes the segment s[0..n) with t's steps (invalid UTF-8 read as U+FFFD first); sets *res to
 * the result (in w's buffers, or s itself when nothing changed it) and returns its length, or
 * -ENOMEM. */
static ssize_t normalize_steps(const struct tokenizer *t, const uint8_t *s, size_t n,
			       struct tok_work *w, const uint8_t **res)
{
	const uint8_t *cur = s;
	size_t len = n;
	int which = 0; /* the buffer cur is in: 0 none (s), 1 norm, 2 norm2 */

	for (int k = -1; k < (int)t->n_norm; k++) {
		const struct norm_step *st = k >= 0 ? &t->norm[k] : NULL;
		uint8_t **dst = which == 1 ? &w->norm2 : &w->norm;
		size_t *cap = which == 1 ? &w->norm2_cap : &w->norm_cap, o = 0;
		ssize_t m;

		if (!st || st->kind == NORM_NFC) {
			bool nfc = st != NULL;
			if (!segment_needs_norm(nfc, cur, len))
				continue;
			if ((m = normalize(nfc, cur, len, w, dst, cap)) < 0)
				return m;
			o = (size_t)m;
		} else if (st->kind == NORM_PREPEND) {
			if (!len)
				continue;
			if (put_bytes(dst, cap, &o, st->with, st->with_len) ||
			    put_bytes(dst, cap, &o, cur, len))
				return -ENOMEM;
		} else { /* NORM_REPLACE */
			const uint8_t *p = memmem(cur, len, st->pat, st->pat_len);
			size_t i = 0;
			if (!p)
				continue;
			while (p) {
				size_t at = (size_t)(p - cur);
				if (put_bytes(dst, cap, &o, cur + i, at - i) ||
				    put_bytes(dst, cap, &o, st->with, st->with_len))
					return -ENOMEM;
				i = at + st->pat_len;
				p = memmem(cur + i, len - i, st->pat, st->pat_len);
			}
			if (put_bytes(dst, cap, &o, cur + i, len - i))
				return -ENOMEM;
		}
		cur = *dst;
		len = o;
		which = which == 1 ? 2 : 1;
	}
	*res = cur;
	return (ssize_t)len;
}

/* The pieces of cur's sub-segment, all of them (no stop: a whole encode), cut TOK_AHEAD ahead of
 * their encoding so each one's vocab slot is read while the pieces before it are encoded (as
 * encode_pieces does for the state machine). Returns 0, -ENOMEM, -E2BIG. */
static int pieces_ahead(const struct tokenizer *t, const uint8_t *T, struct tok_cursor *cur,
			struct tok_ids *out, struct tok_work *w)
{
	int r = 1, err;

	while (r > 0) {
		struct piece p[TOK_AHEAD];
		size_t np = 0, s, e;

		while (np < TOK_AHEAD && (r = pretok_next(t, T, cur, &s, &e)) > 0) {
			p[np].off = s;
			p[np].len = e - s;
			if (p[np].len >= 2 && p[np].len <= t->max_tok_len) {
				p[np].head = bytes_head(T + s, p[np].len);
				p[np].slot =
				    (uint32_t)hash_token(T + s, p[np].len, p[np].head) & t->vmask;
				__builtin_prefetch(&t->vhash[p[np].slot]);
			}
			np++;
		}
		if (r < 0)
			return r;
		for (size_t k = 0; k < np; k++) {
			const uint8_t *ps = T + p[k].off;
			const struct vslot *v;

			if (p[k].len >= 2 && p[k].len <= t->max_tok_len &&
			    (v = vocab_probe(t, ps, p[k].len, p[k].head, p[k].slot)) &&
			    (v->len & VSLOT_WHOLE))
				err = ids_push(out, v->id);
			else
				err = bpe_piece(t, ps, p[k].len, out, w);
			if (err)
				return err;
		}
	}
	return 0;
}

/* Appends the ids of T[*pos..hi) (normalized text, from where cur left it) and moves *pos on: to
 * hi, or past the first piece after which out holds stop ids (cur then says where the pieces are:
 * a later call with the same T, hi and cur goes on as this one would have). Inside, normalized
 * added tokens cut sub-segments, whose pieces are the pre-tokenizer's. Returns 0, -ENOMEM,
 * -E2BIG. */
static int encode_text(const struct tokenizer *t, const uint8_t *T, size_t hi, size_t *pos,
		       struct tok_cursor *cur, size_t stop, struct tok_ids *out, struct tok_work *w)
{
	size_t s, e;
	int err;

	for (;;) {
		if (!cur->sub_open) {
			size_t ts = hi, te = hi;
			if (*pos >= hi)
				return 0;
			cur->sub_added = t->trie_norm.n ? added_next(t, &t->trie_norm, T, hi, *pos,
								     *pos, &ts, &te)
							: -1;
			cur->sub_end = cur->sub_added < 0 ? hi : ts;
			cur->sub_next = cur->sub_added < 0 ? hi : te;
			cur->sub_open = true;
			cur->depth = -1;
		}
		if (*pos < cur->sub_end) {
			if (t->fast_split) {
				if ((err = encode_pieces(t, T, cur->sub_end, pos, stop, out, w)))
					return err;
				if (*pos < cur->sub_end)
					return 0;
			} else if (!t->n_split) {
				if ((err = bpe_piece(t, T + *pos, cur->sub_end - *pos, out, w)))
					return err;
				*pos = cur->sub_end;
			} else {
				int r;
				if (cur->depth < 0) {
					level_init(&cur->lv[0], *pos, cur->sub_end);
					cur->depth = 0;
				}
				if (stop == SIZE_MAX && (err = pieces_ahead(t, T, cur, out, w)))
					return err;
				while ((r = pretok_next(t, T, cur, &s, &e)) > 0) {
					if ((err = bpe_piece(t, T + s, e - s, out, w)))
						return err;
					*pos = e;
					if (out->n >= stop && e < cur->sub_end)
						return 0;
				}
				if (r < 0)
					return r;
				*pos = cur->sub_end;
			}
			if (out->n >= stop && cur->sub_added >= 0)
				return 0; /* the token goes in with the next call */
		}
		if (cur->sub_added >= 0 && (err = ids_push(out, t->added[cur->sub_added].id)))
			return err;
		*pos = cur->sub_next;
		cur->sub_open = false;
		if (out->n >= stop)
			return 0;
	}
}

/* Begins st's segment s[seg..seg_end) (struct tok_stream, tokenizer.h). A segment the cache
 * holds is appended whole: a hit is cheaper than any stop inside it. One that needs normalizing is
 * encoded whole too: its pieces are cut from the normalized text, whose offsets are not those of
 * s[], so a stop inside it would leave no place in s[] to go on from (prompts rarely need NFC; a
 * part-at-a-time caller pays at most that segment; a normalizer that always changes the text, as
 * Gemma's Replace and Llama 2's Prepend, makes every segment one). Otherwise its pieces follow,
 * from st->pos. The segment's hit or miss is counted as a whole-text encode counts it. Returns 0,
 * -ENOMEM, -E2BIG. */
static int segment_begin(const struct tokenizer *t, struct tok_stream *st, struct tok_ids *out)
{
	const uint8_t *s = st->s + st->seg, *T;
	size_t n = st->seg_end - st->seg, at = 0;
	struct tok_work *w = &st->work;
	struct tok_cursor cur = {.depth = -1};
	ssize_t m;
	int rc;

	st->seg_ids = out->n;
	st->seg_h = 0;
	st->cur = (struct tok_cursor){.depth = -1};
	if (w->cache && n >= TOK_CACHE_MIN_SEGMENT) {
		uint64_t h = tc_hash(TC_SEGMENT, s, n);

		rc = tc_get(w->cache, h, TC_SEGMENT, s, n, out);
		if (rc < 0)
			return rc;
		if (rc) {
			w->cache->st.segment_hits++;
			st->pos = st->seg_end;
			return 0;
		}
		w->cache->st.segment_misses++;
		st->seg_h = h; /* stored when its last piece is in out */
	}
	if (t->norm_simple) {
		if (!segment_needs_norm(t->nfc, s, n))
			return 0;
		m = normalize(t->nfc, s, n, w, &w->norm, &w->norm_cap);
		T = w->norm;
	} else {
		m = normalize_steps(t, s, n, w, &T);
		if (m >= 0 && T == s)
			return 0; /* unchanged: its pieces stream from s[] */
	}
	if (m < 0)
		return (int)m;
	if ((rc = encode_text(t, T, (size_t)m, &at, &cur, SIZE_MAX, out, w)))
		return rc;
	st->pos = st->seg_end;
	return 0;
}

void tok_stream_init(struct tok_stream *st, const char *text, size_t len)
{
	*st = (struct tok_stream){
	    .s = (const uint8_t *)text, .len = len, .done = len == 0, .added = -1};
}

void tok_stream_init_special(struct tok_stream *st, const char *text, size_t len, bool add_special)
{
	tok_stream_init(st, text, len);
	st->special = add_special;
}

void tok_stream_free(struct tok_stream *st)
{
	work_free(&st->work);
}

/* The one encode loop (tokenizer_encode_cached is this with no limit): the text is cut at
 * non-normalized added tokens into segments; each segment is begun (segment_begin), its pieces
 * encoded until the limit, and once whole in out it is stored in the cache and followed by its
 * added token. A stream stops only after a piece, so the cache ends up as a whole-text encode
 * leaves it: the same pieces looked up and stored in the same order, each segment stored from out
 * when its last piece is in. With add_special_tokens the post-processor's ids go before the first
 * segment and after the last.
 */
int tokenizer_encode_more(const struct tokenizer *t, struct tok_cache *c, struct tok_stream *st,
			  size_t min_tokens, struct tok_ids *out)
{
	struct tok_work *w = &st->work;
	size_t ts, te;
	int k, err;

	w->cache = c;
	if (st->special && !st->pre_done) {
		if (t->n_before && (err = tok_ids_append(out, t->special_ids, t->n_before)))
			return err;
		st->pre_done = true;
	}
	while (!st->done && out->n < min_tokens) {
		if (!st->open) {
			k = t->trie_raw.n ? added_next(t, &t->trie_raw, st->s, st->len, st->pos,
						       st->pos, &ts, &te)
					  : -1;
			st->added = k;
			st->seg = st->pos;
			st->seg_end = k < 0 ? st->len : ts;
			st->added_end = k < 0 ? st->len : te;
			st->open = true;
			if ((err = segment_begin(t, st, out)))
				return err;
		}
		if (st->pos < st->seg_end || st->cur.sub_open) {
			err = encode_text(t, st->s, st->seg_end, &st->pos, &st->cur, min_tokens,
					  out, w);
			if (err)
				return err;
			if (st->pos < st->seg_end || (st->cur.sub_open && st->cur.sub_added >= 0))
				break; /* stopped inside the segment: out->n >= min_tokens */
		}
		if (st->seg_h && w->cache && out->n >= st->seg_ids)
			tc_put(w->cache, st->seg_h, TC_SEGMENT, st->s + st->seg,
			       st->seg_end - st->seg, out->v + st->seg_ids, out->n - st->seg_ids);
		st->seg_h = 0;
		st->pos = st->seg_end;
		if (st->added >= 0) {
			if ((err = tok_ids_push(out, t->added[st->added].id)))
				return err;
			st->pos = st->added_end;
		}
		st->open = false;
		st->done = st->pos == st->len;
	}
	if (st->done && st->special && !st->post_done) {
		if (t->n_after &&
		    (err = tok_ids_append(out, t->special_ids + t->n_before, t->n_after)))
			return err;
		st->post_done = true;
	}
	return 0;
}

int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_ids *out)
{
	return tokenizer_encode_special(t, NULL, text, len, false, out);
}

int tokenizer_encode_cached(const struct tokenizer *t, struct tok_cache *c, const char *text,
			    size_t len, struct tok_ids *out)
{
	return tokenizer_encode_special(t, c, text, len, false, out);
}

int tokenizer_encode_special(const struct tokenizer *t, struct tok_cache *c, const char *text,
			     size_t len, bool add_special, struct tok_ids *out)
{
	struct tok_stream st;
	int err;

	tok_stream_init_special(&st, text, len, add_special);
	err = tokenizer_encode_more(t, c, &st, SIZE_MAX, out);
	tok_stream_free(&st);
	return err;
}

const uint32_t *tokenizer_special_ids(const struct tokenizer *t, size_t *n_before, size_t *n_after)
{
	if (n_before)
		*n_before = t->n_before;
	if (n_after)
		*n_after = t->n_after;
	return t->special_ids;
}

int64_t tokenizer_bos_id(const struct tokenizer *t)
{
	return t->bos_id;
}

int tokenizer_decode(const struct tokenizer *t, const uint32_t *ids, size_t n, struct buf *out)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= t->n_ids || t->tok_off[ids[i] + 1] == t->tok_off[ids[i]])
			return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *b = t->arena + t->tok_off[ids[i]];
		size_t len = t->tok_off[ids[i] + 1] - t->tok_off[ids[i]];

		if (t->tok_byte && t->tok_byte[ids[i]]) { /* <0xXX>: its byte (ByteFallback) */
			uint8_t one = (uint8_t)(t->tok_byte[ids[i]] - 1);
			if (buf_append(out, &one, 1))
				return -ENOMEM;
			continue;
		}
		while (t->dec_space && len) { /* "▁" as a space (the decoder's Replace) */
			const uint8_t *p = memmem(b, len, "\xe2\x96\x81", 3);
			size_t k = p ? (size_t)(p - b) : len;
			if (buf_append(out, b, k) || (p && buf_append(out, " ", 1)))
				return -ENOMEM;
			k += p ? 3 : 0;
			b += k;
			len -= k;
		}
		if (len && buf_append(out, b, len))
			return -ENOMEM;
	}
	return 0;
}

int64_t tokenizer_token_id(const struct tokenizer *t, const char *content)
{
	size_t n = strlen(content);
	uint32_t id;

	for (uint32_t k = 0; k < t->n_added; k++)
		if (t->added[k].len == n && memcmp(t->added[k].s, content, n) == 0)
			return t->added[k].id;
	if (n == 0 || n > t->max_tok_len)
		return -1;
	id = vocab_find(t, (const uint8_t *)content, n);
	return id == NO_ID ? -1 : (int64_t)id;
}

size_t tokenizer_vocab_size(const struct tokenizer *t)
{
	return t->n_ids;
}

size_t tokenizer_memory(const struct tokenizer *t)
{
	return t->mem;
}

void tokenizer_free(struct tokenizer *t)
{
	if (!t)
		return;
	free(t->arena);
	free(t->tok_off);
	free(t->vhash);
	free(t->bytes2);
	free(t->mtab);
	free(t->added);
	free(t->crules);
	free(t->danger);
	free(t->trie_raw.tab);
	free(t->trie_raw.tok);
	free(t->trie_norm.tab);
	free(t->trie_norm.tok);
	for (uint32_t k = 0; k < t->n_norm; k++) {
		free(t->norm[k].pat);
		free(t->norm[k].with);
	}
	free(t->norm);
	for (uint32_t k = 0; k < t->n_split; k++) {
		free(t->split[k].lit);
		regex_free(t->split[k].re);
	}
	free(t->split);
	free(t->tok_byte);
	free(t->pre_cut);
	free(t->special_ids);
	free(t);
}

/* --- load ----------------------------------------------------------------------------------- */

#define REFUSE(...)                                                                                \
	do {                                                                                       \
		snprintf(err, errlen, __VA_ARGS__);                                                \
		goto cleanup;                                                                      \
	} while (0)

static bool is_null(const cJSON *j)
{
	return !j || cJSON_IsNull(j);
}

static bool is_false(const cJSON *j)
{
	return !j || cJSON_IsNull(j) || cJSON_IsFalse(j);
}

static bool is_empty_str(const cJSON *j)
{
	return !j || cJSON_IsNull(j) || (cJSON_IsString(j) && !j->valuestring[0]);
}

static bool type_is(const cJSON *j, const char *type)
{
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(j, "type");
	return cJSON_IsString(ty) && strcmp(ty->valuestring, type) == 0;
}

static const char *type_of(const cJSON *j)
{
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(j, "type");
	return cJSON_IsString(ty) ? ty->valuestring : "(no type)";
}

/* Copies a JSON string's bytes (NULL on ENOMEM). */
static char *dup_str(const cJSON *j, size_t *len)
{
	size_t n = strlen(j->valuestring);
	char *p = malloc(n + 1);

	if (p)
		memcpy(p, j->valuestring, n + 1);
	*len = n;
	return p;
}

/* One normalizer (not a Sequence) into t->norm. Returns 0, or -1 with why in err. */
static int parse_norm_one(struct tokenizer *t, const cJSON *j, char *err, size_t errlen)
{
	struct norm_step *st = &t->norm[t->n_norm];

	*st = (struct norm_step){0};
	if (type_is(j, "NFC")) {
		st->kind = NORM_NFC;
	} else if (type_is(j, "Replace")) {
		const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
		const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
		const cJSON *with = cJSON_GetObjectItemCaseSensitive(j, "content");
		if (!cJSON_IsString(lit))
			REFUSE("normalizer: Replace with a Regex pattern is not supported (only a "
			       "String)");
		if (!lit->valuestring[0])
			REFUSE("normalizer: Replace with an empty pattern is not supported");
		if (!cJSON_IsString(with))
			REFUSE("normalizer: Replace needs a string content");
		st->kind = NORM_REPLACE;
		if (!(st->pat = dup_str(lit, &st->pat_len)) ||
		    !(st->with = dup_str(with, &st->with_len)))
			REFUSE("out of memory");
	} else if (type_is(j, "Prepend")) {
		const cJSON *with = cJSON_GetObjectItemCaseSensitive(j, "prepend");
		if (!cJSON_IsString(with))
			REFUSE("normalizer: Prepend needs a string prepend");
		st->kind = NORM_PREPEND;
		if (!(st->with = dup_str(with, &st->with_len)))
			REFUSE("out of memory");
	} else {
		REFUSE("normalizer: only NFC, Replace, Prepend, Sequence or none are supported, "
		       "not %s",
		       type_of(j));
	}
	t->n_norm++;
	return 0;
cleanup:
	return -1;
}

static int parse_normalizer(struct tokenizer *t, const cJSON *j, char *err, size_t errlen)
{
	const cJSON *list, *it;
	size_t n = 1;

	if (is_null(j))
		goto done;
	if (type_is(j, "Sequence")) {
		list = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
		if (!cJSON_IsArray(list))
			REFUSE("normalizer: a Sequence needs a normalizers array");
		n = (size_t)cJSON_GetArraySize(list);
		cJSON_ArrayForEach(it, list) if (type_is(it, "Sequence"))
		    REFUSE("normalizer: a Sequence inside a Sequence is not supported");
	}
	if (n && !(t->norm = calloc(n, sizeof(*t->norm))))
		REFUSE("out of memory");
	if (type_is(j, "Sequence")) {
		cJSON_ArrayForEach(
		    it, cJSON_GetObjectItemCaseSensitive(
			    j, "normalizers")) if (parse_norm_one(t, it, err, errlen)) return -1;
	} else if (parse_norm_one(t, j, err, errlen)) {
		return -1;
	}
done:
	t->nfc = t->n_norm == 1 && t->norm[0].kind == NORM_NFC;
	t->norm_simple = t->n_norm == 0 || t->nfc;
	return 0;
cleanup:
	return -1;
}

/* A Split or ByteLevel pre-tokenizer into t->split (ByteLevel: *bl set; a step only with
 * use_regex). Returns 0, or -1 with why in err. */
static int parse_pre_one(struct tokenizer *t, const cJSON *j, bool last, char *err, size_t errlen)
{
	static const char *const behaviors[] = {[SPLIT_ISOLATED] = "Isolated",
						[SPLIT_REMOVED] = "Removed",
						[SPLIT_MERGED_PREV] = "MergedWithPrevious",
						[SPLIT_MERGED_NEXT] = "MergedWithNext",
						[SPLIT_CONTIGUOUS] = "Contiguous"};
	struct split_step *sp = &t->split[t->n_split];
	const char *pattern = NULL;
	size_t plen = 0;

	*sp = (struct split_step){0};
	if (t->byte_level)
		REFUSE("pre_tokenizer: a step after ByteLevel is not supported");
	if (type_is(j, "ByteLevel")) {
		t->byte_level = true;
		if (!is_false(cJSON_GetObjectItemCaseSensitive(j, "add_prefix_space")))
			REFUSE("pre_tokenizer: ByteLevel add_prefix_space is not supported");
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "use_regex")))
			return 0;
		/* the GPT-2 pattern, Isolated */
		pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
			  "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
		plen = strlen(pattern);
		sp->behavior = SPLIT_ISOLATED;
	} else if (type_is(j, "Split")) {
		const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
		const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
		const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
		const cJSON *beh = cJSON_GetObjectItemCaseSensitive(j, "behavior");
		size_t b;

		for (b = 0; b < sizeof(behaviors) / sizeof(behaviors[0]); b++)
			if (cJSON_IsString(beh) && strcmp(beh->valuestring, behaviors[b]) == 0)
				break;
		if (b == sizeof(behaviors) / sizeof(behaviors[0]))
			REFUSE("pre_tokenizer: Split behavior %s is not supported",
			       cJSON_IsString(beh) ? beh->valuestring : "(none)");
		sp->behavior = (int)b;
		sp->invert = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "invert"));
		if (cJSON_IsString(lit)) {
			if (!(sp->lit = dup_str(lit, &sp->lit_len)))
				REFUSE("out of memory");
		} else if (cJSON_IsString(re)) {
			pattern = re->valuestring;
			plen = strlen(pattern);
		} else {
			REFUSE("pre_tokenizer: Split needs a String or Regex pattern");
		}
	} else {
		REFUSE("pre_tokenizer: only Split, ByteLevel and Sequence are supported, not %s",
		       type_of(j));
	}
	(void)last;
	if (pattern) {
		char why[200];
		if (!(sp->re = regex_compile(pattern, plen, why, sizeof(why))))
			REFUSE("pre_tokenizer: Split regex not supported: %s", why);
	}
	t->n_split++;
	return 0;
cleanup:
	return -1;
}

/* Is a a Split step of regex re, Isolated, not inverted? */
static bool split_isolated(const cJSON *a, const char *re)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(a, "pattern"), "Regex");
	const cJSON *beh = cJSON_GetObjectItemCaseSensitive(a, "behavior");

	return type_is(a, "Split") && cJSON_IsString(r) && cJSON_IsString(beh) &&
	       strcmp(beh->valuestring, "Isolated") == 0 &&
	       is_false(cJSON_GetObjectItemCaseSensitive(a, "invert")) &&
	       strcmp(r->valuestring, re) == 0;
}

/* Is b a ByteLevel step without a prefix space or a regex of its own? */
static bool byte_level_plain(const cJSON *b)
{
	return type_is(b, "ByteLevel") &&
	       is_false(cJSON_GetObjectItemCaseSensitive(b, "add_prefix_space")) &&
	       is_false(cJSON_GetObjectItemCaseSensitive(b, "use_regex"));
}

static int parse_pre_tokenizer(struct tokenizer *t, const cJSON *j, char *err, size_t errlen)
{
	const cJSON *list = NULL, *it;
	int n = 1, i = 0;

	if (is_null(j))
		return 0;
	if (type_is(j, "Sequence")) {
		list = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
		if (!cJSON_IsArray(list))
			REFUSE("pre_tokenizer: a Sequence needs a pretokenizers array");
		n = cJSON_GetArraySize(list);
	}
	if (n > TOK_MAX_SPLITS)
		REFUSE("pre_tokenizer: more than %d steps are not supported", TOK_MAX_SPLITS);
	if (n && !(t->split = calloc((size_t)n, sizeof(*t->split))))
		REFUSE("out of memory");
	/* a state machine's pipeline: [Split(its regex, Isolated), ByteLevel], or DeepSeek V3's
	 * [Split(B1), Split(B2), Split(B3), ByteLevel] */
	if (list && n == 2 && byte_level_plain(cJSON_GetArrayItem(list, 1))) {
		static const struct {
			const char *re;
			int kind;
		} one[] = {{QWEN2_SPLIT_REGEX, 1},
			   {LLAMA3_SPLIT_REGEX, 3},
			   {GPTOSS_SPLIT_REGEX, 4},
			   {NEMO_SPLIT_REGEX, 5}};

		for (size_t k = 0; k < sizeof(one) / sizeof(one[0]) && !t->fast_split; k++)
			if (split_isolated(cJSON_GetArrayItem(list, 0), one[k].re))
				t->fast_split = one[k].kind;
	}
	if (list && n == 4 && byte_level_plain(cJSON_GetArrayItem(list, 3)) &&
	    split_isolated(cJSON_GetArrayItem(list, 0), DEEPSEEK_B1_REGEX) &&
	    split_isolated(cJSON_GetArrayItem(list, 1), DEEPSEEK_B2_REGEX) &&
	    split_isolated(cJSON_GetArrayItem(list, 2), DEEPSEEK_B3_REGEX))
		t->fast_split = 6;
	if (t->fast_split) {
		t->byte_level = true;
		return 0;
	}
	if (list) {
		cJSON_ArrayForEach(it,
				   list) if (parse_pre_one(t, it, ++i == n, err, errlen)) return -1;
	} else if (parse_pre_one(t, j, true, err, errlen)) {
		return -1;
	}
	return 0;
cleanup:
	return -1;
}

/* TemplateProcessing's single template: the special tokens around $A into *before / *after (ids
 * named by the special_tokens map). Returns 0, or -1 with why in err. */
static int parse_template(const cJSON *j, uint32_t *ids, uint32_t *nb, uint32_t *na, char *err,
			  size_t errlen)
{
	const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
	const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
	const cJSON *it;
	bool seen_a = false;

	if (!cJSON_IsArray(single))
		REFUSE("post_processor: TemplateProcessing needs a single template");
	cJSON_ArrayForEach(it, single)
	{
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
		const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
		if (seq) {
			const cJSON *id = cJSON_GetObjectItemCaseSensitive(seq, "id");
			if (seen_a || !cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
				REFUSE("post_processor: the single template must hold $A once");
			seen_a = true;
		} else if (sp) {
			const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp, "id");
			const cJSON *tok =
			    cJSON_IsString(name)
				? cJSON_GetObjectItemCaseSensitive(map, name->valuestring)
				: NULL;
			const cJSON *tids = cJSON_GetObjectItemCaseSensitive(tok, "ids"), *x;
			if (!cJSON_IsArray(tids))
				REFUSE("post_processor: special token %s is not in special_tokens",
				       cJSON_IsString(name) ? name->valuestring : "(no id)");
			cJSON_ArrayForEach(x, tids)
			{
				if (!cJSON_IsNumber(x) || x->valuedouble < 0 ||
				    x->valuedouble >= (1 << 24) || *nb + *na >= 16)
					REFUSE("post_processor: bad special token ids");
				ids[*nb + *na] = (uint32_t)x->valueint;
				if (seen_a)
					(*na)++;
				else
					(*nb)++;
			}
		} else {
			REFUSE("post_processor: a template item must be SpecialToken or Sequence");
		}
	}
	if (!seen_a)
		REFUSE("post_processor: the single template must hold $A");
	return 0;
cleanup:
	return -1;
}

/* The post-processor: the ids add_special_tokens adds (ByteLevel adds none). */
static int parse_post(const cJSON *j, uint32_t *ids, uint32_t *nb, uint32_t *na, char *err,
		      size_t errlen)
{
	const cJSON *it;

	if (is_null(j) || type_is(j, "ByteLevel"))
		return 0;
	if (type_is(j, "TemplateProcessing"))
		return parse_template(j, ids, nb, na, err, errlen);
	if (type_is(j, "Sequence")) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "processors"))
		{
			if (type_is(it, "Sequence"))
				REFUSE("post_processor: a Sequence inside a Sequence is not "
				       "supported");
			if (parse_post(it, ids, nb, na, err, errlen))
				return -1;
		}
		return 0;
	}
	REFUSE(
	    "post_processor: only TemplateProcessing, ByteLevel, Sequence or none are supported, "
	    "not %s",
	    type_of(j));
cleanup:
	return -1;
}

/* The decoder: only what tokenizer_decode reproduces. */
static int check_decoder(struct tokenizer *t, const cJSON *j, char *err, size_t errlen)
{
	const cJSON *it;

	if (is_null(j) || type_is(j, "ByteLevel"))
		return 0;
	if (!type_is(j, "Sequence"))
		REFUSE("decoder: only ByteLevel, a Sequence of Replace/ByteFallback/Fuse/Strip or "
		       "none "
		       "is supported, not %s",
		       type_of(j));
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "decoders"))
	{
		if (type_is(it, "Replace"))
			t->dec_space = true;
		else if (type_is(it, "Strip"))
			t->dec_strip = true;
		else if (!type_is(it, "ByteFallback") && !type_is(it, "Fuse"))
			REFUSE("decoder: %s in a Sequence is not supported", type_of(it));
	}
	return 0;
cleanup:
	return -1;
}

/* Checks the parts of tokenizer.json around the model and reads the pipeline into t; writes why
 * to err and returns -1 when the pipeline is not one this module reproduces. */
static int check_pipeline(const cJSON *root, struct tokenizer *t, char *err, size_t errlen)
{
	const cJSON *j;
	uint32_t ids[16];

	j = cJSON_GetObjectItemCaseSensitive(root, "truncation");
	if (!is_null(j))
		REFUSE("truncation: must be null (truncation changes the ids)");
	j = cJSON_GetObjectItemCaseSensitive(root, "padding");
	if (!is_null(j))
		REFUSE("padding: must be null (padding changes the ids)");
	if (parse_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err,
			     errlen) ||
	    parse_pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err,
				errlen) ||
	    parse_post(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), ids, &t->n_before,
		       &t->n_after, err, errlen) ||
	    check_decoder(t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), err, errlen))
		return -1;
	if (t->n_before + t->n_after) {
		if (!(t->special_ids = malloc((t->n_before + t->n_after) * sizeof(*ids))))
			REFUSE("out of memory");
		memcpy(t->special_ids, ids, (t->n_before + t->n_after) * sizeof(*ids));
	}
	j = cJSON_GetObjectItemCaseSensitive(root, "model");
	if (!cJSON_IsObject(j) || !type_is(j, "BPE"))
		REFUSE("model: only BPE is supported, not %s",
		       cJSON_IsObject(j) ? type_of(j) : "none");
	if (!is_null(cJSON_GetObjectItemCaseSensitive(j, "dropout")))
		REFUSE("model: BPE dropout must be null (dropout is random)");
	if (!is_empty_str(cJSON_GetObjectItemCaseSensitive(j, "continuing_subword_prefix")))
		REFUSE("model: BPE continuing_subword_prefix is not supported");
	if (!is_empty_str(cJSON_GetObjectItemCaseSensitive(j, "end_of_word_suffix")))
		REFUSE("model: BPE end_of_word_suffix is not supported");
	t->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "byte_fallback"));
	t->fuse_unk = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fuse_unk"));
	return 0;
cleanup:
	return -1;
}

/* Adds vocab token id to the hash. Returns 0, or -EEXIST when a token with its bytes is there. */
static int vhash_insert(struct tokenizer *t, uint32_t id)
{
	const uint8_t *s = t->arena + t->tok_off[id];
	size_t n = t->tok_off[id + 1] - t->tok_off[id];
	uint64_t head = bytes_head(s, n);
	uint32_t h = (uint32_t)hash_token(s, n, head) & t->vmask;

	if (vocab_slot(t, s, n))
		return -EEXIST;
	while (t->vhash[h].id != NO_ID)
		h = (h + 1) & t->vmask;
	t->vhash[h] = (struct vslot){.head = head, .id = id, .len = (uint32_t)n};
	return 0;
}

/* Isolated BPE of one character's bytes s[0..n) (n <= 4): sets *top to the highest rank merged
 * and adds to left[] / right[] (room for 4 each) the symbols other than the last one that begin /
 * end the character on the way. Returns the one token it ends as, or NO_ID. */
static uint32_t char_bpe(const struct tokenizer *t, const uint8_t *s, size_t n, uint32_t *top,
			 uint32_t *left, uint32_t *nl, uint32_t *right, uint32_t *nr)
{
	uint32_t ids[4], mid[4], rank, best, bmid = 0;
	size_t m = n, bi = 0;

	*top = 0;
	for (size_t i = 0; i < n; i++)
		ids[i] = t->byte_id[s[i]];
	left[(*nl)++] = ids[0];
	right[(*nr)++] = ids[n - 1];
	while (m > 1) {
		best = UINT32_MAX;
		for (size_t i = 0; i + 1 < m; i++) {
			if ((rank = merge_find(t, ids[i], ids[i + 1], &mid[i])) < best) {
				best = rank;
				bi = i;
				bmid = mid[i];
			}
		}
		if (best == UINT32_MAX)
			return NO_ID;
		*top = best > *top ? best : *top;
		ids[bi] = bmid;
		memmove(ids + bi + 1, ids + bi + 2, (m - bi - 2) * sizeof(*ids));
		m--;
		if (m > 1 && bi == 0)
			left[(*nl)++] = ids[0];
		if (m > 1 && bi == m - 1)
			right[(*nr)++] = ids[m - 1];
	}
	return ids[0];
}

/* Adds to the danger list the ids of the merges (x, p) (by_right: csr of p's) or (p, x)
 * (by_left) of rank <= top, for each p of ps[0..np). Returns the count added or -ENOMEM. */
static int64_t danger_add(struct tokenizer *t, size_t *len, size_t *cap, const uint32_t *ps,
			  uint32_t np, uint32_t top, const uint32_t *start, const uint64_t *ent)
{
	int64_t added = 0;

	for (uint32_t k = 0; k < np; k++)
		for (uint32_t e = start[ps[k]]; e < start[ps[k] + 1]; e++) {
			if ((uint32_t)(ent[e] >> 32) > top)
				continue;
			if (*len == *cap) {
				size_t c = *cap ? *cap * 2 : 4096;
				uint32_t *d = realloc(t->danger, c * sizeof(*d));
				if (!d)
					return -ENOMEM;
				t->danger = d;
				*cap = c;
			}
			t->danger[(*len)++] = (uint32_t)ent[e];
			added++;
		}
	return added;
}

/* Whole characters at the start of BPE. BPE of a piece of CJK or Hangul spends most of its merges
 * putting each character's bytes back together; starting from the character's token instead
 * gives the same ids when, in the merge order of the whole piece, the character is always
 * rebuilt before any of its partial symbols could merge with a neighbour:
 *   - the merges are in training order (every merge ranks above those that make its operands),
 *     so merges happen in rank order and a pair with the character's token ranks above all the
 *     character's own merges: it cannot come sooner when the token is there from the start;
 *   - the character alone merges into one token T, its own merges ranking at most R;
 *   - no merge of rank <= R joins a partial symbol at its left edge (its first byte, ...) with a
 *     token x before it, or one at its right edge with a token y after it. Such x and y are listed
 *     per character (its dangers); a merge above R cannot come before T is whole, since T's next
 *     own merge always ranks lower.
 * The dangers are checked against the text around each occurrence: where the bytes before it end
 * with an x, or those after it start with a y, the character starts as bytes. Built here for every
 * token that is one character of 2 to 4 bytes; none when the merges are not in training order.
 * Returns 0 or -ENOMEM. */
static int char_rules_build(struct tokenizer *t)
{
	uint32_t *maxmade = NULL, *rstart = NULL, *lstart = NULL;
	uint64_t *rent = NULL, *lent = NULL; /* rank << 32 | the other operand */
	size_t len = 0, cap = 0, nrules = 0;
	int rc = -ENOMEM;

	if (!(maxmade = calloc(t->n_ids, sizeof(*maxmade))) ||
	    !(rstart = calloc((size_t)t->n_ids + 2, sizeof(*rstart))) ||
	    !(lstart = calloc((size_t)t->n_ids + 2, sizeof(*lstart))) ||
	    !(rent = malloc(((size_t)t->mmask + 1) * sizeof(*rent))) ||
	    !(lent = malloc(((size_t)t->mmask + 1) * sizeof(*lent))))
		goto cleanup;
	/* training order; maxmade[id]: 1 + the highest rank that makes id (0: none) */
	for (uint32_t i = 0; i <= t->mmask; i++)
		if (t->mtab[i].key && t->mtab[i].rank + 1 > maxmade[t->mtab[i].id])
			maxmade[t->mtab[i].id] = t->mtab[i].rank + 1;
	for (uint32_t i = 0; i <= t->mmask; i++) {
		uint64_t k = t->mtab[i].key - 1;
		if (t->mtab[i].key && (maxmade[k >> 32] > t->mtab[i].rank ||
				       maxmade[(uint32_t)k] > t->mtab[i].rank)) {
			rc = 0; /* not in training order: no rules */
			goto cleanup;
		}
	}
	/* the merges by right operand (rent) and by left operand (lent), counting sort */
	for (uint32_t i = 0; i <= t->mmask; i++) {
		uint64_t k = t->mtab[i].key - 1;
		if (t->mtab[i].key) {
			rstart[(uint32_t)k + 2]++;
			lstart[(k >> 32) + 2]++;
		}
	}
	for (uint32_t id = 0; id < t->n_ids; id++) {
		rstart[id + 2] += rstart[id + 1];
		lstart[id + 2] += lstart[id + 1];
	}
	for (uint32_t i = 0; i <= t->mmask; i++) {
		uint64_t k = t->mtab[i].key - 1, r = (uint64_t)t->mtab[i].rank << 32;
		if (t->mtab[i].key) {
			rent[rstart[(uint32_t)k + 1]++] = r | (k >> 32);
			lent[lstart[(k >> 32) + 1]++] = r | (uint32_t)k;
		}
	}
	/* the characters */
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && !nrules) {
			rc = 0; /* no rules */
			goto cleanup;
		}
		if (pass == 1) {
			for (t->cmask = 1; t->cmask <= nrules + nrules / 2; t->cmask <<= 1)
				;
			if (!(t->crules = calloc(t->cmask, sizeof(*t->crules))))
				goto cleanup;
			t->cmask--;
		}
		for (uint32_t id = 0; id < t->n_ids; id++) {
			const uint8_t *b = t->arena + t->tok_off[id];
			size_t n = t->tok_off[id + 1] - t->tok_off[id];
			uint32_t cp, top, left[4], right[4], nl = 0, nr = 0, key, h;
			int64_t dl, dr;

			if (n < 2 || n > 4 || b[0] < 0xC2 || utf8_get(b, n, &cp) != n ||
			    (cp == 0xFFFD && (n != 3 || b[0] != 0xEF)) ||
			    vocab_find(t, b, n) != id ||
			    char_bpe(t, b, n, &top, left, &nl, right, &nr) != id)
				continue;
			if (pass == 0) {
				nrules++;
				continue;
			}
			key = (uint32_t)bytes_head(b, n);
			dl = danger_add(t, &len, &cap, left, nl, top, rstart, rent);
			dr = dl < 0 ? dl : danger_add(t, &len, &cap, right, nr, top, lstart, lent);
			if (dr < 0)
				goto cleanup;
			if (dl > UINT16_MAX || dr > UINT16_MAX || len > UINT32_MAX) {
				len -= (size_t)(dl + dr);
				continue;
			}
			for (h = hash_pair(key) & t->cmask; t->crules[h].key;
			     h = (h + 1) & t->cmask)
				;
			t->crules[h] =
			    (struct char_rule){.key = key,
					       .id = id,
					       .danger = (uint32_t)(len - (size_t)(dl + dr)),
					       .n_left = (uint16_t)dl,
					       .n_right = (uint16_t)dr};
		}
	}
	t->mem += ((size_t)t->cmask + 1) * sizeof(*t->crules) + cap * sizeof(*t->danger);
	rc = 0;
cleanup:
	if (rc || !t->crules) {
		free(t->crules);
		free(t->danger);
		t->crules = NULL;
		t->danger = NULL;
	}
	free(maxmade);
	free(rstart);
	free(lstart);
	free(rent);
	free(lent);
	return rc;
}

/* Sets VSLOT_WHOLE on vocab token id (in the hash). */
static void vhash_mark_whole(struct tokenizer *t, uint32_t id)
{
	const struct vslot *v =
	    vocab_slot(t, t->arena + t->tok_off[id], t->tok_off[id + 1] - t->tok_off[id]);

	if (v && v->id == id)
		t->vhash[v - t->vhash].len |= VSLOT_WHOLE;
}

/* Converts a byte-level token string to its bytes at dst (room for cap); returns the byte count,
 * or -1 for a character outside the byte-level alphabet or more than cap bytes. */
static int byte_level_decode(const char *str, const int16_t u2b[512], uint8_t *dst, size_t cap)
{
	const uint8_t *s = (const uint8_t *)str;
	size_t n = strlen(str), o = 0;
	uint32_t c;

	for (size_t i = 0; i < n;) {
		i += utf8_get(s + i, n - i, &c);
		if (c >= 512 || u2b[c] < 0 || o >= cap)
			return -1;
		dst[o++] = (uint8_t)u2b[c];
	}
	return (int)o;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *p = NULL;

	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) || st.st_size < 0 || !(p = malloc((size_t)st.st_size + 1)) ||
	    fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(p);
		p = NULL;
	} else {
		p[st.st_size] = '\0';
		*len = (size_t)st.st_size;
	}
	fclose(f);
	return p;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The characters some vocab token holds right before "▁" (word_cuts), and cut_ok. 0 or -ENOMEM.
 */
static int pre_cut_build(struct tokenizer *t)
{
	size_t n = 0, cap = 0;
	uint32_t *v = NULL;

	for (uint32_t id = 0; id < t->n_ids; id++) {
		const uint8_t *b = t->arena + t->tok_off[id];
		size_t len = t->tok_off[id + 1] - t->tok_off[id];
		const struct vslot *sl;

		if (len < 4 || !(sl = vocab_slot(t, b, len)) || sl->id != id)
			continue;
		for (size_t i = 1; i + 3 <= len; i++) {
			size_t j = i - 1;
			uint32_t x;
			if (b[i] != 0xE2 || b[i + 1] != 0x96 || b[i + 2] != 0x81)
				continue;
			while (j > 0 && (b[j] & 0xC0) == 0x80)
				j--;
			utf8_get(b + j, i - j, &x);
			if (n == cap) {
				uint32_t *q = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
				if (!q) {
					free(v);
					return -ENOMEM;
				}
				v = q;
			}
			v[n++] = x;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_u32);
	t->n_pre_cut = 0;
	for (size_t i = 0; i < n; i++)
		if (!i || v[i] != v[i - 1])
			v[t->n_pre_cut++] = v[i];
	t->pre_cut = v;
	t->cut_ok = true;
	t->mem += cap * sizeof(*v);
	return 0;
}

/* Adds the tokens of t->added whose normalized flag is normd to trie tr (normalized ones by their
 * normalized content, as the reference builds its second automaton). 0 or -ENOMEM. */
static int trie_build(struct tokenizer *t, struct added_trie *tr, bool normd)
{
	size_t total = 1;
	struct tok_work w = {0};
	int rc = -ENOMEM;

	tr->one_first = -1;
	for (uint32_t k = 0; k < t->n_added; k++)
		if (t->added[k].normalized == normd)
			total +=
			    (size_t)t->added[k].len * 4 + 8; /* room for what normalizing adds */
	for (tr->mask = 1; tr->mask <= 2 * total; tr->mask <<= 1)
		;
	if (!(tr->tab = calloc(tr->mask, sizeof(*tr->tab))) ||
	    !(tr->tok = malloc(total * sizeof(*tr->tok))))
		goto cleanup;
	tr->mask--;
	tr->cap_nodes = (uint32_t)total;
	tr->tok[0] = -1;
	tr->n_nodes = 1;
	for (uint32_t k = 0; k < t->n_added; k++) {
		const struct added_tok *a = &t->added[k];
		const uint8_t *p = a->s;
		ssize_t n = a->len;
		uint32_t node = 0;

		if (a->normalized != normd)
			continue;
		if (normd && t->n_norm && (n = normalize_steps(t, a->s, a->len, &w, &p)) < 0)
			goto cleanup;
		if (!n || (size_t)n > (size_t)a->len * 4 + 8)
			continue; /* normalized to nothing: never matched */
		for (ssize_t i = 0; i < n; i++) {
			int32_t c = trie_child(tr, node, p[i]);
			if (c < 0) {
				uint32_t key = (node << 8 | p[i]) + 1,
					 h = hash_pair(key) & tr->mask;
				while (tr->tab[h].key)
					h = (h + 1) & tr->mask;
				tr->tab[h] = (struct trie_slot){.key = key, .child = tr->n_nodes};
				tr->tok[tr->n_nodes] = -1;
				c = (int32_t)tr->n_nodes++;
			}
			node = (uint32_t)c;
		}
		if (tr->tok[node] < 0)
			tr->tok[node] = (int32_t)k;
		tr->first[p[0]] = 1;
		tr->n++;
	}
	for (int b = 0, seen = 0; b < 256; b++)
		if (tr->first[b])
			tr->one_first = seen++ ? -1 : b;
	t->mem += ((size_t)tr->mask + 1) * sizeof(*tr->tab) + total * sizeof(*tr->tok);
	rc = 0;
cleanup:
	work_free(&w);
	return rc;
}

/* The id of a tokenizer_config.json special token (a string, or an object with a content). */
static int64_t config_token(const struct tokenizer *t, const cJSON *j)
{
	if (cJSON_IsObject(j))
		j = cJSON_GetObjectItemCaseSensitive(j, "content");
	return cJSON_IsString(j) ? tokenizer_token_id(t, j->valuestring) : -1;
}

/* tokenizer_config.json's add_bos_token / add_eos_token, where set, decide the ids
 * add_special_tokens adds (transformers rebuilds the post-processor from them as
 * "[bos] $A [eos]"). A missing file changes nothing. Returns 0, or -1 with why in err. */
static int apply_config(struct tokenizer *t, const char *cfg_path, char *err, size_t errlen)
{
	size_t len = 0;
	char *text = read_file(cfg_path, &len);
	cJSON *root = NULL;
	const cJSON *ab, *ae;
	bool bos, eos;
	int64_t bid = -1, eid = -1;
	int rc = -1;

	if (!text)
		return errno == ENOENT ? 0
				       : (snprintf(err, errlen, "%s: cannot read", cfg_path), -1);
	if (!(root = cJSON_ParseWithLength(text, len)))
		REFUSE("%s: not valid JSON", cfg_path);
	ab = cJSON_GetObjectItemCaseSensitive(root, "add_bos_token");
	ae = cJSON_GetObjectItemCaseSensitive(root, "add_eos_token");
	if (!cJSON_IsBool(ab) && !cJSON_IsBool(ae)) {
		rc = 0;
		goto cleanup;
	}
	bos = cJSON_IsTrue(ab);
	eos = cJSON_IsTrue(ae);
	if (bos && (bid = config_token(t, cJSON_GetObjectItemCaseSensitive(root, "bos_token"))) < 0)
		REFUSE("%s: add_bos_token is true but bos_token names no token", cfg_path);
	if (eos && (eid = config_token(t, cJSON_GetObjectItemCaseSensitive(root, "eos_token"))) < 0)
		REFUSE("%s: add_eos_token is true but eos_token names no token", cfg_path);
	free(t->special_ids);
	t->special_ids = NULL;
	t->n_before = bos;
	t->n_after = eos;
	if ((bos || eos) && !(t->special_ids = malloc(2 * sizeof(*t->special_ids))))
		REFUSE("out of memory");
	if (bos)
		t->special_ids[0] = (uint32_t)bid;
	if (eos)
		t->special_ids[bos] = (uint32_t)eid;
	rc = 0;
cleanup:
	cJSON_Delete(root);
	free(text);
	return rc;
}

static struct tokenizer *load_json(const char *path, char *err, size_t errlen)
{
	struct tokenizer *t = NULL, *ret = NULL;
	cJSON *root = NULL;
	char *text = NULL;
	size_t text_len = 0, arena_cap = 0, arena_len = 0;
	uint32_t b2u[256];
	int16_t u2b[512];
	const cJSON *model, *vocab, *merges, *added, *it;
	uint32_t n_vocab, max_id = 0;
	const cJSON **items = NULL;

	snprintf(err, errlen, "out of memory");
	for (uint32_t c = 0; c < 128; c++)
		if (ascii_cls[c] != (unicode_cls(c) & UCLS_MASK))
			REFUSE("internal: ascii_cls disagrees with unicode_tables at U+%04X", c);
	byte_level_map(b2u, u2b);
	if (!(text = read_file(path, &text_len)))
		REFUSE("%s: cannot read: %s", path, strerror(errno ? errno : EIO));
	if (!(root = cJSON_ParseWithLength(text, text_len)))
		REFUSE("%s: not valid JSON", path);
	free(text);
	text = NULL;
	if (!(t = calloc(1, sizeof(*t))))
		goto cleanup;
	t->unk_id = NO_ID;
	t->bos_id = -1;
	{
		char why[256];
		if (check_pipeline(root, t, why, sizeof(why)))
			REFUSE("%s: unsupported tokenizer pipeline: %s", path, why);
	}
	model = cJSON_GetObjectItemCaseSensitive(root, "model");
	vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
	merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
	added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
		REFUSE("%s: model: BPE needs a vocab object and a merges array", path);
	if (!is_null(added) && !cJSON_IsArray(added))
		REFUSE("%s: added_tokens: must be an array", path);

	/* ids: vocab then added tokens; every id in [0, max] must be defined exactly once */
	n_vocab = (uint32_t)cJSON_GetArraySize(vocab);
	cJSON_ArrayForEach(it, vocab)
	{
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (1 << 24))
			REFUSE("%s: model: vocab id of \"%s\" is not a valid id", path, it->string);
		if ((uint32_t)it->valueint > max_id)
			max_id = (uint32_t)it->valueint;
	}
	cJSON_ArrayForEach(it, added)
	{
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
		if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24))
			REFUSE("%s: added_tokens: an entry has no valid id", path);
		if ((uint32_t)id->valueint > max_id)
			max_id = (uint32_t)id->valueint;
	}
	t->n_ids = max_id + 1;
	if (!(items = calloc(t->n_ids, sizeof(*items))))
		goto cleanup;
	cJSON_ArrayForEach(it, vocab)
	{
		if (items[it->valueint])
			REFUSE("%s: model: vocab id %d is used twice", path, it->valueint);
		items[it->valueint] = it;
	}
	/* arena: every token's bytes by id (added tokens: their content) */
	t->tok_off = calloc((size_t)t->n_ids + 1, sizeof(*t->tok_off));
	if (!t->tok_off)
		goto cleanup;
	arena_cap = 1 << 20;
	if (!(t->arena = malloc(arena_cap)))
		goto cleanup;
	{
		uint32_t n_added = (uint32_t)cJSON_GetArraySize(added);
		const cJSON **added_items = NULL;
		uint8_t *in_hash = NULL; /* vocab ids that go in the vocab hash */
		if (!(in_hash = calloc(t->n_ids, 1)) ||
		    (n_added && !(added_items = calloc(t->n_ids, sizeof(*added_items))))) {
			free(in_hash);
			goto cleanup;
		}
#define REFUSE_ADDED(...)                                                                          \
	do {                                                                                       \
		free(added_items);                                                                 \
		free(in_hash);                                                                     \
		REFUSE(__VA_ARGS__);                                                               \
	} while (0)
		cJSON_ArrayForEach(it, added)
		{
			const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
			const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
			if (!cJSON_IsString(content) || !content->valuestring[0])
				REFUSE_ADDED("%s: added_tokens: id %d has no content", path,
					     id->valueint);
			if (added_items[id->valueint])
				REFUSE_ADDED("%s: added_tokens: id %d is added twice", path,
					     id->valueint);
			added_items[id->valueint] = it;
		}
		for (uint32_t id = 0; id < t->n_ids; id++) {
			size_t need;
			const char *str, *cstr = NULL;
			int n;
			if (added_items && added_items[id])
				cstr = cJSON_GetObjectItemCaseSensitive(added_items[id], "content")
					   ->valuestring;
			str = items[id] ? items[id]->string : cstr;
			need = str ? strlen(str) : 0;
			if (cstr && strlen(cstr) > need)
				need = strlen(cstr);
			if (arena_len + need > arena_cap) {
				uint8_t *p;
				while (arena_len + need > arena_cap)
					arena_cap *= 2;
				if (!(p = realloc(t->arena, arena_cap)))
					REFUSE_ADDED("out of memory");
				t->arena = p;
			}
			t->tok_off[id] = (uint32_t)arena_len;
			if (!str)
				REFUSE_ADDED(
				    "%s: id %u is neither a vocab nor an added token (the "
				    "reference numbers added tokens after the vocab, without gaps)",
				    path, id);
			if (items[id] && t->byte_level)
				n = byte_level_decode(str, u2b, t->arena + arena_len, need);
			else if (items[id])
				n = (int)strlen(str), memcpy(t->arena + arena_len, str, (size_t)n);
			else
				n = -1;
			if (items[id] && n <= 0 && !cstr)
				REFUSE_ADDED("%s: model: vocab token \"%s\" is not byte-level "
					     "(ByteLevel BPE expected)",
					     path, str);
			if (cstr) {
				/* an added token that is also a vocab entry: found by BPE only
				 * when its vocab spelling stands for its content */
				if (n > 0 && ((size_t)n != strlen(cstr) ||
					      memcmp(t->arena + arena_len, cstr, (size_t)n)))
					REFUSE_ADDED("%s: added_tokens: \"%s\" is id %u, a vocab "
						     "token of other bytes",
						     path, cstr, id);
				if (items[id] && n > 0)
					in_hash[id] = 1;
				n = (int)strlen(cstr);
				memcpy(t->arena + arena_len, cstr, (size_t)n);
			} else {
				in_hash[id] = 1;
			}
			if (in_hash[id] && (uint32_t)n > t->max_tok_len)
				t->max_tok_len = (uint32_t)n;
			arena_len += (size_t)n;
		}
		t->tok_off[t->n_ids] = (uint32_t)arena_len;
		/* added tokens, in id order */
		if (n_added && !(t->added = calloc(n_added, sizeof(*t->added))))
			REFUSE_ADDED("out of memory");
		for (uint32_t id = 0; added_items && id < t->n_ids; id++) {
			const cJSON *a_it = added_items[id];
			if (!a_it)
				continue;
			struct added_tok *a = &t->added[t->n_added++];
			a->id = id;
			a->s = t->arena + t->tok_off[id];
			a->len = t->tok_off[id + 1] - t->tok_off[id];
			a->lstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a_it, "lstrip"));
			a->rstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a_it, "rstrip"));
			a->single_word =
			    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a_it, "single_word"));
			a->normalized =
			    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a_it, "normalized"));
			a->special =
			    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a_it, "special"));
		}
		free(added_items);
		added_items = NULL;
		/* vocab hash */
		/* load <= 2/3, and never full: with no empty slot a lookup of a missing token would
		 * probe for ever (a one-token vocab made a table of one slot) */
		for (t->vmask = 1; t->vmask <= n_vocab + n_vocab / 2; t->vmask <<= 1)
			;
		if (!(t->vhash = malloc((size_t)t->vmask * sizeof(*t->vhash))))
			REFUSE_ADDED("out of memory");
		for (uint32_t i = 0; i < t->vmask; i++)
			t->vhash[i].id = NO_ID;
		t->vmask--;
		for (uint32_t id = 0; id < t->n_ids; id++)
			if (items[id] && in_hash[id] && vhash_insert(t, id))
				REFUSE_ADDED("%s: model: two vocab tokens have the same bytes",
					     path);
		free(in_hash);
#undef REFUSE_ADDED
	}
	if (t->byte_level) {
		for (int b = 0; b < 256; b++) {
			uint8_t one = (uint8_t)b;
			if ((t->byte_id[b] = vocab_find(t, &one, 1)) == NO_ID)
				REFUSE("%s: model: the vocab lacks the byte-level symbol of byte "
				       "0x%02x",
				       path, b);
		}
	} else {
		const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
		if (!(t->tok_byte = calloc(t->n_ids, 1)))
			goto cleanup;
		for (int b = 0; b < 256; b++) {
			char name[8];
			uint8_t one = (uint8_t)b;
			snprintf(name, sizeof(name), "<0x%02X>", b);
			t->byte_tok[b] = vocab_find(t, (const uint8_t *)name, 6);
			if (t->byte_tok[b] != NO_ID)
				t->tok_byte[t->byte_tok[b]] = (uint8_t)(1 + b);
			if (b < 128)
				t->ascii_id[b] = vocab_find(t, &one, 1);
		}
		if (!t->byte_fallback)
			for (int b = 0; b < 256; b++)
				t->byte_tok[b] = NO_ID;
		if (cJSON_IsString(unk)) {
			size_t n = strlen(unk->valuestring);
			t->unk_id = n && n <= t->max_tok_len
					? vocab_find(t, (const uint8_t *)unk->valuestring, n)
					: NO_ID;
			if (t->unk_id == NO_ID)
				REFUSE("%s: model: unk_token \"%s\" is not in the vocab", path,
				       unk->valuestring);
		}
		t->mem += t->n_ids;
	}
	/* merges: (left id, right id) -> (rank, merged id) */
	t->n_merges = (uint32_t)cJSON_GetArraySize(merges);
	for (t->mmask = 1; t->mmask < 2 * t->n_merges + 2; t->mmask <<= 1)
		;
	if (!(t->mtab = calloc(t->mmask, sizeof(*t->mtab))))
		goto cleanup;
	t->mmask--;
	{
		uint32_t rank = 0;
		uint8_t *tmp = malloc(2 * (size_t)t->max_tok_len + 8);
		if (!tmp)
			goto cleanup;
		cJSON_ArrayForEach(it, merges)
		{
			const char *l, *r;
			char *sp = NULL;
			uint32_t lid, rid, mid, h;
			int ln, rn;
			uint64_t key;
			if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
			    cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
			    cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
				l = cJSON_GetArrayItem(it, 0)->valuestring;
				r = cJSON_GetArrayItem(it, 1)->valuestring;
			} else if (cJSON_IsString(it) && (sp = strchr(it->valuestring, ' '))) {
				*sp = '\0';
				l = it->valuestring;
				r = sp + 1;
			} else {
				free(tmp);
				REFUSE("%s: model: merge %u is not a pair of tokens", path, rank);
			}
			if (t->byte_level) {
				ln = byte_level_decode(l, u2b, tmp, t->max_tok_len);
				rn = ln > 0 ? byte_level_decode(r, u2b, tmp + ln, t->max_tok_len)
					    : -1;
			} else {
				size_t a = strlen(l), b = strlen(r);
				ln = a && a <= t->max_tok_len ? (int)a : -1;
				rn = ln > 0 && b && b <= t->max_tok_len ? (int)b : -1;
				if (ln > 0)
					memcpy(tmp, l, a);
				if (ln > 0 && rn > 0)
					memcpy(tmp + ln, r, b);
			}
			lid = ln > 0 ? vocab_find(t, tmp, (size_t)ln) : NO_ID;
			rid = rn > 0 ? vocab_find(t, tmp + ln, (size_t)rn) : NO_ID;
			mid = lid != NO_ID && rid != NO_ID && (uint32_t)(ln + rn) <= t->max_tok_len
				  ? vocab_find(t, tmp, (size_t)(ln + rn))
				  : NO_ID;
			if (sp)
				*sp = ' ';
			if (mid == NO_ID) {
				char what[200];
				if (sp)
					snprintf(what, sizeof(what), "\"%s\"", it->valuestring);
				else
					snprintf(what, sizeof(what), "[\"%s\", \"%s\"]", l, r);
				free(tmp);
				REFUSE(
				    "%s: model: merge %u %s uses or makes a token not in the vocab",
				    path, rank, what);
			}
			key = (((uint64_t)lid << 32) | rid) + 1;
			for (h = hash_pair(key) & t->mmask; t->mtab[h].key && t->mtab[h].key != key;
			     h = (h + 1) & t->mmask)
				;
			if (!t->mtab[h].key) { /* a repeated pair keeps its first (best) rank */
				t->mtab[h].key = key;
				t->mtab[h].rank = rank;
				t->mtab[h].id = mid;
			}
			rank++;
		}
		free(tmp);
	}
	if (t->byte_level) {
		if (!(t->bytes2 = malloc(65536 * sizeof(*t->bytes2))))
			goto cleanup;
		for (uint32_t i = 0; i < 65536; i++)
			t->bytes2[i].rank = merge_find(t, t->byte_id[i >> 8], t->byte_id[i & 0xff],
						       &t->bytes2[i].id);
		t->mem += 65536 * sizeof(*t->bytes2);
	}
	if (!t->byte_level &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges")) &&
	    vocab_find(t, (const uint8_t *)"\xe2\x96\x81", 3) != NO_ID && pre_cut_build(t))
		goto cleanup;
	/* The whole-piece shortcut is used only for tokens the merges themselves rebuild, unless
	 * the model says ignore_merges (then the reference takes every whole-piece vocab hit).
	 * Marking a token while others are checked is safe: the shortcut only ever looks at the
	 * token being encoded whole, and each is checked before it is marked. */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"))) {
		for (uint32_t id = 0; id < t->n_ids; id++)
			if (items[id])
				vhash_mark_whole(t, id);
	} else {
		struct tok_ids one = {0};
		struct tok_work w = {0};
		int bad = 0;
		for (uint32_t id = 0; id < t->n_ids && !bad; id++) {
			uint32_t n = t->tok_off[id + 1] - t->tok_off[id];
			const struct vslot *v;
			if (!items[id] || !n ||
			    !(v = vocab_slot(t, t->arena + t->tok_off[id], n)) || v->id != id)
				continue;
			one.n = 0;
			if (n > 1 && bpe_piece(t, t->arena + t->tok_off[id], n, &one, &w))
				bad = 1;
			else if ((n == 1 && t->byte_level) ||
				 (n == 1 && t->ascii_id[t->arena[t->tok_off[id]] & 0x7f] == id) ||
				 (one.n == 1 && one.v[0] == id))
				vhash_mark_whole(t, id);
		}
		tok_ids_free(&one);
		work_free(&w);
		if (bad)
			goto cleanup;
	}
	if (t->byte_level && char_rules_build(t))
		goto cleanup;
	if (trie_build(t, &t->trie_raw, false) || trie_build(t, &t->trie_norm, true))
		goto cleanup;
	t->mem += sizeof(*t) + arena_cap + ((size_t)t->n_ids + 1) * sizeof(*t->tok_off) +
		  ((size_t)t->vmask + 1) * sizeof(*t->vhash) +
		  ((size_t)t->mmask + 1) * sizeof(*t->mtab) +
		  (size_t)t->n_added * sizeof(*t->added);
	ret = t;
	t = NULL;
	err[0] = '\0';
cleanup:
	free(items);
	free(text);
	cJSON_Delete(root);
	tokenizer_free(t);
	return ret;
}

struct tokenizer *tokenizer_load(const char *path, char *err, size_t errlen)
{
	struct tokenizer *t;
	struct stat st;
	char json[4096], cfg[4096];

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(json, sizeof(json), "%s/tokenizer.json", path);
		snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", path);
		if (!(t = load_json(json, err, errlen)))
			return NULL;
		if (apply_config(t, cfg, err, errlen)) {
			tokenizer_free(t);
			return NULL;
		}
	} else if (!(t = load_json(path, err, errlen))) {
		return NULL;
	}
	t->bos_id = t->n_before ? (int64_t)t->special_ids[0] : -1;
	return t;
}
