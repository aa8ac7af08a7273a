/* SPDX-License-Identifier: Apache-2.0 */
/* scrape: the worker metrics the router's load model reads from each vLLM worker's /metrics
 * (Prometheus text format 0.0.4), fetched over non-blocking HTTP/1.1 on the daemon's loop.
 *
 * What is read (vLLM v1's metric names, older names accepted where noted). A pod running
 * several engines (data parallelism) exposes one series per engine label: gauges of requests and
 * counters are summed, kv usage is averaged weighted by each engine's blocks when known:
 *   vllm:num_requests_running, vllm:num_requests_waiting         (sum)
 *   vllm:kv_cache_usage_perc (older: vllm:gpu_cache_usage_perc)  (0..1)
 *   vllm:cache_config_info{...,num_gpu_blocks="N",block_size="B",...} 1   (labels, see below)
 *   vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total          (sum; restart check)
 *     (older: vllm:gpu_prefix_cache_{queries,hits}_total)
 *   process_start_time_seconds                                             (restart check)
 * An older name is read only when the current one is absent (some releases expose both). N is
 * the whole pool of the pod: vLLM's API server already sums num_gpu_blocks over its engines and
 * puts that total on every engine's sample, so equal values are taken once; values that differ
 * can only be per-engine counts, and are summed. Lines that are not these are skipped; a value
 * of NaN (or infinite, or negative) or a label "None" is "unknown".
 *
 * Threading: one thread (the loop's) owns a scraper and calls every function on it. */
#ifndef KVS_SCRAPE_H
#define KVS_SCRAPE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/loop.h"
#include "core/metrics.h"

/* Default time between two scrapes of one worker, ms. */
#ifndef SCRAPE_DEFAULT_INTERVAL_MS
#define SCRAPE_DEFAULT_INTERVAL_MS 250
#endif
/* Default deadline of one scrape (connect to last byte), ms. */
#ifndef SCRAPE_DEFAULT_TIMEOUT_MS
#define SCRAPE_DEFAULT_TIMEOUT_MS 1000
#endif
/* Default largest /metrics response body read, bytes (a vLLM pod's is ~30-200 KB). */
#ifndef SCRAPE_DEFAULT_MAX_BODY
#define SCRAPE_DEFAULT_MAX_BODY (4u << 20)
#endif
/* Default longest answer head accepted, bytes (a vLLM pod's is ~200). */
#ifndef SCRAPE_DEFAULT_MAX_HEAD
#define SCRAPE_DEFAULT_MAX_HEAD (16u << 10)
#endif

/* One worker's metrics. Every field is -1 when the worker did not report it. */
struct scrape_metrics {
	double running;		/* requests in the running batch */
	double waiting;		/* requests queued */
	double kv_usage;	/* fraction of KV blocks in use by requests, 0..1 */
	int64_t num_gpu_blocks; /* KV cache capacity, blocks */
	int64_t block_size;	/* tokens per block */
	double prefix_queries;	/* counter, tokens */
	double prefix_hits;	/* counter, tokens */
	double start_time;	/* process start, seconds since the epoch */
};

/* Parses a /metrics body text[0..len) (need not be NUL-terminated). Fills *out (all -1 first).
 * Returns 0 when at least one vllm: series above was read, -ENODATA when none was (not a vLLM
 * worker, or an empty body). Malformed lines are skipped, and so is a last line without its line
 * feed (it may be cut). Allocates nothing. */
int scrape_parse(const char *text, size_t len, struct scrape_metrics *out);

/* Default time between two reads of one worker's /v1/models, ms (what it serves changes only
 * when an adapter is loaded or unloaded; a worker is also read again at once when it comes back
 * or restarts: scraper_kick). */
#ifndef SCRAPE_DEFAULT_MODELS_INTERVAL_MS
#define SCRAPE_DEFAULT_MODELS_INTERVAL_MS 10000
#endif
/* Models one /v1/models answer may list; more are a bad answer. */
#ifndef SCRAPE_MODELS_MAX
#define SCRAPE_MODELS_MAX 1024
#endif
/* Longest model id kept, bytes (Hugging Face ids are ~100); longer ones are left out. */
#ifndef SCRAPE_MODEL_NAME_MAX
#define SCRAPE_MODEL_NAME_MAX 256
#endif

/* What a worker serves, from its /v1/models (vLLM's ModelList, serving_models.py): each card's
 * id, and its parent (a LoRA adapter's base model; "" for a base model). The names are packed
 * in text: "id\0parent\0" per model, n of them. */
