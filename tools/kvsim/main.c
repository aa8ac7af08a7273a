// SPDX-License-Identifier: Apache-2.0
/* kvsim: one simulated vLLM worker. OpenAI HTTP API (vLLM's responses, errors and metrics), a
 * vLLM v1 prefix cache and scheduler model (kvcache.c, sched.c) timed by a step-cost model, and
 * vLLM's KV events (kvevents.c). Its flags and defaults: opts.h (`kvsim --help`). One thread,
 * one epoll loop. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cjson/cJSON.h>
#include <openssl/sha.h>

#include "core/buf.h"
#include "core/http.h"
#include "kvcache.h"
#include "kvevents.h"
#include "core/log.h"
#include "gpu.h"
#include "opts.h"
#include "prompt/chat.h"
#include "prompt/models.h"
#include "prompt/openai.h"
#include "sched.h"
#include "prompt/tokenizer.h"

#define MAX_HEAD 65536

enum conn_state { C_HEAD, C_BODY, C_BUSY, C_CLOSING };

struct job;

struct conn {
	int fd;
	enum conn_state st;
	struct buf in, out, body;
	struct http_msg m;
	size_t head_len;
	struct http_chunked ch;
	bool keep_alive, want_out, eof;
	bool closed; /* conn_close ran: its memory waits for the end of the event batch */
	struct job *job;
	struct conn *next_free;
};

struct job {
	struct sreq r;
	struct conn *c;
	struct openai_req q;
	uint32_t *out;
	char id[48];
	int64_t created;
	bool started; /* stream head sent */
	bool in_sched;
	double arrive_at; /* monotonic seconds at which it enters the engine */
	struct job *anext;
	struct buf text; /* non-stream: accumulated output */
	char *model;	 /* the model it names, base or adapter (the responses' "model"; owned: an
			  * adapter may be unloaded while it runs) */
};

struct sim {
	struct kvsim_opts o;
	const struct tokenizer *tok; /* the model's, from models */
	const struct model_tok *mt;  /* its tokenizer and chat template */
	struct models *models;
	struct kvcache *kv;
	struct sched *s;
	struct kvev *ev;
	int ep, lfd, tfd;
	bool step_inflight;
	double step_end;
	struct job *ahead, *atail; /* jobs waiting for their API overhead to pass (FIFO) */
	/* the adapters served: --lora-modules, then those loaded at run time (vLLM's
	 * /v1/load_lora_adapter); vLLM's lora_int_id counts up from 1 and is never reused */
	struct lora {
		char *name, *path;
		int64_t id;
	} lora[KVSIM_MAX_LORAS];
	size_t nlora;
	int64_t lora_ids;
	bool runtime_lora; /* VLLM_ALLOW_RUNTIME_LORA_UPDATING: the two endpoints are there */
	uint32_t *nice;	   /* output token ids */
	size_t nnice;
	uint64_t req_counter;
	uint64_t ok_requests, err_requests;
	uint64_t connections;  /* accepted */
	double busy_ms;	       /* model time spent in engine steps (kvsim_busy_seconds_total) */
	struct gpu_share *gpu; /* --gpu-share, or NULL */
	struct kvc_events evbuf;
	struct conn *closed; /* closed during this event batch, freed after it (conns_reap) */
	volatile sig_atomic_t stop;
};

static struct sim *g_sim; /* for the signal handler only */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* --- connections -------------------------------------------------------------------------- */

static void conn_update_events(struct sim *sm, struct conn *c)
{
	struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
	bool want = buf_unread(&c->out) > 0;

	if (want == c->want_out)
		return;
	c->want_out = want;
	if (want)
		e.events |= EPOLLOUT;
	epoll_ctl(sm->ep, EPOLL_CTL_MOD, c->fd, &e);
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	kvc_seq_free(&j->r.seq);
	openai_req_free(&j->q);
	free(j->r.tokens);
	free(j->out);
	free(j->model);
	buf_free(&j->text);
	free(j);
}

static void arrivals_remove(struct sim *sm, struct job *j)
{
	struct job **pp = &sm->ahead, *prev = NULL;

	while (*pp && *pp != j) {
		prev = *pp;
		pp = &(*pp)->anext;
	}
	if (!*pp)
		return;
	*pp = j->anext;
	if (sm->atail == j)
		sm->atail = prev;
}

static void conn_close(struct sim *sm, struct conn *c)
{
	if (c->job) {
		struct job *j = c->job;

		if (j->in_sched)
			sched_abort(sm->s, &j->r);
		else
			arrivals_remove(sm, j);
		job_free(j);
		c->job = NULL;
	}
	epoll_ctl(sm->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->body);
	/* Not freed yet: an event for it may still be waiting later in this epoll batch (a stream
	 * token written by the engine's timer closes the connection its client just reset). */
	c->fd = -1;
	c->closed = true;
	c->next_free = sm->closed;
	sm->closed = c;
}

/* Frees the connections closed during the event batch just handled. */
static void conns_reap(struct sim *sm)
{
	while (sm->closed) {
		struct conn *c = sm->closed;

		sm->closed = c->next_free;
		free(c);
	}
}

/* Writes what can be written; returns -1 when the connection is gone (closed here). */
static int conn_flush(struct sim *sm, struct conn *c)
{
	while (buf_unread(&c->out) > 0) {
		ssize_t n = send(c->fd, buf_rptr(&c->out), buf_unread(&c->out), MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_close(sm, c);
			return -1;
		}
		buf_consume(&c->out, (size_t)n);
	}
	if (buf_unread(&c->out) == 0 && c->st == C_CLOSING) {
		conn_close(sm, c);
		return -1;
	}
	conn_update_events(sm, c);
	return 0;
}

static void head_common(struct sim *sm, struct buf *b, int status, const char *ctype, bool close)
{
	buf_printf(
	    b, "HTTP/1.1 %d %s\r\nserver: kvsim\r\nx-kvsim-worker: %s\r\ncontent-type: %s\r\n%s",
	    status, http_reason(status), sm->o.worker_id, ctype,
	    close ? "connection: close\r\n" : "");
}

static void respond(struct sim *sm, struct conn *c, int status, const char *ctype, const char *body,
		    size_t len)
{
	head_common(sm, &c->out, status, ctype, !c->keep_alive);
	buf_printf(&c->out, "content-length: %zu\r\n\r\n", len);
	buf_append(&c->out, body, len);
	if (!c->keep_alive)
		c->st = C_CLOSING;
}

