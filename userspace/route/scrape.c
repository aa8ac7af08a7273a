// SPDX-License-Identifier: Apache-2.0
/* scrape: see scrape.h. Two halves: a Prometheus text parser that keeps only the few vLLM series
 * the load model reads, and an HTTP/1.1 client on the daemon's loop that fetches them.
 *
 * One target (a worker) moves through these states; at most one scrape is in flight:
 *
 *   IDLE ──due (tick)──▶ CONNECT ──▶ SEND ──▶ RECV ──answer framed──▶ IDLE (+ callback)
 *    ▲      (a kept-alive connection starts at SEND)           │
 *    └──────── error or deadline: connection closed (+ callback) ◀─┘
 *   FAILED (scraper_set_targets could not start a new target) ──next tick──▶ IDLE (+ callback)
 *
 * The connection stays open between scrapes when the answer allows keep-alive; while idle it
 * watches EPOLLIN|EPOLLRDHUP, so a worker that closes it is noticed and the next scrape
 * reconnects. A kept-alive connection that dies before any byte of the answer (the worker's
 * keep-alive timer fired as we reused it) is retried once on a fresh connection, within the same
 * deadline, so it never shows as a failed scrape.
 *
 * The callback is always the last thing a scrape does, so it may call scraper_set_targets (the
 * target reporting may be the one removed). Removed targets go to a zombie list with their fd
 * closed and ev.fd = -1 (the loop skips their events left in the batch), and are freed by the next
 * scraper_tick, after the batch (see loop.h). Memory: the receive buffers are kept between scrapes
 * (a vLLM answer is 30-200 KB) up to SCRAPE_KEEP_BUF, so a warm scrape allocates nothing. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/buf.h"
#include "core/http.h"
#include "core/json.h"
#include "core/log.h"
#include "route/scrape.h"

/* Engines (data-parallel ranks) of one worker whose kv usage is matched with their block count;
 * beyond that, usage is averaged without weights. */
#ifndef SCRAPE_MAX_ENGINES
#define SCRAPE_MAX_ENGINES 64
#endif
/* Receive buffers larger than this are freed after a scrape instead of kept, bytes. */
#ifndef SCRAPE_KEEP_BUF
#define SCRAPE_KEEP_BUF (1 << 20)
#endif
/* Room made before each read(2), bytes. */
#ifndef SCRAPE_READ_CHUNK
#define SCRAPE_READ_CHUNK (64 << 10)
#endif
/* Longest sample value read (digits, sign, exponent), bytes. */
#ifndef SCRAPE_MAX_VALUE
#define SCRAPE_MAX_VALUE 63
#endif

/* ==== parser ================================================================================ */

/* The series read, as one list, so the enum and the names cannot drift apart. The older names
 * are read only when the current one is absent (vLLM 0.9-0.10 expose both). */
#define SCRAPE_SERIES(X)                                                                           \
	X(RUNNING, "vllm:num_requests_running")                                                    \
	X(WAITING, "vllm:num_requests_waiting")                                                    \
	X(USAGE, "vllm:kv_cache_usage_perc")                                                       \
	X(USAGE_OLD, "vllm:gpu_cache_usage_perc")                                                  \
	X(CONFIG, "vllm:cache_config_info")                                                        \
	X(QUERIES, "vllm:prefix_cache_queries_total")                                              \
	X(HITS, "vllm:prefix_cache_hits_total")                                                    \
	X(QUERIES_OLD, "vllm:gpu_prefix_cache_queries_total")                                      \
	X(HITS_OLD, "vllm:gpu_prefix_cache_hits_total")                                            \
	X(START, "process_start_time_seconds")

/* clang-format off */
enum series {
#define X(id, name) S_##id,
	SCRAPE_SERIES(X)
#undef X
	S_MAX
};

static const struct {
	const char *name;
	size_t len;
} series_names[S_MAX] = {
#define X(id, name) [S_##id] = {name, sizeof(name) - 1},
	SCRAPE_SERIES(X)
#undef X
};
/* clang-format on */

struct span {
	const char *p;
	size_t n;
};

/* The labels of one sample that matter here (raw, escapes left in: only compared or digits). */
struct labels {
	struct span engine, blocks, block_size;
	bool has_blocks, has_block_size;
};