struct scrape_models {
	char *text;
	size_t len, n;
};

/* Parses a /v1/models body text[0..len): {"object":"list","data":[{"id":...,"parent":...},
 * ...]}. Fills *out (free with scrape_models_free). Returns 0; -ENODATA when it is not such a
 * list (not JSON, no "data" array, a card without a string id, more than SCRAPE_MODELS_MAX
 * cards), -ENOMEM. Cards whose id is longer than SCRAPE_MODEL_NAME_MAX are left out. */
int scrape_models_parse(const char *text, size_t len, struct scrape_models *out);
void scrape_models_free(struct scrape_models *m);

struct scraper;

/* Called on the loop thread once per finished scrape of target user: err 0 and m filled, or a
 * negative errno (-ECONNREFUSED, -ETIMEDOUT, -EPROTO for a bad answer or status, -ENODATA when
 * the body holds no vLLM metric, -EMSGSIZE for a head over max_head or a body over max_body,
 * -ECONNRESET when the worker closed mid-answer, another connect error) and m NULL. It may
 * call scraper_set_targets (even removing this target), not scraper_free. */
typedef void (*scrape_fn)(void *arg, void *user, const struct scrape_metrics *m, int err);

/* What scraper_opts_default gives (the SCRAPE_DEFAULT_* above); a 0 is off: no mark, no
 * deadline, no bound. */
struct scraper_opts {
	int interval_ms;  /* between scrapes of a target (> 0) */
	int timeout_ms;	  /* deadline of one scrape, connect to last byte */
	uint32_t mark;	  /* SO_MARK of the scrape sockets, so BPF never intercepts them */
	const char *path; /* "/metrics" */
	size_t max_body;  /* largest body read, bytes */
	size_t max_head;  /* longest answer head read, bytes */
	/* NULL: each body is a /metrics text for scrape_parse, handed to fn as m. Else the body
	 * is handed to it instead (from the loop thread, as fn): it returns 0 or a negative errno,
	 * and fn is then called with that err and m NULL (err 0: the body was taken). */
	int (*body)(void *arg, void *user, const char *text, size_t len);
};

/* Fills o with the defaults. */
void scraper_opts_default(struct scraper_opts *o);

struct scrape_target {
	struct sockaddr_in addr; /* the worker's HTTP address */
	void *user;		 /* handed back to fn; identifies the target */
};

/* Creates a scraper driven by loop (o NULL: all defaults). fn(arg, ...) reports results.
 * Returns 0 and *out, -EINVAL (no loop or fn, a negative time, a path not starting with '/' or
 * holding blanks), or -ENOMEM. */
int scraper_new(struct loop *loop, const struct scraper_opts *o, scrape_fn fn, void *arg,
		struct scraper **out);
/* Closes every connection (no callback is made) and frees. NULL is fine. Call it outside
 * loop_run (not from a callback). */
void scraper_free(struct scraper *s);

/* Makes the target set t[0..n) (copied). A target whose addr and user are unchanged keeps its
 * connection and schedule; removed targets' scrapes are cancelled without a callback; new ones
 * are scraped at once. Returns 0 or -ENOMEM (the old set is kept). */
int scraper_set_targets(struct scraper *s, const struct scrape_target *t, size_t n);

/* The target whose user is user is due now (the next scraper_tick starts it), unless a scrape
 * of it is under way. Returns 0, or -ENOENT for no such target. */
int scraper_kick(struct scraper *s, void *user);

/* Starts the scrapes that are due and expires the late ones (callback with -ETIMEDOUT). Call at
 * least every 100 ms (the daemon calls it after every loop_run), outside loop callbacks: it frees
 * the targets dropped during the last batch. Also reports a scrape that scraper_set_targets could
 * not start. One connection per target, kept alive between scrapes when the worker allows; never
 * more than one scrape in flight per target; a failed attempt is reported once and the next one
 * waits for the interval. */
void scraper_tick(struct scraper *s);

/* Scrapes done, and failed, since creation. */
void scraper_counts(const struct scraper *s, uint64_t *ok, uint64_t *failed);

/* The series scraper_metrics writes: the bounds in force, each named after its flag
 * (daemon/catalog.c lists them for docs/reference/metrics.md). */
extern const struct metrics_family scrape_families[];
extern const size_t scrape_nfamilies;
/* Appends the bounds in force as Prometheus text (scrape_families: kvsplice_scrape_limit_*, for
 * the router's metrics collector). Returns 0 or -ENOMEM. */
int scraper_metrics(const struct scraper *s, struct buf *out);

#endif
