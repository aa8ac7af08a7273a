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
