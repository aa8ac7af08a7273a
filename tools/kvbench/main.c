// SPDX-License-Identifier: Apache-2.0
/* kvbench: the seeds' workload (docs/benchmarks.md), or a Mooncake-format trace replayed open-loop
 * at its own timestamps (--trace, trace.h), against one URL or a list of URLs. Everything runs on
 * one epoll loop: the seeds' workload as closed-loop clients, a trace as one request per row sent
 * when its time comes (a timerfd wakes the loop), whether or not earlier ones have finished. A new
 * connection per request (unless --keep-alive), streaming /v1/completions to measure TTFT;
 * hit = usage.prompt_tokens_details.cached_tokens above the opening every prompt of the run shares
 * (0 for completions; a chat template's common header: opening_tokens). Table on stdout, progress
 * on stderr,
 * --json for machines. Its flags and defaults: opts.h (`kvbench --help`). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "core/buf.h"
#include "kv/blockhash.h"
#include "kv/events.h"
#include "core/http.h"
#include "kv/index.h"
#include "core/log.h"
#include "core/metrics.h"
#include "prompt/models.h"
#include "prompt/openai.h"
#include "route/policy.h"
#include "route/router.h"
#include "route/scrape.h"
#include "prompt/tokenizer.h"
#include "opts.h"
#include "convo.h"
#include "trace.h"
#include "workload.h"

#define MAX_WORKERS 256
/* tokens per KV block of the workers (vLLM's default): the unit of the trace's ideal ratio */
#ifndef KVBENCH_KV_BLOCK
#define KVBENCH_KV_BLOCK 16
#endif

enum cstate { S_CONNECT, S_SEND, S_HEAD, S_BODY };

struct cconn {
	int fd;
	int target;
	enum cstate st;
	struct buf out, in, body;
	size_t head_len, sse_off;
	struct http_msg m;
	struct http_chunked ch;
	bool server_keep_alive;
	/* the request */
	long k;		/* request index; -1 - prefix for a warm-up */
	double t_sched; /* trace: when it was due (now_s() clock) */
	double t0, t_first;
	long cached, prompt;
	bool done_stream, got_usage;
	char worker[64];
	struct router_ticket ticket; /* SPREAD_ROUTER */
	uint32_t run;		     /* replay: the run it was sent in */
};

struct result {
	long k;
	uint32_t prefix; /* the seeds' workload: its prefix type */
	bool ok;
	double ttft_ms, total_ms;
	double lag_ms;	 /* trace: how late it was sent (wall clock) */
	double start_ms; /* when it was sent, model ms after the run's start */
	long cached, prompt;
	long expect; /* trace: the prompt length sent (-1: not known) */
	int worker;  /* index into the worker names, -1 unknown */
};

struct run_stats {
	size_t requests, errors, hits; /* hits: cached_tokens > the opening */
	size_t any_cached;	       /* cached_tokens > 0 (any_rate: of the answered) */
	double any_rate;
	double cached_ratio, hit_rate, ttft_p50, ttft_p99, hit_p50, miss_p50, req_per_s,
	    workers_per_prefix, metrics_ratio, wall_s;
	double e2e_p50, e2e_p99;	     /* end-to-end latency, model ms */
	double lag_p50, lag_p99, lag_max;    /* trace: send lag, wall ms */
	double prompt_tokens, cached_tokens; /* usage figures of the answered requests, summed */
	double prompt_mismatches;	     /* trace: usage.prompt_tokens != the length sent */
	double per_worker[MAX_WORKERS];	     /* requests answered by each named worker */
	double worker_max_mean;		     /* max / mean of per_worker */
	bool has_metrics;
};

struct bench {
	struct kvbench_opts o;
	struct workload wl;
	bool replay;		/* --trace or --workload sessions|agent: rows replayed */
	struct trace tr;	/* the replayed rows */
	struct convo_dep *deps; /* --workload: each row's turn before (NULL: --trace) */
	size_t *succ;		/* --workload: each row's next turn (SIZE_MAX: none) */
	size_t *heap;		/* replay: the rows whose send time is known, soonest first */
	size_t nheap;
	double *due;	  /* replay: each row's send time, s after the run's start (wall) */
	uint8_t *queued;  /* replay: the row went into the heap this run */
	double last_due;  /* replay: the latest send time pushed this run */
	uint32_t run;	  /* the run being measured (answers of an earlier one are late) */
	double t_start;	  /* replay: the run's start (now_s() clock) */
	char source[512]; /* replay: the trace file, or the workload and its knobs */
	/* --workload with --api chat: each row's new user message and its answer as message
	 * objects, the system message, each row's rendered prompt length */
	char **umsg, **amsg;
	char *sysmsg;
	size_t *chat_len;
	size_t *chain;		  /* scratch: a row's turns before it, oldest first */
	double *offset;		  /* trace: each row's send time, s after the run's start (wall) */
	uint32_t *scratch;	  /* trace: room for the longest prompt's token ids */
	struct trace_reuse ideal; /* trace: its own reuse with an infinite cache */
	struct trace_reuse ideal_all; /* --trace-shard: the whole trace's, before the shard */
	double t0_ms;	  /* trace: the schedule's origin (the whole trace's first row) */
	size_t clamped;	  /* trace: rows whose lengths did not fit their hash ids */
	int tfd;	  /* trace: timerfd armed at the next row's send time */
	struct buf tbody; /* trace: the body being sent */
	char **bodies;	  /* request bodies, measured */
	char **wbodies;	  /* warm-up bodies */
	int ep;
	uint64_t rng;
	uint64_t rr;
	struct models *models; /* the tokenizer and chat template (the router's, the opening) */
	long opening; /* tokens in the full KV blocks every prompt of the run begins with */
	struct router *router;
	struct metrics *metrics; /* --route-stats */
	struct service svc;	 /* the URLs as one Service of endpoints w0, w1, ... */
	struct endpoint eps[KVBENCH_MAX_TARGETS];
	struct services svcs;
	char *wnames[MAX_WORKERS];
	int nw;
	struct result *res;
	size_t next, ndone, nres;
	double run_t0;	     /* the measured run's start (now_s() clock) */
	struct cconn **idle; /* per slot: a kept-alive connection */
	struct index *idx;   /* with --events: what the workers hold, from their KV events */
	struct events *ev;
};

static char g_events_tag; /* epoll data of the events fd */
static char g_timer_tag;  /* epoll data of the trace's timerfd */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* --- blocking helpers for /metrics and /reset_prefix_cache ----------------------------------- */

static int http_simple(const struct kvbench_target *t, const char *method, const char *path,
		       struct buf *resp)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
	struct timeval tv = {.tv_sec = 5};
	struct buf req = {0};
	char tmp[8192];
	ssize_t n;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)&t->addr, sizeof(t->addr)))
		goto cleanup;
	buf_printf(&req,
		   "%s %s%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		   method, t->base, path, t->hostport);
	if (send(fd, req.data, req.len, MSG_NOSIGNAL) != (ssize_t)req.len)
		goto cleanup;
	while ((n = recv(fd, tmp, sizeof(tmp), 0)) > 0)
		buf_append(resp, tmp, (size_t)n);
	rc = resp->len > 12 ? atoi(resp->data + 9) : -1;
cleanup:
	buf_free(&req);
	close(fd);
	return rc;
}

/* Sums a counter over every labelled series in a Prometheus text body. */
static double prom_sum(const char *text, const char *name)
{
	double sum = 0;
	size_t nl = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, nl) != 0 || (p[nl] != '{' && p[nl] != ' '))
			continue;
		const char *sp = strchr(p + nl, ' ');
		const char *eol = strchr(p, '\n');

		if (sp && (!eol || sp < eol))
			sum += strtod(sp + 1, NULL);
	}
	return sum;
}

/* Hands the client-side router (if any) what metrics target i answered (the response r, head
 * and body), when i is one of the --url workers: its policies then know the workers' KV capacity
 * as the daemon's scrapes tell it (without it, kv learns capacity only from the blocks it sees
 * stored, and at the start of a run judges every cache smaller than it is). */
static void metrics_to_router(struct bench *b, int i, const struct buf *r)
{
	const struct sockaddr_in *a = &b->o.m[i].addr;
	const char *body = r->data ? strstr(r->data, "\r\n\r\n") : NULL;
	struct scrape_metrics m;

	if (!b->router || !body ||
	    scrape_parse(body + 4, r->len - (size_t)(body + 4 - r->data), &m))
		return;
	for (size_t k = 0; k < b->svc.nendpoints; k++) {
		const struct sockaddr_in *e = &b->svc.endpoints[k].addr;

		if (e->sin_addr.s_addr == a->sin_addr.s_addr && e->sin_port == a->sin_port)
			router_worker_metrics(b->router, &b->svc, k, &m);
	}
}

/* Sums the prefix-cache counters over the metrics targets; before a run (to_router) also hands
 * each worker's answer to the client-side router. */
static int metrics_snapshot(struct bench *b, double *queries, double *hits, bool to_router)
{
	*queries = *hits = 0;
	for (int i = 0; i < b->o.nm; i++) {
		struct buf r = {0};

		if (http_simple(&b->o.m[i], "GET", "/metrics", &r) != 200) {
			buf_free(&r);
			return -1;
		}
		*queries += prom_sum(r.data, "vllm:prefix_cache_queries_total");
		*hits += prom_sum(r.data, "vllm:prefix_cache_hits_total");
		if (to_router)
			metrics_to_router(b, i, &r);
		buf_free(&r);
	}
	return 0;
}

static volatile bool g_stop;

static void reset_caches(struct bench *b)
{
	for (int i = 0; i < b->o.nm && !g_stop; i++) {
		for (int tries = 0; tries < 100 && !g_stop; tries++) {
			struct buf r = {0};
			int st = http_simple(&b->o.m[i], "POST", "/reset_prefix_cache", &r);

			buf_free(&r);
			if (st == 200)
				break;
			usleep(50000); /* blocks still in use: requests finishing */
		}
	}
}

/* --- one request on one connection --------------------------------------------------------- */

/* The prebuilt body of request k of the seeds' workload (k < 0: warm-up -1 - k). */
static const char *body_of(struct bench *b, long k)
{
	return k >= 0 ? b->bodies[k] : b->wbodies[-1 - k];
}

