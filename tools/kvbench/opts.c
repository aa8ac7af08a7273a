// SPDX-License-Identifier: Apache-2.0
/* opts: kvbench's flags, defaults and checks (opts.h). */
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* size_t counts are read as OPT_U64: the same type on the 64-bit targets. */
_Static_assert(sizeof(size_t) == sizeof(uint64_t), "size_t counts are read as uint64_t");

void kvbench_opts_default(struct kvbench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->spread = SPREAD_RANDOM;
	o->wl = (struct wl_opts){
	    .prefix_types = 7, .prefix_tokens = 2032, .suffix_tokens = 339, .seed = 1};
	o->concurrency = 8;
	o->runs = 1;
	o->output_tokens = 64;
	o->warmup = true;
	o->tokenizer = "models/qwen3/tokenizer.json";
	o->model = "Qwen/Qwen3-0.6B";
	o->api = API_COMPLETIONS;
	o->timeout_s = 600;
	o->time_scale = 1;
	policy_kv_defaults(&o->kv);
	o->trace_bt = TRACE_FORMAT_BLOCK;
	o->trace_speedup = 1;
	o->cv = (struct kvbench_convo_cli){-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
}

const char *kvbench_spread_name(const struct kvbench_opts *o)
{
	return o->spread == SPREAD_RR	    ? "round-robin"
	       : o->spread == SPREAD_ROUTER ? o->policy
					    : "random";
}

/* The workload's defaults, overridden by the knobs given. */
static int convo_finish(struct kvbench_opts *o)
{
	struct convo_opts *c = &o->convo;
	const struct kvbench_convo_cli *v = &o->cv;

	/* counts are whole and fit their fields; knobs of the other kind are refused */
	static const struct {
		size_t off;
		const char *flag;
		int kind; /* CONVO_NONE: both */
		bool whole;
	} knobs[] = {
	    {offsetof(struct kvbench_convo_cli, count), "--conversations", CONVO_NONE, true},
	    {offsetof(struct kvbench_convo_cli, answer), "--answer-tokens", CONVO_SESSIONS, false},
	    {offsetof(struct kvbench_convo_cli, call), "--call-tokens", CONVO_AGENT, false},
	    {offsetof(struct kvbench_convo_cli, output), "--tool-output-tokens", CONVO_AGENT,
	     false},
	    {offsetof(struct kvbench_convo_cli, system), "--system-tokens", CONVO_NONE, true},
	    {offsetof(struct kvbench_convo_cli, task), "--task-tokens", CONVO_AGENT, true},
	    {offsetof(struct kvbench_convo_cli, share), "--task-share", CONVO_AGENT, false},
	    {offsetof(struct kvbench_convo_cli, max), "--convo-max-tokens", CONVO_NONE, true},
	};

	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		double x = *(const double *)((const char *)v + knobs[i].off);

		if (x < 0)
			continue;
		if (knobs[i].kind != CONVO_NONE && knobs[i].kind != o->workload) {
			fprintf(stderr, "kvbench: %s is for --workload %s\n", knobs[i].flag,
				convo_name(knobs[i].kind));
			return -1;
		}
		if (knobs[i].whole && (x != floor(x) || x > UINT32_MAX)) {
			fprintf(stderr, "kvbench: %s %g: a whole number up to %u\n", knobs[i].flag,
				x, UINT32_MAX);
			return -1;
		}
	}
	if (o->trace_start || o->trace_limit || o->shard_n) {
		fprintf(stderr, "kvbench: --trace-start, --trace-limit and --trace-shard are for "
				"--trace (use --conversations and --seed)\n");
		return -1;
	}
	convo_defaults(c, o->workload);
	c->seed = o->wl.seed;
	if (v->count >= 0)
		c->count = (uint32_t)v->count;
	if (v->rate >= 0)
		c->rate = v->rate;
	if (v->turns >= 0)
		c->turns = v->turns;
	if (v->user >= 0)
		c->user_tokens = v->user;
	if (v->answer >= 0)
		c->answer_tokens = v->answer;
	if (v->call >= 0)
		c->call_tokens = v->call;
	if (v->output >= 0)
		c->output_tokens = v->output;
	if (v->think >= 0)
		c->think_ms = v->think;
	if (v->system >= 0)
		c->system_tokens = (uint32_t)v->system;
	if (v->task >= 0)
		c->task_tokens = (uint32_t)v->task;
	if (v->share >= 0)
		c->task_share = v->share;
	if (v->max >= 0)
		c->max_tokens = (uint64_t)v->max;
	if (o->trace) {
		fprintf(stderr, "kvbench: --workload %s and --trace: one or the other\n",
			convo_name(o->workload));
		return -1;
	}
	return 0;
}