static void respond_error(struct sim *sm, struct conn *c, int status, const char *type,
			  const char *msg)
{
	struct buf w = {0};

	/* vLLM's ErrorResponse, wrapped as {"error": {...}} like recent vLLM and OpenAI. */
	buf_puts(&w, "{\"error\":{\"message\":");
	buf_json_str(&w, msg, strlen(msg));
	buf_puts(&w, ",\"type\":");
	buf_json_str(&w, type, strlen(type));
	buf_printf(&w, ",\"param\":null,\"code\":%d}}", status);
	respond(sm, c, status, "application/json", w.data, w.len);
	buf_free(&w);
	sm->err_requests++;
}

/* --- engine ------------------------------------------------------------------------------- */

static void timer_arm(struct sim *sm)
{
	double t = 0;
	struct itimerspec its = {0};

	if (sm->step_inflight)
		t = sm->step_end;
	if (sm->ahead && (t == 0 || sm->ahead->arrive_at < t))
		t = sm->ahead->arrive_at;
	if (t > 0) {
		if (t < 1e-6)
			t = 1e-6;
		its.it_value.tv_sec = (time_t)t;
		its.it_value.tv_nsec = (long)((t - floor(t)) * 1e9);
		if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(sm->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void publish_events(struct sim *sm)
{
	kvc_take_events(sm->kv, &sm->evbuf);
	if (sm->ev && sm->evbuf.n)
		kvev_publish(sm->ev, &sm->evbuf, wall_s());
	kvc_events_clear(&sm->evbuf);
}

/* Plans and starts the next step. start is when it begins: the end of the step just finished
 * (back to back, so the real time spent processing a step does not stretch the schedule at high
 * --time-scale), or now when the engine was idle. */
static void engine_kick_at(struct sim *sm, double start)
{
	double d;

	if (sm->step_inflight)
		return;
	d = sched_plan(sm->s);
	/* vLLM publishes the events of a step right after scheduling it. */
	publish_events(sm);
	if (d < 0) {
		log_error("kvsim", "scheduler: %s", strerror((int)-d));
		return;
	}
	if (d == 0)
		return;
	sm->step_inflight = true;
	{
		/* The host part (scheduling, sampling, launches) runs on the worker's own CPU; the
		 * rest runs on the GPU, --gpu-speed times faster than the costs say, and waits for
		 * it when it is shared. */
		double host = sm->o.step_host_ms < d ? sm->o.step_host_ms : d;
		double gpu = (d - host) / sm->o.gpu_speed;

		d = host + gpu;
		if (sm->gpu)
			sm->step_end =
			    gpu_share_reserve(sm->gpu, start + host / 1000.0 / sm->o.time_scale,
					      gpu / 1000.0 / sm->o.time_scale,
					      sm->o.gpu_switch_ms / 1000.0 / sm->o.time_scale);
		else
			sm->step_end = start + d / 1000.0 / sm->o.time_scale;
	}
	sm->busy_ms += d;
}

static void usage_json(struct buf *b, const struct job *j)
{
	buf_printf(b,
		   "{\"prompt_tokens\":%zu,\"total_tokens\":%zu,\"completion_tokens\":%zu,"
		   "\"prompt_tokens_details\":{\"cached_tokens\":%" PRId64 "}}",
		   j->r.prompt_len, j->r.prompt_len + j->r.num_output, j->r.num_output,
		   j->r.cached_tokens < 0 ? 0 : j->r.cached_tokens);
}

static void sse_chunk(struct conn *c, const struct buf *payload)
{
	buf_printf(&c->out, "%zx\r\n", payload->len + 8);
	buf_puts(&c->out, "data: ");
	buf_append(&c->out, payload->data, payload->len);
	buf_puts(&c->out, "\n\n\r\n");
}

static void stream_head(struct sim *sm, struct job *j)
{
	struct conn *c = j->c;

	head_common(sm, &c->out, 200, "text/event-stream; charset=utf-8", !c->keep_alive);
	buf_puts(&c->out, "cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n");
	j->started = true;
	if (j->q.endpoint == OPENAI_CHAT) {
		struct buf p = {0};

		buf_printf(
		    &p,
		    "{\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":%" PRId64
		    ",\"model\":",
		    j->id, j->created);
		buf_json_str(&p, j->model, strlen(j->model));
		buf_puts(&p, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
			     "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}");
		sse_chunk(c, &p);
		buf_free(&p);
	}
}

static void stream_token(struct sim *sm, struct job *j, const char *text, size_t tlen,
			 bool finished)
{
	struct conn *c = j->c;
	struct buf p = {0};
	bool chat = j->q.endpoint == OPENAI_CHAT;

	if (!j->started)
		stream_head(sm, j);
	buf_printf(&p, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":", j->id,
		   chat ? "chat.completion.chunk" : "text_completion", j->created);
	buf_json_str(&p, j->model, strlen(j->model));
	if (chat) {
		buf_puts(&p, ",\"choices\":[{\"index\":0,\"delta\":{\"content\":");
		buf_json_str(&p, text, tlen);
		buf_printf(&p, "},\"logprobs\":null,\"finish_reason\":%s%s}]}",
			   finished ? "\"length\"" : "null",
			   finished ? ",\"stop_reason\":null" : "");
	} else {
		buf_puts(&p, ",\"choices\":[{\"index\":0,\"text\":");
		buf_json_str(&p, text, tlen);
		buf_printf(&p, ",\"logprobs\":null,\"finish_reason\":%s,\"stop_reason\":null}]}",
			   finished ? "\"length\"" : "null");
	}
	sse_chunk(c, &p);
	if (finished) {
		if (j->q.include_usage) {
			p.len = 0;
			buf_printf(
			    &p,
			    "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":",
			    j->id, chat ? "chat.completion.chunk" : "text_completion", j->created);
			buf_json_str(&p, j->model, strlen(j->model));
			buf_puts(&p, ",\"choices\":[],\"usage\":");
			usage_json(&p, j);
			buf_puts(&p, "}");
			sse_chunk(c, &p);
		}
		p.len = 0;
		buf_puts(&p, "[DONE]");
		sse_chunk(c, &p);
		buf_puts(&c->out, "0\r\n\r\n");
	}
	buf_free(&p);
}

static void final_response(struct sim *sm, struct job *j)
{
	struct buf p = {0};
	bool chat = j->q.endpoint == OPENAI_CHAT;

	buf_printf(&p, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":", j->id,
		   chat ? "chat.completion" : "text_completion", j->created);
	buf_json_str(&p, j->model, strlen(j->model));
	if (chat) {
		buf_puts(&p, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
			     "\"content\":");
		buf_json_str(&p, j->text.data ? j->text.data : "", j->text.len);
		buf_puts(&p, ",\"reasoning_content\":null,\"tool_calls\":[]},\"logprobs\":null,"
			     "\"finish_reason\":\"length\",\"stop_reason\":null}]");
	} else {
		buf_puts(&p, ",\"choices\":[{\"index\":0,\"text\":");
		buf_json_str(&p, j->text.data ? j->text.data : "", j->text.len);
		buf_puts(&p, ",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null,"
			     "\"prompt_logprobs\":null}]");
	}
	buf_puts(&p, ",\"usage\":");
	usage_json(&p, j);
	buf_puts(&p, "}");
	respond(sm, j->c, 200, "application/json", p.data, p.len);
	buf_free(&p);
}

static void conn_request_done(struct sim *sm, struct conn *c);

static void on_token(void *ctx, struct sreq *r, uint32_t tok, bool first, bool finished)
{
	struct sim *sm = ctx;
	struct job *j = r->user;
	struct conn *c = j->c;
	struct buf t = {0};

	(void)first;
	tokenizer_decode(sm->tok, &tok, 1, &t);
	if (j->q.stream)
		stream_token(sm, j, t.data ? t.data : "", t.len, finished);
	else
		buf_append(&j->text, t.data ? t.data : "", t.len);
	buf_free(&t);
	if (!finished) {
		conn_flush(sm, c); /* may close c on error: then the job was aborted */
		return;
	}
	j->in_sched = false;
	if (!j->q.stream)
		final_response(sm, j);
	else if (!c->keep_alive)
		c->st = C_CLOSING;
	sm->ok_requests++;
	c->job = NULL;
	job_free(j);
	conn_request_done(sm, c);
}

static void engine_on_timer(struct sim *sm)
{
	double t = now_s(), start = t;
	uint64_t x;

	while (read(sm->tfd, &x, sizeof(x)) > 0)
		;
	if (sm->step_inflight && t >= sm->step_end) {
		sm->step_inflight = false;
		sched_finish(sm->s, on_token, sm);
		publish_events(sm);
		/* Late by less than 20 ms: the next step starts where this one ended. */
		if (t - sm->step_end < 0.020)
			start = sm->step_end;
	}
	while (sm->ahead && sm->ahead->arrive_at <= t) {
		struct job *j = sm->ahead;

		sm->ahead = j->anext;
		if (!sm->ahead)
			sm->atail = NULL;
		if (sched_add(sm->s, &j->r) == 0) {
			j->in_sched = true;
		} else {
			struct conn *c = j->c;

			c->job = NULL;
			job_free(j);
			respond_error(sm, c, 500, "InternalServerError", "out of memory");
			conn_request_done(sm, c);
		}
	}
	engine_kick_at(sm, start);
	timer_arm(sm);
}

/* --- endpoints ---------------------------------------------------------------------------- */

/* GET /v1/models: vLLM's ModelList, the base model then each adapter (serving_models.py
 * show_available_models: an adapter's card has its path as root and the base model as parent). */
static void handle_models(struct sim *sm, struct conn *c)
{
	int64_t now = (int64_t)wall_s();
	struct buf b = {0};

	buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
	buf_json_str(&b, sm->o.model, strlen(sm->o.model));
	buf_printf(
	    &b,
	    ",\"object\":\"model\",\"created\":%" PRId64 ",\"owned_by\":\"vllm\",\"root\":", now);
	buf_json_str(&b, sm->o.model, strlen(sm->o.model));
	buf_printf(&b, ",\"parent\":null,\"max_model_len\":%u,\"permission\":[]}",
		   sm->o.max_model_len);
	for (size_t i = 0; i < sm->nlora; i++) {
		const char *path = sm->lora[i].path;

		buf_puts(&b, ",{\"id\":");
		buf_json_str(&b, sm->lora[i].name, strlen(sm->lora[i].name));
		buf_printf(&b,
			   ",\"object\":\"model\",\"created\":%" PRId64
			   ",\"owned_by\":\"vllm\",\"root\":",
			   now);
		buf_json_str(&b, path, strlen(path));
		buf_puts(&b, ",\"parent\":");
		buf_json_str(&b, sm->o.model, strlen(sm->o.model));
		buf_puts(&b, ",\"max_model_len\":null,\"permission\":[]}");
	}
	buf_puts(&b, "]}");
	respond(sm, c, 200, "application/json", b.data, b.len);
	buf_free(&b);
}

static void handle_metrics(struct sim *sm, struct conn *c)
{
	/* process_start_time_seconds as prometheus_client's process collector computes it (boot
	 * time + the process's start in clock ticks since boot) and prints it (Go's float style:
	 * 1.76451234567e+09); "" when /proc cannot tell, then the series is left out. */
	static char start[40];
	static bool start_done;
	const struct sched_stats *st = sched_stats(sm->s);
	struct buf b = {0};
	char lbl[300];

	if (!start_done) {
		FILE *f = fopen("/proc/stat", "r");
		FILE *g = fopen("/proc/self/stat", "r");
		char line[1024], *p = NULL, d[40];
		unsigned long long btime = 0, ticks = 0;
		long hz = sysconf(_SC_CLK_TCK);

		start_done = true;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "btime %llu", &btime) == 1)
				break;
		/* the fields follow the command name's last ')': the name may hold any byte */
		if (g && fgets(line, sizeof(line), g))
			p = strrchr(line, ')');
		if (btime && hz > 0 && p &&
		    sscanf(
			p + 1,
			" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d"
			" %*d %llu",
			&ticks) == 1) {
			int n = snprintf(d, sizeof(d), "%.2f", (double)btime + (double)ticks / hz);
			char *dot = strchr(d, '.');

			if (dot && dot - d > 6) {
				/* d[0] "." the other integer digits and the decimals, trailing
				 * zeros and dot removed, then the exponent */
				int e = (int)(dot - d) - 1, k = 0;

				start[k++] = d[0];
				start[k++] = '.';
				for (int i = 1; i < n; i++)
					if (d[i] != '.')
						start[k++] = d[i];
				while (k > 0 && (start[k - 1] == '0' || start[k - 1] == '.'))
					k--;
				snprintf(start + k, sizeof(start) - (size_t)k, "e+%02d", e);
			} else {
				snprintf(start, sizeof(start), "%s", d);
			}
		}
		if (f)
			fclose(f);
		if (g)
			fclose(g);
	}
	if (start[0])
		buf_printf(&b,
			   "# HELP process_start_time_seconds Start time of the process since "
			   "unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
			   "process_start_time_seconds %s\n",
			   start);
	snprintf(lbl, sizeof(lbl), "{engine=\"0\",model_name=\"%s\"}", sm->o.model);
	buf_printf(
	    &b,
	    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
	    "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running%s %zu.0\n"
	    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
	    "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting%s %zu.0\n"
	    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
	    "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc%s %.6f\n"
	    "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number "
	    "of queried tokens.\n"
	    "# TYPE vllm:prefix_cache_queries_total counter\n"
	    "vllm:prefix_cache_queries_total%s %" PRIu64 ".0\n"
	    "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of "
	    "cached tokens.\n"
	    "# TYPE vllm:prefix_cache_hits_total counter\n"
	    "vllm:prefix_cache_hits_total%s %" PRIu64 ".0\n"
	    "# HELP vllm:num_preemptions_total Cumulative number of preemption from the "
	    "engine.\n"
	    "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total%s %" PRIu64
	    ".0\n"
	    "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
	    "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total%s %" PRIu64 ".0\n"
	    "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
	    "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total%s %" PRIu64
	    ".0\n"
	    "# HELP vllm:request_success_total Count of successfully processed requests.\n"
	    "# TYPE vllm:request_success_total counter\nvllm:request_success_total%s %" PRIu64
	    ".0\n"
	    /* vLLM's num_gpu_blocks is the whole pool, its reserved null block included */
	    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
	    "# TYPE vllm:cache_config_info gauge\n"
	    "vllm:cache_config_info{block_size=\"%u\",cache_dtype=\"auto\","
	    "enable_prefix_caching=\"True\",num_gpu_blocks=\"%u\",num_cpu_blocks=\"None\","
	    "engine=\"0\"} 1.0\n"
	    "# HELP kvsim_connections_total TCP connections accepted (kvsim only).\n"
	    "# TYPE kvsim_connections_total counter\nkvsim_connections_total %" PRIu64 "\n"
	    "# HELP kvsim_errors_total Requests answered with an error (kvsim only).\n"
	    "# TYPE kvsim_errors_total counter\nkvsim_errors_total %" PRIu64 "\n"
	    "# HELP kvsim_busy_seconds_total Model time spent running engine steps: its rate "
	    "is the worker's utilisation (kvsim only).\n"
	    "# TYPE kvsim_busy_seconds_total counter\nkvsim_busy_seconds_total %.6f\n",
	    lbl, sched_num_running(sm->s), lbl, sched_num_waiting(sm->s), lbl, kvc_usage(sm->kv),
	    lbl, st->queries_tokens, lbl, st->hit_tokens, lbl, st->preemptions, lbl,
	    st->prompt_tokens, lbl, st->generation_tokens, lbl, sm->ok_requests,
	    kvc_block_size(sm->kv), kvc_usable_blocks(sm->kv) + 1, sm->connections,
	    sm->err_requests, sm->busy_ms / 1000.0);
	respond(sm, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.data, b.len);
	buf_free(&b);
}

static void hex(struct buf *b, const uint8_t *h)
{
	for (int i = 0; i < KVC_HASH_LEN; i++)
		buf_printf(b, "%02x", h[i]);
}

/* GET /debug/cache: every block that holds a hash, by block id. */
static void handle_debug(struct sim *sm, struct conn *c)
{
	struct buf b = {0};
	uint32_t n = kvc_usable_blocks(sm->kv) + 1, bs = kvc_block_size(sm->kv);
	bool first = true;

	buf_puts(&b, "{\"worker_id\":");
	buf_json_str(&b, sm->o.worker_id, strlen(sm->o.worker_id));
	buf_printf(&b,
		   ",\"block_size\":%u,\"num_blocks\":%u,\"usable_blocks\":%u,\"free_blocks\":%u,"
		   "\"cached_blocks\":%u,\"int_block_hashes\":%s,\"events_next_seq\":%" PRIu64
		   ",\"root_hash_hex\":\"",
		   bs, n, n - 1, kvc_num_free(sm->kv), kvc_num_cached(sm->kv),
		   sm->o.ev.int_hashes ? "true" : "false", sm->ev ? kvev_next_seq(sm->ev) : 0);
	hex(&b, kvc_root_hash(sm->kv));
	buf_puts(&b, "\",\"blocks\":[");
	for (uint32_t id = 1; id < n; id++) {
		struct kvc_block_info bi;

		if (kvc_block_info(sm->kv, id, &bi) || !bi.has_hash)
			continue;
		buf_printf(&b,
			   "%s{\"id\":%u,\"ref_cnt\":%u,\"free_pos\":%" PRId64
			   ",\"hash\":\"%" PRIu64 "\",\"hash_hex\":\"",
			   first ? "" : ",", id, bi.ref_cnt, bi.free_pos, kvc_hash_u64(bi.hash));
		hex(&b, bi.hash);
		if (bi.has_parent) {
			buf_printf(&b, "\",\"parent\":\"%" PRIu64 "\",\"parent_hex\":\"",
				   kvc_hash_u64(bi.parent));
			hex(&b, bi.parent);
			buf_puts(&b, "\"");
		} else {
			buf_puts(&b, "\",\"parent\":null,\"parent_hex\":null");
		}
		buf_puts(&b, ",\"token_ids\":[");
		for (uint32_t i = 0; i < bs; i++)
			buf_printf(&b, "%s%u", i ? "," : "", bi.tokens[i]);
		buf_puts(&b, "]}");
		first = false;
	}
	buf_puts(&b, "]}");
	respond(sm, c, 200, "application/json", b.data, b.len);
	buf_free(&b);
}

/* Adds adapter name (path shown as its root) with the next lora_int_id. 0 or -ENOMEM. */
static int lora_add(struct sim *sm, const char *name, const char *path)
{
	struct lora *l = &sm->lora[sm->nlora];

	if (sm->nlora == KVSIM_MAX_LORAS)
		return -ENOSPC;
	l->name = strdup(name);
	l->path = strdup(path);
	if (!l->name || !l->path) {
		free(l->name);
		free(l->path);
		return -ENOMEM;
	}
	l->id = ++sm->lora_ids;
	sm->nlora++;
	return 0;
}

/* The string field key of a JSON body, or NULL. */
static const char *body_str(cJSON *root, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);

	return cJSON_IsString(j) && j->valuestring[0] ? j->valuestring : NULL;
}

