/* SPDX-License-Identifier: Apache-2.0 */
/* gpu: one GPU time-sliced between several kvsim workers (--gpu-share FILE). The workers that
 * name the same file share one clock in it: the time until which the GPU is busy. A worker's
 * engine step runs on the GPU from max(its start, that time) for its duration, and moves the
 * clock to its end, so the steps of workers on one GPU never overlap: a busy neighbour
 * stretches a step as time-slicing does (the GPU runs one context at a time), an idle one costs
 * nothing. Steps are granted in the order the workers plan them (a compare-and-swap on the
 * clock), which is how CUDA's time-slicing between processes behaves on average; the slices
 * themselves (a few ms) are not modelled, their cost is: --gpu-switch-ms is added to a step
 * that had to wait for another worker's. The clock is CLOCK_MONOTONIC microseconds, common to
 * every process of the machine and to every network namespace. */
#ifndef KVS_KVSIM_GPU_H
#define KVS_KVSIM_GPU_H

#include <stddef.h>

struct gpu_share;

/* Opens the clock in path, creating the file if needed (a new file reads as an idle GPU).
 * NULL with a message in err on failure. */
struct gpu_share *gpu_share_open(const char *path, char *err, size_t errlen);

/* Reserves the GPU for dur seconds, at start (CLOCK_MONOTONIC seconds) or as soon after it as
 * the GPU is free, plus switch_s when it has to wait for another worker's step (a context
 * switch of time-slicing under contention); returns the time the step ends (CLOCK_MONOTONIC
 * seconds, kept to the microsecond). */
double gpu_share_reserve(struct gpu_share *g, double start, double dur, double switch_s);

void gpu_share_close(struct gpu_share *g);

#endif