int kvbench_opts_finish(struct kvbench_opts *o)
{
	bool knob = false;

	for (size_t i = 0; i < sizeof(o->cv) / sizeof(double); i++)
		knob |= ((const double *)&o->cv)[i] >= 0;
	if (o->workload != CONVO_NONE && convo_finish(o))
		return -1;
	if (o->workload == CONVO_NONE && knob) {
		fprintf(stderr,
			"kvbench: the conversation options need --workload sessions|agent\n");
		return -1;
	}
	if (o->trace || o->workload != CONVO_NONE) {
		const char *bad = o->api == API_CHAT && o->trace
				      ? "--api chat (a token-id prompt needs /v1/completions)"
				  : o->keep_alive
				      ? "--keep-alive (each row opens its own connection)"
				  : o->requests_set ? "--requests (use --trace-limit)"
						    : NULL;

		if (bad) {
			fprintf(stderr, "kvbench: %s does not take %s\n",
				o->trace ? "--trace" : "--workload", bad);
			return -1;
		}
	}
	if (o->trace_epoch > 0 && (o->runs > 1 || (!o->trace && o->workload == CONVO_NONE))) {
		fprintf(stderr, "kvbench: --trace-epoch is for one run (--runs 1) of --trace or "
				"--workload\n");
		return -1;
	}
	if (!o->nt) {
		fprintf(stderr, "kvbench: give --url URL[,URL...] (see --help)\n");
		return -1;
	}
	if (o->nev && (o->nev != o->nt || o->spread != SPREAD_ROUTER)) {
		fprintf(stderr,
			"kvbench: --events needs a policy --spread (dynamo, kv, approx) and "
			"one endpoint per --url\n");
		return -1;
	}
	if (!o->requests_set)
		o->wl.requests = o->wl.prefix_types * 20 > 200 ? o->wl.prefix_types * 20 : 200;
	if (!o->nm && o->reset) {
		memcpy(o->m, o->t, sizeof(o->t));
		o->nm = o->nt;
	}
	return 0;
}

/* Reads s as a count: decimal digits only (strtoull would take "-1" for its maximum), at most
 * max, into *v. Returns 0, or -1 when s is not such a count. */