/* POST /v1/load_lora_adapter {"lora_name","lora_path"} and /v1/unload_lora_adapter
 * {"lora_name"}: vLLM's runtime adapter updates (there only with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING), its answers and errors (serving_models.py). */
static void handle_lora_update(struct sim *sm, struct conn *c, bool load)
{
	cJSON *root = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	const char *name = root ? body_str(root, "lora_name") : NULL;
	const char *path = root ? body_str(root, "lora_path") : NULL;
	char msg[512];
	size_t i;

	for (i = 0; name && i < sm->nlora; i++)
		if (strcmp(sm->lora[i].name, name) == 0)
			break;
	if (load && (!name || !path)) {
		respond_error(sm, c, 400, "InvalidUserInput",
			      "Both 'lora_name' and 'lora_path' must be provided.");
	} else if (!load && !name) {
		respond_error(sm, c, 400, "InvalidUserInput",
			      "either 'lora_name' and 'lora_int_id' needs to be provided.");
	} else if (load && i < sm->nlora) {
		snprintf(msg, sizeof(msg), "The lora adapter '%s' has already been loaded.", name);
		respond_error(sm, c, 400, "InvalidUserInput", msg);
	} else if (!load && i == sm->nlora) {
		snprintf(msg, sizeof(msg), "The lora adapter '%s' cannot be found.", name);
		respond_error(sm, c, 404, "NotFoundError", msg);
	} else if (load && (strcmp(name, sm->o.model) == 0 || lora_add(sm, name, path) < 0)) {
		respond_error(sm, c, 400, "BadRequestError", "cannot load this adapter");
	} else {
		if (!load) {
			free(sm->lora[i].name);
			free(sm->lora[i].path);
			memmove(&sm->lora[i], &sm->lora[i + 1],
				(sm->nlora - i - 1) * sizeof(sm->lora[0]));
			sm->nlora--;
		}
		snprintf(msg, sizeof(msg), "Success: LoRA adapter '%s' %s successfully.", name,
			 load ? "added" : "removed");
		respond(sm, c, 200, "text/plain; charset=utf-8", msg, strlen(msg));
	}
	cJSON_Delete(root);
}

