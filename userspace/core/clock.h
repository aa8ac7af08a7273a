/* SPDX-License-Identifier: Apache-2.0 */
/* clock: the monotonic clock every module reads for deadlines and durations (CLOCK_MONOTONIC:
 * never jumps with the wall clock). Header only; any thread. */
#ifndef KVS_CLOCK_H
#define KVS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds, milliseconds, seconds. */
static inline uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_ms(void)
{
	return clock_ns() / 1000000ULL;
}

static inline double clock_s(void)
{
	return (double)clock_ns() / 1e9;
}

#endif
