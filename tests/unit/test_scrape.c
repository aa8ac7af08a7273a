// SPDX-License-Identifier: Apache-2.0
/* scrape module: the /metrics parser as a golden table {input, expected, description} (each input
 * also parsed from an exact-size copy at every prefix length, so a read past the end shows under
 * ASan), then the async scraper against real HTTP servers on 127.0.0.1 run by threads of this
 * test: keep-alive, close after each answer, a keep-alive connection dying as it is reused,
 * chunked, EOF-delimited, 500, no vLLM metric, refused, silent, and target sets replaced while a
 * scrape is in flight (also from inside the callback). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/loop.h"
#include "route/scrape.h"
#include "tap.h"

#define U (-1) /* unknown */

/* ==== parser table ============================================================================ */

/* An excerpt of a real vLLM v1 (0.10) /metrics page of one engine, cut down: Python collectors,
 * gauges, counters with their _created samples, a histogram, cache_config_info. */
#define VLLM_BODY                                                                                  \
	"# HELP python_gc_objects_collected_total Objects collected during gc\n"                   \
	"# TYPE python_gc_objects_collected_total counter\n"                                       \
	"python_gc_objects_collected_total{generation=\"0\"} 13577.0\n"                            \
	"# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"                      \
	"# TYPE process_virtual_memory_bytes gauge\n"                                              \
	"process_virtual_memory_bytes 1.2345678848e+010\n"                                         \
	"# HELP process_start_time_seconds Start time of the process since unix epoch in "         \
	"seconds.\n"                                                                               \
	"# TYPE process_start_time_seconds gauge\n"                                                \
	"process_start_time_seconds 1.76451234567e+09\n"                                           \
	"# HELP vllm:num_requests_running Number of requests in model execution batches.\n"        \
	"# TYPE vllm:num_requests_running gauge\n"                                                 \
	"vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 2.0\n"             \
	"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"           \
	"# TYPE vllm:num_requests_waiting gauge\n"                                                 \
	"vllm:num_requests_waiting{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 1.0\n"             \
	"# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"             \
	"# TYPE vllm:kv_cache_usage_perc gauge\n"                                                  \
	"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 0.25\n"             \
	"# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "      \
	"queried tokens.\n"                                                                        \
	"# TYPE vllm:prefix_cache_queries_total counter\n"                                         \
	"vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 1234.0\n"    \
	"vllm:prefix_cache_queries_created{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} "          \
	"1.7645123457e+09\n"                                                                       \
	"# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached "     \
	"tokens.\n"                                                                                \
	"# TYPE vllm:prefix_cache_hits_total counter\n"                                            \
	"vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 567.0\n"        \
	"vllm:prefix_cache_hits_created{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} "             \
	"1.7645123457e+09\n"                                                                       \
	"# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"   \
	"# TYPE vllm:time_to_first_token_seconds histogram\n"                                      \
	"vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"Qwen/"     \
	"Qwen3-0.6B\"} 0.0\n"                                                                      \
	"vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"Qwen/"      \
	"Qwen3-0.6B\"} 12.0\n"                                                                     \
	"vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} "     \
	"12.0\n"                                                                                   \
	"vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} "       \
	"0.345\n"                                                                                  \
	"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"                 \
	"# TYPE vllm:cache_config_info gauge\n"                                                    \
	"vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales="       \
	"\"False\",cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",gpu_memory_utilization="    \
	"\"0.9\",is_attention_free=\"False\",num_cpu_blocks=\"None\",num_gpu_blocks=\"5080\","     \
	"num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"sha256\",sliding_window="     \
	"\"None\",swap_space=\"4\",engine=\"0\"} 1.0\n"

/* The same page with two engines (data parallelism 2). vLLM labels both engines' cache config
 * with the pod's total of blocks. */
#define VLLM_DP2                                                                                   \
	"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"                           \
	"vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 4.0\n"                           \
	"vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1.0\n"                           \
	"vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 0.0\n"                           \
	"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.2\n"                            \
	"vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.6\n"                            \
	"vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 100.0\n"                   \
	"vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} 50.0\n"                    \
	"vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 75.0\n"                       \
	"vllm:prefix_cache_hits_total{engine=\"1\",model_name=\"m\"} 25.0\n"

struct parse_case {
	const char *in;
	int rc;
	struct scrape_metrics want; /* running, waiting, kv_usage, blocks, block_size, queries,
				       hits, start_time */
	const char *desc;
};