/* What the lines read so far add up to. */
struct acc {
	double sum[S_MAX]; /* summed series: finite values */
	unsigned n[S_MAX];
	bool seen; /* a vllm: series was read (even with an unknown value) */
	struct usage_rec {
		struct span engine;
		double v;
		bool old;
	} use[SCRAPE_MAX_ENGINES];
	size_t nuse;
	double ovf_sum[2]; /* usage samples beyond the table, [old name] */
	unsigned ovf_n[2];
	unsigned nuse_new; /* samples of the current name, table or not */
	struct config_rec {
		struct span engine;
		int64_t blocks;
	} cfg[SCRAPE_MAX_ENGINES];
	size_t ncfg;
	unsigned cfg_series;
	bool cfg_ovf, blocks_unknown, blocks_differ;
	int64_t blocks_first, blocks_sum, block_size;
	double start;
};

static inline bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static inline bool is_label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static inline const char *skip_blank(const char *p, const char *e)
{
	while (p < e && is_blank(*p))
		p++;
	return p;
}

/* The series called p[0..n), or S_MAX for any other name (the common case: a vLLM body is mostly
 * histogram buckets). */
static enum series series_find(const char *p, size_t n)
{
	if (n < 20 || (p[0] != 'v' && p[0] != 'p'))
		return S_MAX;
	for (int i = 0; i < S_MAX; i++)
		if (series_names[i].len == n && memcmp(series_names[i].name, p, n) == 0)
			return (enum series)i;
	return S_MAX;
}

/* Reads a label set from p (just after '{') up to the line end e. Returns the byte after the
 * closing '}', or NULL when the set is malformed or cut short. A value runs to the first '"' not
 * escaped by '\', so quotes, commas and braces inside values are data. */
static const char *labels_parse(const char *p, const char *e, struct labels *l)
{
	for (;;) {
		const char *n0, *v0;
		size_t nlen;

		p = skip_blank(p, e);
		if (p < e && *p == '}')
			return p + 1; /* empty set, or a trailing comma */
		for (n0 = p; p < e && is_label_char(*p); p++)
			;
		nlen = (size_t)(p - n0);
		p = skip_blank(p, e);
		if (!nlen || p >= e || *p != '=')
			return NULL;
		p = skip_blank(p + 1, e);
		if (p >= e || *p != '"')
			return NULL;
		for (v0 = ++p; p < e && *p != '"'; p++)
			if (*p == '\\' && ++p >= e)
				return NULL;
		if (p >= e)
			return NULL;
		if (nlen == 6 && memcmp(n0, "engine", 6) == 0) {
			l->engine = (struct span){v0, (size_t)(p - v0)};
		} else if (nlen == 14 && memcmp(n0, "num_gpu_blocks", 14) == 0) {
			l->blocks = (struct span){v0, (size_t)(p - v0)};
			l->has_blocks = true;
		} else if (nlen == 10 && memcmp(n0, "block_size", 10) == 0) {
			l->block_size = (struct span){v0, (size_t)(p - v0)};
			l->has_block_size = true;
		}
		p = skip_blank(p + 1, e);
		if (p < e && *p == ',')
			p++;
		else if (p < e && *p == '}')
			return p + 1;
		else
			return NULL;
	}
}

/* Reads "value [timestamp]" from p to the line end e. Returns 0 and *v (NaN and infinities as
 * written), or -1 when the rest of the line is not that. */
static int value_parse(const char *p, const char *e, double *v)
{
	char tmp[SCRAPE_MAX_VALUE + 1], *end;
	const char *v0 = p;
	size_t n;

	while (p < e && !is_blank(*p))
		p++;
	n = (size_t)(p - v0);
	if (n == 0 || n > SCRAPE_MAX_VALUE)
		return -1;
	memcpy(tmp, v0, n); /* strtod needs a terminated string; the body is not */
	tmp[n] = '\0';
	*v = strtod(tmp, &end);
	if (end != tmp + n)
		return -1;
	p = skip_blank(p, e);
	if (p == e)
		return 0;
	/* timestamp: an integer of milliseconds, ignored */
	if (*p == '-')
		p++;
	if (p == e || *p < '0' || *p > '9')
		return -1;
	while (p < e && *p >= '0' && *p <= '9')
		p++;
	return skip_blank(p, e) == e ? 0 : -1;
}

/* A label value as a count: its decimal digits, or -1 for "None", anything else, or absent. */
static int64_t label_count(struct span s, bool present)
{
	int64_t v = 0;

	if (!present || s.n == 0 || s.n > 18)
		return -1;
	for (size_t i = 0; i < s.n; i++) {
		if (s.p[i] < '0' || s.p[i] > '9')
			return -1;
		v = v * 10 + (s.p[i] - '0');
	}
	return v;
}

