// SPDX-License-Identifier: Apache-2.0
/* router_debug: what the router shows (route/router_int.h has the map of its files): the metrics
 * it registers and its /metrics collector (per worker, its bounds, the tokenizer caches), and the
 * JSON of /debug/route (the decision log) and /debug/workers (the worker table). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/metrics.h"
#include "kv/approx.h"
#include "prompt/chat.h"
#include "prompt/tokenizer.h"
#include "route/router_int.h"
#include "route/workers.h"

static const char *const fb_names[FB_MAX] = {
#define X(e, s) [FB_##e] = s,
    FALLBACKS(X)
#undef X
};

static const char *const view_names[] = {"none", "events", "approx", "text"};

/* The router's /metrics families (daemon/catalog.c lists them). The per-worker ones are in the
 * order worker_collector writes them. */
enum {
	RF_DECISIONS,
	RF_FALLBACKS,
	RF_TOKENS,
	RF_OUTCOMES,
	RF_PASSTHROUGH,
	RF_DECISION_SECONDS,
	RF_W_INFLIGHT,
	RF_W_REMOTE,
	RF_W_WAITING,
	RF_W_FREE,
	RF_W_CAPACITY,
	RF_W_ROUTED,
	RF_W_SCRAPE_FAILURES,
	RF_W_RESTARTS,
	RF_W_PREFILL,
	RF_W_DOWN,
	RF_W_DOWNS,
	RF_W_SCRAPE_ERRORS,
	RF_W_MODELS,
	RF_W_MODELS_ERRORS,
	RF_APPROX_ENTRIES,
	RF_APPROX_EVICTED,
	RF_APPROX_DISPLACED,
	RF_APPROX_LIMIT,
	RF_TOKCACHE,
	RF_TOKCACHE_BYTES,
	RF_REQ_TMPL,
	RF_COUNT
};
const struct metrics_family router_families[RF_COUNT] = {
    [RF_DECISIONS] = {"kvsplice_route_decisions_total", METRICS_COUNTER,
		      "Routing decisions, by policy and reason.", "policy,reason"},
    [RF_FALLBACKS] = {"kvsplice_route_fallbacks_total", METRICS_COUNTER,
		      "OpenAI requests routed on the approximate view of their raw bytes because "
		      "exact tokens were impossible, by cause.",
		      "cause"},
    [RF_TOKENS] = {"kvsplice_route_tokens_total", METRICS_COUNTER,
		   "Prompt tokens of routed requests; the cached part predicted on the chosen "
		   "worker, the best any worker held, and what the workers reported (usage, "
		   "where the response carried it).",
		   "kind"},
    [RF_OUTCOMES] = {"kvsplice_route_outcomes_total", METRICS_COUNTER,
		     "Routed prompts by predicted and reported prefix-cache hit.",
		     "predicted,reported"},
    [RF_PASSTHROUGH] = {"kvsplice_route_passthrough_total", METRICS_COUNTER,
			"Pass-through connections placed by load alone.", NULL},
    [RF_DECISION_SECONDS] = {"kvsplice_route_decision_seconds", METRICS_HISTOGRAM,
			     "Time to decide (read, tokenize, hash, look up, score).", NULL},
    [RF_W_INFLIGHT] = {"kvsplice_worker_inflight", METRICS_GAUGE,
		       "Requests this kvsplice has in flight on the worker.", "worker"},
    [RF_W_REMOTE] = {"kvsplice_worker_remote_requests", METRICS_GAUGE,
		     "Requests others have on the worker, estimated from its metrics.", "worker"},
    [RF_W_WAITING] = {"kvsplice_worker_waiting", METRICS_GAUGE,
		      "Requests queued at the worker (its metrics; -1 unknown).", "worker"},
    [RF_W_FREE] = {"kvsplice_worker_free_blocks", METRICS_GAUGE,
		   "Free KV blocks of the worker, estimated (-1 unknown).", "worker"},
    [RF_W_CAPACITY] = {"kvsplice_worker_capacity_blocks", METRICS_GAUGE,
		       "KV cache capacity of the worker, blocks (its metrics; 0 unknown).",
		       "worker"},
    [RF_W_ROUTED] = {"kvsplice_worker_routed_total", METRICS_COUNTER,
		     "Requests routed to the worker.", "worker"},
    [RF_W_SCRAPE_FAILURES] = {"kvsplice_worker_scrape_failures", METRICS_GAUGE,
			      "Consecutive failed scrapes of the worker's metrics.", "worker"},
    [RF_W_RESTARTS] = {"kvsplice_worker_restarts_total", METRICS_COUNTER,
		       "New worker processes seen in its metrics (its index is then synced "
		       "again).",
		       "worker"},
    [RF_W_PREFILL] = {"kvsplice_worker_prefill_blocks", METRICS_GAUGE,
		      "KV blocks its requests from here owe before their first response byte.",
		      "worker"},
    [RF_W_DOWN] = {"kvsplice_worker_down", METRICS_GAUGE,
		   "1 while the worker is avoided as down (its scrapes or its connects failed).",
		   "worker"},
    [RF_W_DOWNS] = {"kvsplice_worker_downs_total", METRICS_COUNTER,
		    "Times the worker went down (its connects or its scrapes failed).", "worker"},
    [RF_W_SCRAPE_ERRORS] = {"kvsplice_worker_scrape_errors_total", METRICS_COUNTER,
			    "Failed scrapes of the worker's metrics, by cause (its /metrics too "
			    "large for --scrape-max-body or --scrape-max-head, not answered "
			    "within --scrape-timeout, ...).",
			    "worker,cause"},
    [RF_W_MODELS] = {"kvsplice_worker_models", METRICS_GAUGE,
		     "Models the worker serves, base models and LoRA adapters (its /v1/models, "
		     "read every --models-interval; -1 until it answers: it then takes the "
		     "Service's model).",
		     "worker"},
    [RF_W_MODELS_ERRORS] = {"kvsplice_worker_models_errors_total", METRICS_COUNTER,
			    "Failed reads of the worker's /v1/models (its last list stays).",
			    "worker"},
    [RF_APPROX_ENTRIES] = {"kvsplice_approx_entries", METRICS_GAUGE,
			   "(worker, block) pairs the approximate view holds.", NULL},
    [RF_APPROX_EVICTED] = {"kvsplice_approx_evicted_total", METRICS_COUNTER,
			   "Pairs of the approximate view dropped, or not recorded, at its bound "
			   "(--approx-max-entries).",
			   NULL},
    [RF_APPROX_DISPLACED] = {"kvsplice_approx_displaced_total", METRICS_COUNTER,
			     "Pairs of the approximate view dropped because their worker's KV "
			     "capacity of newer blocks was routed to it since.",
			     NULL},
    [RF_APPROX_LIMIT] = {"kvsplice_approx_limit_entries", METRICS_GAUGE,
			 "Bound on the (worker, block) pairs of the approximate view; past it the "
			 "pairs closest to expiry go first (--approx-max-entries).",
			 NULL},
    [RF_TOKCACHE] = {"kvsplice_tokenizer_cache_total", METRICS_COUNTER,
		     "Encoding cache lookups (whole segments between special tokens, BPE pieces), "
		     "by result.",
		     "tokenizer,kind,result"},
    [RF_TOKCACHE_BYTES] = {"kvsplice_tokenizer_cache_bytes", METRICS_GAUGE,
			   "Bytes held by the encoding caches.", NULL},
    [RF_REQ_TMPL] =
	{"kvsplice_request_chat_templates_total", METRICS_COUNTER,
	 "Requests carrying their own chat_template (--trust-request-chat-template), by "
	 "result: found compiled, compiled, refused (a syntax error or Jinja the "
	 "interpreter does not implement: the request is a fallback).",
	 "result"},
};
const size_t router_nfamilies = RF_COUNT;