/* Writes v in decimal at out (room for 10 bytes). Returns the bytes written. */
static size_t put_u32(char *out, uint32_t v)
{
	char tmp[10];
	size_t n = 0, i = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		out[i++] = tmp[--n];
	return i;
}

/* Builds the /v1/completions body of trace row k into out (emptied first): its prompt as a list
 * of token ids (trace.h), max_tokens from its output_length, streamed with usage. Built when the
 * row is sent rather than up front, since a whole trace's bodies can take gigabytes; the ids are
 * written by hand because printf per id would add to the send lag. Returns 0 or -ENOMEM. */
static int convo_chat_body(struct bench *b, size_t k, struct buf *out);

static int trace_body(struct bench *b, size_t k, struct buf *out)
{
	const struct trace_row *r = &b->tr.rows[k];
	uint64_t n = trace_prompt_len(r, b->o.trace_bt, NULL);

	if (b->umsg)
		return convo_chat_body(b, k, out);
	buf_reset(out);
	trace_prompt(&b->tr, r, b->o.trace_bt, b->scratch);
	if (buf_puts(out, "{\"model\":") || buf_json_str(out, b->o.model, strlen(b->o.model)) ||
	    buf_puts(out, ",\"prompt\":[") || buf_reserve(out, n * 11 + 1))
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		if (i)
			out->data[out->len++] = ',';
		out->len += put_u32(out->data + out->len, b->scratch[i]);
	}
	out->data[out->len] = '\0';
	return buf_printf(out,
			  "],\"max_tokens\":%u,\"temperature\":0,\"ignore_eos\":true,"
			  "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
			  trace_max_tokens(r, b->o.trace_bt, b->o.trace_max_output));
}

/* Builds the /v1/chat/completions body of conversation row k into out (emptied first): the
 * system message, every earlier turn's user message and answer, then its own message. */
static int convo_chat_body(struct bench *b, size_t k, struct buf *out)
{
	size_t n = 0;
	int rc = 0;

	buf_reset(out);
	for (size_t p = b->deps[k].prev; p != SIZE_MAX; p = b->deps[p].prev)
		b->chain[n++] = p;
	rc |= buf_puts(out, "{\"model\":");
	rc |= buf_json_str(out, b->o.model, strlen(b->o.model));
	rc |= buf_puts(out, ",\"messages\":[");
	if (b->sysmsg) {
		rc |= buf_puts(out, b->sysmsg);
		rc |= buf_puts(out, ",");
	}
	while (n--) {
		rc |= buf_puts(out, b->umsg[b->chain[n]]);
		rc |= buf_puts(out, ",");
		rc |= buf_puts(out, b->amsg[b->chain[n]]);
		rc |= buf_puts(out, ",");
	}
	rc |= buf_puts(out, b->umsg[k]);
	rc |= buf_printf(out,
			 "],\"max_tokens\":%u,\"temperature\":0,\"ignore_eos\":true,"
			 "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
			 trace_max_tokens(&b->tr.rows[k], b->o.trace_bt, b->o.trace_max_output));
	return rc ? -ENOMEM : 0;
}

/* One message object {"role": role, "content": prefix + n words chosen by seed}. */
static char *convo_message(const struct wl_words *w, const char *role, const struct buf *prefix,
			   uint64_t seed, uint64_t n)
{
	struct buf text = {0}, m = {0};
	int rc = 0;

	if (prefix)
		rc |= buf_append(&text, prefix->data, prefix->len);
	rc |= wl_words_add(w, seed, (uint32_t)n, &text);
	rc |= buf_printf(&m, "{\"role\":\"%s\",\"content\":", role);
	rc |= buf_json_str(&m, text.data ? text.data : "", text.len);
	rc |= buf_puts(&m, "}");
	buf_free(&text);
	if (rc) {
		buf_free(&m);
		return NULL;
	}
	return m.data;
}

/* Adds hash h to the open-addressing set (mask + 1 slots, never more than half full: the caller
 * grows it first). Returns whether it was there. */
static bool hset_add(uint64_t *set, uint64_t mask, uint64_t h)
{
	uint64_t j;

	for (j = h & mask; set[j] && set[j] != h; j = (j + 1) & mask)
		;
	if (set[j])
		return true;
	set[j] = h;
	return false;
}

/* --workload with --api chat: the messages of every row (words of one token each, chosen by the
 * workload seed), then the ideal reuse of the prompts the model's chat template renders from
 * them: an infinite cache on one worker, whole KVBENCH_KV_BLOCK-token blocks found by their
 * chained hashes as vLLM finds them, at most prompt - 1 tokens. The sessions' user messages and
 * the agents' tool outputs go as user messages (every template renders those). Returns 0, 1. */
static int convo_chat_prepare(struct bench *b, const struct tokenizer *tok)
{
	const struct convo_opts *cv = &b->o.convo;
	const struct model_tok *mt = models_find(b->models, NULL);
	struct wl_words *w = NULL;
	struct buf body = {0}, task = {0};
	uint64_t *set = NULL, mask = 0, seed = cv->seed * 0x9e3779b97f4a7c15ull;
	size_t nset = 0;
	int rc = 1;

	if (!mt || !mt->chat_ok) {
		fprintf(stderr, "kvbench: %s: no chat template rendered exactly (%s)\n",
			b->o.tokenizer, mt && mt->chat_why ? mt->chat_why : "none");
		return 1;
	}
	if (wl_words_new(tok, &w)) {
		fprintf(stderr, "kvbench: %s: too few one-token words for chat messages\n",
			b->o.tokenizer);
		return 1;
	}
	b->umsg = calloc(b->tr.n, sizeof(*b->umsg));
	b->amsg = calloc(b->tr.n, sizeof(*b->amsg));
	b->chat_len = calloc(b->tr.n, sizeof(*b->chat_len));
	b->chain = calloc(b->tr.n, sizeof(*b->chain));
	if (!b->umsg || !b->amsg || !b->chat_len || !b->chain)
		goto out;
	if (cv->system_tokens &&
	    !(b->sysmsg = convo_message(w, "system", NULL, seed ^ 1, cv->system_tokens)))
		goto out;
	for (size_t k = 0; k < b->tr.n; k++) {
		const struct convo_dep *d = &b->deps[k];
		uint64_t rs = seed ^ ((uint64_t)d->conv << 32) ^ ((uint64_t)d->turn << 8);

		buf_reset(&task);
		if (b->o.workload == CONVO_AGENT && d->turn == 0 && cv->task_tokens &&
		    wl_words_add(w, seed ^ 2 ^ ((uint64_t)d->group << 40), cv->task_tokens, &task))
			goto out;
		if (!(b->umsg[k] =
			  convo_message(w, "user", task.len ? &task : NULL, rs ^ 3, d->fresh)) ||
		    !(b->amsg[k] = convo_message(
			  w, "assistant", NULL, rs ^ 4,
			  trace_max_tokens(&b->tr.rows[k], b->o.trace_bt, b->o.trace_max_output))))
			goto out;
	}
	/* the ideal, on the rendered prompts */
	memset(&b->ideal, 0, sizeof(b->ideal));
	for (size_t k = 0; k < b->tr.n; k++) {
		struct openai_req r = {0};
		const char *why = NULL;
		uint64_t h = 0;
		size_t nb, hit = 0;
		bool miss = false;
		int st;

		if (convo_chat_body(b, k, &body))
			goto out;
		st = openai_parse_with(mt->tok, mt->chat, NULL, false, OPENAI_CHAT, body.data,
				       body.len, &r, &why);
		if (st != OPENAI_OK) {
			fprintf(stderr, "kvbench: --workload --api chat: row %zu: %s\n", k,
				why ? why : "not rendered");
			openai_req_free(&r);
			goto out;
		}
		b->chat_len[k] = r.prompt.n;
		nb = r.prompt.n / KVBENCH_KV_BLOCK;
		if ((nset + nb) * 2 > mask) {
			/* grow the set of block hashes seen, and rehash */
			uint64_t nm = mask ? mask + 1 : 1024, *ns;

			while ((nset + nb) * 2 > nm - 1)
				nm <<= 1;
			if (!(ns = calloc(nm, sizeof(*ns)))) {
				openai_req_free(&r);
				goto out;
			}
			for (uint64_t i = 0; set && i <= mask; i++)
				if (set[i])
					hset_add(ns, nm - 1, set[i]);
			free(set);
			set = ns;
			mask = nm - 1;
		}
		for (size_t i = 0; i < nb; i++) {
			bool seen;

			h = XXH3_64bits_withSeed(r.prompt.v + i * KVBENCH_KV_BLOCK,
						 KVBENCH_KV_BLOCK * sizeof(uint32_t), h) |
			    1;
			seen = hset_add(set, mask, h);
			nset += !seen;
			if (seen && !miss && (i + 1) * KVBENCH_KV_BLOCK <= r.prompt.n - 1)
				hit++;
			else
				miss = true;
		}
		b->ideal.prompt_tokens += r.prompt.n;
		b->ideal.cached_tokens += hit * KVBENCH_KV_BLOCK;
		b->ideal.hit_rows += hit > 0;
		openai_req_free(&r);
	}
	b->ideal.ratio = b->ideal.prompt_tokens
			     ? (double)b->ideal.cached_tokens / (double)b->ideal.prompt_tokens
			     : 0;
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "kvbench: --workload --api chat: cannot build the messages\n");
	buf_free(&body);
	buf_free(&task);
	free(set);
	wl_words_free(w);
	return rc;
}

/* The index of the URL a new connection for body (blen bytes) goes to, by --spread; a policy
 * --spread fills c->ticket. Never fails: a router without an answer gives URL 0. */
static int pick_target(struct bench *b, const char *body, size_t blen, struct cconn *c)
{
	if (b->o.nt == 1)
		return 0;
	switch (b->o.spread) {
	case SPREAD_RR:
		return (int)(b->rr++ % (uint64_t)b->o.nt);
	case SPREAD_ROUTER: {
		const char *path =
		    b->o.api == API_CHAT ? "/v1/chat/completions" : "/v1/completions";
		struct router_request rq = {.method = "POST",
					    .method_len = 4,
					    .target = path,
					    .target_len = strlen(path),
					    .body = body,
					    .body_len = blen};
		int w;

		if (b->ev) /* the newest events first, as the daemon's loop would have them */
			while (events_poll(b->ev, 0) == 1)
				;
		w = router_pick(b->router, &b->svc, &rq, &c->ticket);
		return w >= 0 ? w : 0;
	}
	default:
		return (int)(rng_next(&b->rng) % (uint64_t)b->o.nt);
	}
}