static bool span_eq(struct span a, struct span b)
{
	return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

/* vllm:cache_config_info: one sample per engine, the config as labels. */
static void config_add(struct acc *a, const struct labels *l)
{
	int64_t blocks = label_count(l->blocks, l->has_blocks);
	int64_t bs = label_count(l->block_size, l->has_block_size);

	if (bs > 0 && a->block_size < 0)
		a->block_size = bs;
	if (blocks < 0) {
		a->blocks_unknown = true;
	} else {
		if (a->cfg_series && blocks != a->blocks_first)
			a->blocks_differ = true;
		if (!a->cfg_series)
			a->blocks_first = blocks;
		if (a->blocks_sum <= INT64_MAX - blocks)
			a->blocks_sum += blocks;
	}
	a->cfg_series++;
	if (a->ncfg < SCRAPE_MAX_ENGINES)
		a->cfg[a->ncfg++] = (struct config_rec){l->engine, blocks};
	else
		a->cfg_ovf = true;
}

static void sample_add(struct acc *a, enum series s, const struct labels *l, double v)
{
	/* NaN is vLLM's "no value"; infinities and negatives are no count or fraction either, and
	 * would collide with -1 for unknown */
	bool known = isfinite(v) && v >= 0;

	if (s != S_START)
		a->seen = true;
	switch (s) {
	case S_CONFIG:
		config_add(a, l); /* an info gauge: the value is always 1 */
		break;
	case S_USAGE:
	case S_USAGE_OLD:
		if (!known)
			break;
		if (s == S_USAGE)
			a->nuse_new++;
		if (a->nuse < SCRAPE_MAX_ENGINES) {
			a->use[a->nuse++] = (struct usage_rec){l->engine, v, s == S_USAGE_OLD};
		} else {
			a->ovf_sum[s == S_USAGE_OLD] += v;
			a->ovf_n[s == S_USAGE_OLD]++;
		}
		break;
	case S_START:
		if (known && v > a->start)
			a->start = v;
		break;
	default:
		if (known) {
			a->sum[s] += v;
			a->n[s]++;
		}
		break;
	}
}

/* Reads one line p[0..e) (no line feed, no CR). Lines that are not a well-formed sample of a
 * series above are skipped. */
static void line_read(struct acc *a, const char *p, const char *e)
{
	struct labels l = {0};
	const char *n0;
	enum series s;
	double v;

	p = skip_blank(p, e);
	if (p == e || *p == '#')
		return;
	for (n0 = p; p < e && (is_label_char(*p) || *p == ':'); p++)
		;
	s = series_find(n0, (size_t)(p - n0));
	if (s == S_MAX)
		return;
	if (p == e || (*p != '{' && !is_blank(*p)))
		return;
	p = skip_blank(p, e);
	if (p < e && *p == '{') {
		p = labels_parse(p + 1, e, &l);
		if (!p)
			return;
	}
	if (value_parse(skip_blank(p, e), e, &v) == 0)
		sample_add(a, s, &l, v);
}

/* The blocks cache_config_info gives for an engine, or -1. */
static int64_t config_blocks(const struct acc *a, struct span engine)
{
	for (size_t i = 0; i < a->ncfg; i++)
		if (span_eq(a->cfg[i].engine, engine))
			return a->cfg[i].blocks;
	return -1;
}

/* Mean kv usage over the engines of the chosen name, weighted by each engine's blocks when every
 * one is known, or -1. */
static double usage_mean(const struct acc *a)
{
	bool old = a->nuse_new == 0;
	double sum = a->ovf_sum[old], wsum = 0, w = 0;
	unsigned n = a->ovf_n[old];
	bool weighted = !a->ovf_n[old] && !a->cfg_ovf;

	for (size_t i = 0; i < a->nuse; i++) {
		const struct usage_rec *u = &a->use[i];
		int64_t b;

		if (u->old != old)
			continue;
		sum += u->v;
		n++;
		b = config_blocks(a, u->engine);
		if (b <= 0) {
			weighted = false;
			continue;
		}
		w += (double)b;
		wsum += (double)b * u->v;
	}
	if (!n)
		return -1;
	return weighted && w > 0 ? wsum / w : sum / n;
}

static double sum_or_unknown(const struct acc *a, enum series s, enum series old)
{
	if (a->n[s])
		return a->sum[s];
	if (old != S_MAX && a->n[old])
		return a->sum[old];
	return -1;
}

int scrape_parse(const char *text, size_t len, struct scrape_metrics *out)
{
	const char *p = text, *end = len ? text + len : text; /* text may be NULL when len is 0 */
	struct acc a;

	memset(&a, 0, sizeof(a));
	a.block_size = -1;
	a.start = -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le;

		/* A last line without its line feed may be cut ("12" of "123"): the format ends
		 * every line with one, so such a line is not trusted. */
		if (!nl)
			break;
		le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
		line_read(&a, p, le);
		p = nl + 1;
	}
	out->running = sum_or_unknown(&a, S_RUNNING, S_MAX);
	out->waiting = sum_or_unknown(&a, S_WAITING, S_MAX);
	out->prefix_queries = sum_or_unknown(&a, S_QUERIES, S_QUERIES_OLD);
	out->prefix_hits = sum_or_unknown(&a, S_HITS, S_HITS_OLD);
	out->kv_usage = usage_mean(&a);
	/* vLLM's API server sums num_gpu_blocks over its engines (wait_for_engine_startup) and
	 * labels every engine's sample with that same total: equal values are the pod's total, not
	 * per-engine counts to add. Values that differ can only be per-engine: they are summed. */
	if (!a.cfg_series || a.blocks_unknown)
		out->num_gpu_blocks = -1;
	else
		out->num_gpu_blocks = a.blocks_differ ? a.blocks_sum : a.blocks_first;
	out->block_size = a.block_size;
	out->start_time = a.start;
	return a.seen ? 0 : -ENODATA;
}

