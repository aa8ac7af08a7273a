/* SPDX-License-Identifier: Apache-2.0 */
/* blockhash: kvsplice's own KV-block chain hash, computed from token ids (docs/design.md, "Our
 * own block hash"). The router hashes a request's tokens and the index hashes each BlockStored
 * event's token_ids with these same functions, so matching never depends on the engine's hash
 * algorithm, its PYTHONHASHSEED or its wire encoding of hashes.
 *
 * Definition (all integers little-endian on the wire to XXH3):
 *   h_i = XXH3_64bits_withSeed(le64(h_{i-1}) || le32(t_{i*B}) .. le32(t_{i*B+B-1}) || extra_i,
 * seed) where B is the block size (default 16), extra_i is empty unless the block carries extra
 * keys the engine hashed too (see index.h), and h_{-1}, the parent of block 0, is the "root":
 *   - base model:          root = 0
 *   - LoRA adapter "name": root = XXH3_64bits_withSeed("lora-name:" || name, seed)
 *   - LoRA known only by the deprecated integer lora_id (old vLLM):
 *                          root = XXH3_64bits_withSeed("lora-id:" || decimal(id), seed)
 * so blocks of different adapters, and of an adapter versus the base model, never share a hash.
 * A result of 0 is replaced by 1 (0 marks an empty slot in the index); a root of 0 is only ever
 * the base model's. Pure functions: any thread may call them at any time. */
#ifndef KVS_BLOCKHASH_H
#define KVS_BLOCKHASH_H

#include <stddef.h>
#include <stdint.h>

/* Tokens per KV block, vLLM's default. */
#ifndef BLOCKHASH_DEFAULT_BLOCK_SIZE
#define BLOCKHASH_DEFAULT_BLOCK_SIZE 16
#endif
/* XXH3 seed used when the configuration gives none (the value Dynamo uses). */
#ifndef BLOCKHASH_DEFAULT_SEED
#define BLOCKHASH_DEFAULT_SEED 1337
#endif
/* Largest accepted block size in tokens (vLLM uses at most 256). */
#ifndef BLOCKHASH_MAX_BLOCK_SIZE
#define BLOCKHASH_MAX_BLOCK_SIZE 1024
#endif

/* The root (parent of block 0) for a LoRA adapter name of len bytes; 0 when name is NULL or
 * len is 0 (the base model). */
uint64_t blockhash_root(uint64_t seed, const char *lora_name, size_t len);

/* The root for an adapter known only by vLLM's deprecated integer lora_id. */
uint64_t blockhash_root_lora_id(uint64_t seed, int64_t lora_id);

/* Hash of one block: bs tokens (1..BLOCKHASH_MAX_BLOCK_SIZE, not checked) chained to parent,
 * with extra_len optional extra bytes (NULL/0 for none). Never returns 0. */
uint64_t blockhash_block(uint64_t seed, uint64_t parent, const uint32_t *tokens, uint32_t bs,
			 const void *extra, size_t extra_len);

/* Chain hashes of the full blocks of tokens[0..n): writes min(n / bs, max) hashes to out, block 0
 * chained to root. Returns the number written; 0 when bs is 0 or above BLOCKHASH_MAX_BLOCK_SIZE.
 * Allocates nothing. */
size_t blockhash_chain(uint64_t seed, uint32_t bs, uint64_t root, const uint32_t *tokens, size_t n,
		       uint64_t *out, size_t max);

/* Root of chains over raw bytes (blockhash_bytes_chain): never the root of a token chain. */
#define BLOCKHASH_BYTES_ROOT 0x6b76737062797465ULL /* "kvspbyte" */

/* Chain hashes over raw bytes, for requests that cannot be tokenized exactly (the router's approx
 * view): the full chunk-byte pieces of p[0..n), h_i = XXH3_64bits_withSeed(le64(h_{i-1}) ||
 * chunk bytes, seed), h_{-1} = BLOCKHASH_BYTES_ROOT, 0 replaced by 1. Writes min(n / chunk, max)
 * hashes; 0 when chunk is 0. Allocates nothing. */
size_t blockhash_bytes_chain(uint64_t seed, uint32_t chunk, const void *p, size_t n, uint64_t *out,
			     size_t max);

#endif