static void handle_reset(struct sim *sm, struct conn *c)
{
	int rc = kvc_reset(sm->kv);

	if (rc == -EBUSY) {
		respond_error(sm, c, 409, "ConflictError",
			      "Failed to reset prefix cache: some blocks are still in use");
		return;
	}
	publish_events(sm);
	respond(sm, c, 200, "application/json", "{}", 2);
}

/* The value of query parameter name in target[0..len) ("" when it has none), into out[n]; false
 * when absent. */
static bool query_param(const char *target, size_t len, const char *name, char *out, size_t n)
{
	const char *q = memchr(target, '?', len), *end = target + len;
	size_t nl = strlen(name);

	while (q && q < end) {
		const char *p = q + 1, *amp = memchr(p, '&', (size_t)(end - p));
		const char *stop = amp ? amp : end;

		if ((size_t)(stop - p) >= nl && !strncmp(p, name, nl) &&
		    (p + nl == stop || p[nl] == '=')) {
			const char *v = p + nl == stop ? stop : p + nl + 1;

			snprintf(out, n, "%.*s", (int)(stop - v), v);
			return true;
		}
		q = amp;
	}
	return false;
}

/* POST /debug/events?drop=N&replay=off|on: test hooks (tests/node/test_faults.sh, bench/faults.sh).
 * drop: the next N event batches are numbered and kept for replay but never published, as vLLM's
 * PUB drops them past its high-water mark (a subscriber sees a gap its replay has to fill).
 * replay=off: replay requests go unanswered from now on, as from a dead replay endpoint; on: they
 * are answered again. */