static void worker_collector(struct buf *out, void *arg);

/* --- metrics ---------------------------------------------------------------------------------- */

int router_debug_stats_init(struct router *r)
{
	struct metrics *m = r->metrics;
	struct rstats *st = &r->st;
	static const double bounds[] = {10e-6,	25e-6, 50e-6, 100e-6, 250e-6,
					500e-6, 1e-3,  5e-3,  25e-3};
	static const char *const oname[3] = {"hit", "miss", "unknown"};
	char lb[128];

	if (!m)
		return 0;
	for (size_t k = 0; k < POLICY_COUNT; k++)
		for (int i = 0; i < POLICY_REASON_MAX; i++) {
			snprintf(lb, sizeof(lb), "policy=\"%s\",reason=\"%s\"", r->pi[k].ops->name,
				 policy_reason_name((enum policy_reason)i));
			r->pi[k].decisions[i] =
			    metrics_counter_of(m, &router_families[RF_DECISIONS], lb);
			if (!r->pi[k].decisions[i])
				return -ENOMEM;
		}
	for (int i = 0; i < FB_MAX; i++) {
		snprintf(lb, sizeof(lb), "cause=\"%s\"", fb_names[i]);
		st->fallbacks[i] = metrics_counter_of(m, &router_families[RF_FALLBACKS], lb);
		if (!st->fallbacks[i])
			return -ENOMEM;
	}
#define TOK(field, kind)                                                                           \
	st->field = metrics_counter_of(m, &router_families[RF_TOKENS], "kind=\"" kind "\"");       \
	if (!st->field)                                                                            \
		return -ENOMEM;
	TOK(tok_prompt, "prompt")
	TOK(tok_predicted, "predicted_cached")
	TOK(tok_best, "best_cached")
	TOK(tok_reported, "reported_cached")
	TOK(tok_reported_prompt, "reported_prompt")
#undef TOK
	for (int p = 0; p < 2; p++)
		for (int o = 0; o < 3; o++) {
			snprintf(lb, sizeof(lb), "predicted=\"%s\",reported=\"%s\"", oname[p],
				 oname[o]);
			st->outcome[p][o] =
			    metrics_counter_of(m, &router_families[RF_OUTCOMES], lb);
			if (!st->outcome[p][o])
				return -ENOMEM;
		}
	st->passthrough = metrics_counter_of(m, &router_families[RF_PASSTHROUGH], NULL);
	st->decision = metrics_histogram_of(m, &router_families[RF_DECISION_SECONDS], NULL, bounds,
					    (int)(sizeof(bounds) / sizeof(bounds[0])));
	if (!st->passthrough || !st->decision)
		return -ENOMEM;
	return metrics_add_collector(m, worker_collector, r);
}

