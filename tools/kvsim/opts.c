// SPDX-License-Identifier: Apache-2.0
/* opts: kvsim's flags and defaults (opts.h). */
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* size_t counts are read as OPT_U64 (the same type on the 64-bit targets), enums as OPT_CHOICE's
 * int. */
_Static_assert(sizeof(size_t) == sizeof(uint64_t), "size_t counts are read as uint64_t");
_Static_assert(sizeof(enum kvev_format) == sizeof(int), "--events-format is read as an int");

void kvsim_opts_default(struct kvsim_opts *o)
{
	*o = (struct kvsim_opts){
	    .host = "0.0.0.0",
	    .worker_id = "w0",
	    .tokenizer = "models/qwen3/tokenizer.json",
	    .time_scale = 1,
	    .block_size = 16,
	    .max_body = 64u << 20,
	    .ev = {.topic = "", .format = KVEV_ARRAY, .int_hashes = true, .buffer_steps = 10000},
	    .profile = "seeds",
	    .gpu_speed = 1,
	    .log_level = LOG_INFO};
	kvsim_profile_apply(o, "seeds");
}

/* Hardware profiles: what one vLLM worker costs per engine step on a given GPU and model
 * (docs/benchmarks.md#calibration has the fits and where every number comes from). */
struct kvsim_profile {
	const char *name;
	const char *model;
	size_t kv_bytes, kv_bytes_per_token;
	uint32_t max_model_len, max_num_batched_tokens, max_num_seqs;
	double api_overhead_ms, gpu_switch_ms, step_host_ms, step_fixed_ms, step_prefill_fixed_ms,
	    prefill_us_per_token, prefill_attn_us, decode_us_per_seq, decode_attn_us;
};

static const struct kvsim_profile profiles[] = {
    /* The seeds' workers: Qwen3-0.6B with a 1 GiB KV cap (585 blocks of 16) on consumer GPUs,
     * four of the six time-sliced on one (kvsim --gpu-share; tools/kvsim/cluster.sh
     * KVSIM_SEEDS_GPUS), calibrated against the seeds' random-Service timing: TTFT of hits and
     * misses at C=4 and req/s at C=16 (docs/benchmarks.md#calibration). The API overhead holds
     * the client's network, kube-proxy and vLLM's API server (tokenizing 2,371 tokens); a step
     * that waits for another worker's on a shared GPU loses 2 ms to the switch. */
    {"seeds", "Qwen/Qwen3-0.6B", 1073741824ull, 114688, 4096, 2048, 256, 14, 2, 9, 10, 2, 26, 0,
     100, 0},
    /* One H200, Qwen3-8B (36 layers, 8 KV heads of 128: 147,456 B per token), ~42,000 blocks
     * of 16 tokens, vLLM's limits for a GPU of 70 GiB or more (8,192 batched tokens, 1,024
     * sequences), Qwen3-8B's 40,960-token context. */
    {"h200-qwen3-8b", "Qwen/Qwen3-8B", 42000ull * 16 * 147456, 147456, 40960, 8192, 1024, 4, 0, 0,
     7.5, 8.05, 18.99, 2.80, 206, 31},
    /* One H200, Qwen3-0.6B (28 layers, 8 KV heads of 128: 114,688 B per token), the KV of 120
     * GB (65,395 blocks of 16), the same limits. */
    {"h200-qwen3-0.6b", "Qwen/Qwen3-0.6B", 120000000000ull, 114688, 40960, 8192, 1024, 4, 0, 0,
     3.54, 4.19, 1.353, 1.09, 100, 24},
};

static const struct kvsim_profile *profile_find(const char *name)
{
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (strcmp(profiles[i].name, name) == 0)
			return &profiles[i];
	return NULL;
}

int kvsim_profile_apply(struct kvsim_opts *o, const char *name)
{
	const struct kvsim_profile *p = profile_find(name);

	if (!p)
		return -1;
	o->profile = p->name;
	o->model = p->model;
	o->kv_bytes = p->kv_bytes;
	o->kv_bytes_per_token = p->kv_bytes_per_token;
	o->max_model_len = p->max_model_len;
	o->sc.max_num_batched_tokens = p->max_num_batched_tokens;
	o->sc.max_num_seqs = p->max_num_seqs;
	o->api_overhead_ms = p->api_overhead_ms;
	o->gpu_switch_ms = p->gpu_switch_ms;
	o->step_host_ms = p->step_host_ms;
	o->sc.step_fixed_ms = p->step_fixed_ms;
	o->sc.step_prefill_fixed_ms = p->step_prefill_fixed_ms;
	o->sc.prefill_us_per_token = p->prefill_us_per_token;
	o->sc.prefill_attn_us = p->prefill_attn_us;
	o->sc.decode_us_per_seq = p->decode_us_per_seq;
	o->sc.decode_attn_us = p->decode_attn_us;
	return 0;
}