static const struct parse_case parse_cases[] = {
    {VLLM_BODY, 0, {2, 1, 0.25, 5080, 16, 1234, 567, 1.76451234567e9}, "real vLLM v1 page"},
    {VLLM_DP2 "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"2000\",engine=\"0\"} "
	      "1.0\n"
	      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"2000\",engine=\"1\"} "
	      "1.0\n",
     0,
     {7, 1, 0.4, 2000, 16, 150, 100, U},
     "two engines: counts summed, the pod's block total taken once, usage mean"},
    {VLLM_DP2 "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"3000\",engine=\"1\"} "
	      "1.0\n"
	      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"1000\",engine=\"0\"} "
	      "1.0\n",
     0,
     {7, 1, 0.5, 4000, 16, 150, 100, U},
     "two engines with their own block counts: summed, usage weighted by engine"},
    {VLLM_DP2 "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"3000\",engine=\"1\"} "
	      "1.0\n",
     0,
     {7, 1, 0.4, 3000, 16, 150, 100, U},
     "one engine's blocks unknown: usage is the plain mean"},
    {VLLM_DP2 "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\",engine=\"0\"} "
	      "1.0\n"
	      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\",engine=\"1\"} "
	      "1.0\n",
     0,
     {7, 1, 0.4, U, 16, 150, 100, U},
     "cache_config_info with num_gpu_blocks \"None\": unknown, plain mean"},
    {"vllm:cache_config_info{block_size=\"None\",num_gpu_blocks=\"None\"} 1.0\n",
     0,
     {U, U, U, U, U, U, U, U},
     "config alone, all None: a vLLM worker that knows nothing yet"},
    {"vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.125\n"
     "vllm:num_requests_running{model_name=\"m\"} 1\n"
     "vllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 10\n"
     "vllm:gpu_prefix_cache_hits_total{model_name=\"m\"} 5\n",
     0,
     {1, U, 0.125, U, U, 10, 5, U},
     "older names (gpu_cache_usage_perc, gpu_prefix_cache_*) without an engine label"},
    {"vllm:gpu_cache_usage_perc{engine=\"0\"} 0.9\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.3\n"
     "vllm:gpu_prefix_cache_hits_total{engine=\"0\"} 9\n"
     "vllm:prefix_cache_hits_total{engine=\"0\"} 4\n",
     0,
     {U, U, 0.3, U, U, U, 4, U},
     "old and new names together: the new ones only, nothing counted twice"},
    {"vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_waiting{engine=\"0\"} 2\n"
     "vllm:kv_cache_usage_perc{engine=\"0\"} NaN\nprocess_start_time_seconds NaN\n",
     0,
     {U, 2, U, U, U, U, U, U},
     "NaN is unknown"},
    {"vllm:num_requests_running{engine=\"0\"} NaN\nvllm:num_requests_running{engine=\"1\"} 3\n",
     0,
     {3, U, U, U, U, U, U, U},
     "a NaN engine does not hide the others"},
    {"vllm:num_requests_running +Inf\nvllm:num_requests_waiting -1\n"
     "vllm:kv_cache_usage_perc -Inf\n",
     0,
     {U, U, U, U, U, U, U, U},
     "infinities and negatives are unknown"},
    {"vllm:num_requests_running{model_name=\"a\\\"b,c}{d\\\\\",engine=\"0\"} 5\n"
     "vllm:cache_config_info{x=\"num_gpu_blocks=\\\"9\\\", block_size=\\\"8\\\"}\","
     "num_gpu_blocks=\"700\",block_size=\"32\"} 1\n",
     0,
     {5, U, U, 700, 32, U, U, U},
     "escaped quotes, backslashes, commas and braces inside label values"},
    {"vllm:num_requests_running { engine = \"0\" , model_name=\"m\" , } 5 1700000000000\n"
     "\tvllm:num_requests_waiting\t7\t-5\n",
     0,
     {5, 7, U, U, U, U, U, U},
     "blanks around tokens, a trailing comma, timestamps"},
    {"vllm:num_requests_running 1.5e+01\nvllm:kv_cache_usage_perc 5E-1\n",
     0,
     {15, U, 0.5, U, U, U, U, U},
     "exponents"},
    {"vllm:num_requests_running{engine=\"0\"} 3\r\nvllm:num_requests_waiting{engine=\"0\"} "
     "4\r\n# HELP x y\r\n\r\nvllm:kv_cache_usage_perc 0.5\r\n",
     0,
     {3, 4, 0.5, U, U, U, U, U},
     "CRLF line ends"},
    {"vllm:num_requests_running 3\nvllm:num_requests_waiting 12",
     0,
     {3, U, U, U, U, U, U, U},
     "last line without its line feed (maybe cut) is ignored"},
    {"vllm:num_requests_running 3\nvllm:num_requests_waiting{engine=\"0",
     0,
     {3, U, U, U, U, U, U, U},
     "last line cut inside a label value"},
    {"vllm:num_requests_running{engine=\"0\"}",
     -ENODATA,
     {U, U, U, U, U, U, U, U},
     "only a cut line"},
    {"vllm:num_requests_running_foo 3\nvllm:num_requests_runnin 3\n"
     "vllm:prefix_cache_queries_created 9\nvllm:num_requests_running{engine=\"0\"} 3 x\n"
     "vllm:num_requests_running{engine=\"0\"}\nvllm:num_requests_running{engine=0} 3\n"
     "vllm:num_requests_running{engine=\"0\" 3\nvllm:num_requests_running abc\n"
     "vllm:num_requests_running{\"0\"} 3\nvllm:num_requests_running{engine=\"0\"} 3 17 x\n"
     "vllm:num_requests_running{engine=\"0\"} 3 1.5\n"
     "vllm:num_requests_running 1111111111111111111111111111111111111111111111111111111111111111"
     "111\n"
     "vllm:num_requests_waiting 2\n",
     0,
     {U, 2, U, U, U, U, U, U},
     "malformed lines and other names are skipped"},
    {"# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n"
     "process_start_time_seconds 1.7e9\npython_info{version=\"3.12\"} 1.0\n",
     -ENODATA,
     {U, U, U, U, U, U, U, 1.7e9},
     "no vllm: series (comments and process metrics only)"},
    {"", -ENODATA, {U, U, U, U, U, U, U, U}, "empty body"},
    {"<html>Not Found</html>\n", -ENODATA, {U, U, U, U, U, U, U, U}, "not Prometheus text"},
};