static void handle_debug_events(struct sim *sm, struct conn *c)
{
	char v[32], out[128];
	unsigned long long n = 0;
	bool mute = false;

	if (!sm->ev) {
		respond_error(sm, c, 409, "ConflictError", "no KV events are published");
		return;
	}
	if (query_param(c->m.target, c->m.target_len, "drop", v, sizeof(v))) {
		n = strtoull(v, NULL, 10);
		kvev_drop_next(sm->ev, n);
	}
	if (query_param(c->m.target, c->m.target_len, "replay", v, sizeof(v))) {
		mute = strcmp(v, "off") == 0;
		kvev_replay_mute(sm->ev, mute);
	}
	snprintf(out, sizeof(out),
		 "{\"drop_next\":%llu,\"replay\":\"%s\",\"next_seq\":%" PRIu64 "}", n,
		 mute ? "off" : "on", kvev_next_seq(sm->ev));
	respond(sm, c, 200, "application/json", out, strlen(out));
}

static void handle_generate(struct sim *sm, struct conn *c, enum openai_endpoint ep)
{
	struct job *j = calloc(1, sizeof(*j));
	const char *why = NULL;
	char msg[512];
	size_t plen, max_tokens;
	uint64_t h;
	int rc;

	if (!j) {
		respond_error(sm, c, 500, "InternalServerError", "out of memory");
		return;
	}
	if (ep == OPENAI_CHAT && !sm->mt->chat_ok) {
		/* vLLM cannot render it either (no template), or renders it another way (harmony,
		 * mistral mode) that kvsim does not reproduce */
		snprintf(msg, sizeof(msg), "chat requests are not served for this model: %s",
			 sm->mt->chat_why ? sm->mt->chat_why : "no chat template");
		respond_error(sm, c, 400, "BadRequestError", msg);
		goto fail;
	}
	rc = openai_parse_with(sm->tok, sm->mt->chat, NULL, false, ep,
			       c->body.data ? c->body.data : "", c->body.len, &j->q, &why);
	if (rc != OPENAI_OK) {
		if (rc < 0)
			respond_error(sm, c, 500, "InternalServerError", "out of memory");
		else
			respond_error(sm, c, 400, "BadRequestError", why ? why : "invalid request");
		goto fail;
	}
	/* the base model (also when the request names none), or an adapter (vLLM's
	 * _maybe_get_lora: its LoRARequest, lora_int_id its place in load order from 1) */
	if (j->q.model && strcmp(j->q.model, sm->o.model) != 0) {
		size_t i;

		for (i = 0; i < sm->nlora; i++)
			if (strcmp(j->q.model, sm->lora[i].name) == 0)
				break;
		if (i == sm->nlora) {
			snprintf(msg, sizeof(msg), "The model `%s` does not exist.", j->q.model);
			respond_error(sm, c, 404, "NotFoundError", msg);
			goto fail;
		}
		if (!(j->model = strdup(sm->lora[i].name))) {
			respond_error(sm, c, 500, "InternalServerError", "out of memory");
			goto fail;
		}
		j->r.seq.lora_name = j->model;
		j->r.seq.lora_id = sm->lora[i].id;
		/* the adapter's name is an extra key of every block (vLLM); mixed in as its sha256
		 */
		SHA256((const unsigned char *)j->model, strlen(j->model), j->r.seq.lora);
		j->r.seq.has_lora = true;
	}
	if (!j->model && !(j->model = strdup(sm->o.model))) {
		respond_error(sm, c, 500, "InternalServerError", "out of memory");
		goto fail;
	}
	plen = j->q.prompt.n;
	if (plen >= sm->o.max_model_len) {
		snprintf(msg, sizeof(msg),
			 "This model's maximum context length is %u tokens. However, your request "
			 "has %zu input tokens. Please reduce the length of the input messages.",
			 sm->o.max_model_len, plen);
		respond_error(sm, c, 400, "BadRequestError", msg);
		goto fail;
	}
	max_tokens = j->q.max_tokens < 0 ? sm->o.max_model_len - plen : (size_t)j->q.max_tokens;
	if (plen + max_tokens > sm->o.max_model_len) {
		snprintf(
		    msg, sizeof(msg),
		    "This model's maximum context length is %u tokens. However, you requested "
		    "%zu tokens (%zu in the messages, %zu in the completion). Please reduce the "
		    "length of the messages or completion.",
		    sm->o.max_model_len, plen + max_tokens, plen, max_tokens);
		respond_error(sm, c, 400, "BadRequestError", msg);
		goto fail;
	}
	j->r.tokens = malloc((plen + max_tokens) * sizeof(uint32_t));
	j->out = malloc(max_tokens * sizeof(uint32_t));
	if (!j->r.tokens || !j->out) {
		respond_error(sm, c, 500, "InternalServerError", "out of memory");
		goto fail;
	}
	memcpy(j->r.tokens, j->q.prompt.v, plen * sizeof(uint32_t));
	/* Output tokens: deterministic from the seed(s) and the prompt. */
	h = sm->o.seed ^ (j->q.seed >= 0 ? splitmix((uint64_t)j->q.seed) : 0);
	for (size_t i = 0; i < plen; i++)
		h = splitmix(h ^ j->r.tokens[i]);
	for (size_t i = 0; i < max_tokens; i++)
		j->out[i] = sm->nice[splitmix(h + i) % sm->nnice];
	j->r.prompt_len = plen;
	j->r.out = j->out;
	j->r.max_tokens = max_tokens;
	j->r.user = j;
	if (j->q.cache_salt) {
		/* cache_salt is an extra key of block 0 (vLLM); mixed in as its sha256. */
		struct kvc_seq *s = &j->r.seq;

		SHA256((const unsigned char *)j->q.cache_salt, strlen(j->q.cache_salt), s->salt);
		s->has_salt = true;
		s->cache_salt = j->q.cache_salt;
	}
	j->c = c;
	j->created = (int64_t)wall_s();
	snprintf(j->id, sizeof(j->id), "%s-%s-%" PRIu64, ep == OPENAI_CHAT ? "chatcmpl" : "cmpl",
		 sm->o.worker_id, ++sm->req_counter);
	c->job = j;
	if (j->q.stream && ep == OPENAI_CHAT) {
		/* vLLM sends the role chunk before the first token; the caller flushes it. */
		stream_head(sm, j);
	}
	/* The API server's own time (HTTP, tokenization, hand-off to the engine core). */
	j->arrive_at = now_s() + sm->o.api_overhead_ms / 1000.0 / sm->o.time_scale;
	j->anext = NULL;
	if (sm->atail)
		sm->atail->anext = j;
	else
		sm->ahead = j;
	sm->atail = j;
	timer_arm(sm);
	return;
fail:
	job_free(j);
}