/* --profile NAME (OPT_FIRST: parsed before the other flags, which then override it). */
static int parse_profile(void *cfg, const char *arg)
{
	if (kvsim_profile_apply(cfg, arg) < 0) {
		fprintf(stderr, "kvsim: --profile: unknown profile '%s' (", arg);
		for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
			fprintf(stderr, "%s%s", i ? ", " : "", profiles[i].name);
		fprintf(stderr, ")\n");
		return OPT_SAID;
	}
	return 0;
}

static int show_profile(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%s", ((const struct kvsim_opts *)cfg)->profile);
	return 1;
}

/* --time-scale: a number above 0 and finite. */
static int parse_time_scale(void *cfg, const char *arg)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(arg, &end);
	if (end == arg || *end || errno || !(x > 0) || !isfinite(x))
		return -1;
	((struct kvsim_opts *)cfg)->time_scale = x;
	return 0;
}

static int show_time_scale(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%g", ((const struct kvsim_opts *)cfg)->time_scale);
	return 1;
}

/* --int-block-hashes 0|1 (a bool). */
static int parse_int_hashes(void *cfg, const char *arg)
{
	if (strcmp(arg, "0") && strcmp(arg, "1"))
		return -1;
	((struct kvsim_opts *)cfg)->ev.int_hashes = arg[0] == '1';
	return 0;
}

static int show_int_hashes(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%d", ((const struct kvsim_opts *)cfg)->ev.int_hashes ? 1 : 0);
	return 1;
}

const char *kvsim_lora_name(const struct kvsim_opts *o, size_t i, char *buf, size_t n,
			    const char **path)
{
	const char *s = o->lora[i], *eq = strchr(s, '=');

	snprintf(buf, n, "%.*s", (int)(eq ? (size_t)(eq - s) : strlen(s)), s);
	if (path)
		*path = eq ? eq + 1 : s;
	return buf;
}

/* --lora-modules NAME=PATH [NAME=PATH ...]: vLLM takes several in one flag (its nargs='+'); here
 * they are one argument, blank- or comma-separated, and the flag may repeat. A bare NAME is
 * accepted too (no weights are loaded: the path is only shown in /v1/models). A name given twice
 * is refused, as vLLM refuses an adapter already loaded. */