static int parse_count(const char *s, uint64_t max, uint64_t *v)
{
	char *end = NULL;

	if (!s[0] || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || *v > max ? -1 : 0;
}

/* A number above 0 and finite. 0 or -1. */
static int parse_above0(const char *s, double *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(s, &end);
	if (end == s || *end || errno || !(x > 0) || !isfinite(x))
		return -1;
	*v = x;
	return 0;
}

/* "http://host:port/base" (http only), the first len bytes of u. */
static int parse_url(const char *u, size_t len, struct kvbench_target *t)
{
	char tmp[96], *hp, *slash, *colon;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int port = 80;

	if (len >= sizeof(tmp))
		return -1;
	memcpy(tmp, u, len);
	tmp[len] = '\0';
	if (strncmp(tmp, "http://", 7) != 0)
		return -1;
	hp = tmp + 7;
	slash = strchr(hp, '/');
	snprintf(t->base, sizeof(t->base), "%.90s", slash ? slash : "");
	if (slash)
		*slash = '\0';
	size_t bl = strlen(t->base);
	while (bl > 0 && t->base[bl - 1] == '/')
		t->base[--bl] = '\0';
	snprintf(t->hostport, sizeof(t->hostport), "%.90s", hp);
	colon = strrchr(hp, ':');
	if (colon) {
		*colon = '\0';
		port = atoi(colon + 1);
		if (port <= 0 || port > 65535)
			return -1;
	}
	snprintf(t->host, sizeof(t->host), "%.90s", hp);
	if (getaddrinfo(hp, NULL, &hints, &ai) != 0)
		return -1;
	memcpy(&t->addr, ai->ai_addr, sizeof(t->addr));
	t->addr.sin_port = htons((uint16_t)port);
	freeaddrinfo(ai);
	return 0;
}

/* "URL[,URL...]" into t[0..*n): replaces the list. */
static int parse_url_list(const char *s, struct kvbench_target *t, int *n)
{
	*n = 0;
	while (*s) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);

		if (len && (*n >= KVBENCH_MAX_TARGETS || parse_url(s, len, &t[(*n)++])))
			return -1;
		s += len + (e ? 1 : 0);
	}
	return *n ? 0 : -1;
}

/* A URL list as the flag takes it, comma-separated (0 when empty). */
static int show_url_list(const struct kvbench_target *t, int n, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%shttp://%s%s", i ? "," : "",
				       t[i].hostport, t[i].base);
	return n > 0;
}

static int parse_url_opt(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;

	return parse_url_list(arg, o->t, &o->nt);
}

static int show_url_opt(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	return show_url_list(o->t, o->nt, buf, n);
}

static int parse_metrics_urls(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;

	return parse_url_list(arg, o->m, &o->nm);
}

static int show_metrics_urls(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	return show_url_list(o->m, o->nm, buf, n);
}

/* --events EP[,EP...]: appended to those already given (empty items skipped, at most
 * KVBENCH_MAX_TARGETS kept). */
static int parse_events(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;
	char *dup = strdup(arg), *save = NULL, *tk;

	if (!dup)
		return -1;
	for (tk = strtok_r(dup, ",", &save); tk && o->nev < KVBENCH_MAX_TARGETS;
	     tk = strtok_r(NULL, ",", &save))
		o->events[o->nev++] = strdup(tk);
	free(dup);
	return 0;
}

static int show_events(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	return opt_show_list((const char *const *)o->events, (size_t)o->nev, ',', buf, n);
}

/* --spread random|round-robin|POLICY. */
static int parse_spread(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;

	if (!strcmp(arg, "random")) {
		o->spread = SPREAD_RANDOM;
	} else if (!strcmp(arg, "round-robin")) {
		o->spread = SPREAD_RR;
	} else if (policy_find(arg)) {
		o->spread = SPREAD_ROUTER;
		o->policy = arg;
	} else {
		return -1;
	}
	return 0;
}

static int show_spread(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%s", kvbench_spread_name(cfg));
	return 1;
}

/* --popularity uniform|zipf:S. */
static int parse_popularity(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;
	char *end;
	double s;

	if (!strcmp(arg, "uniform")) {
		o->wl.zipf_s = 0;
		return 0;
	}
	if (strncmp(arg, "zipf:", 5))
		return -1;
	errno = 0;
	s = strtod(arg + 5, &end);
	if (errno || *end)
		return -1;
	o->wl.zipf_s = s;
	return 0;
}

static int show_popularity(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	if (o->wl.zipf_s == 0)
		snprintf(buf, n, "uniform");
	else
		snprintf(buf, n, "zipf:%g", o->wl.zipf_s);
	return 1;
}

static int parse_requests(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;
	uint64_t v;

	if (parse_count(arg, SIZE_MAX, &v))
		return -1;
	o->wl.requests = (size_t)v;
	o->requests_set = true;
	return 0;
}

static int show_requests(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	snprintf(buf, n, "%zu", o->wl.requests);
	return o->requests_set;
}