static bool target_is(const struct http_msg *m, const char *path)
{
	size_t n = strlen(path);

	return m->target_len >= n && memcmp(m->target, path, n) == 0 &&
	       (m->target_len == n || m->target[n] == '?');
}

static bool method_is(const struct http_msg *m, const char *meth)
{
	return m->method_len == strlen(meth) && memcmp(m->method, meth, m->method_len) == 0;
}

static void dispatch(struct sim *sm, struct conn *c)
{
	const struct http_msg *m = &c->m;
	enum openai_endpoint ep =
	    openai_endpoint_of(m->method, m->method_len, m->target, m->target_len);

	if (ep != OPENAI_NONE) {
		handle_generate(sm, c, ep);
		return;
	}
	if ((target_is(m, "/v1/completions") || target_is(m, "/v1/chat/completions"))) {
		respond_error(sm, c, 405, "MethodNotAllowed", "Method Not Allowed");
		return;
	}
	if (method_is(m, "GET") && target_is(m, "/v1/models"))
		handle_models(sm, c);
	else if (method_is(m, "GET") && target_is(m, "/health"))
		respond(sm, c, 200, "application/json", "", 0);
	else if (method_is(m, "GET") && target_is(m, "/metrics"))
		handle_metrics(sm, c);
	else if (method_is(m, "GET") && target_is(m, "/debug/cache"))
		handle_debug(sm, c);
	else if (sm->runtime_lora && method_is(m, "POST") && target_is(m, "/v1/load_lora_adapter"))
		handle_lora_update(sm, c, true);
	else if (sm->runtime_lora && method_is(m, "POST") &&
		 target_is(m, "/v1/unload_lora_adapter"))
		handle_lora_update(sm, c, false);
	else if (method_is(m, "POST") && target_is(m, "/reset_prefix_cache"))
		handle_reset(sm, c);
	else if (method_is(m, "POST") && target_is(m, "/debug/events"))
		handle_debug_events(sm, c);
	else
		respond(sm, c, 404, "application/json", "{\"detail\":\"Not Found\"}", 22);
}