static void put_label(struct buf *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_printf(out, "\\%c", *s);
		else if (*s == '\n')
			buf_puts(out, "\\n");
		else
			buf_append(out, s, 1);
	}
}

/* The router's bounds (each named after its flag) and what the approximate view holds; the
 * scraper's bounds when it scrapes. */
static void router_limits_text(const struct router *r, struct buf *out)
{
	struct approx_stats ax;

	approx_stats(r->ax, &ax);
	metrics_head(out, &router_families[RF_APPROX_ENTRIES]);
	buf_printf(out, "%s %llu\n", router_families[RF_APPROX_ENTRIES].name,
		   (unsigned long long)ax.entries);
	metrics_head(out, &router_families[RF_APPROX_EVICTED]);
	buf_printf(out, "%s %llu\n", router_families[RF_APPROX_EVICTED].name,
		   (unsigned long long)ax.evicted);
	metrics_head(out, &router_families[RF_APPROX_DISPLACED]);
	buf_printf(out, "%s %llu\n", router_families[RF_APPROX_DISPLACED].name,
		   (unsigned long long)ax.displaced);
	metrics_head(out, &router_families[RF_APPROX_LIMIT]);
	buf_printf(out, "%s %zu\n", router_families[RF_APPROX_LIMIT].name, r->approx_max_entries);
	if (r->scr)
		scraper_metrics(r->scr, out);
}

