// SPDX-License-Identifier: Apache-2.0
// blockhash: own chain hash over token ids (see blockhash.h for the definition).
#include <stdio.h>
#include <string.h>

/* Header-only use of Debian's xxHash: the hash inlines into the hot ingest/lookup loops. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kv/blockhash.h"

uint64_t blockhash_root(uint64_t seed, const char *lora_name, size_t len)
{
	static const char tag[] = "lora-name:";
	char small[256];
	XXH3_state_t st;
	uint64_t h;

	if (!lora_name || !len)
		return 0;
	if (len + sizeof(tag) - 1 <= sizeof(small)) {
		memcpy(small, tag, sizeof(tag) - 1);
		memcpy(small + sizeof(tag) - 1, lora_name, len);
		h = XXH3_64bits_withSeed(small, len + sizeof(tag) - 1, seed);
	} else {
		memset(&st, 0, sizeof(st));
		XXH3_64bits_reset_withSeed(&st, seed);
		XXH3_64bits_update(&st, tag, sizeof(tag) - 1);
		XXH3_64bits_update(&st, lora_name, len);
		h = XXH3_64bits_digest(&st);
	}
	return h ? h : 1;
}

uint64_t blockhash_root_lora_id(uint64_t seed, int64_t lora_id)
{
	char s[48];
	int n = snprintf(s, sizeof(s), "lora-id:%lld", (long long)lora_id);
	uint64_t h = XXH3_64bits_withSeed(s, (size_t)n, seed);

	return h ? h : 1;
}

/* Serialises parent and tokens little-endian explicitly, so the value is the same on any host. */
uint64_t blockhash_block(uint64_t seed, uint64_t parent, const uint32_t *tokens, uint32_t bs,
			 const void *extra, size_t extra_len)
{
	unsigned char buf[8 + 4 * 64];
	XXH3_state_t st;
	uint64_t h;
	uint32_t i;

	for (i = 0; i < 8; i++)
		buf[i] = (unsigned char)(parent >> (8 * i));
	if (bs <= 64 && !extra_len) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(buf + 8, tokens, (size_t)bs * 4);
#else
		for (i = 0; i < bs; i++)
			for (int k = 0; k < 4; k++)
				buf[8 + 4 * i + k] = (unsigned char)(tokens[i] >> (8 * k));
#endif
		h = XXH3_64bits_withSeed(buf, 8 + (size_t)bs * 4, seed);
		return h ? h : 1;
	}
	memset(&st, 0, sizeof(st)); /* xxHash 0.8.1 reads st.seed before setting it */
	XXH3_64bits_reset_withSeed(&st, seed);
	XXH3_64bits_update(&st, buf, 8);
	for (i = 0; i < bs; i++) {
		unsigned char t[4] = {(unsigned char)tokens[i], (unsigned char)(tokens[i] >> 8),
				      (unsigned char)(tokens[i] >> 16),
				      (unsigned char)(tokens[i] >> 24)};
		XXH3_64bits_update(&st, t, 4);
	}
	if (extra_len)
		XXH3_64bits_update(&st, extra, extra_len);
	h = XXH3_64bits_digest(&st);
	return h ? h : 1;
}

size_t blockhash_chain(uint64_t seed, uint32_t bs, uint64_t root, const uint32_t *tokens, size_t n,
		       uint64_t *out, size_t max)
{
	size_t nb, i;
	uint64_t h = root;

	if (!bs || bs > BLOCKHASH_MAX_BLOCK_SIZE)
		return 0;
	nb = n / bs;
	if (nb > max)
		nb = max;
	for (i = 0; i < nb; i++) {
		h = blockhash_block(seed, h, tokens + i * bs, bs, NULL, 0);
		out[i] = h;
	}
	return nb;
}

/* One block of a byte chain: XXH3 of le64(parent) || chunk bytes, 0 replaced by 1. Short chunks
 * are hashed in one shot from a stack copy (the fast XXH3 path); longer ones stream. */
static uint64_t bytes_block(uint64_t seed, uint64_t parent, const unsigned char *p, uint32_t chunk)
{
	unsigned char buf[8 + 512];
	XXH3_state_t st;
	uint64_t h;

	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)(parent >> (8 * i));
	if (chunk <= sizeof(buf) - 8) {
		memcpy(buf + 8, p, chunk);
		h = XXH3_64bits_withSeed(buf, 8 + (size_t)chunk, seed);
	} else {
		memset(&st, 0, sizeof(st)); /* xxHash 0.8.1 reads st.seed before setting it */
		XXH3_64bits_reset_withSeed(&st, seed);
		XXH3_64bits_update(&st, buf, 8);
		XXH3_64bits_update(&st, p, chunk);
		h = XXH3_64bits_digest(&st);
	}
	return h ? h : 1;
}

size_t blockhash_bytes_chain(uint64_t seed, uint32_t chunk, const void *p, size_t n, uint64_t *out,
			     size_t max)
{
	const unsigned char *b = p;
	uint64_t h = BLOCKHASH_BYTES_ROOT;
	size_t nb, i;

	if (!chunk)
		return 0;
	nb = n / chunk;
	if (nb > max)
		nb = max;
	for (i = 0; i < nb; i++) {
		h = bytes_block(seed, h, b + i * chunk, chunk);
		out[i] = h;
	}
	return nb;
}