/* Parses what is buffered: a head, then its body; dispatches a complete request. */
static void conn_process(struct sim *sm, struct conn *c)
{
	while (c->st == C_HEAD || c->st == C_BODY) {
		if (c->st == C_HEAD) {
			int n = http_parse_request(buf_rptr(&c->in), buf_unread(&c->in), MAX_HEAD,
						   &c->m);

			if (n == 0)
				return;
			if (n < 0) {
				c->keep_alive = false;
				respond_error(sm, c, -n, "BadRequestError",
					      "malformed HTTP request");
				return;
			}
			c->head_len = (size_t)n;
			c->keep_alive = c->m.keep_alive;
			c->body.len = c->body.off = 0;
			memset(&c->ch, 0, sizeof(c->ch));
			if (c->m.body == HTTP_BODY_LENGTH && c->m.content_length > sm->o.max_body) {
				c->keep_alive = false;
				respond_error(sm, c, 413, "BadRequestError",
					      "request body too large");
				return;
			}
			if (c->m.expect_continue)
				buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
			c->st = C_BODY;
		}
		/* The head points into c->in, which must not move: bodies are copied out. */
		const char *p = buf_rptr(&c->in) + c->head_len;
		size_t avail = buf_unread(&c->in) - c->head_len, used;

		if (c->m.body == HTTP_BODY_LENGTH) {
			if (avail < c->m.content_length)
				return;
			used = c->m.content_length;
			buf_append(&c->body, p, used);
		} else if (c->m.body == HTTP_BODY_CHUNKED) {
			bool done = false;
			ssize_t k = http_chunked_feed(&c->ch, p, avail, &c->body, &done);

			if (k < 0 || c->body.len > sm->o.max_body) {
				c->keep_alive = false;
				respond_error(sm, c, 400, "BadRequestError", "bad chunked body");
				return;
			}
			/* Feeding again from the start next time: reset and keep the bytes. */
			if (!done) {
				c->body.len = c->body.off = 0;
				memset(&c->ch, 0, sizeof(c->ch));
				return;
			}
			used = (size_t)k;
		} else {
			used = 0;
		}
		/* Reading more may have moved the buffer: parse the head again where it is now. */
		if (http_parse_request(buf_rptr(&c->in), buf_unread(&c->in), MAX_HEAD, &c->m) <=
		    0) {
			c->keep_alive = false;
			respond_error(sm, c, 400, "BadRequestError", "malformed HTTP request");
			return;
		}
		c->st = C_BUSY;
		dispatch(sm, c);
		/* dispatch may have queued a job or written a full response. */
		if (c->st == C_CLOSING)
			return;
		/* The head and body are consumed only after dispatch, which read them. */
		buf_consume(&c->in, c->head_len + used);
		c->head_len = 0;
		if (!c->job)
			c->st = C_HEAD;
	}
}

static void conn_request_done(struct sim *sm, struct conn *c)
{
	if (c->st != C_CLOSING) {
		c->st = C_HEAD;
		if (!c->keep_alive)
			c->st = C_CLOSING;
	}
	if (conn_flush(sm, c) < 0)
		return;
	if (c->st == C_HEAD)
		conn_process(sm, c);
	if (c->st != C_CLOSING || buf_unread(&c->out))
		conn_flush(sm, c);
	else
		conn_close(sm, c);
}

static void conn_on_event(struct sim *sm, struct conn *c, uint32_t events)
{
	if (c->closed)
		return; /* closed by an earlier event of this batch */
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		for (;;) {
			ssize_t n;

			if (buf_reserve(&c->in, 16384)) {
				conn_close(sm, c);
				return;
			}
			n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len - 1, 0);
			if (n > 0) {
				c->in.len += (size_t)n;
				c->in.data[c->in.len] = '\0';
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				c->eof = true;
			}
			break;
		}
		if (c->eof && (c->job || c->st != C_HEAD || buf_unread(&c->in) == 0)) {
			/* Client gone: vLLM aborts the request and frees its blocks. */
			conn_close(sm, c);
			return;
		}
		if (c->st == C_HEAD || c->st == C_BODY)
			conn_process(sm, c);
	}
	conn_flush(sm, c);
}