static bool num_eq(double a, double b)
{
	return a == b || fabs(a - b) <= 1e-9 * fmax(1, fabs(b));
}

static bool metrics_eq(const struct scrape_metrics *a, const struct scrape_metrics *b)
{
	return num_eq(a->running, b->running) && num_eq(a->waiting, b->waiting) &&
	       num_eq(a->kv_usage, b->kv_usage) && a->num_gpu_blocks == b->num_gpu_blocks &&
	       a->block_size == b->block_size && num_eq(a->prefix_queries, b->prefix_queries) &&
	       num_eq(a->prefix_hits, b->prefix_hits) && num_eq(a->start_time, b->start_time);
}

static void metrics_print(const char *what, const struct scrape_metrics *m)
{
	printf("#   %s: running %g waiting %g kv %g blocks %lld bs %lld queries %g hits %g start "
	       "%.3f\n",
	       what, m->running, m->waiting, m->kv_usage, (long long)m->num_gpu_blocks,
	       (long long)m->block_size, m->prefix_queries, m->prefix_hits, m->start_time);
}

static void test_parse_table(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		const struct parse_case *c = &parse_cases[i];
		size_t n = strlen(c->in);
		char *copy = malloc(n ? n : 1); /* exact size, no NUL: ASan sees any overread */
		struct scrape_metrics m;
		int rc, bad = 0;

		memcpy(copy, c->in, n);
		rc = scrape_parse(copy, n, &m);
		CHECK_EQ(rc, c->rc, c->desc);
		if (!CHECK(metrics_eq(&m, &c->want), "%s: values", c->desc)) {
			metrics_print("got ", &m);
			metrics_print("want", &c->want);
		}
		for (size_t k = 0; k < n; k++) {
			char *pre = malloc(k ? k : 1);

			memcpy(pre, c->in, k);
			rc = scrape_parse(pre, k, &m);
			if (rc != 0 && rc != -ENODATA)
				bad++;
			free(pre);
		}
		CHECK(bad == 0, "%s: every prefix parses within bounds (%d bad)", c->desc, bad);
		free(copy);
	}
}

/* A vLLM-sized page (~200 KB, mostly histogram buckets) parses fast. */
static void test_parse_speed(void)
{
	struct buf b = {0};
	struct scrape_metrics m;
	struct timespec t0, t1;
	int reps = 200, ok = 1;
	double s, mbps;

	while (b.len < 200000)
		buf_printf(&b,
			   "vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"%zu.0\","
			   "model_name=\"Qwen/Qwen3-0.6B\"} 12345.0\n",
			   b.len);
	buf_puts(&b, VLLM_BODY);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < reps; i++)
		ok &= scrape_parse(b.data, b.len, &m) == 0 && m.running == 2;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	mbps = (double)b.len * reps / s / 1e6;
	printf("# parse: %zu bytes, %.0f MB/s\n", b.len, mbps);
	CHECK(ok, "a 200 KB page parses with the vLLM series found");
	CHECK(mbps > 20, "parse faster than 20 MB/s (got %.0f)", mbps);
	buf_free(&b);
}

/* ==== test servers ============================================================================ */

enum srv_mode {
	SRV_KEEP,  /* 200 with Content-Length, keep-alive */
	SRV_CLOSE, /* 200 with "Connection: close", then close */
	SRV_ONE,   /* one answer per connection; the next request is met with a close (a keep-alive
		      timer firing just as the request arrives) */
	SRV_CHUNKED, /* 200 chunked in uneven pieces, keep-alive */
	SRV_EOF,     /* 200 without a length, body ends at close */
	SRV_500,     /* 500 */
	SRV_NODATA,  /* 200 with a body that holds no vLLM series */
	SRV_SILENT,  /* accepts, reads, never answers */
};

struct srv {
	int lfd;
	struct sockaddr_in addr;
	enum srv_mode mode;
	atomic_int conns, reqs, stop;
	pthread_t th;
};