static void cconn_free(struct bench *b, struct cconn *c)
{
	if (!c)
		return;
	if (c->fd >= 0) {
		epoll_ctl(b->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	buf_free(&c->out);
	buf_free(&c->in);
	buf_free(&c->body);
	free(c);
}

static int worker_index(struct bench *b, const char *name)
{
	if (!name[0])
		return -1;
	for (int i = 0; i < b->nw; i++)
		if (strcmp(b->wnames[i], name) == 0)
			return i;
	if (b->nw == MAX_WORKERS)
		return -1;
	b->wnames[b->nw] = strdup(name);
	return b->wnames[b->nw] ? b->nw++ : -1;
}

static void request_end(struct bench *b, struct cconn *c, bool ok);

/* Starts request k (>= 0: measured, < 0: warm-up -1 - k) on c: a new connection to the URL
 * pick_target chooses (or c's kept-alive one), the request queued for the first EPOLLOUT. A trace
 * row's body is built here; when that fails for memory the request ends at once as failed. */
static void request_start(struct bench *b, struct cconn *c, long k)
{
	const char *body;
	size_t blen;
	struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
	const struct kvbench_target *t;

	if (k >= 0 && b->replay) {
		if (trace_body(b, (size_t)k, &b->tbody)) {
			c->k = k;
			c->t0 = c->t_first = now_s();
			c->cached = c->prompt = -1;
			request_end(b, c, false);
			return;
		}
		body = b->tbody.data;
		blen = b->tbody.len;
	} else {
		body = body_of(b, k);
		blen = strlen(body);
	}
	c->k = k;
	c->t0 = now_s();
	c->t_first = 0;
	c->cached = c->prompt = -1;
	c->done_stream = c->got_usage = false;
	c->worker[0] = '\0';
	c->in.len = c->in.off = 0;
	c->body.len = c->body.off = 0;
	c->out.len = c->out.off = 0;
	c->sse_off = 0;
	c->head_len = 0;
	memset(&c->ch, 0, sizeof(c->ch));
	if (c->fd < 0) {
		c->target = pick_target(b, body, blen, c);
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int one = 1;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->fd, (const struct sockaddr *)&b->o.t[c->target].addr,
			    sizeof(struct sockaddr_in)) &&
		    errno != EINPROGRESS) {
			c->st = S_SEND; /* fails on the first write */
		}
		epoll_ctl(b->ep, EPOLL_CTL_ADD, c->fd, &e);
	} else {
		epoll_ctl(b->ep, EPOLL_CTL_MOD, c->fd, &e);
	}
	t = &b->o.t[c->target];
	c->st = S_SEND;
	buf_printf(&c->out,
		   "POST %s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
		   "Accept: text/event-stream\r\nContent-Length: %zu\r\n%s\r\n",
		   t->base, b->o.api == API_CHAT ? "/v1/chat/completions" : "/v1/completions",
		   t->hostport, blen, b->o.keep_alive ? "" : "Connection: close\r\n");
	buf_append(&c->out, body, blen);
}

/* Reads the SSE events in c->body from sse_off. */
static void sse_scan(struct cconn *c)
{
	for (;;) {
		char *start = c->body.data + c->sse_off;
		char *nl = memchr(start, '\n', c->body.len - c->sse_off);

		if (!nl)
			return;
		*nl = '\0';
		c->sse_off = (size_t)(nl - c->body.data) + 1;
		if (strncmp(start, "data:", 5) != 0)
			continue;
		start += 5;
		while (*start == ' ')
			start++;
		if (strcmp(start, "[DONE]") == 0) {
			c->done_stream = true;
			continue;
		}
		cJSON *j = cJSON_Parse(start);
		if (!j)
			continue;
		const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
		const cJSON *c0 = cJSON_IsArray(ch) ? ch->child : NULL;
		if (c0 && !c->t_first) {
			const cJSON *txt = cJSON_GetObjectItemCaseSensitive(c0, "text");
			const cJSON *delta = cJSON_GetObjectItemCaseSensitive(c0, "delta");

			if (!txt && delta)
				txt = cJSON_GetObjectItemCaseSensitive(delta, "content");
			if (cJSON_IsString(txt) && txt->valuestring[0])
				c->t_first = now_s();
		}
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
		if (cJSON_IsObject(u)) {
			const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
			const cJSON *d =
			    cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
			const cJSON *ct =
			    d ? cJSON_GetObjectItemCaseSensitive(d, "cached_tokens") : NULL;

			if (cJSON_IsNumber(pt))
				c->prompt = (long)pt->valuedouble;
			c->cached = cJSON_IsNumber(ct) ? (long)ct->valuedouble : 0;
			c->got_usage = true;
		}
		cJSON_Delete(j);
	}
}

static void request_end(struct bench *b, struct cconn *c, bool ok);

/* Processes received bytes; returns true when the response is complete. */
static bool response_feed(struct bench *b, struct cconn *c, bool eof)
{
	if (c->st == S_HEAD) {
		int n =
		    http_parse_response(buf_rptr(&c->in), buf_unread(&c->in), 65536, "POST", &c->m);

		if (n == 0)
			return false;
		if (n < 0 || c->m.status != 200) {
			if (n > 0 && c->m.status >= 100 && c->m.status < 200) {
				buf_consume(&c->in, (size_t)n);
				return response_feed(b, c, eof);
			}
			request_end(b, c, false);
			return true;
		}
		const struct http_header *h = http_find_header(&c->m, "x-kvsim-worker");
		if (h) {
			size_t l = h->value_len < sizeof(c->worker) - 1 ? h->value_len
									: sizeof(c->worker) - 1;
			memcpy(c->worker, h->value, l);
			c->worker[l] = '\0';
		} else if (b->replay) {
			/* not kvsim: a trace's per-worker counts go by the URL it was sent to */
			snprintf(c->worker, sizeof(c->worker), "%s", b->o.t[c->target].hostport);
		}
		c->server_keep_alive = c->m.keep_alive;
		c->head_len = (size_t)n;
		buf_consume(&c->in, (size_t)n);
		c->st = S_BODY;
	}
	bool complete = false;
	if (c->m.body == HTTP_BODY_CHUNKED) {
		bool done = false;
		ssize_t k = http_chunked_feed(&c->ch, buf_rptr(&c->in), buf_unread(&c->in),
					      &c->body, &done);

		if (k < 0) {
			request_end(b, c, false);
			return true;
		}
		buf_consume(&c->in, (size_t)k);
		complete = done;
	} else if (c->m.body == HTTP_BODY_LENGTH) {
		size_t want =
		    c->m.content_length -
		    (c->body.len < c->m.content_length ? c->body.len : c->m.content_length);
		size_t take = buf_unread(&c->in) < want ? buf_unread(&c->in) : want;

		buf_append(&c->body, buf_rptr(&c->in), take);
		buf_consume(&c->in, take);
		complete = c->body.len >= c->m.content_length;
	} else {
		buf_append(&c->body, buf_rptr(&c->in), buf_unread(&c->in));
		buf_consume(&c->in, buf_unread(&c->in));
		complete = eof;
	}
	sse_scan(c);
	if (c->t_first > 0 && c->ticket.flight)
		router_first_byte(b->router, &c->ticket);
	if (complete || (eof && !complete)) {
		request_end(b, c, complete && c->got_usage && c->t_first > 0);
		return true;
	}
	return false;
}

static void slot_next(struct bench *b, struct cconn *reuse);

static void replay_answered(struct bench *b, size_t k, double t);