/* Per worker: what the router sees of it. */
static void worker_collector(struct buf *out, void *arg)
{
	struct router *r = arg;
	uint64_t t = clock_ms(), tc_bytes = 0;
	for (size_t k = 0; k <= RF_W_DOWNS - RF_W_INFLIGHT; k++) {
		const struct metrics_family *f = &router_families[RF_W_INFLIGHT + k];

		metrics_head(out, f);
		for (uint32_t i = 0; i < workers_count(r->ws); i++) {
			struct worker *w = workers_at(r->ws, i);
			double rem, wait, fb, cap, v = 0;

			if (!w)
				continue;
			workers_load(r->ws, w, t, 0, &rem, &wait, &fb, &cap);
			switch (k) {
			case 0:
				v = w->inflight;
				break;
			case 1:
				v = rem;
				break;
			case 2:
				v = wait;
				break;
			case 3:
				v = fb;
				break;
			case 4:
				v = cap;
				break;
			case 5:
				v = (double)w->routed;
				break;
			case 6:
				v = w->scrape_fails;
				break;
			case 7:
				v = (double)w->restarts;
				break;
			case 8:
				v = w->prefill;
				break;
			case 9:
				v = workers_down(w);
				break;
			case 10:
				v = (double)w->downs;
				break;
			}
			buf_printf(out, "%s{worker=\"", f->name);
			put_label(out, w->name);
			buf_printf(out, "\"} %.6g\n", v);
		}
	}
	metrics_head(out, &router_families[RF_W_SCRAPE_ERRORS]);
	for (uint32_t i = 0; i < workers_count(r->ws); i++) {
		struct worker *w = workers_at(r->ws, i);

		for (int c = 0; w && c < WORKERS_SCRAPE_NCAUSES; c++) {
			buf_puts(out, "kvsplice_worker_scrape_errors_total{worker=\"");
			put_label(out, w->name);
			buf_printf(out, "\",cause=\"%s\"} %llu\n",
				   workers_scrape_cause_name((enum workers_scrape_cause)c),
				   (unsigned long long)w->scrape_errors[c]);
		}
	}
	if (r->mscr) {
		metrics_head(out, &router_families[RF_W_MODELS]);
		for (uint32_t i = 0; i < workers_count(r->ws); i++) {
			struct worker *w = workers_at(r->ws, i);

			if (!w)
				continue;
			buf_printf(out, "%s{worker=\"", router_families[RF_W_MODELS].name);
			put_label(out, w->name);
			buf_printf(out, "\"} %lld\n",
				   w->models_known ? (long long)w->models_n : -1LL);
		}
		metrics_head(out, &router_families[RF_W_MODELS_ERRORS]);
		for (uint32_t i = 0; i < workers_count(r->ws); i++) {
			struct worker *w = workers_at(r->ws, i);

			if (!w)
				continue;
			buf_printf(out, "%s{worker=\"", router_families[RF_W_MODELS_ERRORS].name);
			put_label(out, w->name);
			buf_printf(out, "\"} %llu\n", (unsigned long long)w->models_errors);
		}
	}
	router_limits_text(r, out);
	metrics_head(out, &router_families[RF_TOKCACHE]);
	for (size_t i = 0; i < sizeof(r->tc) / sizeof(r->tc[0]) && r->tc[i].tok; i++) {
		struct tok_cache_stats st;

		tok_cache_stats(r->tc[i].cache, &st);
		buf_printf(out,
			   "kvsplice_tokenizer_cache_total{tokenizer=\"%zu\",kind=\"segment\","
			   "result=\"hit\"} %llu\n"
			   "kvsplice_tokenizer_cache_total{tokenizer=\"%zu\",kind=\"segment\","
			   "result=\"miss\"} %llu\n"
			   "kvsplice_tokenizer_cache_total{tokenizer=\"%zu\",kind=\"piece\","
			   "result=\"hit\"} %llu\n"
			   "kvsplice_tokenizer_cache_total{tokenizer=\"%zu\",kind=\"piece\","
			   "result=\"miss\"} %llu\n",
			   i, (unsigned long long)st.segment_hits, i,
			   (unsigned long long)st.segment_misses, i,
			   (unsigned long long)st.piece_hits, i,
			   (unsigned long long)st.piece_misses);
		tc_bytes += st.bytes;
	}
	metrics_head(out, &router_families[RF_TOKCACHE_BYTES]);
	buf_printf(out, "%s %llu\n", router_families[RF_TOKCACHE_BYTES].name,
		   (unsigned long long)tc_bytes);
	{
		struct chat_req_tmpl_stats rt;

		chat_req_tmpl_stats(&rt);
		metrics_head(out, &router_families[RF_REQ_TMPL]);
		buf_printf(out,
			   "%s{result=\"hit\"} %llu\n%s{result=\"compiled\"} %llu\n"
			   "%s{result=\"refused\"} %llu\n",
			   router_families[RF_REQ_TMPL].name, (unsigned long long)rt.hits,
			   router_families[RF_REQ_TMPL].name, (unsigned long long)rt.compiles,
			   router_families[RF_REQ_TMPL].name, (unsigned long long)rt.refused);
	}
}

