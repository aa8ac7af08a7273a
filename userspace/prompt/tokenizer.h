/* SPDX-License-Identifier: Apache-2.0 */
/* tokenizer: exact BPE encoding of Hugging Face tokenizer.json files, giving the ids Hugging Face
 * `tokenizers` 0.22 gives: added tokens (non-normalized ones on the raw text, then normalized ones
 * on the normalized text; leftmost-longest, lstrip/rstrip/single_word), normalizers (NFC, Replace,
 * Prepend, Sequence), pre-tokenizers (Split by a literal or a regex, ByteLevel, Sequence; the
 * Qwen2 and Llama 3 split regexes as a hand-written state machine), BPE (byte-level or over
 * characters with byte_fallback, unk, ignore_merges) and the TemplateProcessing post-processor
 * (overridden by tokenizer_config.json's add_bos_token/add_eos_token where they are set, as
 * transformers does). A tokenizer.json whose pipeline this module does not implement exactly is
 * refused at load, naming the unsupported part.
 * After load a tokenizer is read-only: any number of threads may encode with it at once. */
#ifndef KVS_TOKENIZER_H
#define KVS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

struct tokenizer;
struct tok_cache;

/* A growable array of token ids. Zero-initialise; free with tok_ids_free. */
struct tok_ids {
	uint32_t *v;
	size_t n;
	size_t cap;
};

int tok_ids_push(struct tok_ids *ids, uint32_t id);
void tok_ids_free(struct tok_ids *ids);

/* Loads a tokenizer: path is a tokenizer.json file, or a directory holding tokenizer.json and
 * (optionally) tokenizer_config.json, whose add_bos_token/add_eos_token then decide the special
 * tokens add_special_tokens adds. Returns NULL and a message in err (errlen bytes) on failure,
 * including for pipelines it does not reproduce exactly. */
struct tokenizer *tokenizer_load(const char *path, char *err, size_t errlen);
void tokenizer_free(struct tokenizer *t);

/* Appends the ids of text[0..len) (UTF-8; invalid sequences are read as U+FFFD) to out, with
 * add_special_tokens=false semantics. Returns 0, -ENOMEM, or -E2BIG when a split regex ran out of
 * its step budget (the text cannot be tokenized exactly: count it as a fallback, never use out). */
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_ids *out);

/* tokenizer_encode with add_special_tokens as given: true adds the post-processor's ids (e.g.
 * BOS) around the text's. Returns as tokenizer_encode. */
int tokenizer_encode_special(const struct tokenizer *t, struct tok_cache *c, const char *text,
			     size_t len, bool add_special, struct tok_ids *out);

/* The ids add_special_tokens=true puts before (n_before) and after the text's; NULL n: not asked.
 * Returns the array of before then after ids (NULL when there are none). */
const uint32_t *tokenizer_special_ids(const struct tokenizer *t, size_t *n_before, size_t *n_after);

/* A cache of encodings for ONE thread (the tokenizer itself stays read-only and shared): whole
 * segments between added tokens — a chat message is one, and a conversation's earlier turns are
 * read again with every new turn — and the BPE pieces that are not one vocabulary entry (words of
 * code, CJK, emoji), keyed by their exact bytes (compared in full on every hit), bounded by
 * max_bytes (two generations: when the newer one passes half the bound, the older is dropped).
 * The ids are the same with or without it. NULL on ENOMEM. */
struct tok_cache;
struct tok_cache *tok_cache_new(size_t max_bytes);
void tok_cache_free(struct tok_cache *c);

/* tokenizer_encode through cache c (NULL: none): equal output, repeated text read once. c must
 * be used with one tokenizer only. Returns 0 or -ENOMEM. */
int tokenizer_encode_cached(const struct tokenizer *t, struct tok_cache *c, const char *text,
			    size_t len, struct tok_ids *out);

struct tok_cache_stats {
	uint64_t segment_hits, segment_misses, piece_hits, piece_misses;
	uint64_t bytes, entries, drops; /* drops: older generations dropped */
};
void tok_cache_stats(const struct tok_cache *c, struct tok_cache_stats *st);

/* Private to tokenizer.c (here so a tok_stream can live on the stack): where a general
 * pre-tokenizer is inside a segment, one level a splitting step. */
#define TOK_MAX_SPLITS 4
struct tok_split_lv {
	size_t a, b;	/* the piece this level splits */
	size_t prev;	/* end of the last match (start of the next gap) */
	size_t from;	/* where the next search starts */
	size_t last_me; /* 1 + end of the last match, 0: none yet */
	size_t ms, me;	/* a match found behind a gap not yet given */
	size_t ps, pe;	/* a peeked element */
	uint8_t has_m, has_p, p_match, done;
};
struct tok_cursor {
	bool sub_open;	/* a sub-segment (between normalized added tokens) is begun */
	int sub_added;	/* the normalized added token at sub_end, or -1 */
	size_t sub_end; /* end of the sub-segment; its token ends at sub_next */
	size_t sub_next;
	int depth; /* deepest level begun, -1: none */
	struct tok_split_lv lv[TOK_MAX_SPLITS];
};

/* Private to tokenizer.c (here so a tok_stream can live on the stack): scratch reused by every
 * segment of an encode. */