static void request_end(struct bench *b, struct cconn *c, bool ok)
{
	double t = now_s();

	if (c->ticket.flight) {
		struct router_outcome ro = {.status = ok ? 200 : 0,
					    .cached_tokens = c->cached,
					    .prompt_tokens = c->prompt,
					    .attempts = 1,
					    .ms = (t - c->t0) * 1000};

		router_done(b->router, &c->ticket, &ro);
		router_settle(b->router); /* a request never sent: its rest counted at once */
	}
	/* (a request left over from a run that timed out may end in the next: not counted past the
	 * results' room) */
	if (c->k >= 0 && b->nres < (b->replay ? b->tr.n : b->wl.o.requests)) {
		struct result *r = &b->res[b->nres++];

		r->k = c->k;
		r->prefix = b->replay ? 0 : b->wl.reqs[c->k].prefix;
		r->lag_ms = b->replay ? (c->t0 - c->t_sched) * 1000 : 0;
		r->expect = b->chat_len ? (long)b->chat_len[c->k]
			    : b->replay
				? (long)trace_prompt_len(&b->tr.rows[c->k], b->o.trace_bt, NULL)
				: -1;
		r->ok = ok;
		r->ttft_ms = c->t_first > 0 ? (c->t_first - c->t0) * 1000 : 0;
		r->total_ms = (t - c->t0) * 1000;
		r->start_ms = (c->t0 - b->run_t0) * 1000;
		r->cached = c->cached;
		r->prompt = c->prompt;
		r->worker = worker_index(b, c->worker);
	}
	if (c->k >= 0 && b->replay && c->run == b->run)
		replay_answered(b, (size_t)c->k, t);
	b->ndone++;
	bool keep = ok && b->o.keep_alive && c->server_keep_alive && buf_unread(&c->in) == 0;
	if (!keep && c->fd >= 0) {
		epoll_ctl(b->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
	slot_next(b, c);
}

/* Closed loop: starts the next request on this slot (reusing c), or frees c when none is left. A
 * trace's requests are started by its schedule (drive_trace), so c is freed. */
static void slot_next(struct bench *b, struct cconn *c)
{
	if (!b->replay && b->next < b->wl.o.requests && c->k >= 0) {
		request_start(b, c, (long)b->next++);
		return;
	}
	cconn_free(b, c);
}

static void cconn_event(struct bench *b, struct cconn *c, uint32_t ev)
{
	if (c->st == S_SEND) {
		if (ev & (EPOLLERR | EPOLLHUP)) {
			request_end(b, c, false);
			return;
		}
		while (buf_unread(&c->out)) {
			ssize_t n =
			    send(c->fd, buf_rptr(&c->out), buf_unread(&c->out), MSG_NOSIGNAL);

			if (n < 0) {
				if (errno == EAGAIN || errno == EINPROGRESS || errno == ENOTCONN)
					return;
				request_end(b, c, false);
				return;
			}
			buf_consume(&c->out, (size_t)n);
		}
		struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
		epoll_ctl(b->ep, EPOLL_CTL_MOD, c->fd, &e);
		c->st = S_HEAD;
		if (b->router) { /* sent: the router finishes the prompt (at once: a client) */
			router_sent(b->router, &c->ticket);
			while (router_work(b->router))
				;
		}
		return;
	}
	bool eof = false;
	for (;;) {
		if (buf_reserve(&c->in, 65536)) {
			request_end(b, c, false);
			return;
		}
		ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1, 0);
		if (n > 0) {
			c->in.len += (size_t)n;
			c->in.data[c->in.len] = '\0';
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			eof = true;
		break;
	}
	if (!response_feed(b, c, eof) && eof)
		request_end(b, c, false);
}

/* Handles one epoll event: KV events, the trace timer (drained; drive_trace sends what is due),
 * or a connection. */
static void dispatch_ev(struct bench *b, const struct epoll_event *e)
{
	if (e->data.ptr == &g_events_tag) {
		while (events_poll(b->ev, 0) == 1)
			;
		return;
	}
	if (e->data.ptr == &g_timer_tag) {
		uint64_t expirations;

		if (read(b->tfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
			fprintf(stderr, "kvbench: timerfd: %s\n", strerror(errno));
		return;
	}
	cconn_event(b, e->data.ptr, e->events);
}

/* Prints a progress line on stderr (unless --quiet) when another tenth of total is done or 5 s
 * passed since the last one (*last_pct, *last_print). */
static void progress(struct bench *b, size_t total, double t_start, size_t *last_pct,
		     double *last_print)
{
	double t = now_s();
	size_t pct = b->ndone * 10 / (total ? total : 1), hits = 0, errs = 0;

	if (b->o.quiet || (pct == *last_pct && t - *last_print <= 5))
		return;
	for (size_t i = 0; i < b->nres; i++) {
		errs += !b->res[i].ok;
		hits += b->res[i].ok && b->res[i].cached > b->opening;
	}
	fprintf(stderr, "kvbench%s%s: %zu/%zu done, %zu errors, hit %.1f%%, %.1f s\n",
		b->o.label ? " " : "", b->o.label ? b->o.label : "", b->ndone, total, errs,
		b->nres ? 100.0 * hits / b->nres : 0.0, t - t_start);
	*last_pct = pct;
	*last_print = t;
}

/* The replay's schedule: a min-heap of rows by send time (b->due). A trace's rows are all in it
 * from the start; a conversation's next turn goes in when the turn before it is answered. */
static bool heap_less(const struct bench *b, size_t x, size_t y)
{
	return b->due[x] < b->due[y] || (b->due[x] == b->due[y] && x < y);
}

static void heap_push(struct bench *b, size_t row)
{
	size_t i;

	if (b->queued[row])
		return; /* (a leftover of a timed-out run answering late) */
	b->queued[row] = 1;
	if (b->due[row] > b->last_due)
		b->last_due = b->due[row];
	i = b->nheap++;
	b->heap[i] = row;
	while (i && heap_less(b, b->heap[i], b->heap[(i - 1) / 2])) {
		size_t p = (i - 1) / 2, t = b->heap[p];

		b->heap[p] = b->heap[i];
		b->heap[i] = t;
		i = p;
	}
}

static size_t heap_pop(struct bench *b)
{
	size_t top = b->heap[0], i = 0;

	b->heap[0] = b->heap[--b->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i, t;

		if (l < b->nheap && heap_less(b, b->heap[l], b->heap[m]))
			m = l;
		if (r < b->nheap && heap_less(b, b->heap[r], b->heap[m]))
			m = r;
		if (m == i)
			break;
		t = b->heap[m];
		b->heap[m] = b->heap[i];
		b->heap[i] = t;
		i = m;
	}
	return top;
}

/* A conversation's row k was answered (or failed) at t: its next turn is due a think time later
 * (model ms, played --time-scale and --trace-speedup faster like a trace's schedule). */
static void replay_answered(struct bench *b, size_t k, double t)
{
	size_t s;

	if (!b->succ || (s = b->succ[k]) == SIZE_MAX || b->queued[s])
		return;
	b->due[s] =
	    t - b->t_start + b->deps[s].gap_ms / 1000.0 / b->o.time_scale / b->o.trace_speedup;
	heap_push(b, s);
}

/* Replay: sends each row when its time comes (a trace's timestamp; a conversation's next turn a
 * think time after the answer before it), whether or not other rows are still in flight, and
 * waits for every answer. The timerfd wakes the loop at the next row's time, so the send lag is
 * what the machine adds, not a poll interval. Gives up --timeout seconds after the last send time
 * known. */
static void drive_trace(struct bench *b, volatile bool *stop)
{
	size_t total = b->tr.n, last_pct = 0;
	double t_start, last_print;

	/* glibc merges its fast bins (the tokenizer's many small frees) on the first allocation
	 * above them, which took ~15 ms here: done before the clock starts, not on row 0's time. */
	malloc_trim(0);
	t_start = b->t_start = now_s();
	if (b->o.trace_epoch > 0) {
		/* one clock for every client given the same epoch (CLOCK_MONOTONIC is the
		 * machine's, the offset to Unix time read once) */
		struct timespec r;

		clock_gettime(CLOCK_REALTIME, &r);
		t_start = b->t_start =
		    t_start + b->o.trace_epoch - ((double)r.tv_sec + (double)r.tv_nsec / 1e9);
	}
	last_print = t_start;
	b->nheap = 0;
	b->last_due = 0;
	memset(b->queued, 0, total);
	for (size_t k = 0; k < total; k++) {
		b->due[k] = b->offset[k];
		if (!b->deps || b->deps[k].prev == SIZE_MAX)
			heap_push(b, k);
	}

	b->ndone = 0;
	b->next = 0;
	while (b->ndone < total && !*stop) {
		struct epoll_event evs[64];
		double t = now_s();
		int n;

		while (b->nheap && t_start + b->due[b->heap[0]] <= t && !*stop) {
			size_t k = heap_pop(b);
			struct cconn *c = calloc(1, sizeof(*c));

			if (!c) {
				fprintf(stderr, "kvbench: out of memory\n");
				*stop = true;
				break;
			}
			c->fd = -1;
			c->t_sched = t_start + b->due[k];
			b->next++;
			c->run = b->run;
			request_start(b, c, (long)k);
			t = now_s();
		}
		if (b->nheap) {
			double due = t_start + b->due[b->heap[0]];
			struct itimerspec its = {
			    .it_value = {.tv_sec = (time_t)due,
					 .tv_nsec = (long)((due - floor(due)) * 1e9)}};

			timerfd_settime(b->tfd, TFD_TIMER_ABSTIME, &its, NULL);
		}
		n = epoll_wait(b->ep, evs, 64, 200);
		for (int k = 0; k < n; k++)
			dispatch_ev(b, &evs[k]);
		progress(b, total, t_start, &last_pct, &last_print);
		if (now_s() - (t_start + b->last_due) > b->o.timeout_s) {
			fprintf(stderr, "kvbench: run timed out %.0f s after the last send time\n",
				b->o.timeout_s);
			break;
		}
	}
}

/* Runs the measured requests with conc closed-loop slots, or the warm-ups one by one. */
static void drive(struct bench *b, bool warm, uint32_t conc, volatile bool *stop)
{
	size_t total = warm ? b->wl.o.prefix_types : b->wl.o.requests;
	size_t last_pct = 0;
	double t_start = now_s(), last_print = t_start;

	b->ndone = 0;
	if (warm) {
		/* One at a time, in prefix order. */
		for (size_t i = 0; i < total && !*stop; i++) {
			struct cconn *c = calloc(1, sizeof(*c));
			size_t target = b->ndone + 1;

			c->fd = -1;
			request_start(b, c, -1 - (long)i);
			while (b->ndone < target && !*stop) {
				struct epoll_event evs[16];
				int n = epoll_wait(b->ep, evs, 16, 100);

				for (int k = 0; k < n; k++)
					dispatch_ev(b, &evs[k]);
			}
		}
		return;
	}
	b->next = 0;
	for (uint32_t s = 0; s < conc && b->next < total; s++) {
		struct cconn *c = calloc(1, sizeof(*c));

		c->fd = -1;
		request_start(b, c, (long)b->next++);
	}
	while (b->ndone < total && !*stop) {
		struct epoll_event evs[64];
		int n = epoll_wait(b->ep, evs, 64, 200);

		for (int k = 0; k < n; k++)
			dispatch_ev(b, &evs[k]);
		progress(b, total, t_start, &last_pct, &last_print);
		if (now_s() - t_start > b->o.timeout_s) {
			fprintf(stderr, "kvbench: run timed out after %.0f s\n", b->o.timeout_s);
			break;
		}
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v[0..n) (sorted here). */
static double pct(double *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	qsort(v, n, sizeof(double), cmp_d);
	i = (size_t)ceil(p / 100.0 * n);
	return v[i ? i - 1 : 0];
}

/* --request-log: appends one JSON line per measured request of run `run` (times in model ms). */
static int write_request_log(struct bench *b, uint32_t run)
{
	FILE *f = fopen(b->o.request_log, "a");
	double s = b->o.time_scale;
	int rc = 0;

	if (!f)
		return -1;
	for (size_t i = 0; i < b->nres; i++) {
		const struct result *r = &b->res[i];

		if (fprintf(
			f,
			"{\"run\":%u,\"k\":%ld,\"prefix\":%u,\"worker\":\"%s\",\"start_ms\":%.3f,"
			"\"ttft_ms\":%.3f,\"total_ms\":%.3f,\"cached\":%ld,\"prompt\":%ld,"
			"\"ok\":%s",
			run + 1, r->k, r->prefix, r->worker >= 0 ? b->wnames[r->worker] : "",
			r->start_ms * s, r->ttft_ms * s, r->total_ms * s, r->cached, r->prompt,
			r->ok ? "true" : "false") < 0)
			rc = -1;
		/* a conversation's rows: which one, its turn, and the row it waited for */
		if (b->deps && r->k >= 0 &&
		    fprintf(f, ",\"conv\":%u,\"turn\":%u,\"after\":%ld,\"gap_ms\":%.3f",
			    b->deps[r->k].conv, b->deps[r->k].turn,
			    b->deps[r->k].prev == SIZE_MAX ? -1L : (long)b->deps[r->k].prev,
			    b->deps[r->k].gap_ms) < 0)
			rc = -1;
		if (fputs("}\n", f) < 0)
			rc = -1;
	}
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

/* Fills *st from the run's results (b->res) and its wall time in seconds. Times are model time
 * (wall times --time-scale) but for the send lag, which is the load generator's own (wall ms). A
 * trace's rows that never finished (timeout, signal) count as requests and errors. */
static void compute_stats(struct bench *b, struct run_stats *st, double wall)
{
	double *all = calloc(b->nres + 1, sizeof(double)),
	       *hit = calloc(b->nres + 1, sizeof(double)),
	       *miss = calloc(b->nres + 1, sizeof(double)),
	       *e2e = calloc(b->nres + 1, sizeof(double)),
	       *lag = calloc(b->nres + 1, sizeof(double));
	size_t na = 0, nh = 0, nm = 0, nl = 0;
	double cached = 0, prompt = 0, wmax = 0, wsum = 0;
	uint32_t P = b->replay ? 0 : b->wl.o.prefix_types;
	uint8_t *seen = P ? calloc((size_t)P * MAX_WORKERS, 1) : NULL;
	size_t used_prefixes = 0, pairs = 0;
	int nworkers = b->nw > b->o.nt ? b->nw : b->o.nt;

	memset(st, 0, sizeof(*st));
	if (!all || !hit || !miss || !e2e || !lag)
		goto cleanup;
	st->requests = b->nres;
	if (b->replay && b->tr.n > b->nres) {
		st->requests = b->tr.n;
		st->errors = b->tr.n - b->nres;
	}
	for (size_t i = 0; i < b->nres; i++) {
		const struct result *r = &b->res[i];

		if (b->replay)
			lag[nl++] = r->lag_ms;
		if (r->worker >= 0)
			st->per_worker[r->worker]++;
		if (!r->ok) {
			st->errors++;
			continue;
		}
		e2e[na] = r->total_ms;
		all[na++] = r->ttft_ms;
		if (r->expect >= 0 && r->prompt != r->expect)
			st->prompt_mismatches++;
		st->any_cached += r->cached > 0;
		if (r->cached > b->opening) {
			st->hits++;
			hit[nh++] = r->ttft_ms;
		} else {
			miss[nm++] = r->ttft_ms;
		}
		cached += r->cached > 0 ? r->cached : 0;
		prompt += r->prompt > 0 ? r->prompt : 0;
		if (r->worker >= 0 && seen)
			seen[(size_t)r->prefix * MAX_WORKERS + r->worker] = 1;
	}
	for (uint32_t p = 0; seen && p < P; p++) {
		size_t n = 0;

		for (int w = 0; w < MAX_WORKERS; w++)
			n += seen[(size_t)p * MAX_WORKERS + w];
		if (n) {
			used_prefixes++;
			pairs += n;
		}
	}
	st->hit_rate = na ? (double)st->hits / na : 0;
	st->any_rate = na ? (double)st->any_cached / na : 0;
	st->cached_ratio = prompt > 0 ? cached / prompt : 0;
	/* Reported in model time: the workers ran time_scale times faster. */
	st->ttft_p50 = pct(all, na, 50) * b->o.time_scale;
	st->ttft_p99 = pct(all, na, 99) * b->o.time_scale;
	st->hit_p50 = pct(hit, nh, 50) * b->o.time_scale;
	st->miss_p50 = pct(miss, nm, 50) * b->o.time_scale;
	st->wall_s = wall;
	st->req_per_s = wall > 0 ? na / wall / b->o.time_scale : 0;
	st->workers_per_prefix = used_prefixes ? (double)pairs / used_prefixes : 0;
	st->e2e_p50 = pct(e2e, na, 50) * b->o.time_scale;
	st->e2e_p99 = pct(e2e, na, 99) * b->o.time_scale;
	st->lag_p50 = pct(lag, nl, 50);
	st->lag_p99 = pct(lag, nl, 99);
	st->lag_max = pct(lag, nl, 100);
	st->prompt_tokens = prompt;
	st->cached_tokens = cached;
	/* Spread: the busiest worker against the mean over every worker, so one that got nothing
	 * counts (each --url is a worker; behind one URL, the workers that answered). */
	for (int w = 0; w < b->nw; w++) {
		wsum += st->per_worker[w];
		wmax = st->per_worker[w] > wmax ? st->per_worker[w] : wmax;
	}
	st->worker_max_mean = wsum > 0 ? wmax / (wsum / nworkers) : 0;
cleanup:
	free(all);
	free(hit);
	free(miss);
	free(e2e);
	free(lag);
	free(seen);
}

static double median_of(struct run_stats *rs, size_t n, size_t off)
{
	double v[64];

	for (size_t i = 0; i < n && i < 64; i++)
		v[i] = *(double *)((char *)&rs[i] + off);
	return pct(v, n < 64 ? n : 64, 50);
}

static void print_row(FILE *f, const char *name, const struct run_stats *s)
{
	char mr[16];

	if (s->has_metrics)
		snprintf(mr, sizeof(mr), "%.3f", s->metrics_ratio);
	else
		snprintf(mr, sizeof(mr), "-");
	fprintf(f, "%-7s %5zu %4zu %6.1f %7.3f %7s %8.1f %8.1f %7.1f %7.1f %6.2f %6.2f\n", name,
		s->requests, s->errors, 100 * s->hit_rate, s->cached_ratio, mr, s->ttft_p50,
		s->ttft_p99, s->hit_p50, s->miss_p50, s->req_per_s, s->workers_per_prefix);
}

/* A trace run's table row: requests, errors, hit %, cached-token ratio, the trace's ideal ratio,
 * the workers' own ratio, TTFT and end-to-end p50/p99 (model ms), the send lag p50/p99/max (wall
 * ms), the achieved request rate (model time) and the busiest worker against the mean. */
static void print_trace_row(FILE *f, const char *name, const struct run_stats *s, double ideal)
{
	char mr[16];

	if (s->has_metrics)
		snprintf(mr, sizeof(mr), "%.3f", s->metrics_ratio);
	else
		snprintf(mr, sizeof(mr), "-");
	fprintf(f,
		"%-7s %5zu %4zu %6.1f %7.3f %6.3f %7s %8.1f %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f "
		"%6.2f %8.2f\n",
		name, s->requests, s->errors, 100 * s->hit_rate, s->cached_ratio, ideal, mr,
		s->ttft_p50, s->ttft_p99, s->e2e_p50, s->e2e_p99, s->lag_p50, s->lag_p99,
		s->lag_max, s->req_per_s, s->worker_max_mean);
}

/* Adds the figures every run reports to o. */
static void json_stats(cJSON *o, const struct run_stats *s)
{
	cJSON_AddNumberToObject(o, "requests", (double)s->requests);
	cJSON_AddNumberToObject(o, "errors", (double)s->errors);
	cJSON_AddNumberToObject(o, "hit_rate", s->hit_rate);
	cJSON_AddNumberToObject(o, "any_cached_rate", s->any_rate);
	cJSON_AddNumberToObject(o, "cached_token_ratio", s->cached_ratio);
	if (s->has_metrics)
		cJSON_AddNumberToObject(o, "metrics_hit_ratio", s->metrics_ratio);
	else
		cJSON_AddNullToObject(o, "metrics_hit_ratio");
	cJSON_AddNumberToObject(o, "ttft_p50_ms", s->ttft_p50);
	cJSON_AddNumberToObject(o, "ttft_p99_ms", s->ttft_p99);
	cJSON_AddNumberToObject(o, "ttft_hit_p50_ms", s->hit_p50);
	cJSON_AddNumberToObject(o, "ttft_miss_p50_ms", s->miss_p50);
	cJSON_AddNumberToObject(o, "req_per_s", s->req_per_s);
	cJSON_AddNumberToObject(o, "workers_per_prefix", s->workers_per_prefix);
	cJSON_AddNumberToObject(o, "wall_s", s->wall_s);
	cJSON_AddNumberToObject(o, "e2e_p50_ms", s->e2e_p50);
	cJSON_AddNumberToObject(o, "e2e_p99_ms", s->e2e_p99);
	cJSON_AddNumberToObject(o, "usage_prompt_tokens", s->prompt_tokens);
	cJSON_AddNumberToObject(o, "usage_cached_tokens", s->cached_tokens);
	cJSON_AddNumberToObject(o, "worker_max_mean", s->worker_max_mean);
}

/* Adds a trace run's own figures to o: the send lag, prompt length mismatches, and the requests
 * each worker (names[0..nw)) answered. */
static void json_trace_stats(cJSON *o, const struct run_stats *s, char *const *names, int nw)
{
	cJSON *pw = cJSON_AddObjectToObject(o, "requests_per_worker");

	cJSON_AddNumberToObject(o, "send_lag_p50_ms", s->lag_p50);
	cJSON_AddNumberToObject(o, "send_lag_p99_ms", s->lag_p99);
	cJSON_AddNumberToObject(o, "send_lag_max_ms", s->lag_max);
	cJSON_AddNumberToObject(o, "prompt_mismatches", s->prompt_mismatches);
	for (int w = 0; pw && w < nw; w++)
		cJSON_AddNumberToObject(pw, names[w], s->per_worker[w]);
}

/* The tokens of the full KV blocks that every prefix type's prompt begins with, as the workers
 * see it (the model's chat template and BOS included): 0 for the seeds' completions, a block or
 * more for a chat template that opens each conversation with the same header (Llama 3's dated
 * system block). A request counts as a hit when it found more than this cached, so a header every
 * request shares does not make a miss a hit. Returns the count, or -1 (message on stderr). */
static long opening_tokens(const struct bench *b)
{
	const struct model_tok *mt = models_find(b->models, NULL);
	enum openai_endpoint ep = b->o.api == API_CHAT ? OPENAI_CHAT : OPENAI_COMPLETIONS;
	struct tok_ids first = {0};
	size_t common = 0;
	long rc = -1;

	if (!mt || (ep == OPENAI_CHAT && !mt->chat_ok)) {
		fprintf(stderr, "kvbench: %s: no chat template rendered exactly (%s)\n",
			b->o.tokenizer, mt && mt->chat_why ? mt->chat_why : "none");
		return -1;
	}
	for (uint32_t i = 0; i < b->o.wl.prefix_types; i++) {
		struct openai_req r = {0};
		const char *why = NULL;
		int st = openai_parse_with(mt->tok, mt->chat, NULL, false, ep, b->wbodies[i],
					   strlen(b->wbodies[i]), &r, &why);

		if (st != OPENAI_OK) {
			fprintf(stderr, "kvbench: prefix type %u's prompt: %s\n", i,
				st < 0 ? strerror(-st)
				: why  ? why
				       : "not read");
			openai_req_free(&r);
			goto out;
		}
		if (i == 0) {
			first = r.prompt;
			r.prompt = (struct tok_ids){0};
			common = first.n;
		}
		for (size_t j = 0; i && j < common; j++)
			if (j >= r.prompt.n || r.prompt.v[j] != first.v[j])
				common = j;
		openai_req_free(&r);
	}
	/* one prefix type: nothing to compare against, so nothing counts as shared */
	rc = b->o.wl.prefix_types > 1 ? (long)(common / KVBENCH_KV_BLOCK * KVBENCH_KV_BLOCK) : 0;
out:
	tok_ids_free(&first);
	return rc;
}

static char *make_body(const struct kvbench_opts *o, const struct wl_req *r)
{
	struct buf b = {0};

	buf_puts(&b, "{\"model\":");
	buf_json_str(&b, o->model, strlen(o->model));
	if (o->api == API_CHAT) {
		buf_puts(&b, ",\"messages\":[{\"role\":\"user\",\"content\":");
		buf_json_str(&b, r->text, r->text_len);
		buf_puts(&b, "}]");
	} else {
		buf_puts(&b, ",\"prompt\":");
		buf_json_str(&b, r->text, r->text_len);
	}
	buf_printf(&b,
		   ",\"max_tokens\":%u,\"temperature\":0,\"ignore_eos\":true,\"stream\":true,"
		   "\"stream_options\":{\"include_usage\":true}}",
		   o->output_tokens);
	return b.data;
}

/* --trace: loads the rows to replay, refuses a trace with a prompt above --max-prompt-tokens
 * (naming the first such line) and lays out the schedule, the prompt scratch, the results and the
 * trace's ideal reuse. Sends nothing. Returns 0, 2 for a trace refused (message on stderr), or 1
 * for a system failure. */
static int trace_prepare(struct bench *b)
{
	struct kvbench_opts *o = &b->o;
	uint64_t longest = 0;
	char err[512];
	double t0;
	int rc;

	if (o->workload != CONVO_NONE) {
		rc = convo_build(&o->convo, o->trace_bt, &b->tr, &b->deps, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "kvbench: --workload %s: %s\n", convo_name(o->workload),
				err);
			return rc == -ENOMEM ? 1 : 2;
		}
		if (!(b->succ = malloc(b->tr.n * sizeof(*b->succ))))
			return 1;
		for (size_t k = 0; k < b->tr.n; k++)
			b->succ[k] = SIZE_MAX;
		for (size_t k = 0; k < b->tr.n; k++)
			if (b->deps[k].prev != SIZE_MAX)
				b->succ[b->deps[k].prev] = k;
	} else if ((rc = trace_load(o->trace, o->trace_start, o->trace_limit, &b->tr, err,
				    sizeof(err)))) {
		fprintf(stderr, "kvbench: --trace %s\n", err);
		return rc == -ENOMEM ? 1 : 2;
	}
	if (!b->tr.n) {
		fprintf(stderr, "kvbench: --trace %s: no rows to replay (--trace-start %zu)\n",
			o->trace, o->trace_start);
		return 2;
	}
	b->t0_ms = b->tr.rows[0].t_ms;
	if (o->shard_n) {
		size_t kept = 0;

		/* the whole trace's ideal first, then only rows k ≡ K-1 (mod N) stay; their hash
		 * ids stay where they are (rows point into tr.ids) */
		if (trace_ideal(&b->tr, o->trace_bt, KVBENCH_KV_BLOCK, &b->ideal_all, NULL)) {
			fprintf(stderr, "kvbench: replay: out of memory\n");
			return 1;
		}
		for (size_t k = o->shard_k - 1; k < b->tr.n; k += o->shard_n)
			b->tr.rows[kept++] = b->tr.rows[k];
		b->tr.n = kept;
		if (!kept) {
			fprintf(stderr, "kvbench: --trace %s: shard %u/%u holds no rows\n",
				o->trace, o->shard_k, o->shard_n);
			return 2;
		}
	}
	for (size_t k = 0; k < b->tr.n; k++) {
		const struct trace_row *r = &b->tr.rows[k];
		bool clamped;
		uint64_t len = trace_prompt_len(r, o->trace_bt, &clamped);

		if (o->max_prompt_tokens && len > o->max_prompt_tokens) {
			fprintf(stderr,
				"kvbench: %s %s: line %u: a prompt of %" PRIu64 " tokens "
				"(input_length %" PRIu64 " at %u tokens per hash id) is above "
				"--max-prompt-tokens %" PRIu64 "; nothing sent\n",
				o->trace ? "--trace" : "--workload",
				o->trace ? o->trace : convo_name(o->workload), r->line, len,
				r->input_length, o->trace_bt, o->max_prompt_tokens);
			return 2;
		}
		b->clamped += clamped;
		longest = len > longest ? len : longest;
	}
	b->offset = calloc(b->tr.n, sizeof(*b->offset));
	b->due = calloc(b->tr.n, sizeof(*b->due));
	b->heap = calloc(b->tr.n, sizeof(*b->heap));
	b->queued = calloc(b->tr.n, 1);
	b->scratch = calloc(longest, sizeof(*b->scratch));
	b->res = calloc(b->tr.n, sizeof(*b->res));
	if (!b->offset || !b->due || !b->heap || !b->queued || !b->scratch || !b->res ||
	    trace_ideal(&b->tr, o->trace_bt, KVBENCH_KV_BLOCK, &b->ideal, NULL)) {
		fprintf(stderr, "kvbench: replay: out of memory\n");
		return 1;
	}
	t0 = o->trace ? b->t0_ms : b->tr.rows[0].t_ms;
	for (size_t k = 0; k < b->tr.n; k++)
		b->offset[k] =
		    (b->tr.rows[k].t_ms - t0) / 1000.0 / o->time_scale / o->trace_speedup;
	return 0;
}

/* The trace's schedule span in model seconds: its first to its last row, sped up. */
static double trace_span_s(const struct bench *b)
{
	return b->tr.n ? b->offset[b->tr.n - 1] * b->o.time_scale : 0;
}

/* The request rate the schedule asks for, in model time: rows after the first over the span (0
 * when every row has the same time). */
static double trace_offered(const struct bench *b)
{
	double span = trace_span_s(b);

	return span > 0 ? (double)(b->tr.n - 1) / span : 0;
}

/* Raises the open-file limit to its hard limit: an open loop near overload holds one connection
 * per request in flight, far more than the default 1024. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void on_sig(int s)
{
	(void)s;
	g_stop = true;
}

int main(int argc, char **argv)
{
	struct bench b = {0};
	struct kvbench_opts *o = &b.o;
	struct tokenizer *tok = NULL;
	struct run_stats rs[64], med;
	char err[256];
	int rc = 1;
	cJSON *root = NULL, *runs = NULL;

	b.tfd = -1;
	kvbench_opts_default(o);
	switch (opt_parse(&kvbench_options, argc, argv, o)) {
	case OPT_RUN:
		break;
	case OPT_EXIT:
		return 0;
	case OPT_ERROR:
		return 2;
	}
	if (kvbench_opts_finish(o))
		return 2;
	log_set_level(LOG_WARN); /* the events module's per-worker notices are not news here */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	b.replay = o->trace || o->workload != CONVO_NONE;
	if (b.replay) {
		o->warmup = false;
		o->wl.requests = 0;
		o->wl.prefix_types = 0;
		if ((rc = trace_prepare(&b)))
			goto cleanup;
		rc = 1;
		raise_nofile();
	}
	tok = tokenizer_load(o->tokenizer, err, sizeof(err));
	if (!tok) {
		fprintf(stderr, "kvbench: tokenizer %s: %s\n", o->tokenizer, err);
		goto cleanup;
	}
	if (b.replay && o->api != API_CHAT &&
	    tokenizer_vocab_size(tok) < TRACE_TOKEN_FIRST + TRACE_TOKEN_COUNT) {
		fprintf(stderr,
			"kvbench: replayed prompts use token ids up to %u, beyond the %zu of %s\n",
			TRACE_TOKEN_FIRST + TRACE_TOKEN_COUNT - 1, tokenizer_vocab_size(tok),
			o->tokenizer);
		rc = 2;
		goto cleanup;
	}
	if (!b.replay) {
		if (wl_build(&b.wl, &o->wl, tok, err, sizeof(err))) {
			fprintf(stderr, "kvbench: workload: %s\n", err);
			goto cleanup;
		}
		b.bodies = calloc(o->wl.requests, sizeof(char *));
		b.wbodies = calloc(o->wl.prefix_types, sizeof(char *));
		b.res = calloc(o->wl.requests, sizeof(*b.res));
		if (!b.bodies || !b.wbodies || !b.res)
			goto cleanup;
		for (size_t k = 0; k < o->wl.requests; k++)
			if (!(b.bodies[k] = make_body(o, &b.wl.reqs[k])))
				goto cleanup;
		for (uint32_t i = 0; i < o->wl.prefix_types; i++)
			if (!(b.wbodies[i] = make_body(o, &b.wl.warm[i])))
				goto cleanup;
	}
	if (!b.replay || o->spread == SPREAD_ROUTER || o->api == API_CHAT) {
		if (models_new(&b.models) < 0 ||
		    models_add(b.models, NULL, o->tokenizer, err, sizeof(err)) < 0) {
			fprintf(stderr, "kvbench: tokenizer %s: %s\n", o->tokenizer, err);
			goto cleanup;
		}
	}
	if (b.replay && o->api == API_CHAT && convo_chat_prepare(&b, tok))
		goto cleanup;
	if (!b.replay && (b.opening = opening_tokens(&b)) < 0)
		goto cleanup;
	b.ep = epoll_create1(EPOLL_CLOEXEC);
	if (b.replay) {
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = &g_timer_tag};

		b.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (b.ep < 0 || b.tfd < 0 || epoll_ctl(b.ep, EPOLL_CTL_ADD, b.tfd, &e)) {
			fprintf(stderr, "kvbench: epoll/timerfd: %s\n", strerror(errno));
			goto cleanup;
		}
	}
	if (o->spread == SPREAD_ROUTER) {
		snprintf(b.svc.name, sizeof(b.svc.name), "bench");
		for (int i = 0; i < o->nt; i++) {
			snprintf(b.eps[i].name, sizeof(b.eps[i].name), "w%d", i);
			b.eps[i].addr = o->t[i].addr;
		}
		b.svc.endpoints = b.eps;
		b.svc.nendpoints = (size_t)o->nt;
		b.svc.id = 1;
		b.svcs = (struct services){.refs = 1, .n = 1, .v = &b.svc};
	}
	if (o->nev) {
		struct index_cfg icfg;
		index_cfg_default(&icfg);
		icfg.max_workers = (uint32_t)o->nt;
		icfg.block_size = KVBENCH_KV_BLOCK;
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = &g_events_tag};

		index_new(&icfg, &b.idx);
		struct events_cfg ecfg;
		events_cfg_default(&ecfg);
		ecfg.index = b.idx;
		if (b.idx)
			events_new(&ecfg, &b.ev);
		if (!b.ev)
			goto cleanup;
		for (int i = 0; i < o->nev; i++) {
			char name[32];

			snprintf(name, sizeof(name), "bench/w%d", i); /* the router's worker name */
			if (events_worker_add(b.ev, (uint32_t)i, name, o->events[i], NULL, NULL)) {
				fprintf(stderr, "kvbench: bad events endpoint %s\n", o->events[i]);
				goto cleanup;
			}
		}
		epoll_ctl(b.ep, EPOLL_CTL_ADD, events_fd(b.ev), &e);
		usleep(300000); /* ZMQ slow joiner: let the subscriptions reach the workers */
	}
	if (b.replay && !o->trace) {
		const struct convo_opts *cv = &o->convo;

		if (o->workload == CONVO_AGENT)
			snprintf(b.source, sizeof(b.source),
				 "workload agent: %u agents at %g/s, %zu steps, mean %g steps, "
				 "%u shared system tokens, %u task tokens (shared %g), tokens %g "
				 "request + %g call + %g tool output a step, %g ms between, seed "
				 "%" PRIu64,
				 cv->count, cv->rate, b.tr.n, cv->turns, cv->system_tokens,
				 cv->task_tokens, cv->task_share, cv->user_tokens, cv->call_tokens,
				 cv->output_tokens, cv->think_ms, cv->seed);
		else
			snprintf(
			    b.source, sizeof(b.source),
			    "workload sessions: %u sessions at %g/s, %zu turns, mean %g turns, "
			    "tokens %g user + %g answer a turn, think %g ms, %u shared system "
			    "tokens, seed %" PRIu64,
			    cv->count, cv->rate, b.tr.n, cv->turns, cv->user_tokens,
			    cv->answer_tokens, cv->think_ms, cv->system_tokens, cv->seed);
	} else if (b.replay) {
		if (o->shard_n)
			snprintf(b.source, sizeof(b.source), "trace %s, shard %u/%u", o->trace,
				 o->shard_k, o->shard_n);
		else
			snprintf(b.source, sizeof(b.source), "trace %s", o->trace);
	}
	if (!o->quiet && b.replay)
		fprintf(stderr,
			"kvbench: %d URL(s), spread %s, %s rows %zu..%zu (lines %u..%u), %u "
			"tokens per hash id, span %.1f s (model time), offered %.2f req/s, ideal "
			"cached ratio %.3f, %zu row(s) whose lengths do not fit their hash ids, "
			"%u run(s)\n",
			o->nt, (o->nt > 1 ? kvbench_spread_name(o) : "none"), b.source,
			o->trace_start, o->trace_start + b.tr.n - 1, b.tr.rows[0].line,
			b.tr.rows[b.tr.n - 1].line, o->trace_bt, trace_span_s(&b),
			trace_offered(&b), b.ideal.ratio, b.clamped, o->runs);
	else if (!o->quiet)
		fprintf(stderr,
			"kvbench: %d URL(s), spread %s, P=%u, C=%u, %zu requests (+%u warm-up), "
			"%u+%u tokens in, %u out, seed %" PRIu64 ", %u run(s)\n",
			o->nt, (o->nt > 1 ? kvbench_spread_name(o) : "none"), o->wl.prefix_types,
			o->concurrency, o->wl.requests, o->warmup ? o->wl.prefix_types : 0,
			o->wl.prefix_tokens, o->wl.suffix_tokens, o->output_tokens, o->wl.seed,
			o->runs);
	for (uint32_t run = 0; run < o->runs && !g_stop; run++) {
		double q0 = 0, h0 = 0, q1 = 0, h1 = 0, t0;
		bool mok;

		b.rng = o->wl.seed * 31 + run + 1;
		b.rr = 0;
		router_free(b.router);
		b.router = NULL;
		if (o->spread == SPREAD_ROUTER) {
			/* a fresh router per run: no state carried over, like a restarted daemon */
			struct router_cfg rc;
			router_cfg_default(&rc);
			rc.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
			rc.policy = o->policy;
			rc.kv = &o->kv;
			rc.index = b.idx;
			rc.events = b.ev;
			rc.models = b.models;
			rc.seed = o->wl.seed + run;

			metrics_free(b.metrics);
			b.metrics = NULL;
			if (o->route_stats && metrics_new(&b.metrics) < 0)
				goto cleanup;
			rc.metrics = b.metrics;
			if (router_new(&rc, &b.router) < 0)
				goto cleanup;
			router_set_services(b.router, &b.svcs);
		}
		if (o->reset)
			reset_caches(&b);
		if (o->warmup)
			drive(&b, true, 1, &g_stop);
		mok = o->nm && metrics_snapshot(&b, &q0, &h0, true) == 0;
		b.nres = 0;
		b.run = run + 1; /* (0 is no run: a connection from calloc) */
		t0 = b.run_t0 = now_s();
		if (b.replay)
			drive_trace(&b, &g_stop);
		else
			drive(&b, false, o->concurrency, &g_stop);
		compute_stats(&b, &rs[run], now_s() - t0);
		if (o->request_log && write_request_log(&b, run) < 0)
			fprintf(stderr, "kvbench: --request-log %s: cannot write\n",
				o->request_log);
		if (b.metrics) {
			struct buf mt = {0};

			metrics_render(b.metrics, &mt);
			for (char *l = mt.data; l && *l;) {
				char *nl = strchr(l, '\n');
				size_t ll = nl ? (size_t)(nl - l) : strlen(l);

				if (!strncmp(l, "kvsplice_route_", 15) &&
				    !memmem(l, ll, "_bucket", 7))
					fprintf(stderr, "%.*s\n", (int)ll, l);
				l = nl ? nl + 1 : NULL;
			}
			buf_free(&mt);
		}
		if (b.router && o->route_log) {
			struct buf rl = {0};
			FILE *f = fopen(o->route_log, "w");

			if (!f || router_debug_json(b.router, &rl) < 0 ||
			    fwrite(rl.data, 1, rl.len, f) != rl.len)
				fprintf(stderr, "kvbench: --route-log %s: cannot write\n",
					o->route_log);
			if (f)
				fclose(f);
			buf_free(&rl);
		}
		if (mok && metrics_snapshot(&b, &q1, &h1, false) == 0 && q1 > q0) {
			rs[run].has_metrics = true;
			rs[run].metrics_ratio = (h1 - h0) / (q1 - q0);
		}
		if (!o->quiet)
			fprintf(stderr, "kvbench: run %u: hit %.1f%%, cached %.3f, %zu errors\n",
				run + 1, 100 * rs[run].hit_rate, rs[run].cached_ratio,
				rs[run].errors);
	}
	uint32_t nr = o->runs;
	med = rs[0];
#define MED(field) med.field = median_of(rs, nr, offsetof(struct run_stats, field))
	MED(cached_ratio);
	MED(hit_rate);
	MED(any_rate);
	MED(ttft_p50);
	MED(ttft_p99);
	MED(hit_p50);
	MED(miss_p50);
	MED(req_per_s);
	MED(workers_per_prefix);
	MED(wall_s);
	MED(e2e_p50);
	MED(e2e_p99);
	MED(lag_p50);
	MED(lag_p99);
	MED(lag_max);
	MED(prompt_tokens);
	MED(cached_tokens);
	MED(prompt_mismatches);
	MED(worker_max_mean);
	for (int w = 0; w < b.nw; w++)
		MED(per_worker[w]);
	med.has_metrics = true;
	for (uint32_t i = 0; i < nr; i++)
		med.has_metrics &= rs[i].has_metrics;
	if (med.has_metrics)
		MED(metrics_ratio);
	{
		double e[64], q[64];
		for (uint32_t i = 0; i < nr; i++) {
			e[i] = (double)rs[i].errors;
			q[i] = (double)rs[i].requests;
		}
		med.errors = (size_t)pct(e, nr, 50);
		med.requests = (size_t)pct(q, nr, 50);
	}
	if (b.replay && o->json) {
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "mode", o->trace ? "trace" : convo_name(o->workload));
		cJSON_AddStringToObject(root, "label", o->label ? o->label : "");
		cJSON_AddStringToObject(root, "spread",
					(o->nt > 1 ? kvbench_spread_name(o) : "none"));
		cJSON_AddBoolToObject(root, "kv_events", o->nev > 0);
		cJSON_AddNumberToObject(root, "urls", o->nt);
		cJSON_AddStringToObject(root, "trace", o->trace ? o->trace : b.source);
		if (!o->trace) {
			cJSON *w = cJSON_AddObjectToObject(root, "workload");
			const struct convo_opts *cv = &o->convo;

			cJSON_AddStringToObject(w, "kind", convo_name(o->workload));
			cJSON_AddNumberToObject(w, "conversations", cv->count);
			cJSON_AddNumberToObject(w, "rate", cv->rate);
			cJSON_AddNumberToObject(w, "turns", cv->turns);
			cJSON_AddNumberToObject(w, "user_tokens", cv->user_tokens);
			cJSON_AddNumberToObject(w, "answer_tokens", cv->answer_tokens);
			cJSON_AddNumberToObject(w, "call_tokens", cv->call_tokens);
			cJSON_AddNumberToObject(w, "tool_output_tokens", cv->output_tokens);
			cJSON_AddNumberToObject(w, "think_ms", cv->think_ms);
			cJSON_AddNumberToObject(w, "system_tokens", cv->system_tokens);
			cJSON_AddNumberToObject(w, "task_tokens", cv->task_tokens);
			cJSON_AddNumberToObject(w, "task_share", cv->task_share);
			cJSON_AddNumberToObject(w, "max_tokens", (double)cv->max_tokens);
			cJSON_AddNumberToObject(w, "seed", (double)cv->seed);
		}
		cJSON_AddNumberToObject(root, "trace_start", (double)o->trace_start);
		cJSON_AddNumberToObject(root, "trace_rows", (double)b.tr.n);
		cJSON_AddNumberToObject(root, "trace_block_tokens", o->trace_bt);
		cJSON_AddNumberToObject(root, "trace_speedup", o->trace_speedup);
		cJSON_AddNumberToObject(root, "trace_max_output", o->trace_max_output);
		cJSON_AddNumberToObject(root, "trace_span_s", trace_span_s(&b));
		cJSON_AddNumberToObject(root, "trace_clamped_rows", (double)b.clamped);
		cJSON_AddNumberToObject(root, "offered_req_per_s", trace_offered(&b));
		cJSON_AddNumberToObject(root, "trace_prompt_tokens", (double)b.ideal.prompt_tokens);
		cJSON_AddNumberToObject(root, "ideal_cached_tokens", (double)b.ideal.cached_tokens);
		cJSON_AddNumberToObject(root, "ideal_cached_ratio", b.ideal.ratio);
		cJSON_AddNumberToObject(root, "ideal_hit_rate", (double)b.ideal.hit_rows / b.tr.n);
		if (o->shard_n) {
			char shard[32];

			snprintf(shard, sizeof(shard), "%u/%u", o->shard_k, o->shard_n);
			cJSON_AddStringToObject(root, "trace_shard", shard);
			cJSON_AddNumberToObject(root, "trace_all_prompt_tokens",
						(double)b.ideal_all.prompt_tokens);
			cJSON_AddNumberToObject(root, "trace_all_ideal_cached_tokens",
						(double)b.ideal_all.cached_tokens);
			cJSON_AddNumberToObject(root, "trace_all_ideal_cached_ratio",
						b.ideal_all.ratio);
		}
		cJSON_AddNumberToObject(root, "runs_count", nr);
		cJSON_AddNumberToObject(root, "time_scale", o->time_scale);
		json_stats(root, &med);
		json_trace_stats(root, &med, b.wnames, b.nw);
		runs = cJSON_AddArrayToObject(root, "runs");
		for (uint32_t i = 0; i < nr; i++) {
			cJSON *r = cJSON_CreateObject();

			json_stats(r, &rs[i]);
			json_trace_stats(r, &rs[i], b.wnames, b.nw);
			cJSON_AddItemToArray(runs, r);
		}
		char *s = cJSON_PrintUnformatted(root);
		printf("%s\n", s ? s : "{}");
		free(s);
	} else if (b.replay) {
		printf("kvbench: %d URL(s) spread %s, %s, rows %zu..%zu, %u tokens per hash id, "
		       "speedup %g%s%s\n",
		       o->nt, (o->nt > 1 ? kvbench_spread_name(o) : "none"), b.source,
		       o->trace_start, o->trace_start + b.tr.n - 1, o->trace_bt, o->trace_speedup,
		       o->label ? ", " : "", o->label ? o->label : "");
		printf("trace: %zu rows over %.1f s (model time), offered %.2f req/s, %" PRIu64
		       " prompt tokens, ideal cached ratio %.3f (%zu rows hit), %zu clamped\n",
		       b.tr.n, trace_span_s(&b), trace_offered(&b), b.ideal.prompt_tokens,
		       b.ideal.ratio, b.ideal.hit_rows, b.clamped);
		printf("%-7s %5s %4s %6s %7s %6s %7s %8s %8s %8s %8s %7s %7s %7s %6s %8s\n", "run",
		       "reqs", "err", "hit%", "cached", "ideal", "metrics", "ttft_p50", "ttft_p99",
		       "e2e_p50", "e2e_p99", "lag_p50", "lag_p99", "lag_max", "req/s", "max/mean");
		for (uint32_t i = 0; i < nr; i++) {
			char name[16];

			snprintf(name, sizeof(name), "%u", i + 1);
			print_trace_row(stdout, name, &rs[i], b.ideal.ratio);
		}
		if (nr > 1)
			print_trace_row(stdout, "median", &med, b.ideal.ratio);
		printf("requests per worker%s:", nr > 1 ? " (median)" : "");
		for (int w = 0; w < b.nw; w++)
			printf(" %s %.0f", b.wnames[w], med.per_worker[w]);
		if (!b.nw)
			printf(" none answered");
		printf(
		    "\n(ttft, e2e: model ms; lag: wall ms, how late rows were sent; req/s: model "
		    "time)\n");
		if (med.prompt_mismatches)
			printf("warning: %.0f answers gave a prompt_tokens other than the length "
			       "sent\n",
			       med.prompt_mismatches);
	} else if (o->json) {
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "label", o->label ? o->label : "");
		cJSON_AddStringToObject(root, "spread",
					(o->nt > 1 ? kvbench_spread_name(o) : "none"));
		cJSON_AddBoolToObject(root, "kv_events", o->nev > 0);
		cJSON_AddNumberToObject(root, "urls", o->nt);
		cJSON_AddNumberToObject(root, "prefix_types", o->wl.prefix_types);
		cJSON_AddNumberToObject(root, "concurrency", o->concurrency);
		cJSON_AddNumberToObject(root, "seed", (double)o->wl.seed);
		cJSON_AddNumberToObject(
		    root, "prefix_seed",
		    (double)(o->wl.prefix_seed_set ? o->wl.prefix_seed : o->wl.seed));
		cJSON_AddNumberToObject(root, "zipf_s", o->wl.zipf_s);
		cJSON_AddNumberToObject(root, "prompt_tokens",
					o->wl.prefix_tokens + o->wl.suffix_tokens);
		cJSON_AddNumberToObject(root, "opening_tokens", (double)b.opening);
		cJSON_AddNumberToObject(root, "runs_count", nr);
		cJSON_AddNumberToObject(root, "time_scale", o->time_scale);
		json_stats(root, &med);
		runs = cJSON_AddArrayToObject(root, "runs");
		for (uint32_t i = 0; i < nr; i++) {
			cJSON *r = cJSON_CreateObject();

			json_stats(r, &rs[i]);
			cJSON_AddItemToArray(runs, r);
		}
		char *s = cJSON_PrintUnformatted(root);
		printf("%s\n", s ? s : "{}");
		free(s);
	} else {
		printf("kvbench: %d URL(s) spread %s, P=%u, C=%u, seed %" PRIu64 "%s%s\n", o->nt,
		       (o->nt > 1 ? kvbench_spread_name(o) : "none"), o->wl.prefix_types,
		       o->concurrency, o->wl.seed, o->label ? ", " : "", o->label ? o->label : "");
		if (b.opening)
			printf(
			    "every prompt opens with the same %ld tokens (full blocks): a hit is a "
			    "request with more cached\n",
			    b.opening);
		printf("%-7s %5s %4s %6s %7s %7s %8s %8s %7s %7s %6s %6s\n", "run", "reqs", "err",
		       "hit%", "cached", "metrics", "ttft_p50", "ttft_p99", "hit_p50", "miss_p50",
		       "req/s", "w/pfx");
		for (uint32_t i = 0; i < nr; i++) {
			char name[16];

			snprintf(name, sizeof(name), "%u", i + 1);
			print_row(stdout, name, &rs[i]);
		}
		if (nr > 1)
			print_row(stdout, "median", &med);
	}
	rc = med.errors ? 1 : 0;
	if (g_stop)
		rc = 130;
cleanup:
	cJSON_Delete(root);
	router_free(b.router);
	metrics_free(b.metrics);
	models_free(b.models);
	events_free(b.ev);
	index_free(b.idx);
	for (int i = 0; i < o->nev; i++)
		free(o->events[i]);
	for (size_t k = 0; b.bodies && k < o->wl.requests; k++)
		free(b.bodies[k]);
	for (uint32_t i = 0; b.wbodies && i < o->wl.prefix_types; i++)
		free(b.wbodies[i]);
	free(b.bodies);
	free(b.wbodies);
	free(b.res);
	for (int i = 0; i < b.nw; i++)
		free(b.wnames[i]);
	wl_free(&b.wl);
	tokenizer_free(tok);
	for (size_t k = 0; k < b.tr.n; k++) {
		if (b.umsg)
			free(b.umsg[k]);
		if (b.amsg)
			free(b.amsg[k]);
	}
	free(b.umsg);
	free(b.amsg);
	free(b.sysmsg);
	free(b.chat_len);
	free(b.chain);
	free(b.deps);
	free(b.succ);
	free(b.due);
	free(b.heap);
	free(b.queued);
	trace_free(&b.tr);
	free(b.offset);
	free(b.scratch);
	buf_free(&b.tbody);
	if (b.tfd >= 0)
		close(b.tfd);
	return rc;
}