static const char srv_body[] = VLLM_BODY;

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Answers one request on fd per the mode. Returns 0 to go on with the connection, -1 to close. */
static int srv_answer(struct srv *v, int fd, int nth)
{
	char head[256];
	int n;

	switch (v->mode) {
	case SRV_KEEP:
	case SRV_CLOSE:
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; "
			     "charset=utf-8\r\nContent-Length: %zu\r\n%s\r\n",
			     sizeof(srv_body) - 1,
			     v->mode == SRV_CLOSE ? "Connection: close\r\n" : "");
		if (send_all(fd, head, (size_t)n) || send_all(fd, srv_body, sizeof(srv_body) - 1))
			return -1;
		return v->mode == SRV_CLOSE ? -1 : 0;
	case SRV_ONE:
		if (nth > 0)
			return -1;
		n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
			     sizeof(srv_body) - 1);
		if (send_all(fd, head, (size_t)n) || send_all(fd, srv_body, sizeof(srv_body) - 1))
			return -1;
		return 0;
	case SRV_CHUNKED: {
		size_t len = sizeof(srv_body) - 1, off = 0, piece = 7;
		char sz[32];

		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
		if (send_all(fd, head, (size_t)n))
			return -1;
		while (off < len) {
			size_t k = len - off < piece ? len - off : piece;

			n = snprintf(sz, sizeof(sz), "%zx;x=y\r\n", k);
			if (send_all(fd, sz, (size_t)n) || send_all(fd, srv_body + off, k) ||
			    send_all(fd, "\r\n", 2))
				return -1;
			off += k;
			piece = piece * 3 + 1;
		}
		return send_all(fd, "0\r\n\r\n", 5) ? -1 : 0;
	}
	case SRV_EOF:
		n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
		send_all(fd, head, (size_t)n);
		send_all(fd, srv_body, sizeof(srv_body) - 1);
		return -1;
	case SRV_500:
		n = snprintf(
		    head, sizeof(head),
		    "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\noops\n");
		return send_all(fd, head, (size_t)n) ? -1 : 0;
	case SRV_NODATA:
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nnothing to see here\n");
		return send_all(fd, head, (size_t)n) ? -1 : 0;
	case SRV_SILENT:
		return 0;
	}
	return -1;
}

/* Serves one connection: reads request heads, answers each. */
static void srv_conn(struct srv *v, int fd)
{
	char in[4096];
	size_t len = 0;
	int nth = 0;

	while (!v->stop) {
		struct pollfd pf = {fd, POLLIN, 0};
		char *end;
		ssize_t r;

		if (poll(&pf, 1, 20) <= 0)
			continue;
		r = read(fd, in + len, sizeof(in) - 1 - len);
		if (r <= 0)
			return;
		len += (size_t)r;
		in[len] = '\0';
		while ((end = strstr(in, "\r\n\r\n"))) {
			size_t used = (size_t)(end + 4 - in);

			v->reqs++;
			if (srv_answer(v, fd, nth++) < 0)
				return;
			memmove(in, in + used, len - used + 1);
			len -= used;
		}
		if (len == sizeof(in) - 1)
			return;
	}
}