struct tok_work {
	struct tok_cache *cache; /* BPE pieces looked up there first (NULL: none) */
	uint8_t *norm;		 /* normalized segment (UTF-8) */
	size_t norm_cap;
	uint32_t *cps; /* code points during NFC */
	size_t cps_cap;
	void *bpe; /* symbols and heap for long pieces */
	size_t bpe_cap;
	uint8_t *norm2; /* second buffer of the normalizer steps */
	size_t norm2_cap;
};

/* A text encoded a part at a time: tokenizer_encode_more appends ids until at least min_tokens
 * are in out (or the text ends), stopping only where going on later gives the ids encoding the
 * whole at once gives: after a piece of the split, or at an added token. Start a new (zeroed) or
 * freed stream with tok_stream_init; free it with tok_stream_free, done or not. The text is not
 * copied: it must stay unchanged until the stream is done or freed.
 * pos: the ids of s[0..pos) are all in out and none of the rest is; pos is a piece boundary, or
 * the end of a segment that needed normalizing (such a segment is encoded whole, never stopped
 * inside). Read s, len, pos and done; the rest is private. Like a tok_cache, a stream is used by
 * one thread at a time. */
struct tok_stream {
	const uint8_t *s;
	size_t len;
	size_t pos; /* bytes of s[] done: everything before pos is in out */
	bool done;  /* the whole text is in out */
	bool open;  /* a segment was begun and is not finished: [seg, seg_end) */
	int added;  /* the added token at seg_end, or -1 (then seg_end = len) */
	size_t seg; /* where the current segment starts in s[] */
	size_t seg_end;
	size_t added_end; /* where the text after that added token begins */
	size_t seg_ids;	  /* out->n when the segment began: its ids are out->v[seg_ids..] */
	uint64_t seg_h;	  /* its segment cache hash, to store it once whole; 0: not stored */
	bool special;	  /* add_special_tokens */
	bool pre_done;	  /* the ids before the text are in out */
	bool post_done;	  /* the ids after the text are in out */
	struct tok_cursor cur;
	struct tok_work work;
};

/* Starts st on text[0..len) (st holds no buffers: new, zeroed or freed), add_special_tokens false.
 */
void tok_stream_init(struct tok_stream *st, const char *text, size_t len);

/* tok_stream_init with add_special_tokens as given: the post-processor's ids before the text go
 * to out with the first call, those after it once the text is done. */
void tok_stream_init_special(struct tok_stream *st, const char *text, size_t len, bool add_special);

/* Appends ids of st's text to out until out->n >= min_tokens or the text ends (then st->done).
 * It may go past min_tokens to the next place it can stop: the end of the piece that reaches it
 * (and the added token right after, when that piece ends a segment), or the end of a segment
 * found whole in the cache or needing normalization. min_tokens <= out->n returns at once.
 * Every call of a stream must get the same out, holding the ids the earlier calls appended (a
 * segment cut across calls is stored in the cache from out->v), and the same c (NULL: none; as
 * in tokenizer_encode_cached). The ids appended over all the calls are tokenizer_encode_cached's.
 * Returns 0, -ENOMEM or -E2BIG (as tokenizer_encode; then the stream can only be freed). */
int tokenizer_encode_more(const struct tokenizer *t, struct tok_cache *c, struct tok_stream *st,
			  size_t min_tokens, struct tok_ids *out);

/* Frees st's buffers, done or not; st may then be given to tok_stream_init again. */
void tok_stream_free(struct tok_stream *st);

/* Appends the UTF-8 text of ids (byte-level decoded, or for a character-level vocabulary "▁" as a
 * space, where the decoder says so, and <0xXX> tokens as their byte; added tokens as their
 * content) to out. A decoder's Strip (Llama 2's leading space) is not applied, so that decoding
 * stays token by token.
 * The bytes are appended as the tokens hold them: ids that split a character give its bytes (the
 * concatenation of consecutive decodes is the text; no U+FFFD is substituted).
 * Returns 0, -EINVAL for an id outside the vocabulary (nothing appended), -ENOMEM. */
int tokenizer_decode(const struct tokenizer *t, const uint32_t *ids, size_t n, struct buf *out);

/* The id of a token given by its exact content: an added token's content (e.g. "<|im_end|>"),
 * or the text a vocab token stands for (e.g. " the", not its byte-level spelling "Ġthe"); or -1. */
int64_t tokenizer_token_id(const struct tokenizer *t, const char *content);

/* The id of the beginning-of-sequence token add_special_tokens puts first, or -1 when none. */
int64_t tokenizer_bos_id(const struct tokenizer *t);

/* Number of ids (vocabulary plus added tokens). */
size_t tokenizer_vocab_size(const struct tokenizer *t);

/* Heap bytes held by the loaded tokenizer. */
size_t tokenizer_memory(const struct tokenizer *t);

/* Where a state machine of the tokenizer's is in a text: zeroed before a text's first cut. */
struct tok_split_state {
	size_t e1, e2; /* DeepSeek V3: the ends of the B1 and B2 pieces of the last cut */
};

/* The end of the piece at i (< n) of valid UTF-8 s[0..n), cut by the hand-written state machine
 * of kind: 1 Qwen2's split regex, 3 Llama 3's, 4 gpt-oss's, 5 Mistral-Nemo's (a match of the
 * regex), 6 DeepSeek V3's three Splits in turn (a piece of the last). The tokenizer uses it where
 * tokenizer.json's pre-tokenizer is that one. Cuts go left to right with one st. For benches and
 * differential tests. */
size_t tok_split_fast(int kind, const uint8_t *s, size_t n, size_t i, struct tok_split_state *st);

#endif
