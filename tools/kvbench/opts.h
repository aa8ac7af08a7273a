/* SPDX-License-Identifier: Apache-2.0 */
/* opts: everything kvbench's flags set, in one struct, with its defaults function and its option
 * table (core/options.h). main() fills a kvbench_opts with kvbench_opts_default, parses the flags
 * into it with kvbench_options, then kvbench_opts_finish checks what no single flag can and fills
 * the defaults that depend on other flags. `kvbench --help`, `--print-config` and the reference
 * come from the same table. opts.c calls nothing else of kvbench (it includes workload.h and
 * trace.h for their types and constants only): a generator of the reference links opts.o alone,
 * with libkvs. */
#ifndef KVS_KVBENCH_OPTS_H
#define KVS_KVBENCH_OPTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/options.h"
#include "route/policy.h"
#include "convo.h"
#include "workload.h"

#define KVBENCH_MAX_TARGETS 64

/* How a request picks its URL: kube-proxy's per-connection random choice or round-robin (the
 * Service baselines), or a kvsplice routing policy run client-side through the same router code
 * the daemon runs (dynamo, kv, approx). */
enum kvbench_spread { SPREAD_RANDOM, SPREAD_RR, SPREAD_ROUTER };

/* --api: the OpenAI endpoint requests go to (the order of the choices). */
enum kvbench_api { API_COMPLETIONS, API_CHAT };

/* One URL of --url or --metrics-urls. */
struct kvbench_target {
	char hostport[128];
	char host[100];
	struct sockaddr_in addr;
	char base[256]; /* path prefix, no trailing slash */
};

struct kvbench_opts {
	/* targets */
	struct kvbench_target t[KVBENCH_MAX_TARGETS];
	int nt;
	struct kvbench_target m[KVBENCH_MAX_TARGETS]; /* metrics/reset URLs */
	int nm;
	char *events[KVBENCH_MAX_TARGETS]; /* KV event endpoints, one per --url (malloc'ed) */
	int nev;
	enum kvbench_spread spread;
	const char *policy; /* SPREAD_ROUTER: the policy */
	bool reset;
	/* the seeds' workload */
	struct wl_opts wl;
	bool requests_set; /* --requests given (else max(200, 20 * prefix types)) */
	uint32_t concurrency;
	uint32_t runs;
	uint32_t output_tokens;
	bool keep_alive, warmup;
	/* requests */
	const char *tokenizer;
	const char *model;
	int api; /* enum kvbench_api */
	double timeout_s;
	double time_scale; /* the workers' --time-scale: times are reported in model time */
	/* output */
	const char *label;
	bool json, quiet, route_stats;
	const char *route_log;	  /* --route-log FILE */
	const char *request_log;  /* --request-log FILE */
	struct policy_kv_opts kv; /* --kv-* */
	/* --trace: replay a trace instead of the seeds' workload */
	const char *trace;
	uint32_t trace_bt;	    /* --trace-block-tokens: tokens per hash id */
	size_t trace_start;	    /* --trace-start: rows skipped */
	size_t trace_limit;	    /* --trace-limit: rows replayed at most (0: all) */
	uint32_t shard_k, shard_n;  /* --trace-shard K/N: every Nth row from the Kth (n 0: all) */
	double trace_speedup;	    /* --trace-speedup: the schedule runs this much faster */
	double trace_epoch;	    /* --trace-epoch: the schedule's start, Unix time (0: now) */
	uint64_t max_prompt_tokens; /* --max-prompt-tokens: refuse longer prompts (0: no limit) */
	uint32_t trace_max_output;  /* --trace-max-output: max_tokens cap (0: none) */
	/* --workload sessions | agent: generated conversations replayed like a trace (convo.h);
	 * the knobs below are < 0 when not given (the workload's default, convo_defaults) */
	int workload; /* enum convo_kind (CONVO_NONE: the seeds' workload or --trace) */
	struct kvbench_convo_cli {
		double count, rate, turns, user, answer, call, output, think, system, task, share,
		    max;
	} cv;
	struct convo_opts convo; /* filled by kvbench_opts_finish */
};

/* Fills o with every default. */
void kvbench_opts_default(struct kvbench_opts *o);
/* After opt_parse: refuses flags that do not go together (a message on stderr; returns -1) and
 * fills the defaults that depend on other flags (--requests, the metrics URLs of --reset).
 * Returns 0. */
int kvbench_opts_finish(struct kvbench_opts *o);
/* "random", "round-robin" or the policy's name. */
const char *kvbench_spread_name(const struct kvbench_opts *o);

extern const struct opt_table kvbench_options;

#endif
