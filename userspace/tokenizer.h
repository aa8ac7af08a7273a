/* SPDX-License-Identifier: Apache-2.0 */
/* tokenizer: exact byte-level BPE encoding of Hugging Face tokenizer.json files of the Qwen2/Qwen3
 * family (added tokens, NFC, the Qwen2 split regex as a hand-written state machine, ByteLevel,
 * BPE), giving the ids Hugging Face `tokenizers` gives. A tokenizer.json whose pipeline this
 * module does not implement exactly is refused at load, naming the unsupported part.
 * After load a tokenizer is read-only: any number of threads may encode with it at once. */
#ifndef KVS_TOKENIZER_H
#define KVS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct tokenizer;

/* A growable array of token ids. Zero-initialise; free with tok_ids_free. */
struct tok_ids {
	uint32_t *v;
	size_t n;
	size_t cap;
};

int tok_ids_push(struct tok_ids *ids, uint32_t id);
void tok_ids_free(struct tok_ids *ids);

/* Loads tokenizer.json at path. Returns NULL and a message in err (errlen bytes) on failure,
 * including for pipelines it does not reproduce exactly. */
struct tokenizer *tokenizer_load(const char *path, char *err, size_t errlen);
void tokenizer_free(struct tokenizer *t);

/* Appends the ids of text[0..len) (UTF-8; invalid sequences are read as U+FFFD) to out, with
 * add_special_tokens=false semantics (for Qwen3 true gives the same ids). Returns 0 or -ENOMEM. */
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_ids *out);

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

/* Appends the UTF-8 text of ids (byte-level decoded, added tokens as their content) to out.
 * The bytes are appended as the tokens hold them: ids that split a character give its bytes (the
 * concatenation of consecutive decodes is the text; no U+FFFD is substituted).
 * Returns 0, -EINVAL for an id outside the vocabulary (nothing appended), -ENOMEM. */
int tokenizer_decode(const struct tokenizer *t, const uint32_t *ids, size_t n, struct buf *out);

/* The id of a token given by its exact content: an added token's content (e.g. "<|im_end|>"),
 * or the text a vocab token stands for (e.g. " the", not its byte-level spelling "Ġthe"); or -1. */
int64_t tokenizer_token_id(const struct tokenizer *t, const char *content);

/* Number of ids (vocabulary plus added tokens). */
size_t tokenizer_vocab_size(const struct tokenizer *t);

/* Heap bytes held by the loaded tokenizer. */
size_t tokenizer_memory(const struct tokenizer *t);

#endif