/* ==== /v1/models ============================================================================ */

int scrape_models_parse(const char *text, size_t len, struct scrape_models *out)
{
	cJSON *root = json_parse(text, len);
	const cJSON *data = root ? json_get(root, "data") : NULL, *card;
	struct buf b = {0};
	size_t n = 0;
	int rc = -ENODATA;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsArray(data) || cJSON_GetArraySize(data) > SCRAPE_MODELS_MAX)
		goto done;
	cJSON_ArrayForEach(card, data)
	{
		const cJSON *id = json_get(card, "id"), *parent = json_get(card, "parent");
		const char *p = cJSON_IsString(parent) ? parent->valuestring : "";

		if (!cJSON_IsString(id) || !id->valuestring[0])
			goto done;
		if (strlen(id->valuestring) > SCRAPE_MODEL_NAME_MAX ||
		    strlen(p) > SCRAPE_MODEL_NAME_MAX)
			continue;
		if (buf_append(&b, id->valuestring, strlen(id->valuestring) + 1) < 0 ||
		    buf_append(&b, p, strlen(p) + 1) < 0) {
			rc = -ENOMEM;
			goto done;
		}
		n++;
	}
	out->text = b.data;
	out->len = b.len;
	out->n = n;
	b = (struct buf){0};
	rc = 0;
done:
	buf_free(&b);
	cJSON_Delete(root);
	return rc;
}

void scrape_models_free(struct scrape_models *m)
{
	free(m->text);
	memset(m, 0, sizeof(*m));
}

/* ==== scraper =============================================================================== */

enum tstate { T_IDLE, T_CONNECT, T_SEND, T_RECV, T_FAILED };

/* The answer being read; one assignment resets it. */
struct answer {
	bool head_done;
	bool got_bytes;	 /* a byte of it arrived */
	bool keep_alive; /* the head allows reuse */
	enum http_body kind;
	uint64_t length; /* HTTP_BODY_LENGTH: body bytes */
	struct http_chunked chunk;
};

struct target {
	struct loop_ev ev; /* ev.fd: the connection, -1 when there is none */
	struct scraper *s;
	struct target *next; /* zombie list */
	struct sockaddr_in addr;
	void *user;
	enum tstate state;
	int err;		    /* T_FAILED: the error the next tick reports */
	bool reused;		    /* this scrape runs on a kept-alive connection */
	bool taken;		    /* scraper_set_targets: matched by the new set */
	bool fresh;		    /* scraper_set_targets: created by the call under way */
	uint64_t deadline, next_at; /* ms, monotonic */
	struct buf req;		    /* the request, built once */
	size_t sent;
	struct buf in;	 /* received bytes not framed yet (after the head: the body) */
	struct buf body; /* decoded chunked body */
	struct answer ans;
};

struct scraper {
	struct loop *loop;
	scrape_fn fn;
	void *arg;
	int interval_ms, timeout_ms;
	uint32_t mark;
	size_t max_body, max_head;
	char *path;
	int (*body)(void *arg, void *user, const char *text, size_t len);
	struct target **t;
	size_t n;
	struct target *zombies;
	unsigned gen; /* bumped by every scraper_set_targets */
	uint64_t ok, failed;
};

static void target_cb(struct loop_ev *ev, uint32_t events);

/* Closes t's connection, if any. Safe inside a loop batch: ev.fd becomes -1. */
static void target_close(struct target *t)
{
	if (t->ev.fd < 0)
		return;
	loop_forget(&t->ev); /* close() takes it out of epoll: the fd is ours alone */
	close(t->ev.fd);
	t->ev.fd = -1;
}