/* --- /debug --------------------------------------------------------------------------------- */

static int json_num(struct buf *out, const char *key, double v)
{
	if (v < 0)
		return buf_printf(out, ",\"%s\":null", key);
	return buf_printf(out, ",\"%s\":%.6g", key, v);
}

int router_debug_json(const struct router *r, struct buf *out)
{
	uint64_t n = r->nlog < ROUTER_LOG ? r->nlog : ROUTER_LOG;
	int rc = buf_printf(out, "{\"router\":\"%s\",\"routes\":[", r->pol->ops->name);

	for (uint64_t i = 0; i < n && !rc; i++) {
		const struct route_rec *x = &r->log[(r->nlog - 1 - i) % ROUTER_LOG];
		char a[INET_ADDRSTRLEN], tm_s[32];
		struct tm tm;

		inet_ntop(AF_INET, &x->client.sin_addr, a, sizeof(a));
		gmtime_r(&x->when.tv_sec, &tm);
		strftime(tm_s, sizeof(tm_s), "%Y-%m-%dT%H:%M:%S", &tm);
		rc |= buf_printf(out, "%s{\"time\":\"%s.%03ldZ\",\"client\":\"%s:%u\",\"service\":",
				 i ? "," : "", tm_s, x->when.tv_nsec / 1000000, a,
				 ntohs(x->client.sin_port));
		rc |= buf_json_str(out, x->service, strlen(x->service));
		rc |= buf_printf(out, ",\"policy\":\"%s\"", x->policy ? x->policy : "");
		rc |= buf_puts(out, ",\"method\":");
		rc |= buf_json_str(out, x->method, strlen(x->method));
		rc |= buf_puts(out, ",\"target\":");
		rc |= buf_json_str(out, x->target, strlen(x->target));
		rc |= buf_puts(out, ",\"endpoint\":");
		rc |= buf_json_str(out, x->endpoint, strlen(x->endpoint));
		rc |= buf_printf(out, ",\"attempts\":%d,\"status\":%d,\"ms\":%.3f,\"model\":",
				 x->attempts, x->status, x->ms);
		rc |= x->model[0] ? buf_json_str(out, x->model, strlen(x->model))
				  : buf_puts(out, "null");
		rc |= buf_printf(out,
				 ",\"prompt_tokens\":%u,\"blocks\":%u,\"decided_on_blocks\":%u,"
				 "\"key_pos\":%u,\"view\":\"%s\",\"fallback\":",
				 x->prompt_tokens, x->blocks, x->decided_blocks, x->key_pos,
				 view_names[x->view]);
		rc |= x->fallback == FB_NONE ? buf_puts(out, "null")
					     : buf_printf(out, "\"%s\"", fb_names[x->fallback]);
		rc |= buf_printf(out, ",\"reason\":\"%s\"", policy_reason_name(x->reason));
		rc |= json_num(out, "predicted_cached_tokens", (double)x->predicted);
		rc |= json_num(out, "best_cached_tokens", (double)x->best);
		rc |= json_num(out, "reported_cached_tokens", (double)x->reported);
		rc |= buf_printf(out, ",\"decision_us\":%.1f,\"candidates\":[", x->decision_us);
		for (uint32_t k = 0; k < x->ncand; k++) {
			const struct rec_cand *c = &x->cand[k];

			rc |= buf_printf(out, "%s{\"endpoint\":", k ? "," : "");
			rc |= buf_json_str(out, c->ep, strlen(c->ep));
			rc |= buf_printf(
			    out, ",\"depth\":%u,\"keys\":%u,\"load\":%.6g,\"prefill_blocks\":%u",
			    c->depth, c->keys, c->load, c->prefill);
			rc |= json_num(out, "waiting", c->waiting);
			rc |= json_num(out, "free_blocks", c->free_blocks);
			rc |= buf_printf(out, ",\"score\":%.6g,\"chosen\":%s}", c->score,
					 c->chosen ? "true" : "false");
		}
		rc |= buf_puts(out, "]}");
	}
	rc |= buf_puts(out, "]}\n");
	return rc ? -ENOMEM : 0;
}