static int parse_lora(void *cfg, const char *arg)
{
	struct kvsim_opts *o = cfg;
	char *dup = strdup(arg), *save = NULL, *tok;
	int n = 0;

	if (!dup)
		return -1;
	for (tok = strtok_r(dup, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
		char a[256], b[256];
		const char *eq = strchr(tok, '=');

		if (tok[0] == '=' || (eq && !eq[1]) || o->nlora == KVSIM_MAX_LORAS) {
			fprintf(stderr,
				"kvsim: --lora-modules: bad adapter '%s' (NAME=PATH, at most %d)\n",
				tok, KVSIM_MAX_LORAS);
			return OPT_SAID; /* dup stays referenced by the entries taken */
		}
		o->lora[o->nlora] = tok;
		kvsim_lora_name(o, o->nlora, a, sizeof(a), NULL);
		for (size_t i = 0; i < o->nlora; i++)
			if (strcmp(kvsim_lora_name(o, i, b, sizeof(b), NULL), a) == 0) {
				fprintf(stderr,
					"kvsim: --lora-modules: the lora adapter '%s' has "
					"already been loaded\n",
					a);
				return OPT_SAID;
			}
		o->nlora++;
		n++;
	}
	if (!n) {
		free(dup);
		return -1;
	}
	return 0;
}

static int show_lora(const void *cfg, char *buf, size_t n)
{
	const struct kvsim_opts *o = cfg;

	return opt_show_list(o->lora, o->nlora, '\n', buf, n);
}

static const char *const format_names[] = {"array", "map", NULL}; /* enum kvev_format */
static const char *const log_names[] = {"error", "warn", "info", "debug", NULL};

#define F(f) offsetof(struct kvsim_opts, f)
#define COUNT_MAX 1e9 /* counts without a bound of their own */
#define SIZE_MAX_OPT 0x1p50

/* Option tables name the leading fields and leave the rest zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct opt kvsim_flags[] = {
    {"The worker", OPT_SECTION},
    {"host", OPT_STR, F(host), "ADDR", 0, 0, "listen address"},
    {"port", OPT_INT, F(port), "N", 0, 65535,
     "listen port (0: any; the port is printed on stderr)"},
    {"worker-id", OPT_STR, F(worker_id), "ID", 0, 0, "x-kvsim-worker header value"},
    {"tokenizer", OPT_STR, F(tokenizer), "PATH", 0, 0,
     "tokenizer directory (with its chat template) or tokenizer.json"},
    {"chat-template", OPT_STR, F(chat_template), "FILE", 0, 0,
     "chat template file replacing tokenizer_config.json's, as vLLM's --chat-template",
     .dflt = "the tokenizer directory's"},
    {"default-chat-template-kwargs", OPT_STR, F(chat_kwargs), "JSON", 0, 0,
     "kwargs every chat template gets under each request's chat_template_kwargs, as vLLM's flag",
     .dflt = "none"},
    {"trust-request-chat-template", OPT_FLAG, F(trust_request_tmpl), NULL, 0, 0,
     "render a request's own chat_template, as vLLM's flag (without: a 400)"},
    {"model", OPT_STR, F(model), "NAME", 0, 0, "served model name"},
    {"lora-modules", OPT_FUNC, 0, "NAME=PATH", 0, 0,
     "LoRA adapters served beside the model (blank- or comma-separated, repeatable; PATH is "
     "only shown, no weights: a bare NAME is fine); a request naming one is hashed with its "
     "name as vLLM does",
     OPT_NO_DEFAULT, .parse = parse_lora, .show = show_lora},
    {"enable-lora", OPT_FLAG, F(enable_lora), NULL, 0, 0,
     "accepted for vLLM's command line (adapters are served whether given or not)"},
    {"seed", OPT_U64, F(seed), "N", 0, 0, "output-token seed"},
    {"log-level", OPT_CHOICE, F(log_level), NULL, 0, 0, "what is logged", .choices = log_names},

    {"KV cache and scheduler", OPT_SECTION},
    {"kv-cache-memory-bytes", OPT_SIZE, F(kv_bytes), NULL, 0, SIZE_MAX_OPT, "KV capacity"},
    {"kv-bytes-per-token", OPT_SIZE, F(kv_bytes_per_token), NULL, 1, SIZE_MAX_OPT,
     "KV bytes per token (Qwen3-0.6B's by default)"},
    {"num-blocks", OPT_U32, F(num_blocks), "N", 0, 0, "KV blocks, overriding the two above",
     .dflt = "--kv-cache-memory-bytes / --kv-bytes-per-token / --block-size"},
    {"block-size", OPT_U32, F(block_size), "N", 1, COUNT_MAX, "tokens per block"},
    {"max-model-len", OPT_U32, F(max_model_len), "N", 1, COUNT_MAX,
     "longest prompt + completion (more blocks than the cache holds: refused at start, as "
     "vLLM does)"},
    {"max-num-batched-tokens", OPT_U32, F(sc.max_num_batched_tokens), "N", 1, COUNT_MAX,
     "chunked-prefill token budget per step"},
    {"max-num-seqs", OPT_U32, F(sc.max_num_seqs), "N", 1, COUNT_MAX, "running requests at most"},
    {"hash-seed", OPT_STR, F(hash_seed), "STR", 0, 0, "engine block-hash seed",
     .dflt = "random per process"},

    {"Time: the step-cost model", OPT_SECTION},
    {"profile", OPT_FUNC, 0, "NAME", 0, 0,
     "the GPU and model one worker stands for: seeds (Qwen3-0.6B, 1 GiB of KV, the seeds' "
     "consumer GPUs), h200-qwen3-8b or h200-qwen3-0.6b (one H200); sets --model, the KV pool, "
     "--max-model-len, the scheduler limits and the step costs below, which any flag overrides "
     "wherever it stands",
     .flags = OPT_FIRST, .parse = parse_profile, .show = show_profile},
    {"time-scale", OPT_FUNC, 0, "S", 0, 0, "run the same schedule S times faster (above 0)",
     .parse = parse_time_scale, .show = show_time_scale},
    {"gpu-share", OPT_STR, F(gpu_share), "FILE", 0, 0,
     "a GPU time-sliced with every worker naming the same FILE (created if missing): their "
     "steps take turns, never overlap",
     .dflt = "a GPU of its own"},
    {"step-host-ms", OPT_DOUBLE, F(step_host_ms), "X", 0, 0,
     "of each step, the first X ms (at most the whole step) run on the host (scheduling, "
     "sampling, kernel launches): a GPU shared with --gpu-share does not delay them"},
    {"gpu-switch-ms", OPT_DOUBLE, F(gpu_switch_ms), "X", 0, 0,
     "with --gpu-share: a step that waits for another worker's pays X ms more (the context "
     "switch of time-slicing)"},
    {"gpu-speed", OPT_DOUBLE, F(gpu_speed), "X", 0.01, 100,
     "this worker's GPU is X times as fast as the profile's: the part of each step past "
     "--step-host-ms takes 1/X as long"},
    {"step-fixed-ms", OPT_DOUBLE, F(sc.step_fixed_ms), "X", 0, 0, "step time: fixed part"},
    {"step-prefill-fixed-ms", OPT_DOUBLE, F(sc.step_prefill_fixed_ms), "X", 0, 0,
     "step time: extra when the step has prefill"},
    {"prefill-us-per-token", OPT_DOUBLE, F(sc.prefill_us_per_token), "X", 0, 0,
     "step time: per prefill token"},
    {"prefill-attn-us", OPT_DOUBLE, F(sc.prefill_attn_us), "X", 0, 0,
     "step time: per prefill token per 1,000 tokens it attends to (cached ones and the chunk's "
     "own before it)"},
    {"decode-us-per-seq", OPT_DOUBLE, F(sc.decode_us_per_seq), "X", 0, 0,
     "step time: per decoding sequence"},
    {"decode-attn-us", OPT_DOUBLE, F(sc.decode_attn_us), "X", 0, 0,
     "step time: per decoding sequence per 1,000 tokens of its context"},
    {"api-overhead-ms", OPT_DOUBLE, F(api_overhead_ms), "X", 0, 0,
     "API server time before a request reaches the engine"},

    {"KV events", OPT_SECTION},
    {"events-endpoint", OPT_STR, F(ev.endpoint), "EP", 0, 0,
     "ZMQ PUB bind, e.g. tcp://127.0.0.1:5557 or tcp://127.0.0.1:* (the bound endpoint is "
     "printed on stderr)",
     .dflt = "none"},
    {"replay-endpoint", OPT_STR, F(ev.replay_endpoint), "EP", 0, 0, "ZMQ ROUTER replay bind",
     .dflt = "none"},
    {"topic", OPT_STR, F(ev.topic), "T", 0, 0, "event topic"},
    {"events-format", OPT_CHOICE, F(ev.format), NULL, 0, 0,
     "event encoding (array: vLLM before PR 42892)", .choices = format_names},
    {"int-block-hashes", OPT_FUNC, 0, "0|1", 0, 0, "hashes as u64 ints (1) or 32 raw bytes (0)",
     .parse = parse_int_hashes, .show = show_int_hashes},
    {"buffer-steps", OPT_U64, F(ev.buffer_steps), "N", 0, 0, "replay ring, in batches"},
};

static void defaults(void *cfg)
{
	kvsim_opts_default(cfg);
}

const struct opt_table kvsim_options = {
    .prog = "kvsim",
    .synopsis = "Usage: kvsim --port N --worker-id ID --tokenizer PATH [options]\n",
    .about = "One simulated vLLM worker: OpenAI API, vLLM v1 prefix cache, KV events. SIZE "
	     "takes bytes (4096, 64K, 1G).",
    .epilog = "Test hooks: POST /debug/events?drop=N drops the next N event batches from the PUB\n"
	      "(kept for replay), as a PUB past its high-water mark does; ?replay=off leaves\n"
	      "replay requests unanswered (a dead replay endpoint), ?replay=on answers again.\n"
	      "With VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in the environment, as vLLM: POST\n"
	      "/v1/load_lora_adapter {\"lora_name\",\"lora_path\"} and /v1/unload_lora_adapter\n"
	      "{\"lora_name\"} add and remove adapters at run time.\n",
    .v = kvsim_flags,
    .n = sizeof(kvsim_flags) / sizeof(kvsim_flags[0]),
    .cfg_size = sizeof(struct kvsim_opts),
    .defaults = defaults,
};