static void buf_trim(struct buf *b)
{
	if (b->cap > SCRAPE_KEEP_BUF)
		buf_free(b);
	else
		buf_reset(b);
}

/* Makes a target for tg with its request built. Returns it, or NULL when out of memory. */
static struct target *target_new(struct scraper *s, const struct scrape_target *tg)
{
	struct target *t = calloc(1, sizeof(*t));
	char a[INET_ADDRSTRLEN];

	if (!t)
		return NULL;
	t->s = s;
	t->ev.fd = -1;
	t->ev.cb = target_cb;
	t->addr = tg->addr;
	t->user = tg->user;
	inet_ntop(AF_INET, &tg->addr.sin_addr, a, sizeof(a));
	/* Accept asks for text 0.0.4, not OpenMetrics; no Accept-Encoding, so no gzip */
	if (buf_printf(&t->req,
		       "GET %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: kvsplice\r\n"
		       "Accept: text/plain; version=0.0.4\r\n\r\n",
		       s->path, a, ntohs(tg->addr.sin_port)) < 0) {
		buf_free(&t->req);
		free(t);
		return NULL;
	}
	return t;
}

static void target_free(struct target *t)
{
	target_close(t);
	buf_free(&t->req);
	buf_free(&t->in);
	buf_free(&t->body);
	free(t);
}

/* Drops t without a callback; its memory lives until the next scraper_tick. */
static void target_zombie(struct target *t)
{
	struct scraper *s = t->s;

	target_close(t);
	t->state = T_IDLE;
	t->next = s->zombies;
	s->zombies = t;
}

/* Starts a non-blocking connect of t. Returns 0 (state CONNECT), or a negative errno. */
static int scrape_connect(struct target *t)
{
	struct scraper *s = t->s;
	int fd, one = 1, rc;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* without the mark, BPF could redirect our own scrape: refuse rather than scrape unmarked
	 */
	if (s->mark && setsockopt(fd, SOL_SOCKET, SO_MARK, &s->mark, sizeof(s->mark)) < 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&t->addr, sizeof(t->addr)) < 0 &&
	    errno != EINPROGRESS)
		goto fail;
	t->ev.fd = fd;
	t->state = T_CONNECT;
	rc = loop_set(s->loop, &t->ev, EPOLLOUT);
	if (rc < 0)
		target_close(t);
	return rc;
fail:
	rc = -errno;
	close(fd);
	return rc;
}

/* Begins a scrape of t at now, on its kept-alive connection if it has one. Returns 0, or a
 * negative errno when not even a connect could start (the caller reports it). */
static int scrape_start(struct target *t, uint64_t now)
{
	struct scraper *s = t->s;

	t->deadline = s->timeout_ms ? now + (uint64_t)s->timeout_ms : UINT64_MAX;
	t->next_at = now + (uint64_t)s->interval_ms;
	t->ans = (struct answer){0};
	t->sent = 0;
	t->reused = t->ev.fd >= 0;
	if (t->reused) {
		t->state = T_SEND;
		if (loop_set(s->loop, &t->ev, EPOLLOUT) == 0)
			return 0;
		target_close(t);
		t->reused = false;
	}
	return scrape_connect(t);
}

/* Ends t's scrape: keeps or closes the connection, then reports err (0: m holds the metrics).
 * The callback comes last: the caller must not touch t afterwards. */
static void scrape_end(struct target *t, int err, bool keep, const struct scrape_metrics *m)
{
	struct scraper *s = t->s;

	if (!keep || loop_set(s->loop, &t->ev, EPOLLIN | EPOLLRDHUP) < 0)
		target_close(t);
	t->state = T_IDLE;
	buf_trim(&t->in);
	buf_trim(&t->body);
	if (err) {
		char a[INET_ADDRSTRLEN];

		s->failed++;
		inet_ntop(AF_INET, &t->addr.sin_addr, a, sizeof(a));
		log_debug("scrape", "%s:%u: %s", a, ntohs(t->addr.sin_port), strerror(-err));
	} else {
		s->ok++;
	}
	s->fn(s->arg, t->user, err || s->body ? NULL : m, err);
}

/* The connection failed before any byte of the answer. A kept-alive one may just have been
 * closed by the worker as we reused it: one retry on a fresh connection. */
static void scrape_lost(struct target *t, int err)
{
	target_close(t);
	if (t->reused) {
		int rc;

		t->reused = false;
		t->ans = (struct answer){0};
		t->sent = 0;
		buf_reset(&t->in);
		/* inside t's own callback: no later event of the old fd is left in this batch, so
		 * the ev may carry a new fd at once */
		rc = scrape_connect(t);
		if (rc == 0)
			return;
		err = rc;
	}
	scrape_end(t, err, false, NULL);
}

