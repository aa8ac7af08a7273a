/* SPDX-License-Identifier: Apache-2.0 */
/* opts: everything kvsim's flags set, in one struct, with its defaults function and its option
 * table (core/options.h). main() fills a kvsim_opts with kvsim_opts_default and parses the flags
 * into it with kvsim_options; `kvsim --help`, `--print-config` and the reference come from the
 * same table. opts.c calls nothing else of kvsim (it includes kvevents.h and sched.h for their
 * types only): a generator of the reference links opts.o alone, with libkvs. */
#ifndef KVS_KVSIM_OPTS_H
#define KVS_KVSIM_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "kvevents.h"
#include "sched.h"

struct kvsim_opts {
	const char *host;
	int port;
	const char *worker_id;
	const char *tokenizer;
	const char *model;
	double time_scale;
	size_t kv_bytes;
	size_t kv_bytes_per_token;
	uint32_t num_blocks; /* 0: kv_bytes / kv_bytes_per_token / block_size */
	uint32_t block_size;
	uint32_t max_model_len;
	size_t max_body;
	uint64_t seed;
	const char *hash_seed; /* NULL: random per process */
	struct kvev_opts ev;
	struct sched_cfg sc;
	double api_overhead_ms;
	int log_level; /* enum log_level */
};

/* Fills o with every default. */
void kvsim_opts_default(struct kvsim_opts *o);

extern const struct opt_table kvsim_options;

#endif
