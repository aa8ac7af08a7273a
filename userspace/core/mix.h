/* SPDX-License-Identifier: Apache-2.0 */
/* mix: the small integer mixers several modules share. Header only; pure functions. */
#ifndef KVS_MIX_H
#define KVS_MIX_H

#include <stdint.h>

/* The 64-bit golden ratio, the increment of splitmix64 and a good multiplicative hash. */
#define MIX_GOLDEN 0x9e3779b97f4a7c15ULL

/* MurmurHash3's 64-bit finaliser: every input bit moves every output bit, so table homes and
 * rendezvous scores of nearby keys are independent. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* One step of splitmix64: a fast, good-enough generator for tie-breaking draws. */
static inline uint64_t mix_next(uint64_t *state)
{
	uint64_t x = (*state += MIX_GOLDEN);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

#endif