static void on_accept(struct sim *sm)
{
	for (;;) {
		int fd = accept4(sm->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct conn *c;
		struct epoll_event e;

		if (fd < 0)
			return;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->st = C_HEAD;
		sm->connections++;
		e.events = EPOLLIN | EPOLLRDHUP;
		e.data.ptr = c;
		epoll_ctl(sm->ep, EPOLL_CTL_ADD, fd, &e);
	}
}

/* --- start-up ----------------------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	if (g_sim)
		g_sim->stop = 1;
}

static const char *const NICE_WORDS[] = {
    " the",  " of",    " and",	 " to",	   " in",    " is",	" that",   " for",
    " it",   " as",    " was",	 " with",  " be",    " by",	" on",	   " not",
    " he",   " this",  " are",	 " or",	   " his",   " from",	" at",	   " which",
    " but",  " have",  " an",	 " had",   " they",  " you",	" were",   " their",
    " one",  " all",   " we",	 " can",   " her",   " has",	" there",  " been",
    " if",   " more",  " when",	 " will",  " would", " who",	" so",	   " no",
    " time", " cache", " block", " model", " token", " worker", " prefix", " route",
    " node", " fast",  " small", " large", " new",   " old",	" good",   " first"};

static int build_nice(struct sim *sm)
{
	size_t n = sizeof(NICE_WORDS) / sizeof(NICE_WORDS[0]);

	sm->nice = calloc(n, sizeof(uint32_t));
	if (!sm->nice)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct tok_ids ids = {0};

		if (tokenizer_encode(sm->tok, NICE_WORDS[i], strlen(NICE_WORDS[i]), &ids) == 0 &&
		    ids.n == 1)
			sm->nice[sm->nnice++] = ids.v[0];
		tok_ids_free(&ids);
	}
	if (!sm->nnice)
		sm->nice[sm->nnice++] = 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct sim sm = {0};
	struct kvsim_opts *o = &sm.o;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t salen = sizeof(sa);
	struct epoll_event e;
	char err[256];
	int one = 1, rc = 1, evfd = -1;
	uint32_t nblocks;

	kvsim_opts_default(o);
	switch (opt_parse(&kvsim_options, argc, argv, o)) {
	case OPT_RUN:
		break;
	case OPT_EXIT:
		return 0;
	case OPT_ERROR:
		return 2;
	}
	log_set_level((enum log_level)o->log_level);
	nblocks = o->num_blocks ? o->num_blocks
				: (uint32_t)(o->kv_bytes / o->kv_bytes_per_token / o->block_size);
	if ((uint64_t)(o->max_model_len + o->block_size - 1) / o->block_size > nblocks - 1) {
		fprintf(stderr,
			"kvsim: max_model_len %u needs more KV blocks than the %u available (vLLM "
			"refuses to start)\n",
			o->max_model_len, nblocks ? nblocks - 1 : 0);
		return 2;
	}
	o->ev.block_size = o->block_size;
	for (size_t i = 0; i < o->nlora; i++) {
		char nm[256];
		const char *path;

		kvsim_lora_name(o, i, nm, sizeof(nm), &path);
		if (strcmp(nm, o->model) == 0) {
			fprintf(stderr, "kvsim: --lora-modules: %s is the base model's name\n", nm);
			return 2;
		}
		if (lora_add(&sm, nm, path) < 0)
			return 1;
	}
	{
		const char *v = getenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING");

		sm.runtime_lora = v && (!strcasecmp(v, "true") || !strcmp(v, "1"));
	}
	if (chat_server_configure(o->chat_kwargs, o->trust_request_tmpl, err, sizeof(err))) {
		fprintf(stderr, "kvsim: %s\n", err);
		return 2;
	}
	if (models_new(&sm.models) ||
	    models_add_with(sm.models, NULL, o->tokenizer, o->chat_template, err, sizeof(err))) {
		fprintf(stderr, "kvsim: tokenizer %s: %s\n", o->tokenizer, err);
		models_free(sm.models);
		return 1;
	}
	sm.mt = models_find(sm.models, NULL);
	sm.tok = sm.mt->tok;
	sm.kv =
	    kvc_new(nblocks, o->block_size, o->hash_seed, o->hash_seed ? strlen(o->hash_seed) : 0);
	if (!sm.kv || build_nice(&sm)) {
		fprintf(stderr, "kvsim: cannot create a cache of %u blocks\n", nblocks);
		goto cleanup;
	}
	sm.s = sched_new(&o->sc, sm.kv);
	if (!sm.s)
		goto cleanup;
	if (o->gpu_share) {
		sm.gpu = gpu_share_open(o->gpu_share, err, sizeof(err));
		if (!sm.gpu) {
			fprintf(stderr, "kvsim: --gpu-share: %s\n", err);
			goto cleanup;
		}
	}
	if (o->ev.endpoint || o->ev.replay_endpoint) {
		sm.ev = kvev_open(&o->ev, err, sizeof(err));
		if (!sm.ev) {
			fprintf(stderr, "kvsim: events: %s\n", err);
			goto cleanup;
		}
	}
	sm.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(sm.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_port = htons((uint16_t)o->port);
	if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1) {
		fprintf(stderr, "kvsim: bad --host %s\n", o->host);
		goto cleanup;
	}
	if (bind(sm.lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(sm.lfd, 4096)) {
		fprintf(stderr, "kvsim: listen %s:%d: %s\n", o->host, o->port, strerror(errno));
		goto cleanup;
	}
	getsockname(sm.lfd, (struct sockaddr *)&sa, &salen);
	sm.ep = epoll_create1(EPOLL_CLOEXEC);
	sm.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	e.events = EPOLLIN;
	e.data.ptr = &sm.lfd;
	epoll_ctl(sm.ep, EPOLL_CTL_ADD, sm.lfd, &e);
	e.data.ptr = &sm.tfd;
	epoll_ctl(sm.ep, EPOLL_CTL_ADD, sm.tfd, &e);
	if (sm.ev && (evfd = kvev_fd(sm.ev)) >= 0) {
		e.data.ptr = &evfd;
		epoll_ctl(sm.ep, EPOLL_CTL_ADD, evfd, &e);
	}
	g_sim = &sm;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	char pub_ep[256] = "", rep_ep[256] = "";
	if (sm.ev)
		kvev_endpoints(sm.ev, pub_ep, sizeof(pub_ep), rep_ep, sizeof(rep_ep));
	/* One line that scripts parse: the bound port and event endpoints. */
	fprintf(
	    stderr,
	    "kvsim %s: listening on %s:%u, %u blocks of %u (%u usable), time scale %g, events %s, "
	    "replay %s\n",
	    o->worker_id, o->host, ntohs(sa.sin_port), nblocks, o->block_size, nblocks - 1,
	    o->time_scale, pub_ep[0] ? pub_ep : "none", rep_ep[0] ? rep_ep : "none");
	while (!sm.stop) {
		struct epoll_event evs[64];
		int n = epoll_wait(sm.ep, evs, 64, 1000);

		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &sm.lfd)
				on_accept(&sm);
			else if (p == &sm.tfd)
				engine_on_timer(&sm);
			else if (p == &evfd)
				kvev_poll(sm.ev);
			else
				conn_on_event(&sm, p, evs[i].events);
		}
		conns_reap(&sm);
		/* ZMQ_FD is edge-triggered: serve replays after every wake-up too. */
		if (sm.ev)
			kvev_poll(sm.ev);
	}
	rc = 0;
cleanup:
	conns_reap(&sm);
	kvev_close(sm.ev);
	sched_free(sm.s);
	gpu_share_close(sm.gpu);
	kvc_free(sm.kv);
	models_free(sm.models);
	free(sm.nice);
	for (size_t i = 0; i < sm.nlora; i++) {
		free(sm.lora[i].name);
		free(sm.lora[i].path);
	}
	kvc_events_clear(&sm.evbuf);
	free(sm.evbuf.v);
	return rc;
}