static void *srv_main(void *arg)
{
	struct srv *v = arg;

	while (!v->stop) {
		struct pollfd pf = {v->lfd, POLLIN, 0};
		int fd;

		if (poll(&pf, 1, 20) <= 0)
			continue;
		fd = accept(v->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		v->conns++;
		srv_conn(v, fd);
		close(fd);
	}
	return NULL;
}

static int srv_start(struct srv *v, enum srv_mode mode)
{
	socklen_t alen = sizeof(v->addr);

	memset(v, 0, sizeof(*v));
	v->mode = mode;
	v->addr.sin_family = AF_INET;
	v->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	v->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (v->lfd < 0 || bind(v->lfd, (struct sockaddr *)&v->addr, sizeof(v->addr)) < 0 ||
	    listen(v->lfd, 16) < 0 || getsockname(v->lfd, (struct sockaddr *)&v->addr, &alen) < 0)
		return -1;
	return pthread_create(&v->th, NULL, srv_main, v) == 0 ? 0 : -1;
}

static void srv_stop(struct srv *v)
{
	v->stop = 1;
	pthread_join(v->th, NULL);
	close(v->lfd);
}

/* ==== scraper ================================================================================= */

struct rec {
	int calls, ok, errs, last_err;
	int by_user[3];
	bool got_null_m; /* every failure came with m NULL */
	struct scrape_metrics last;
	struct scraper *clear_on_call; /* when set: the callback empties the target set */
};

static int users[3]; /* &users[i] identifies target i */

static void on_scrape(void *arg, void *user, const struct scrape_metrics *m, int err)
{
	struct rec *r = arg;

	r->calls++;
	for (int i = 0; i < 3; i++)
		if (user == &users[i])
			r->by_user[i]++;
	if (err) {
		r->errs++;
		r->last_err = err;
		if (m)
			r->got_null_m = false;
	} else {
		r->ok++;
		r->last = *m;
	}
	if (r->clear_on_call)
		CHECK_EQ(scraper_set_targets(r->clear_on_call, NULL, 0), 0,
			 "set_targets from inside the callback");
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs the loop and ticks for up to ms, or until *count reaches until (count NULL: the whole
 * time). Returns the elapsed ms. */
static uint64_t spin(struct loop *l, struct scraper *s, int ms, const int *count, int until)
{
	uint64_t t0 = ms_now(), end = t0 + (uint64_t)ms;

	while (ms_now() < end && !(count && *count >= until)) {
		loop_run(l, 5);
		scraper_tick(s);
	}
	return ms_now() - t0;
}

static struct scrape_target target_of(const struct srv *v, int i)
{
	return (struct scrape_target){v->addr, &users[i]};
}

struct fixture {
	struct loop *loop;
	struct scraper *s;
	struct rec r;
};

static int fixture_new(struct fixture *f, int interval_ms, int timeout_ms)
{
	struct scraper_opts o;
	scraper_opts_default(&o);
	o.interval_ms = interval_ms;
	o.timeout_ms = timeout_ms;

	memset(f, 0, sizeof(*f));
	f->r.got_null_m = true;
	if (loop_new(&f->loop) < 0)
		return -1;
	return scraper_new(f->loop, &o, on_scrape, &f->r, &f->s);
}

static void fixture_free(struct fixture *f)
{
	scraper_free(f->s);
	loop_free(f->loop);
}

static const struct scrape_metrics body_metrics = {2,  1,    0.25, 5080,
						   16, 1234, 567,  1.76451234567e9};

static void test_keep_alive(void)
{
	struct fixture f;
	struct srv v;
	struct scrape_target t;
	uint64_t ok, failed;

	if (!CHECK(srv_start(&v, SRV_KEEP) == 0 && fixture_new(&f, 30, 1000) == 0,
		   "keep-alive: set-up"))
		return;
	t = target_of(&v, 0);
	CHECK_EQ(scraper_set_targets(f.s, &t, 1), 0, "keep-alive: set one target");
	spin(f.loop, f.s, 3000, &f.r.calls, 5);
	CHECK_EQ(f.r.ok, 5, "keep-alive: five scrapes succeed");
	CHECK(metrics_eq(&f.r.last, &body_metrics), "keep-alive: the metrics read are the page's");
	CHECK_EQ(v.conns, 1, "keep-alive: all over one connection");
	CHECK(v.reqs >= 5, "keep-alive: the server saw every request (%d)", v.reqs);
	scraper_counts(f.s, &ok, &failed);
	CHECK(ok == 5 && failed == 0, "keep-alive: counts %llu ok %llu failed",
	      (unsigned long long)ok, (unsigned long long)failed);
	fixture_free(&f);
	srv_stop(&v);
}

/* One server mode, scraped until n callbacks: returns the record. */
static void scrape_mode(enum srv_mode mode, int n, int timeout_ms, struct rec *out, int *conns,
			int *reqs)
{
	struct fixture f;
	struct srv v;
	struct scrape_target t;

	memset(out, 0, sizeof(*out));
	if (srv_start(&v, mode) < 0 || fixture_new(&f, 30, timeout_ms) < 0) {
		CHECK(0, "set-up of server mode %d", mode);
		return;
	}
	t = target_of(&v, 0);
	scraper_set_targets(f.s, &t, 1);
	spin(f.loop, f.s, 3000, &f.r.calls, n);
	*out = f.r;
	fixture_free(&f);
	srv_stop(&v);
	*conns = v.conns;
	*reqs = v.reqs;
}

static void test_server_modes(void)
{
	struct rec r;
	int conns, reqs;

	scrape_mode(SRV_CLOSE, 4, 1000, &r, &conns, &reqs);
	CHECK_EQ(r.ok, 4, "Connection: close: four scrapes succeed");
	CHECK(reqs >= 4 && conns >= reqs && conns <= reqs + 1,
	      "Connection: close: one connection per scrape (%d conns, %d requests)", conns, reqs);

	scrape_mode(SRV_ONE, 4, 1000, &r, &conns, &reqs);
	CHECK(r.ok == 4 && r.errs == 0,
	      "kept-alive connection closed as it is reused: retried, no failure (%d ok, %d err)",
	      r.ok, r.errs);
	CHECK(conns >= 4, "kept-alive connection closed as it is reused: new connections (%d)",
	      conns);

	scrape_mode(SRV_CHUNKED, 3, 1000, &r, &conns, &reqs);
	CHECK_EQ(r.ok, 3, "chunked: three scrapes succeed");
	CHECK(metrics_eq(&r.last, &body_metrics), "chunked: the metrics read are the page's");
	CHECK_EQ(conns, 1, "chunked: kept alive");

	scrape_mode(SRV_EOF, 2, 1000, &r, &conns, &reqs);
	CHECK_EQ(r.ok, 2, "body delimited by close: two scrapes succeed");
	CHECK(metrics_eq(&r.last, &body_metrics), "body delimited by close: the page's metrics");

	scrape_mode(SRV_500, 2, 1000, &r, &conns, &reqs);
	CHECK(r.calls == 2 && r.errs == 2 && r.last_err == -EPROTO, "status 500: -EPROTO (got %d)",
	      r.last_err);
	CHECK(r.got_null_m, "status 500: m is NULL");

	scrape_mode(SRV_NODATA, 1, 1000, &r, &conns, &reqs);
	CHECK(r.errs == 1 && r.last_err == -ENODATA, "200 without vLLM series: -ENODATA (got %d)",
	      r.last_err);
}

static void test_refused(void)
{
	struct fixture f;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	struct scrape_target t;
	uint64_t ok, failed;
	/* bound, never listening: the port is ours and every connect to it is refused */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		       getsockname(fd, (struct sockaddr *)&a, &alen) == 0 &&
		       fixture_new(&f, 100, 1000) == 0,
		   "refused: set-up"))
		return;
	t = (struct scrape_target){a, &users[0]};
	scraper_set_targets(f.s, &t, 1);
	spin(f.loop, f.s, 1000, NULL, 0);
	CHECK(f.r.calls >= 8 && f.r.calls <= 12,
	      "refused: one report per 100 ms attempt over 1 s, no busy loop (%d)", f.r.calls);
	CHECK(f.r.errs == f.r.calls && f.r.last_err == -ECONNREFUSED,
	      "refused: every report is -ECONNREFUSED (got %d)", f.r.last_err);
	scraper_counts(f.s, &ok, &failed);
	CHECK(ok == 0 && failed == (uint64_t)f.r.calls, "refused: counted as failed");
	fixture_free(&f);
	close(fd);
}