static int parse_prefix_seed(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;

	if (parse_count(arg, UINT64_MAX, &o->wl.prefix_seed))
		return -1;
	o->wl.prefix_seed_set = true;
	return 0;
}

static int show_prefix_seed(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	snprintf(buf, n, "%llu", (unsigned long long)o->wl.prefix_seed);
	return o->wl.prefix_seed_set;
}

static int parse_time_scale(void *cfg, const char *arg)
{
	return parse_above0(arg, &((struct kvbench_opts *)cfg)->time_scale);
}

static int show_time_scale(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%g", ((const struct kvbench_opts *)cfg)->time_scale);
	return 1;
}

static int parse_trace_speedup(void *cfg, const char *arg)
{
	return parse_above0(arg, &((struct kvbench_opts *)cfg)->trace_speedup);
}

static int parse_trace_epoch(void *cfg, const char *arg)
{
	return parse_above0(arg, &((struct kvbench_opts *)cfg)->trace_epoch);
}

static int show_trace_epoch(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	if (!(o->trace_epoch > 0))
		return 0;
	snprintf(buf, n, "%.3f", o->trace_epoch);
	return 1;
}

static int show_trace_speedup(const void *cfg, char *buf, size_t n)
{
	snprintf(buf, n, "%g", ((const struct kvbench_opts *)cfg)->trace_speedup);
	return 1;
}

/* --trace-shard K/N, 1 <= K <= N <= 1024 */
static int parse_trace_shard(void *cfg, const char *arg)
{
	struct kvbench_opts *o = cfg;
	unsigned long k, n;
	char *end;

	errno = 0;
	k = strtoul(arg, &end, 10);
	if (end == arg || *end != '/' || errno)
		return -1;
	arg = end + 1;
	n = strtoul(arg, &end, 10);
	if (end == arg || *end || errno || k < 1 || k > n || n > 1024)
		return -1;
	o->shard_k = (uint32_t)k;
	o->shard_n = (uint32_t)n;
	return 0;
}

static int show_trace_shard(const void *cfg, char *buf, size_t n)
{
	const struct kvbench_opts *o = cfg;

	if (!o->shard_n)
		return 0;
	snprintf(buf, n, "%u/%u", o->shard_k, o->shard_n);
	return 1;
}

static const char *const api_names[] = {"completions", "chat", NULL};
/* --workload, in enum convo_kind's order */
static const char *const workload_names[] = {"seeds", "sessions", "agent", NULL};

/* The --workload knobs: a number >= 0 each, unset (< 0) until given. */
#define CONVO_KNOB(field)                                                                          \
	static int parse_cv_##field(void *cfg, const char *arg)                                    \
	{                                                                                          \
		char *end;                                                                         \
		double v = strtod(arg, &end);                                                      \
		if (end == arg || *end || !(v >= 0) || v > 1e12)                                   \
			return -1;                                                                 \
		((struct kvbench_opts *)cfg)->cv.field = v;                                        \
		return 0;                                                                          \
	}                                                                                          \
	static int show_cv_##field(const void *cfg, char *buf, size_t n)                           \
	{                                                                                          \
		double v = ((const struct kvbench_opts *)cfg)->cv.field;                           \
		snprintf(buf, n, "%g", v);                                                         \
		return v >= 0;                                                                     \
	}
CONVO_KNOB(count)
CONVO_KNOB(rate)
CONVO_KNOB(turns)
CONVO_KNOB(user)
CONVO_KNOB(answer)
CONVO_KNOB(call)
CONVO_KNOB(output)
CONVO_KNOB(think)
CONVO_KNOB(system)
CONVO_KNOB(task)
CONVO_KNOB(share)
CONVO_KNOB(max)
#define CV_OPT(name, field, arg, help, dfl)                                                        \
	{                                                                                          \
		name, OPT_FUNC, 0, arg, 0, 0, help, .parse = parse_cv_##field,                     \
						    .show = show_cv_##field, .dflt = dfl           \
	}