/* Writes the rest of the request. Returns 1 when all is sent, 0 when the socket is full, or a
 * negative errno. */
static int scrape_send(struct target *t)
{
	while (t->sent < t->req.len) {
		ssize_t n =
		    send(t->ev.fd, t->req.data + t->sent, t->req.len - t->sent, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		t->sent += (size_t)n;
	}
	return 1;
}

/* Whether a head http_parse_response refused at max_head was refused for its length: its first
 * max_head bytes parse as the start of a head (more needed), not as a malformed one. So that a
 * worker whose head outgrew --scrape-max-head shows as too large, not as a bad answer. */
static bool head_too_long(struct target *t, size_t max_head)
{
	struct http_msg m;

	return buf_unread(&t->in) >= max_head &&
	       http_parse_response(buf_rptr(&t->in), max_head, max_head + 1, "GET", &m) == 0;
}

/* Frames the bytes in t->in. eof: the worker closed its side. Returns 1 when the answer is
 * complete, 0 when more is needed, or a negative errno: -EPROTO malformed head or coding, or a
 * status other than 200; -EMSGSIZE head over max_head or body over max_body; -ECONNRESET closed
 * mid-answer. */
static int answer_frame(struct target *t, bool eof)
{
	struct answer *a = &t->ans;
	size_t max_body = t->s->max_body, max_head = t->s->max_head;
	bool done = false;
	ssize_t used;

	while (!a->head_done) {
		struct http_msg m;
		int rc =
		    http_parse_response(buf_rptr(&t->in), buf_unread(&t->in), max_head, "GET", &m);

		if (rc == 0)
			return eof ? -ECONNRESET : 0;
		if (rc < 0)
			return head_too_long(t, max_head) ? -EMSGSIZE : -EPROTO;
		buf_consume(&t->in, (size_t)rc);
		if (m.status < 200 && m.status != 101)
			continue; /* 1xx: the answer follows */
		if (m.status != 200)
			return -EPROTO;
		a->head_done = true;
		a->kind = m.body;
		a->length = m.content_length;
		a->keep_alive = m.keep_alive;
		if (a->kind == HTTP_BODY_LENGTH && a->length > max_body)
			return -EMSGSIZE;
	}
	switch (a->kind) {
	case HTTP_BODY_NONE:
		return 1;
	case HTTP_BODY_LENGTH:
		if (buf_unread(&t->in) >= a->length)
			return 1;
		return eof ? -ECONNRESET : 0;
	case HTTP_BODY_CHUNKED:
		used = http_chunked_feed(&a->chunk, buf_rptr(&t->in), buf_unread(&t->in), &t->body,
					 &done);
		if (used < 0)
			return -EPROTO;
		buf_consume(&t->in, (size_t)used);
		if (t->body.len > max_body)
			return -EMSGSIZE;
		if (done)
			return 1;
		return eof ? -ECONNRESET : 0;
	case HTTP_BODY_EOF:
		if (buf_unread(&t->in) > max_body)
			return -EMSGSIZE;
		return eof ? 1 : 0;
	}
	return -EPROTO;
}

/* The answer is complete: parses its body and ends the scrape. */
static void scrape_done(struct target *t)
{
	struct answer *a = &t->ans;
	struct scrape_metrics m;
	const char *body = buf_rptr(&t->in);
	size_t len = 0;
	bool extra = false;

	switch (a->kind) {
	case HTTP_BODY_NONE:
		extra = buf_unread(&t->in) > 0;
		break;
	case HTTP_BODY_LENGTH:
		len = (size_t)a->length;
		extra = buf_unread(&t->in) > len;
		break;
	case HTTP_BODY_CHUNKED:
		body = t->body.data;
		len = t->body.len;
		extra = buf_unread(&t->in) > 0;
		break;
	case HTTP_BODY_EOF:
		len = buf_unread(&t->in);
		break;
	}
	/* bytes after the answer: the worker is out of step, do not reuse the connection */
	if (t->s->body) {
		int err = t->s->body(t->s->arg, t->user, body ? body : "", len);

		scrape_end(t, err, a->keep_alive && a->kind != HTTP_BODY_EOF && !extra, NULL);
		return;
	}
	scrape_end(t, scrape_parse(body ? body : "", len, &m) < 0 ? -ENODATA : 0,
		   a->keep_alive && a->kind != HTTP_BODY_EOF && !extra, &m);
}

/* Reads what the worker sent and ends the scrape when the answer is complete or broken. */
static void scrape_recv(struct target *t)
{
	bool eof = false;
	int rc;

	for (int i = 0; i < 8; i++) {
		ssize_t n;

		if (buf_reserve(&t->in, SCRAPE_READ_CHUNK) < 0) {
			scrape_end(t, -ENOMEM, false, NULL);
			return;
		}
		n = read(t->ev.fd, t->in.data + t->in.len, t->in.cap - t->in.len - 1);
		if (n > 0) {
			t->in.len += (size_t)n;
			t->in.data[t->in.len] = '\0';
			t->ans.got_bytes = true;
			rc = answer_frame(t, false);
			if (rc < 0) {
				scrape_end(t, rc, false, NULL);
				return;
			}
			if (rc > 0) {
				scrape_done(t);
				return;
			}
			continue;
		}
		if (n == 0) {
			eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			break;
		rc = -errno;
		if (!t->ans.got_bytes)
			scrape_lost(t, rc);
		else
			scrape_end(t, rc, false, NULL);
		return;
	}
	if (!eof)
		return;
	if (!t->ans.got_bytes) {
		scrape_lost(t, -ECONNRESET);
		return;
	}
	rc = answer_frame(t, true);
	if (rc > 0)
		scrape_done(t);
	else
		scrape_end(t, rc < 0 ? rc : -ECONNRESET, false, NULL);
}

static void target_cb(struct loop_ev *ev, uint32_t events)
{
	struct target *t = container_of(ev, struct target, ev);
	int rc, err = 0;
	socklen_t len = sizeof(err);

	switch (t->state) {
	case T_IDLE:
		/* a kept-alive connection between scrapes: the worker closed it, or sent bytes
		 * nobody asked for */
		target_close(t);
		return;
	case T_CONNECT:
		if (getsockopt(t->ev.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			scrape_end(t, -err, false, NULL);
			return;
		}
		t->state = T_SEND;
		/* fallthrough */
	case T_SEND:
		rc = scrape_send(t);
		if (rc < 0) {
			scrape_lost(t, rc);
			return;
		}
		if (rc == 0) {
			if (loop_set(t->s->loop, &t->ev, EPOLLOUT) < 0)
				scrape_end(t, -ENOMEM, false, NULL);
			return;
		}
		t->state = T_RECV;
		if (loop_set(t->s->loop, &t->ev, EPOLLIN | EPOLLRDHUP) < 0)
			scrape_end(t, -ENOMEM, false, NULL);
		return;
	case T_RECV:
		scrape_recv(t);
		return;
	case T_FAILED:
		return; /* no connection: cannot happen */
	}
}

/* --- public ----------------------------------------------------------------------------------- */

void scraper_opts_default(struct scraper_opts *o)
{
	o->interval_ms = SCRAPE_DEFAULT_INTERVAL_MS;
	o->timeout_ms = SCRAPE_DEFAULT_TIMEOUT_MS;
	o->mark = 0;
	o->path = "/metrics";
	o->max_body = SCRAPE_DEFAULT_MAX_BODY;
	o->max_head = SCRAPE_DEFAULT_MAX_HEAD;
	o->body = NULL;
}

int scraper_new(struct loop *loop, const struct scraper_opts *o, scrape_fn fn, void *arg,
		struct scraper **out)
{
	struct scraper_opts dflt;
	const char *path;
	struct scraper *s;

	if (!o) {
		scraper_opts_default(&dflt);
		o = &dflt;
	}
	path = o->path ? o->path : "/metrics";
	if (!loop || !fn || o->interval_ms <= 0 || o->timeout_ms < 0 || path[0] != '/' ||
	    strpbrk(path, " \t\r\n"))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->path = strdup(path);
	if (!s->path) {
		free(s);
		return -ENOMEM;
	}
	s->loop = loop;
	s->fn = fn;
	s->arg = arg;
	s->interval_ms = o->interval_ms;
	s->timeout_ms = o->timeout_ms;
	s->mark = o->mark;
	s->body = o->body;
	/* 0 is no bound: half the address space, so max + 1 never wraps */
	s->max_body = o->max_body ? o->max_body : SIZE_MAX / 2;
	s->max_head = o->max_head ? o->max_head : SIZE_MAX / 2;
	*out = s;
	return 0;
}

static void reap(struct scraper *s)
{
	while (s->zombies) {
		struct target *t = s->zombies;

		s->zombies = t->next;
		target_free(t);
	}
}

void scraper_free(struct scraper *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		target_free(s->t[i]);
	free(s->t);
	reap(s);
	free(s->path);
	free(s);
}

static bool target_same(const struct target *t, const struct scrape_target *tg)
{
	return t->addr.sin_addr.s_addr == tg->addr.sin_addr.s_addr &&
	       t->addr.sin_port == tg->addr.sin_port && t->user == tg->user;
}

int scraper_set_targets(struct scraper *s, const struct scrape_target *tg, size_t n)
{
	struct target **nt = calloc(n ? n : 1, sizeof(*nt));
	uint64_t now = clock_ms();
	size_t i, j;

	if (!nt)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		for (j = 0; j < s->n; j++)
			if (!s->t[j]->taken && target_same(s->t[j], &tg[i]))
				break;
		if (j < s->n) {
			nt[i] = s->t[j];
			nt[i]->taken = true;
			continue;
		}
		nt[i] = target_new(s, &tg[i]);
		if (!nt[i])
			goto nomem;
		nt[i]->fresh = true;
	}
	for (j = 0; j < s->n; j++) {
		if (!s->t[j]->taken)
			target_zombie(s->t[j]); /* removed: no callback */
		s->t[j]->taken = false;
	}
	free(s->t);
	s->t = nt;
	s->n = n;
	s->gen++;
	for (i = 0; i < n; i++) {
		struct target *t = nt[i];
		int rc;

		if (!t->fresh)
			continue;
		t->fresh = false;
		rc = scrape_start(t, now);
		if (rc < 0) {
			/* reported by the next tick: a callback from here could re-enter */
			t->state = T_FAILED;
			t->err = rc;
		}
	}
	return 0;
nomem:
	for (j = 0; j < i; j++) {
		if (nt[j]->fresh)
			target_free(nt[j]);
		else
			nt[j]->taken = false;
	}
	free(nt);
	return -ENOMEM;
}

void scraper_tick(struct scraper *s)
{
	uint64_t now = clock_ms();
	unsigned gen;

	reap(s);
again:
	gen = s->gen;
	for (size_t i = 0; i < s->n; i++) {
		struct target *t = s->t[i];
		int rc;

		if (t->state == T_FAILED) {
			scrape_end(t, t->err, false, NULL);
		} else if (t->state == T_IDLE) {
			if (now < t->next_at)
				continue;
			rc = scrape_start(t, now);
			if (rc == 0)
				continue;
			scrape_end(t, rc, false, NULL);
		} else if (now >= t->deadline) {
			scrape_end(t, -ETIMEDOUT, false, NULL);
		} else {
			continue;
		}
		/* the callback replaced the target set: the array is another one */
		if (s->gen != gen)
			goto again;
	}
}

int scraper_kick(struct scraper *s, void *user)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i]->user == user) {
			if (s->t[i]->state == T_IDLE)
				s->t[i]->next_at = 0;
			return 0;
		}
	return -ENOENT;
}