static void test_silent(void)
{
	struct fixture f;
	struct srv v;
	struct scrape_target t;
	uint64_t ms;

	if (!CHECK(srv_start(&v, SRV_SILENT) == 0 && fixture_new(&f, 50, 200) == 0,
		   "silent: set-up"))
		return;
	t = target_of(&v, 0);
	scraper_set_targets(f.s, &t, 1);
	ms = spin(f.loop, f.s, 2000, &f.r.calls, 1);
	CHECK(f.r.calls == 1 && f.r.last_err == -ETIMEDOUT && f.r.got_null_m,
	      "silent server: -ETIMEDOUT (got %d)", f.r.last_err);
	CHECK(ms >= 190 && ms < 600, "silent server: reported at the 200 ms deadline (%llu ms)",
	      (unsigned long long)ms);
	CHECK_EQ(v.reqs, 1, "silent server: the request was sent");
	fixture_free(&f);
	srv_stop(&v);
}

static void test_replace(void)
{
	struct fixture f;
	struct srv silent, a, b;
	struct scrape_target t[2];
	uint64_t t0;

	if (!CHECK(srv_start(&silent, SRV_SILENT) == 0 && srv_start(&a, SRV_KEEP) == 0 &&
		       srv_start(&b, SRV_KEEP) == 0 && fixture_new(&f, 50, 300) == 0,
		   "replace: set-up"))
		return;
	/* target 0 (silent) in flight, then replaced by target 1 */
	t[0] = target_of(&silent, 0);
	scraper_set_targets(f.s, t, 1);
	t0 = ms_now();
	while (silent.reqs < 1 && ms_now() - t0 < 1000)
		spin(f.loop, f.s, 5, NULL, 0);
	CHECK_EQ(silent.reqs, 1, "replace: the first target's scrape is in flight");
	t[0] = target_of(&a, 1);
	CHECK_EQ(scraper_set_targets(f.s, t, 1), 0, "replace: new set");
	spin(f.loop, f.s, 500, NULL, 0);
	CHECK_EQ(f.r.by_user[0], 0,
		 "replace: no callback for the removed target, even after its "
		 "deadline");
	CHECK(f.r.by_user[1] >= 4 && f.r.errs == 0, "replace: the new target is scraped (%d)",
	      f.r.by_user[1]);

	/* target 1 kept (same addr and user), target 2 added */
	t[1] = target_of(&b, 2);
	CHECK_EQ(scraper_set_targets(f.s, t, 2), 0, "replace: grow the set");
	spin(f.loop, f.s, 300, NULL, 0);
	CHECK_EQ(a.conns, 1, "replace: an unchanged target keeps its connection");
	CHECK(f.r.by_user[2] >= 3, "replace: the added target is scraped (%d)", f.r.by_user[2]);

	/* the set emptied from inside a callback, in the middle of the loop's batch */
	f.r.clear_on_call = f.s;
	f.r.calls = 0;
	spin(f.loop, f.s, 300, NULL, 0);
	CHECK_EQ(f.r.calls, 1, "replace: nothing after the callback emptied the set");
	f.r.clear_on_call = NULL;

	/* freed with a scrape in flight: no callback, nothing leaked */
	t[0] = target_of(&silent, 0);
	scraper_set_targets(f.s, t, 1);
	spin(f.loop, f.s, 50, NULL, 0);
	f.r.calls = 0;
	fixture_free(&f);
	CHECK_EQ(f.r.calls, 0, "replace: scraper_free makes no callback");
	srv_stop(&silent);
	srv_stop(&a);
	srv_stop(&b);
}

/* scraper_opts.max_body: a body of exactly the bound is read, one byte more fails the scrape
 * with -EMSGSIZE, whatever its framing. */
