// SPDX-License-Identifier: Apache-2.0
// blockhash: the own chain hash. Expected values were computed with python3-xxhash (an
// independent XXH3 implementation) from the definition in blockhash.h, not from this code.
#include <stdint.h>
#include <string.h>

#include <xxhash.h>

#include "blockhash.h"
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
	return tap_done();
}