void scraper_counts(const struct scraper *s, uint64_t *ok, uint64_t *failed)
{
	*ok = s->ok;
	*failed = s->failed;
}

enum { SF_BODY, SF_HEAD, SF_TIMEOUT, SF_COUNT };

const struct metrics_family scrape_families[] = {
    [SF_BODY] = {"kvsplice_scrape_limit_body_bytes", METRICS_GAUGE,
		 "Largest worker /metrics body read; a larger one fails the scrape "
		 "(--scrape-max-body).",
		 NULL},
    [SF_HEAD] = {"kvsplice_scrape_limit_head_bytes", METRICS_GAUGE,
		 "Longest worker /metrics answer head read; a longer one fails the scrape "
		 "(--scrape-max-head).",
		 NULL},
    [SF_TIMEOUT] = {"kvsplice_scrape_limit_timeout_seconds", METRICS_GAUGE,
		    "Deadline of one scrape, connect to last byte (--scrape-timeout).", NULL},
};
const size_t scrape_nfamilies = SF_COUNT;
_Static_assert(sizeof(scrape_families) / sizeof(scrape_families[0]) == SF_COUNT,
	       "a family per SF_ entry");

int scraper_metrics(const struct scraper *s, struct buf *out)
{
	int rc = 0;

	rc |= metrics_head(out, &scrape_families[SF_BODY]);
	rc |= buf_printf(out, "%s %zu\n", scrape_families[SF_BODY].name, s->max_body);
	rc |= metrics_head(out, &scrape_families[SF_HEAD]);
	rc |= buf_printf(out, "%s %zu\n", scrape_families[SF_HEAD].name, s->max_head);
	rc |= metrics_head(out, &scrape_families[SF_TIMEOUT]);
	rc |= buf_printf(out, "%s %g\n", scrape_families[SF_TIMEOUT].name, s->timeout_ms / 1000.0);
	return rc < 0 ? -ENOMEM : 0;
}