int router_workers_json(const struct router *r, struct buf *out)
{
	uint64_t t = clock_ms();
	int rc = buf_printf(out, "{\"router\":\"%s\",\"workers\":[", r->pol->ops->name), first = 1;

	for (uint32_t i = 0; i < workers_count(r->ws); i++) {
		struct worker *w = workers_at(r->ws, i);
		double rem, wait, fb, cap;

		if (!w)
			continue;
		workers_load(r->ws, w, t, 0, &rem, &wait, &fb, &cap);
		rc |= buf_printf(out, "%s{\"name\":", first ? "" : ",");
		rc |= buf_json_str(out, w->name, strlen(w->name));
		rc |= buf_printf(
		    out,
		    ",\"slot\":%u,\"events_id\":%d,\"inflight\":%u,\"prefill_blocks\":%u,"
		    "\"active_blocks\":%u,\"remote_requests\":%.6g",
		    w->slot, w->events_id, w->inflight, w->prefill, workers_active(r->ws, w), rem);
		rc |= json_num(out, "waiting", wait);
		rc |= json_num(out, "free_blocks", fb);
		rc |= json_num(out, "capacity_blocks", cap > 0 ? cap : -1);
		rc |= json_num(out, "kv_usage", w->have_metrics ? w->m.kv_usage : -1);
		rc |= json_num(out, "running", w->have_metrics ? w->m.running : -1);
		rc |=
		    buf_printf(out,
			       ",\"metrics_age_ms\":%lld,\"scrapes\":%llu,\"scrape_failures\":%u,"
			       "\"scrape_error\":%d,\"down\":%s,\"restarts\":%llu,\"routed\":%llu,",
			       w->have_metrics ? (long long)(t - w->metrics_ms) : -1LL,
			       (unsigned long long)w->scrapes, w->scrape_fails, w->scrape_err,
			       workers_down(w) ? "true" : "false", (unsigned long long)w->restarts,
			       (unsigned long long)w->routed);
		rc |= buf_printf(out,
				 "\"down_by\":%s,\"connect_failures\":%u,\"backoff_ms\":%u,"
				 "\"retry_in_ms\":%lld,\"downs\":%llu",
				 workers_scrape_down(w) && w->connect_down ? "\"scrapes+connects\""
				 : workers_scrape_down(w)		   ? "\"scrapes\""
				 : w->connect_down			   ? "\"connects\""
									   : "null",
				 w->connect_fails, w->backoff_ms,
				 w->backoff_ms && w->retry_ms > t ? (long long)(w->retry_ms - t)
								  : 0LL,
				 (unsigned long long)w->downs);
		/* what it serves: null until its /v1/models answers */
		rc |= buf_puts(out, ",\"models\":");
		if (!w->models_known) {
			rc |= buf_puts(out, "null");
		} else {
			const char *p = w->models, *end = w->models + w->models_len;

			rc |= buf_puts(out, "[");
			for (int k = 0; p && p < end; k++) {
				const char *par = p + strlen(p) + 1;

				rc |= buf_printf(out, "%s{\"id\":", k ? "," : "");
				rc |= buf_json_str(out, p, strlen(p));
				rc |= buf_puts(out, ",\"parent\":");
				rc |= par[0] ? buf_json_str(out, par, strlen(par))
					     : buf_puts(out, "null");
				rc |= buf_puts(out, "}");
				p = par + strlen(par) + 1;
			}
			rc |= buf_puts(out, "]");
		}
		rc |= buf_printf(out, ",\"models_errors\":%llu}",
				 (unsigned long long)w->models_errors);
		first = 0;
	}
	rc |= buf_puts(out, "]}\n");
	return rc ? -ENOMEM : 0;
}