#define F(f) offsetof(struct kvbench_opts, f)
#define COUNT_MAX 1e9 /* counts without a bound of their own */

/* Option tables name the leading fields and leave the rest zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct opt kvbench_flags[] = {
    {"Targets", OPT_SECTION},
    {"url", OPT_FUNC, 0, "URL[,URL...]", 0, 0,
     "http://host:port[/base] targets, one worker or Service each", OPT_NO_DEFAULT,
     .parse = parse_url_opt, .show = show_url_opt},
    {"spread", OPT_FUNC, 0, "random|round-robin|POLICY", 0, 0,
     "how each request picks its URL: random or round-robin per connection (a Service), or "
     "a kvsplice policy run client-side: dynamo, kv, approx",
     .parse = parse_spread, .show = show_spread},
    {"events", OPT_FUNC, 0, "EP[,EP...]", 0, 0,
     "the workers' KV event endpoints (tcp://IP:PORT), one per --url in order: a policy "
     "--spread then takes what the workers hold from their events (Dynamo's KV routing) "
     "instead of its own routing history (approximate mode)",
     OPT_NO_DEFAULT, .parse = parse_events, .show = show_events},
    {"metrics-urls", OPT_FUNC, 0, "URL[,...]", 0, 0,
     "worker base URLs: vllm:prefix_cache_* deltas per run", OPT_NO_DEFAULT,
     .parse = parse_metrics_urls, .show = show_metrics_urls},
    {"reset", OPT_FLAG, F(reset), NULL, 0, 0,
     "POST /reset_prefix_cache to the metrics URLs (or the --url list) before each run"},

    {"The seeds' workload", OPT_SECTION},
    {"prefix-types", OPT_U32, F(wl.prefix_types), "P", 1, COUNT_MAX, "prefix types"},
    {"popularity", OPT_FUNC, 0, "uniform|zipf:S", 0, 0, "prefix popularity",
     .parse = parse_popularity, .show = show_popularity},
    {"concurrency", OPT_U32, F(concurrency), "C", 1, COUNT_MAX, "closed-loop clients"},
    {"requests", OPT_FUNC, 0, "N", 0, 0, "measured requests", .parse = parse_requests,
     .show = show_requests, .dflt = "max(200, 20 x --prefix-types)"},
    {"runs", OPT_U32, F(runs), "R", 1, 64, "runs; the table's last row and the JSON are medians"},
    {"seed", OPT_U64, F(wl.seed), "S", 0, 0, "workload seed"},
    {"prefix-seed", OPT_FUNC, 0, "S", 0, 0,
     "the prefix texts' own seed: clients with different --seed then share one prefix set",
     .parse = parse_prefix_seed, .show = show_prefix_seed, .dflt = "--seed"},
    {"prefix-tokens", OPT_U32, F(wl.prefix_tokens), "N", 0, 0, "tokens of each shared prefix"},
    {"suffix-tokens", OPT_U32, F(wl.suffix_tokens), "N", 0, 0,
     "tokens of each request's unique suffix"},
    {"output-tokens", OPT_U32, F(output_tokens), "N", 1, COUNT_MAX, "tokens generated per request"},
    {"mixed-lengths", OPT_U32, F(wl.mixed_pct), "PCT", 0, 90,
     "vary prefix and suffix lengths by +-PCT %"},
    {"keep-alive", OPT_FLAG, F(keep_alive), NULL, 0, 0,
     "reuse connections (pins a client to a worker)"},
    {"no-warmup", OPT_CLEAR, F(warmup), NULL, 0, 0, "skip the warm-up requests"},

    {"Requests", OPT_SECTION},
    {"tokenizer", OPT_STR, F(tokenizer), "PATH", 0, 0,
     "tokenizer directory (with its chat template) or tokenizer.json"},
    {"model", OPT_STR, F(model), "NAME", 0, 0, "model field"},
    {"api", OPT_CHOICE, F(api), NULL, 0, 0, "endpoint: /v1/completions or /v1/chat/completions",
     .choices = api_names},
    {"timeout", OPT_DOUBLE, F(timeout_s), "S", 0, 0,
     "give up on a run after S seconds (with --trace: counted from the last row's time)"},
    {"time-scale", OPT_FUNC, 0, "S", 0, 0,
     "the workers' --time-scale (above 0): TTFT and req/s are reported in model time",
     .parse = parse_time_scale, .show = show_time_scale},

    {"Output", OPT_SECTION},
    {"label", OPT_STR, F(label), "NAME", 0, 0, "name shown in progress lines and the JSON",
     OPT_NO_DEFAULT},
    {"json", OPT_FLAG, F(json), NULL, 0, 0, "JSON on stdout instead of the table"},
    {"quiet", OPT_FLAG, F(quiet), NULL, 0, 0, "no progress on stderr"},
    {"route-stats", OPT_FLAG, F(route_stats), NULL, 0, 0,
     "with a policy --spread: the router's decision counters (kvsplice_route_* of /metrics) "
     "on stderr after each run"},
    {"route-log", OPT_STR, F(route_log), "FILE", 0, 0,
     "with a policy --spread: the router's last decisions (/debug/route JSON) written to FILE "
     "after each run",
     OPT_NO_DEFAULT},
    {"request-log", OPT_STR, F(request_log), "FILE", 0, 0,
     "one JSON line per measured request appended to FILE: run, k, prefix, worker, start, "
     "ttft, total (model ms), cached and prompt tokens, ok",
     OPT_NO_DEFAULT},

    {"The kv policy's tunables (--spread kv or approx; kvsplice's own)", OPT_SECTION},
    {"", OPT_INCLUDE, F(kv), .sub = policy_kv_options, .nsub = POLICY_KV_NOPTIONS},

    {"Trace replay (--concurrency, --requests, --keep-alive, --api chat do not apply)",
     OPT_SECTION},
    {"trace", OPT_STR, F(trace), "FILE", 0, 0,
     "the trace (one JSON object a line: timestamp, input_length, output_length, hash_ids; "
     "rows sorted by time; a bad line is refused with its number)",
     OPT_NO_DEFAULT},
    {"trace-block-tokens", OPT_U32, F(trace_bt), "B", 1, TRACE_FORMAT_BLOCK,
     "tokens per hash id (by default the trace format's own)"},
    {"trace-start", OPT_U64, F(trace_start), "N", 0, 0, "skip the first N rows"},
    {"trace-limit", OPT_U64, F(trace_limit), "N", 0, 0, "replay at most N rows (0: all)"},
    {"trace-shard", OPT_FUNC, 0, "K/N", 0, 0,
     "replay only rows K, K+N, K+2N, ... of those kept (1 <= K <= N <= 1024), on the whole "
     "trace's clock: N clients with shards 1/N .. N/N together send the trace as one would; "
     "the JSON adds the whole trace's ideal (trace_all_*)",
     .parse = parse_trace_shard, .show = show_trace_shard, .flags = OPT_NO_DEFAULT},
    {"trace-epoch", OPT_FUNC, 0, "S", 0, 0,
     "start the schedule at Unix time S (seconds, fractions allowed) instead of once "
     "loaded: clients started apart send on one clock (--runs 1 only)",
     .parse = parse_trace_epoch, .show = show_trace_epoch, .flags = OPT_NO_DEFAULT},
    {"trace-speedup", OPT_FUNC, 0, "X", 0, 0, "play the schedule X times faster (above 0)",
     .parse = parse_trace_speedup, .show = show_trace_speedup},
    {"trace-max-output", OPT_U32, F(trace_max_output), "N", 0, 0,
     "cap max_tokens at N (0: no cap)"},
    {"max-prompt-tokens", OPT_U64, F(max_prompt_tokens), "N", 0, 0,
     "refuse, before sending anything, a trace with a prompt longer than N tokens after "
     "scaling (0: no limit)"},

    {"Generated conversations (--workload sessions | agent: replayed as a trace, each next turn "
     "sent a think time after the answer before it; the trace-replay options apply)",
     OPT_SECTION},
    {"workload", OPT_CHOICE, F(workload), NULL, 0, 0,
     "seeds: the seeds' workload (or --trace); sessions: multi-turn chat, each turn the "
     "conversation so far + the answer + a new message; agent: agents sharing a system prompt "
     "with tools, each step adding a tool call and its output",
     .choices = workload_names},
    CV_OPT("conversations", count, "N", "sessions or agents", "sessions 200, agent 40"),
    CV_OPT("convo-rate", rate, "R", "conversations starting a second (Poisson, model time)",
	   "sessions 2, agent 0.5"),
    CV_OPT("turns", turns, "T", "mean turns per session, steps per agent (geometric, >= 1)",
	   "sessions 2.0 (LMSYS-Chat-1M), agent 10"),
    CV_OPT("user-tokens", user, "N",
	   "mean tokens of a user message (sessions) or an agent's first request (lognormal)",
	   "sessions 69.5 (LMSYS-Chat-1M), agent 256"),
    CV_OPT("answer-tokens", answer, "N", "sessions: mean tokens of an answer (max_tokens)",
	   "214.5 (LMSYS-Chat-1M)"),
    CV_OPT("call-tokens", call, "N", "agent: mean tokens of a tool call (max_tokens)", "64"),
    CV_OPT("tool-output-tokens", output, "N", "agent: mean tokens of a tool's output", "512"),
    CV_OPT("think-ms", think, "MS",
	   "mean pause after an answer before the next turn (exponential, model ms)",
	   "sessions 5000, agent 200"),
    CV_OPT("system-tokens", system, "N",
	   "a system prompt (agent: with its tools) every conversation shares, whole blocks",
	   "sessions 0, agent 4096"),
    CV_OPT("task-tokens", task, "N", "agent: a task prefix, whole blocks", "256"),
    CV_OPT("task-share", share, "P",
	   "agent: probability that an agent works on the task of the agent before it", "0.5"),
    CV_OPT("convo-max-tokens", max, "N", "a conversation ends before a prompt longer than N",
	   "32768"),
};

static void defaults(void *cfg)
{
	kvbench_opts_default(cfg);
}

const struct opt_table kvbench_options = {
    .prog = "kvbench",
    .synopsis = "Usage: kvbench --url URL[,URL...] --prefix-types P --concurrency C --seed S "
		"--tokenizer PATH [options]\n"
		"       kvbench --url URL[,URL...] --trace FILE --tokenizer PATH [trace options]\n",
    .about = "The seeds' workload: P shared prefixes of --prefix-tokens + a unique suffix of "
	     "--suffix-tokens per request, --output-tokens generated, streamed, a new connection "
	     "per request, one warm-up request per prefix first (not counted).",
    .epilog = "--trace: a Mooncake / aiperf mooncake_trace JSONL file replayed open-loop, each\n"
	      "row sent at its timestamp (ms after the first replayed row) / --time-scale /\n"
	      "--trace-speedup, finished or not the rows before. Each hash id becomes B fixed\n"
	      "token ids (equal ids, equal tokens, on every worker and run), input_length\n"
	      "scales by B/512 with the last block cut to it; the prompt goes out as token ids,\n"
	      "max_tokens = max(1, round(output_length * B/512)). No warm-up. Reports the\n"
	      "trace's own ideal cached ratio (an infinite cache on one worker), the send lag\n"
	      "(wall ms: how late rows went out) and the requests each worker answered\n"
	      "(x-kvsim-worker, else the URL).\n"
	      "\n"
	      "Exit status: 0, 1 when a request (or the setup) failed, 2 for bad arguments or a\n"
	      "trace refused before anything was sent, 130 when interrupted.\n",
    .v = kvbench_flags,
    .n = sizeof(kvbench_flags) / sizeof(kvbench_flags[0]),
    .cfg_size = sizeof(struct kvbench_opts),
    .defaults = defaults,
};
