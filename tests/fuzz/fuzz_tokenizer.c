// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/tokenizer, on the real Qwen3 tokenizer.json (models/qwen3,
 * or $KVS_TOKENIZER). Any bytes are encoded (ill-formed UTF-8 included). Checked, beyond no crash
 * and no sanitizer report: every id is inside the vocabulary; decoding succeeds and gives
 * well-formed UTF-8; for ASCII input (which NFC leaves alone) decoding gives the input back byte
 * for byte; encoding through a tok_cache (one kept across inputs, small enough that its generations
 * turn over) gives the same ids, on a miss and on the hit that follows. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "prompt/tokenizer.h"

static struct tokenizer *tok;
static struct tok_cache *cache;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *path = getenv("KVS_TOKENIZER");
	char err[512];

	(void)argc;
	(void)argv;
	tok = tokenizer_load(path ? path : "models/qwen3/tokenizer.json", err, sizeof(err));
	cache = tok_cache_new(256 << 10);
	if (!tok || !cache) {
		fprintf(stderr, "fuzz_tokenizer: %s\n", err);
		abort();
	}
	return 0;
}

/* Well-formed UTF-8 (RFC 3629: no surrogates, no overlongs, <= U+10FFFF). */
static int utf8_ok(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t b = s[i];
		size_t need;
		uint8_t lo = 0x80, hi = 0xBF;
		if (b < 0x80) {
			i++;
			continue;
		}
		if (b >= 0xC2 && b <= 0xDF)
			need = 1;
		else if (b >= 0xE0 && b <= 0xEF)
			need = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
		else if (b >= 0xF0 && b <= 0xF4)
			need = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
		else
			return 0;
		for (size_t k = 1; k <= need; k++) {
			if (i + k >= n || s[i + k] < lo || s[i + k] > hi)
				return 0;
			lo = 0x80, hi = 0xBF;
		}
		i += need + 1;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tok_ids ids = {0};
	struct buf out = {0};
	int ascii = 1;

	if (tokenizer_encode(tok, (const char *)data, size, &ids))
		abort();
	for (size_t i = 0; i < ids.n; i++)
		if (ids.v[i] >= tokenizer_vocab_size(tok))
			abort();
	if (tokenizer_decode(tok, ids.v, ids.n, &out))
		abort();
	if (!utf8_ok((const uint8_t *)out.data, out.len))
		abort();
	for (size_t i = 0; i < size; i++)
		if (data[i] >= 0x80)
			ascii = 0;
	if (ascii && (out.len != size || (size && memcmp(out.data, data, size))))
		abort();
	if (size == 0 && ids.n != 0)
		abort();
	for (int pass = 0; pass < 2; pass++) {
		struct tok_ids c = {0};

		if (tokenizer_encode_cached(tok, cache, (const char *)data, size, &c) ||
		    c.n != ids.n || (c.n && memcmp(c.v, ids.v, c.n * sizeof(*c.v))))
			abort();
		tok_ids_free(&c);
	}
	tok_ids_free(&ids);
	buf_free(&out);
	return 0;
}
