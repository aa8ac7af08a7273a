// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/tokenizer, on the real tokenizers of every model family
 * (models/<family> directories, or the paths in $KVS_TOKENIZER separated by ':'): the first input
 * byte picks the family (all loaded at start), its top bit add_special_tokens; the rest is the
 * text. Any bytes are encoded (ill-formed UTF-8 included). Checked, beyond no crash and no
 * sanitizer report: every id is inside the vocabulary; decoding succeeds and gives well-formed
 * UTF-8; for ASCII input, a family whose decoding gives "a b" back gives the input back byte for
 * byte; add_special_tokens gives the special ids around the same ids; encoding a few tokens at a
 * time (tok_stream) gives the same ids; encoding through a tok_cache (one a family, kept across
 * inputs, small enough that its generations turn over) gives the same ids, on a miss and on the
 * hit that follows. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "prompt/tokenizer.h"

#define MAX_FAM 16
static const char *fam_path[MAX_FAM];
static int n_fam;
static struct tokenizer *tok[MAX_FAM];
static struct tok_cache *cache[MAX_FAM];
static bool roundtrip[MAX_FAM];

static struct tokenizer *family(int k);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const def[] = {
	    "models/qwen3",	  "models/llama3_2",	 "models/gemma3", "models/llama2",
	    "models/deepseek_v3", "models/mistral_nemo", "models/gptoss", "models/qwen2_5"};
	const char *env = getenv("KVS_TOKENIZER");

	(void)argc;
	(void)argv;
	if (env) {
		char *dup = strdup(env), *save = NULL;
		for (char *p = strtok_r(dup, ":", &save); p && n_fam < MAX_FAM;
		     p = strtok_r(NULL, ":", &save))
			fam_path[n_fam++] = p;
	} else {
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			fam_path[n_fam++] = def[i];
	}
	for (int k = 0; k < n_fam; k++)
		family(k); /* all loaded here: a load is not a slow input */
	return 0;
}

/* The tokenizer of family k, loaded on first use. */
/* The tokenizer of family k, loaded once. */
static struct tokenizer *family(int k)
{
	char err[512];
	struct tok_ids ids = {0};
	struct buf out = {0};

	if (tok[k])
		return tok[k];
	tok[k] = tokenizer_load(fam_path[k], err, sizeof(err));
	cache[k] = tok_cache_new(256 << 10);
	if (!tok[k] || !cache[k]) {
		fprintf(stderr, "fuzz_tokenizer: %s: %s\n", fam_path[k], err);
		abort();
	}
	roundtrip[k] = !tokenizer_encode(tok[k], "a b", 3, &ids) &&
		       !tokenizer_decode(tok[k], ids.v, ids.n, &out) && out.len == 3 &&
		       !memcmp(out.data, "a b", 3);
	tok_ids_free(&ids);
	buf_free(&out);
	return tok[k];
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

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t insize)
{
	struct tok_ids ids = {0}, sp = {0}, more = {0};
	struct buf out = {0};
	struct tok_stream st;
	struct tokenizer *t;
	const uint8_t *data;
	size_t size, nb, na, step;
	const uint32_t *spids;
	int ascii = 1, k;
	bool special;

	if (!insize)
		return 0;
	k = (in[0] & 0x7f) % n_fam;
	special = in[0] & 0x80;
	step = 1 + (in[0] >> 3 & 7);
	data = in + 1;
	size = insize - 1;
	t = family(k);
	if (tokenizer_encode(t, (const char *)data, size, &ids))
		abort();
	for (size_t i = 0; i < ids.n; i++)
		if (ids.v[i] >= tokenizer_vocab_size(t))
			abort();
	if (tokenizer_decode(t, ids.v, ids.n, &out))
		abort();
	if (!utf8_ok((const uint8_t *)out.data, out.len))
		abort();
	for (size_t i = 0; i < size; i++)
		if (data[i] >= 0x80)
			ascii = 0;
	if (roundtrip[k] && ascii && (out.len != size || (size && memcmp(out.data, data, size))))
		abort();
	if (size == 0 && ids.n != 0)
		abort();
	/* add_special_tokens: the special ids around the same ids */
	spids = tokenizer_special_ids(t, &nb, &na);
	if (tokenizer_encode_special(t, NULL, (const char *)data, size, special, &sp))
		abort();
	if (!special && (sp.n != ids.n || (sp.n && memcmp(sp.v, ids.v, sp.n * 4))))
		abort();
	if (special && (sp.n != nb + ids.n + na || (nb && memcmp(sp.v, spids, nb * 4)) ||
			(ids.n && memcmp(sp.v + nb, ids.v, ids.n * 4)) ||
			(na && memcmp(sp.v + nb + ids.n, spids + nb, na * 4))))
		abort();
	/* a few tokens at a time */
	tok_stream_init(&st, (const char *)data, size);
	for (size_t want = step; !st.done; want += step)
		if (tokenizer_encode_more(t, NULL, &st, want, &more))
			abort();
	tok_stream_free(&st);
	if (more.n != ids.n || (more.n && memcmp(more.v, ids.v, more.n * 4)))
		abort();
	for (int pass = 0; pass < 2; pass++) {
		struct tok_ids c = {0};

		if (tokenizer_encode_cached(t, cache[k], (const char *)data, size, &c) ||
		    c.n != ids.n || (c.n && memcmp(c.v, ids.v, c.n * sizeof(*c.v))))
			abort();
		tok_ids_free(&c);
	}
	tok_ids_free(&ids);
	tok_ids_free(&sp);
	tok_ids_free(&more);
	buf_free(&out);
	return 0;
}
