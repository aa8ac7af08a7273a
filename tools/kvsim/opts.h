/* SPDX-License-Identifier: Apache-2.0 */
/* opts: everything kvsim's flags set, in one struct, with its defaults function and its option
 * table (core/options.h). main() fills a kvsim_opts with kvsim_opts_default and parses the flags
 * into it with kvsim_options; `kvsim --help`, `--print-config` and the reference come from the
 * same table. opts.c calls nothing else of kvsim (it includes kvevents.h and sched.h for their
 * types only): a generator of the reference links opts.o alone, with libkvs. */
#ifndef KVS_KVSIM_OPTS_H
#define KVS_KVSIM_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "kvevents.h"
#include "sched.h"

/* --lora-modules adapters at most. */
#ifndef KVSIM_MAX_LORAS
#define KVSIM_MAX_LORAS 64
#endif

struct kvsim_opts {
	const char *host;
	int port;
	const char *worker_id;
	const char *tokenizer;
	const char *chat_template; /* NULL: the tokenizer directory's */
	const char *chat_kwargs;   /* --default-chat-template-kwargs JSON, or NULL */
	bool trust_request_tmpl;   /* --trust-request-chat-template */
	const char *model;
	/* LoRA adapters served (--lora-modules), each "NAME=PATH" or "NAME"; vLLM's lora_int_id
	 * of lora[i] is i + 1 (its adapter counter counts from 1 in load order) */
	const char *lora[KVSIM_MAX_LORAS];
	size_t nlora;
	bool enable_lora; /* accepted for vLLM's command line; adapters need no weights here */
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
	const char *profile;   /* --profile name (its values are set before the other flags) */
	const char *gpu_share; /* --gpu-share clock file, or NULL: a GPU of its own */
	double step_host_ms;   /* of each step, the part on the host (not time-sliced) */
	double gpu_speed;      /* the GPU part of a step is divided by this */
	double gpu_switch_ms;  /* added to a step that waited for another worker's */
	double api_overhead_ms;
	int log_level; /* enum log_level */
};

/* The name of adapter i (o->lora[i] up to its '=') into buf; its path (after '='; the name
 * when it has none) in *path. */
const char *kvsim_lora_name(const struct kvsim_opts *o, size_t i, char *buf, size_t n,
			    const char **path);

/* Fills o with every default (the "seeds" profile). */
void kvsim_opts_default(struct kvsim_opts *o);

/* Sets the model, KV pool, scheduler limits and step-cost constants of the named hardware
 * profile (see kvsim --help, "--profile"). -1 for an unknown name. --profile is parsed
 * before the other flags (OPT_FIRST), so they override it wherever they stand. */
int kvsim_profile_apply(struct kvsim_opts *o, const char *name);

extern const struct opt_table kvsim_options;

#endif