static void test_max_body(void)
{
	const size_t len = sizeof(srv_body) - 1;
	static const struct {
		enum srv_mode mode;
		size_t under; /* max_body = the body's length - under */
		int err;
		const char *what;
	} rows[] = {
	    {SRV_KEEP, 0, 0, "max_body: a Content-Length body of exactly the bound is read"},
	    {SRV_KEEP, 1, -EMSGSIZE, "max_body: a Content-Length one byte over: -EMSGSIZE"},
	    {SRV_CHUNKED, 0, 0, "max_body: a chunked body of exactly the bound is read"},
	    {SRV_CHUNKED, 1, -EMSGSIZE, "max_body: a chunked body one byte over: -EMSGSIZE"},
	    {SRV_EOF, 0, 0, "max_body: a body delimited by close of exactly the bound is read"},
	    {SRV_EOF, 1, -EMSGSIZE, "max_body: a body delimited by close one byte over: -EMSGSIZE"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct scraper_opts o;
		scraper_opts_default(&o);
		o.interval_ms = 30;
		o.timeout_ms = 1000;
		o.max_body = len - rows[i].under;
		struct fixture f = {.r.got_null_m = true};
		struct srv v;
		struct scrape_target t;

		if (!CHECK(srv_start(&v, rows[i].mode) == 0 && loop_new(&f.loop) == 0 &&
			       scraper_new(f.loop, &o, on_scrape, &f.r, &f.s) == 0,
			   "%s: set-up", rows[i].what))
			return;
		t = target_of(&v, 0);
		scraper_set_targets(f.s, &t, 1);
		spin(f.loop, f.s, 3000, &f.r.calls, 1);
		CHECK(f.r.calls == 1 && (rows[i].err ? f.r.errs == 1 && f.r.last_err == rows[i].err
						     : f.r.ok == 1),
		      "%s (got %d)", rows[i].what, f.r.last_err);
		fixture_free(&f);
		srv_stop(&v);
	}
}

/* scraper_opts.max_head: an answer head of exactly the bound is read, one byte longer fails the
 * scrape with -EMSGSIZE (too large, as a body over max_body), not -EPROTO (a bad answer). */
static void test_max_head(void)
{
	/* SRV_KEEP's head */
	const size_t len =
	    (size_t)snprintf(NULL, 0,
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
			     "version=0.0.4; charset=utf-8\r\nContent-Length: %zu\r\n\r\n",
			     sizeof(srv_body) - 1);
	static const struct {
		size_t under; /* max_head = the head's length - under */
		int err;
		const char *what;
	} rows[] = {
	    {0, 0, "max_head: a head of exactly the bound is read"},
	    {1, -EMSGSIZE, "max_head: a head one byte longer: -EMSGSIZE"},
	    {40, -EMSGSIZE, "max_head: a head 40 bytes longer (the bound mid-line): -EMSGSIZE"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct scraper_opts o;
		scraper_opts_default(&o);
		o.interval_ms = 30;
		o.timeout_ms = 1000;
		o.max_head = len - rows[i].under;
		struct fixture f = {.r.got_null_m = true};
		struct srv v;
		struct scrape_target t;

		if (!CHECK(srv_start(&v, SRV_KEEP) == 0 && loop_new(&f.loop) == 0 &&
			       scraper_new(f.loop, &o, on_scrape, &f.r, &f.s) == 0,
			   "%s: set-up", rows[i].what))
			return;
		t = target_of(&v, 0);
		scraper_set_targets(f.s, &t, 1);
		spin(f.loop, f.s, 3000, &f.r.calls, 1);
		CHECK(f.r.calls == 1 && (rows[i].err ? f.r.errs == 1 && f.r.last_err == rows[i].err
						     : f.r.ok == 1),
		      "%s (got %d)", rows[i].what, f.r.last_err);
		fixture_free(&f);
		srv_stop(&v);
	}
}

static void test_new_args(void)
{
	struct loop *l;
	struct scraper *s = NULL;
	struct scraper_opts bad_path, bad_time, zero_time, blank, off;
	struct rec r = {0};

	scraper_opts_default(&bad_path);
	bad_path.path = "metrics";
	scraper_opts_default(&bad_time);
	bad_time.interval_ms = -1;
	scraper_opts_default(&zero_time);
	zero_time.interval_ms = 0;
	scraper_opts_default(&blank);
	blank.path = "/me trics";
	scraper_opts_default(&off);
	off.timeout_ms = 0;
	off.max_body = off.max_head = 0;
	if (loop_new(&l) < 0)
		return;
	CHECK_EQ(scraper_new(l, &zero_time, on_scrape, &r, &s), -EINVAL, "interval 0 refused");
	CHECK_EQ(scraper_new(l, &off, on_scrape, &r, &s), 0,
		 "timeout and bounds 0: none (accepted)");
	scraper_free(s);
	s = NULL;
	CHECK_EQ(scraper_new(l, &bad_path, on_scrape, &r, &s), -EINVAL, "path without '/'");
	CHECK_EQ(scraper_new(l, &bad_time, on_scrape, &r, &s), -EINVAL, "negative interval");
	CHECK_EQ(scraper_new(l, &blank, on_scrape, &r, &s), -EINVAL, "path with a blank");
	CHECK_EQ(scraper_new(l, NULL, on_scrape, &r, &s), 0, "NULL options: defaults");
	scraper_free(s);
	scraper_free(NULL);
	loop_free(l);
}

/* scraper_metrics: the bounds in force, as the router's collector has always written them
 * (defaults when the options leave them 0). */
static void test_limits_text(void)
{
	static const char want[] =
	    "# HELP kvsplice_scrape_limit_body_bytes Largest worker /metrics body read; a "
	    "larger one fails the scrape (--scrape-max-body).\n"
	    "# TYPE kvsplice_scrape_limit_body_bytes gauge\n"
	    "kvsplice_scrape_limit_body_bytes 12345\n"
	    "# HELP kvsplice_scrape_limit_head_bytes Longest worker /metrics answer head "
	    "read; a longer one fails the scrape (--scrape-max-head).\n"
	    "# TYPE kvsplice_scrape_limit_head_bytes gauge\n"
	    "kvsplice_scrape_limit_head_bytes 678\n"
	    "# HELP kvsplice_scrape_limit_timeout_seconds Deadline of one scrape, connect "
	    "to last byte (--scrape-timeout).\n"
	    "# TYPE kvsplice_scrape_limit_timeout_seconds gauge\n"
	    "kvsplice_scrape_limit_timeout_seconds 1.5\n";
	struct scraper_opts o;
	scraper_opts_default(&o);
	o.max_body = 12345;
	o.max_head = 678;
	o.timeout_ms = 1500;
	struct loop *l;
	struct scraper *s;
	struct rec r = {0};
	struct buf b = {0};
	char line[128];

	if (!CHECK(loop_new(&l) == 0 && scraper_new(l, &o, on_scrape, &r, &s) == 0,
		   "limits: set-up"))
		return;
	CHECK(scraper_metrics(s, &b) == 0 && b.len == sizeof(want) - 1 &&
		  memcmp(b.data, want, b.len) == 0,
	      "scraper_metrics: the bounds given, in the router's text");
	scraper_free(s);
	buf_free(&b);
	CHECK(scraper_new(l, NULL, on_scrape, &r, &s) == 0 && scraper_metrics(s, &b) == 0,
	      "scraper_metrics with the default options");
	snprintf(line, sizeof(line), "\nkvsplice_scrape_limit_body_bytes %u\n",
		 (unsigned)SCRAPE_DEFAULT_MAX_BODY);
	CHECK(b.data && strstr(b.data, line), "the default body bound: %s", line + 1);
	scraper_free(s);
	buf_free(&b);
	loop_free(l);
}

/* /v1/models bodies: what vLLM's show_available_models answers, and what is no model list. */
static void test_models_parse(void)
{
	static const char vllm[] =
	    "{\"object\":\"list\",\"data\":[{\"id\":\"Qwen/Qwen3-0.6B\",\"object\":\"model\","
	    "\"created\":1,\"owned_by\":\"vllm\",\"root\":\"/models/qwen3\",\"parent\":null,"
	    "\"max_model_len\":4096,\"permission\":[{\"id\":\"modelperm-1\"}]},"
	    "{\"id\":\"sql-lora\",\"object\":\"model\",\"created\":1,\"owned_by\":\"vllm\","
	    "\"root\":\"/adapters/sql\",\"parent\":\"Qwen/Qwen3-0.6B\",\"max_model_len\":null,"
	    "\"permission\":[]}]}";
	static const char want[] = "Qwen/Qwen3-0.6B\0\0sql-lora\0Qwen/Qwen3-0.6B\0";
	static const struct {
		const char *body, *what;
	} bad[] = {
	    {"", "an empty body"},
	    {"<html>404</html>", "not JSON"},
	    {"{\"object\":\"list\"}", "no data"},
	    {"{\"data\":{}}", "data not an array"},
	    {"{\"data\":[{\"object\":\"model\"}]}", "a card without an id"},
	    {"{\"data\":[{\"id\":7}]}", "a card whose id is no string"},
	};
	struct scrape_models m;
	char longid[SCRAPE_MODEL_NAME_MAX + 64];

	CHECK(scrape_models_parse(vllm, sizeof(vllm) - 1, &m) == 0 && m.n == 2 &&
		  m.len == sizeof(want) - 1 && memcmp(m.text, want, m.len) == 0,
	      "vLLM's model list: the base model (no parent) and the adapter with its parent");
	scrape_models_free(&m);
	CHECK(scrape_models_parse("{\"data\":[]}", 11, &m) == 0 && m.n == 0,
	      "an empty list: known, serving nothing");
	scrape_models_free(&m);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(scrape_models_parse(bad[i].body, strlen(bad[i].body), &m) == -ENODATA &&
			  !m.text && !m.n,
		      "no model list: %s", bad[i].what);
	}
	snprintf(longid, sizeof(longid), "{\"data\":[{\"id\":\"%0*d\"},{\"id\":\"ok\"}]}",
		 SCRAPE_MODEL_NAME_MAX + 1, 7);
	CHECK(scrape_models_parse(longid, strlen(longid), &m) == 0 && m.n == 1 &&
		  !strcmp(m.text, "ok"),
	      "an id longer than SCRAPE_MODEL_NAME_MAX is left out, the others kept");
	scrape_models_free(&m);
}

int main(void)
{
	test_models_parse();
	test_parse_table();
	test_parse_speed();
	test_new_args();
	test_keep_alive();
	test_server_modes();
	test_refused();
	test_silent();
	test_replace();
	test_max_body();
	test_max_head();
	test_limits_text();
	return tap_done();
}
