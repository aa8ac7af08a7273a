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
	    .model = "Qwen/Qwen3-0.6B",
	    .time_scale = 1,
	    .kv_bytes = 1073741824ull,
	    .kv_bytes_per_token = 114688,
	    .block_size = 16,
	    .max_model_len = 4096,
	    .max_body = 64u << 20,
	    .ev = {.topic = "", .format = KVEV_ARRAY, .int_hashes = true, .buffer_steps = 10000},
	    .sc = {.max_num_batched_tokens = 2048,
		   .max_num_seqs = 256,
		   .step_fixed_ms = 10.0,
		   .step_prefill_fixed_ms = 11.8,
		   .prefill_us_per_token = 23.8,
		   .decode_us_per_seq = 1000.0},
	    .api_overhead_ms = 4.0,
	    .log_level = LOG_INFO};
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
    {"time-scale", OPT_FUNC, 0, "S", 0, 0, "run the same schedule S times faster (above 0)",
     .parse = parse_time_scale, .show = show_time_scale},
    {"step-fixed-ms", OPT_DOUBLE, F(sc.step_fixed_ms), "X", 0, 0, "step time: fixed part"},
    {"step-prefill-fixed-ms", OPT_DOUBLE, F(sc.step_prefill_fixed_ms), "X", 0, 0,
     "step time: extra when the step has prefill"},
    {"prefill-us-per-token", OPT_DOUBLE, F(sc.prefill_us_per_token), "X", 0, 0,
     "step time: per prefill token"},
    {"decode-us-per-seq", OPT_DOUBLE, F(sc.decode_us_per_seq), "X", 0, 0,
     "step time: per decoding sequence"},
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
