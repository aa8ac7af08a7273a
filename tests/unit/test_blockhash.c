// SPDX-License-Identifier: Apache-2.0
// blockhash: the own chain hash. Expected values were computed with python3-xxhash (an
// independent XXH3 implementation) from the definition in blockhash.h, not from this code.
#include <stdint.h>
#include <string.h>

#include <xxhash.h>

#include "kv/blockhash.h"
#include "tap.h"

int main(void)
{
	uint32_t toks[40], big[3000];
	uint64_t h[4], h2[200];
	size_t n;

	for (uint32_t i = 0; i < 40; i++)
		toks[i] = i + 1;
	/* golden: python3 xxhash.xxh3_64_intdigest(le64(parent) + le32 tokens, seed=1337) */
	n = blockhash_chain(1337, 16, 0, toks, 32, h, 4);
	CHECK_EQ(n, 2, "two full blocks of 32 tokens");
	CHECK(h[0] == 0x4cb272cc1093c096ULL, "block 0 matches python3-xxhash");
	CHECK(h[1] == 0xb1ad570883ab2e1fULL, "block 1 chains on block 0 (python3-xxhash)");
	CHECK(blockhash_root(1337, "sql-adapter", 11) == 0xb20b6613ceef8fefULL,
	      "LoRA root = XXH3(\"lora-name:\" + name)");
	n = blockhash_chain(1337, 16, blockhash_root(1337, "sql-adapter", 11), toks, 16, h, 4);
	CHECK(n == 1 && h[0] == 0x2d88c6fac695f3d9ULL, "LoRA chain matches python3-xxhash");
	CHECK(h[0] != 0x4cb272cc1093c096ULL, "LoRA block differs from the base model's");
	CHECK(blockhash_root_lora_id(1337, 7) == 0x25dcd108322d0ebdULL, "lora_id root");
	CHECK(blockhash_root(1337, NULL, 0) == 0 && blockhash_root(1337, "x", 0) == 0,
	      "base model root is 0");
	for (uint32_t i = 0; i < 16; i++)
		big[i] = 151643;
	CHECK(blockhash_block(0, 0, big, 16, NULL, 0) == 0xf9a9ffdc362426d5ULL, "seed 0 vector");

	/* partial blocks are not hashed; max bounds the output */
	CHECK_EQ(blockhash_chain(1337, 16, 0, toks, 31, h, 4), 1, "31 tokens: one block");
	CHECK_EQ(blockhash_chain(1337, 16, 0, toks, 15, h, 4), 0, "15 tokens: none");
	CHECK_EQ(blockhash_chain(1337, 16, 0, toks, 40, h, 1), 1, "max respected");
	CHECK_EQ(blockhash_chain(1337, 0, 0, toks, 40, h, 4), 0, "block size 0 refused");
	CHECK_EQ(blockhash_chain(1337, BLOCKHASH_MAX_BLOCK_SIZE + 1, 0, big, 3000, h, 4), 0,
		 "block size above the max refused");

	/* the streaming path (block size > 64, or extra bytes) equals the one-shot definition */
	for (uint32_t i = 0; i < 3000; i++)
		big[i] = i * 2654435761u;
	{
		unsigned char raw[8 + 4 * 100];
		uint64_t p = 0x0123456789abcdefULL;
		memcpy(raw, &p, 8);
		memcpy(raw + 8, big, 400);
		uint64_t a = blockhash_block(5, p, big, 100, NULL, 0);
		uint64_t b = XXH3_64bits_withSeed(raw, sizeof(raw), 5);
		CHECK(a == b, "block size 100 (streaming path) = one-shot XXH3 of the definition");
		uint64_t c = blockhash_block(5, p, big, 16,
					     "\x91\xa3"
					     "abc",
					     5);
		CHECK(c != blockhash_block(5, p, big, 16, NULL, 0), "extra keys change the hash");
	}
	/* a chain hashes prefixes consistently: first k hashes of a longer chain are equal */
	n = blockhash_chain(9, 16, 0, big, 3000, h2, 200);
	CHECK_EQ(n, 187, "187 blocks in 3000 tokens");
	CHECK(blockhash_chain(9, 16, 0, big, 160, h, 4) == 4 && !memcmp(h, h2, sizeof(h)),
	      "prefix of a chain equals the chain of the prefix");
	CHECK(blockhash_chain(10, 16, 0, big, 16, h, 1) == 1 && h[0] != h2[0],
	      "seed changes the hash");
	big[17] ^= 1;
	CHECK(blockhash_chain(9, 16, 0, big, 48, h, 4) == 3 && h[0] == h2[0] && h[1] != h2[1] &&
		  h[2] != h2[2],
	      "a token change changes its block and every later one");

	/* blockhash_bytes_chain. Expected values were computed when this test was written with
	 * python3-xxhash from the definition in blockhash.h, not from this code:
	 *   h = BLOCKHASH_BYTES_ROOT
	 *   h = xxhash.xxh3_64_intdigest(struct.pack('<Q', h) + chunk_bytes, seed=seed) or 1
	 * (a chunk whose hash is 0 cannot be constructed, so the 0 -> 1 rule is only documented).
	 */
	{
		static const char fox[] = "The quick brown fox jumps over the lazy dog. ";
		unsigned char d[200], t[1350];
		uint64_t b[8];

		for (int i = 0; i < 200; i++)
			d[i] = (unsigned char)(i * 7 + 3);
		for (int i = 0; i < 30; i++)
			memcpy(t + i * 45, fox, 45);
		CHECK_EQ(blockhash_bytes_chain(1337, 64, d, 200, b, 8), 3,
			 "200 bytes in 64-byte chunks: 3 hashes, the 8-byte tail ignored");
		CHECK(b[0] == 0x1a599758ef09041bULL && b[1] == 0xf213a36a839adc87ULL &&
			  b[2] == 0xa5138a4d4a6b287dULL,
		      "bytes chain matches python3-xxhash (chunk 64, seed 1337)");
		CHECK(blockhash_bytes_chain(1337, 512, t, 1350, b, 8) == 2 &&
			  b[0] == 0xb14cd1aac5a380c7ULL && b[1] == 0xae7ed38599ff44d5ULL,
		      "chunk 512 (largest one-shot) matches python3-xxhash");
		CHECK(blockhash_bytes_chain(1337, 513, t, 1350, b, 8) == 2 &&
			  b[0] == 0xf8266ec1eb864e5cULL && b[1] == 0xe2b3b04da9a3b285ULL,
		      "chunk 513 (streaming path) matches python3-xxhash");
		CHECK(blockhash_bytes_chain(5, 600, t, 1350, b, 8) == 2 &&
			  b[0] == 0x7568ca80818adb2cULL && b[1] == 0x46cae0e8e49d16a7ULL,
		      "chunk 600, seed 5 matches python3-xxhash");
		CHECK(blockhash_bytes_chain(0, 1, "ab", 2, b, 8) == 2 &&
			  b[0] == 0x44f826c093fc6dd1ULL && b[1] == 0x61cbfa900d5df0c5ULL,
		      "chunk 1, seed 0 matches python3-xxhash");
		CHECK_EQ(blockhash_bytes_chain(1337, 0, d, 200, b, 8), 0, "chunk 0 refused");
		CHECK_EQ(blockhash_bytes_chain(1337, 64, d, 63, b, 8), 0,
			 "63 bytes: no full chunk");
		b[1] = 42;
		CHECK(blockhash_bytes_chain(1337, 64, d, 200, b, 1) == 1 &&
			  b[0] == 0x1a599758ef09041bULL && b[1] == 42,
		      "max bounds the output and nothing past it is written");
		CHECK(blockhash_bytes_chain(1337, 64, d, 199, b, 8) == 3 &&
			  b[2] == 0xa5138a4d4a6b287dULL,
		      "the partial tail does not change the full chunks' hashes");
		/* 16 bytes that read as tokens 0x01020304.. give another hash as bytes than as
		 * tokens: the root keeps the two kinds of chain apart */
		uint32_t tk[4] = {1, 2, 3, 4};
		CHECK(blockhash_bytes_chain(1337, 16, tk, 16, b, 1) == 1 &&
			  b[0] != blockhash_block(1337, 0, tk, 4, NULL, 0),
		      "a bytes chain never equals the token chain of the same bytes");
	}
	return tap_done();
}
