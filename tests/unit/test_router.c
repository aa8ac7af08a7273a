// SPDX-License-Identifier: Apache-2.0
/* router: the whole decision on real requests (tokenizer, chat template, chain, index, policy),
 * fallbacks and their causes, retries, load accounting, the decision log; and that two routers
 * fed the same events place the same new prefixes on the same workers whatever order their
 * requests come in (docs/design.md, "One kvsplice per node"). The index is fed directly (this test
 * is its writer); an events runtime only names the workers (its sockets connect nowhere useful). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kv/blockhash.h"
#include "kv/events.h"
#include "kv/index.h"
#include "core/metrics.h"
#include "prompt/models.h"
#include "prompt/openai.h"
#include "route/router.h"
#include "route/scrape.h"
#include "tap.h"
#include "prompt/tokenizer.h"

#define NW 6
#define BS 16

struct rig {
	struct index *idx;
	struct events *ev;
	struct router *r;
	struct metrics *m;
	struct service svc;
	struct endpoint eps[NW];
	struct services svcs;
};

/* rig_init's routers tokenize whole prompts before deciding (--whole-prompt) */
static bool rig_whole_prompt;

static void rig_init(struct rig *g, const char *policy, const struct models *m, uint64_t seed)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 16;
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	struct router_cfg rc;
	router_cfg_default(&rc);
	rc.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
	rc.policy = policy;
	rc.models = m;
	rc.seed = seed;
	rc.whole_prompt = rig_whole_prompt;

	memset(g, 0, sizeof(*g));
	index_new(&icfg, &g->idx);
	ecfg.index = g->idx;
	events_new(&ecfg, &g->ev);
	snprintf(g->svc.name, sizeof(g->svc.name), "qwen");
	for (int i = 0; i < NW; i++) {
		char name[64], pub[64];

		snprintf(g->eps[i].name, sizeof(g->eps[i].name), "w%d", i);
		g->eps[i].addr.sin_family = AF_INET;
		g->eps[i].addr.sin_addr.s_addr = htonl(0x0af40101 + (uint32_t)i); /* 10.244.1.x */
		g->eps[i].addr.sin_port = htons(8000);
		snprintf(name, sizeof(name), "qwen/w%d", i);
		snprintf(pub, sizeof(pub), "tcp://127.0.0.1:%d", 9 + i);
		events_worker_add(g->ev, (uint32_t)i, name, pub, NULL, NULL);
	}
	g->svc.endpoints = g->eps;
	g->svc.nendpoints = NW;
	g->svcs = (struct services){.refs = 1, .n = 1, .v = &g->svc};
	rc.index = g->idx;
	rc.events = g->ev;
	metrics_new(&g->m);
	rc.metrics = g->m;
	router_new(&rc, &g->r);
	router_set_services(g->r, &g->svcs);
}

static void rig_free(struct rig *g)
{
	router_free(g->r);
	metrics_free(g->m);
	events_free(g->ev);
	index_free(g->idx);
}

/* kvsplice_route_tokens_total{kind="KIND"} of g's metrics (-1: not there). */
static double tokens_metric(struct rig *g, const char *kind)
{
	struct buf b = {0};
	char want[96];
	const char *p;
	double v = -1;

	snprintf(want, sizeof(want), "kvsplice_route_tokens_total{kind=\"%s\"} ", kind);
	if (metrics_render(g->m, &b) == 0 && b.data && (p = strstr(b.data, want)))
		v = strtod(p + strlen(want), NULL);
	buf_free(&b);
	return v;
}

/* Stores tokens[0..n) (full blocks) on worker w of g's index, engine hashes from salt. */
static void store(struct rig *g, uint32_t w, const uint32_t *tokens, size_t n, uint64_t salt)
{
	uint64_t eng[512];
	size_t nb = n / BS;
	struct index_stored s = {.engine = eng,
				 .n = nb,
				 .tokens = tokens,
				 .n_tokens = nb * BS,
				 .block_size = BS,
				 .tier = INDEX_TIER_GPU};

	for (size_t i = 0; i < nb; i++)
		eng[i] = salt * 1000003 + i + 1;
	index_write_lock(g->idx);
	index_block_stored(g->idx, w, &s);
	index_write_unlock(g->idx);
}

/* A completions body whose prompt is the token ids tokens[0..n); nested: as the first of a
 * list of id lists. */
static char *ids_body_as(const uint32_t *tokens, size_t n, bool nested)
{
	size_t cap = 96 + n * 12, len;
	char *b = malloc(cap);

	len = (size_t)snprintf(b, cap,
			       "{\"model\":\"Qwen/Qwen3-0.6B\",\"max_tokens\":4,\"prompt\":%s",
			       nested ? "[[" : "[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(b + len, cap - len, "%s%u", i ? "," : "", tokens[i]);
	snprintf(b + len, cap - len, nested ? "],[1,2]]}" : "]}");
	return b;
}

static char *ids_body(const uint32_t *tokens, size_t n)
{
	return ids_body_as(tokens, n, false);
}

static int pick(struct rig *g, const char *path, const char *body, uint64_t tried,
		struct router_ticket *t)
{
	struct router_request rq = {.method = "POST",
				    .method_len = 4,
				    .target = path,
				    .target_len = strlen(path),
				    .body = body,
				    .body_len = strlen(body),
				    .tried = tried};

	return router_pick(g->r, &g->svc, &rq, t);
}

static void done(struct rig *g, struct router_ticket *t, int64_t cached)
{
	struct router_outcome o = {
	    .status = 200, .cached_tokens = cached, .prompt_tokens = -1, .attempts = 1};

	router_done(g->r, t, &o);
}

/* The sum over g's workers of field k of /debug/workers (inflight, active_blocks, ...). */
static double workers_sum(struct rig *g, const char *k)
{
	struct buf b = {0};
	cJSON *root, *x;
	double sum = 0;

	router_workers_json(g->r, &b);
	root = cJSON_Parse(b.data);
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(root, "workers")) sum +=
	    cJSON_GetNumberValue(cJSON_GetObjectItem(x, k));
	cJSON_Delete(root);
	buf_free(&b);
	return sum;
}

/* The newest decision of g as a cJSON object (caller deletes the returned root). */
static cJSON *last_route(struct rig *g, cJSON **root)
{
	struct buf b = {0};
	cJSON *r;

	router_debug_json(g->r, &b);
	*root = cJSON_Parse(b.data);
	buf_free(&b);
	r = cJSON_GetObjectItem(*root, "routes");
	return r ? r->child : NULL;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *j = cJSON_GetObjectItem(o, k);

	return cJSON_IsNumber(j) ? j->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *j = cJSON_GetObjectItem(o, k);

	return cJSON_IsString(j) ? j->valuestring : "";
}

/* Prefix p: PLEN random-ish token ids, distinct per p. */
#define PLEN (8 * BS)
static void prefix_tokens(uint32_t p, uint32_t *t, size_t n)
{
	uint64_t x = 0x12345 + p * 7919;

	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		t[i] = (uint32_t)(x >> 40) % 150000;
	}
}

int main(void)
{
	const char *tokpath = "models/qwen3/tokenizer.json";
	struct models *m = NULL;
	struct router *r;
	struct router_cfg bad;
	router_cfg_default(&bad);
	bad.policy = "nope";
	struct rig g;
	struct router_ticket t = {0};
	char err[256];
	int w, w2;

	CHECK_EQ(router_new(&bad, &r), -EINVAL, "unknown policy refused");
	models_new(&m);
	if (models_add(m, NULL, tokpath, err, sizeof(err)) < 0) {
		printf("not ok - tokenizer %s: %s\n", tokpath, err);
		return 1;
	}

	/* --- metrics read by the caller (kvbench): the worker's capacity, as a scrape gives it ---
	 */
	{
		static const char text[] = "vllm:cache_config_info{block_size=\"16\","
					   "num_gpu_blocks=\"585\"} 1\n"
					   "vllm:num_requests_running 0\n"
					   "vllm:num_requests_waiting 0\n"
					   "vllm:kv_cache_usage_perc 0\n";
		struct scrape_metrics sm;
		struct buf b = {0};
		cJSON *root, *ws, *x;
		double cap[NW];
		int n = 0;
		int prc = scrape_parse(text, sizeof(text) - 1, &sm);

		rig_init(&g, "kv", m, 1);
		CHECK(prc == 0 && sm.num_gpu_blocks == 585,
		      "metrics text parsed (num_gpu_blocks %lld)", (long long)sm.num_gpu_blocks);
		CHECK_EQ(router_worker_metrics(g.r, &g.svc, 2, &sm), 0, "endpoint 2 takes them");
		CHECK_EQ(router_worker_metrics(g.r, &g.svc, NW, &sm), -ENOENT,
			 "an endpoint past the Service's is refused");
		router_workers_json(g.r, &b);
		root = cJSON_Parse(b.data);
		ws = cJSON_GetObjectItem(root, "workers");
		cJSON_ArrayForEach(x, ws) if (n < NW) cap[n++] = num(x, "capacity_blocks");
		CHECK(n == NW && cap[2] == 585 && cap[0] < 0 && cap[5] < 0,
		      "its capacity is known (%g), the others' still unknown (%g, %g)",
		      n == NW ? cap[2] : -2, n == NW ? cap[0] : -2, n == NW ? cap[5] : -2);
		cJSON_Delete(root);
		buf_free(&b);
		rig_free(&g);
	}

	/* --- the chain of a request equals the chain of the blocks a worker stored ---------------
	 */
	{
		struct tokenizer *tk = tokenizer_load(tokpath, err, sizeof(err));
		struct tok_ids ids = {0};
		const char *text = "The quick brown fox jumps over the lazy dog. ";
		struct buf body = {0}, prompt = {0};
		cJSON *root, *x;

		rig_init(&g, "kv", m, 1);
		/* a text prompt of ~300 tokens; w3 holds its blocks */
		for (int i = 0; i < 30; i++)
			buf_puts(&prompt, text);
		tokenizer_encode(tk, prompt.data, prompt.len, &ids);
		store(&g, 3, ids.v, ids.n, 77);
		buf_puts(&body, "{\"model\":\"Qwen/Qwen3-0.6B\",\"prompt\":");
		buf_json_str(&body, prompt.data, prompt.len);
		buf_puts(&body, "}");
		w = pick(&g, "/v1/completions", body.data, 0, &t);
		CHECK_EQ(w, 3, "string prompt: routed to the worker holding its blocks");
		x = last_route(&g, &root);
		CHECK(num(x, "prompt_tokens") == (double)ids.n &&
			  num(x, "blocks") == (double)(ids.n / BS),
		      "string prompt: %zu tokens, %zu blocks in the record", ids.n, ids.n / BS);
		CHECK(num(x, "predicted_cached_tokens") == (double)((ids.n - 1) / BS * BS),
		      "predicted cached tokens: whole blocks, at most n - 1 (%g)",
		      num(x, "predicted_cached_tokens"));
		CHECK(!strcmp(str(x, "reason"), "home") && !strcmp(str(x, "view"), "events") &&
			  !strcmp(str(x, "endpoint"), "w3"),
		      "record: reason home, view events, endpoint w3");
		cJSON_Delete(root);
		done(&g, &t, 0);

		/* the same text as a batch of strings: routed on the first */
		buf_reset(&body);
		buf_puts(&body, "{\"model\":\"m\",\"prompt\":[");
		buf_json_str(&body, prompt.data, prompt.len);
		buf_puts(&body, ",\"another prompt\"]}");
		CHECK_EQ(pick(&g, "/v1/completions", body.data, 0, &t), 3,
			 "batch of strings: routed on the first");
		done(&g, &t, 0);
		/* the same tokens as ids, and as a list of id lists */
		{
			char *b1 = ids_body(ids.v, ids.n), *b2 = ids_body_as(ids.v, ids.n, true);

			CHECK_EQ(pick(&g, "/v1/completions", b1, 0, &t), 3,
				 "token-id prompt: the same chain, the same worker");
			done(&g, &t, 0);
			CHECK_EQ(pick(&g, "/v1/completions", b2, 0, &t), 3,
				 "list of id lists: routed on the first");
			x = last_route(&g, &root);
			CHECK(num(x, "prompt_tokens") == (double)ids.n,
			      "nested ids: the first list read");
			cJSON_Delete(root);
			done(&g, &t, 0);
			free(b1);
			free(b2);
		}
		/* chat: the rendered template's tokens; w1 holds them */
		{
			const char *chat =
			    "{\"model\":\"Qwen/Qwen3-0.6B\",\"messages\":["
			    "{\"role\":\"system\",\"content\":\"You are a helpful "
			    "assistant that answers briefly and precisely, always.\"},"
			    "{\"role\":\"user\",\"content\":\"Tell me about the weather "
			    "in Paris in the spring, and what to wear for a walk.\"}],"
			    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
			    "\"get_weather\",\"description\":\"Weather of a city\","
			    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
			    "{\"type\":\"string\"}},\"required\":[\"city\"]}}}]}";
			struct openai_req q = {0};
			const char *why;

			openai_parse(tk, OPENAI_CHAT, chat, strlen(chat), &q, &why);
			store(&g, 1, q.prompt.v, q.prompt.n, 99);
			CHECK(q.prompt.n >= 2 * BS, "chat with tools renders %zu tokens",
			      q.prompt.n);
			CHECK_EQ(pick(&g, "/v1/chat/completions", chat, 0, &t), 1,
				 "chat with tools: the template's tokens, the worker holding them");
			done(&g, &t, 0);
			openai_req_free(&q);
		}
		/* fallbacks: counted by cause, never refused, routed on the raw bytes */
		{
			/* not JSON, and long enough for a few 64-byte blocks of the raw-bytes view
			 */
			const char *bad_json =
			    "{\"model\":\"x\",\"prompt\":\"a prompt cut short by a "
			    "client that gave up half-way through writing its "
			    "request, so that the proxy sees no closing quote";
			const char *mm =
			    "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":"
			    "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}";
			const char *salted =
			    "{\"model\":\"x\",\"prompt\":\"hello\",\"cache_salt\":\"s\"}";

			w = pick(&g, "/v1/completions", bad_json, 0, &t);
			x = last_route(&g, &root);
			CHECK(w >= 0 && !strcmp(str(x, "fallback"), "not_json") &&
				  !strcmp(str(x, "view"), "text"),
			      "not JSON: routed (to %d), fallback not_json, text view", w);
			cJSON_Delete(root);
			done(&g, &t, -1);
			w = pick(&g, "/v1/chat/completions", mm, 0, &t);
			x = last_route(&g, &root);
			CHECK(w >= 0 && !strcmp(str(x, "fallback"), "not_exact"),
			      "multimodal chat: fallback not_exact (%s)", str(x, "fallback"));
			cJSON_Delete(root);
			done(&g, &t, -1);
			pick(&g, "/v1/completions", salted, 0, &t);
			x = last_route(&g, &root);
			CHECK(!cJSON_IsString(cJSON_GetObjectItem(x, "fallback")) &&
				  !strcmp(str(x, "view"), "events"),
			      "cache_salt: exact (block 0 hashed with [salt]), no fallback");
			cJSON_Delete(root);
			done(&g, &t, -1);
			/* the same raw bytes again: the approximate view sends them where they went
			 */
			w = pick(&g, "/v1/completions", bad_json, 0, &t);
			done(&g, &t, -1);
			w2 = pick(&g, "/v1/completions", bad_json, 0, &t);
			done(&g, &t, -1);
			CHECK_EQ(w2, w, "fallback: the same bytes follow the approximate view");
		}
		/* other paths and pass-through: placed by load */
		{
			struct router_request rq = {.method = "GET",
						    .method_len = 3,
						    .target = "/v1/models?x=secret",
						    .target_len = 19};
			struct router_ticket t2 = {0};

			w = router_pick(g.r, &g.svc, &rq, &t);
			CHECK(w >= 0 && !router_wants_usage(g.r, &t),
			      "GET /v1/models: placed, no usage read");
			x = last_route(&g, &root);
			CHECK(
			    !strcmp(str(x, "reason"), "balance") &&
				!strcmp(str(x, "target"), "/v1/models"),
			    "other path: reason balance; the record keeps the path, not the query");
			cJSON_Delete(root);
			/* w is loaded now: the next one goes elsewhere */
			w2 = router_pick(g.r, &g.svc, &rq, &t2);
			CHECK(w2 >= 0 && w2 != w, "balance: the loaded worker is avoided (%d, %d)",
			      w, w2);
			done(&g, &t, -1);
			done(&g, &t2, -1);
			rq = (struct router_request){0};
			w = router_pick(g.r, &g.svc, &rq, &t);
			CHECK(w >= 0, "pass-through connection placed");
			done(&g, &t, -1);
		}
		/* retries: tried endpoints are skipped, the accounting moves */
		{
			char *b1 = ids_body(ids.v, ids.n);
			struct buf wj = {0};

			w = pick(&g, "/v1/completions", b1, 0, &t);
			CHECK_EQ(w, 3, "retry: first attempt at the holder");
			w2 = pick(&g, "/v1/completions", b1, 1ULL << 3, &t);
			CHECK(w2 >= 0 && w2 != 3, "retry: the holder failed, another worker (%d)",
			      w2);
			router_workers_json(g.r, &wj);
			CHECK(
			    strstr(
				wj.data,
				"\"name\":\"qwen/w3\",\"slot\":3,\"events_id\":3,\"inflight\":0") !=
				NULL,
			    "retry: the failed worker no longer counts the request");
			x = last_route(&g, &root);
			CHECK(num(x, "attempts") == 2, "retry: one record, two attempts");
			cJSON_Delete(root);
			{
				/* the new worker owes the whole prompt's prefill until the first
				 * byte */
				char want[96];
				double nb = (double)(ids.n / BS);

				snprintf(want, sizeof(want),
					 "\"name\":\"qwen/w%d\",\"slot\":%d,\"events_id\":%d,"
					 "\"inflight\":1,\"prefill_blocks\":%d",
					 w2, w2, w2, (int)nb);
				CHECK(strstr(wj.data, want) != NULL &&
					  strstr(wj.data, "\"inflight\":0,"
							  "\"prefill_blocks\":0"),
				      "prefill backlog: %d blocks on the retry's worker, 0 on the "
				      "failed one",
				      (int)nb);
				router_first_byte(g.r, &t);
				router_first_byte(g.r, &t);
				buf_reset(&wj);
				router_workers_json(g.r, &wj);
				snprintf(want, sizeof(want),
					 "\"name\":\"qwen/w%d\",\"slot\":%d,\"events_id\":%d,"
					 "\"inflight\":1,\"prefill_blocks\":0",
					 w2, w2, w2);
				CHECK(strstr(wj.data, want) != NULL,
				      "prefill backlog: gone at the first response byte (twice: "
				      "once)");
			}
			CHECK_EQ(pick(&g, "/v1/completions", b1, 0x3f, &t), -ENOENT,
				 "retry: every endpoint tried: none left");
			CHECK_EQ(t.flight, 0, "none left: the ticket holds nothing");
			buf_free(&wj);
			free(b1);
		}
		/* the outcome reaches the record */
		{
			char *b1 = ids_body(ids.v, ids.n);
			struct router_outcome o = {.status = 200,
						   .cached_tokens = -1,
						   .prompt_tokens = 300,
						   .attempts = 1};

			pick(&g, "/v1/completions", b1, 0, &t);
			done(&g, &t, 288);
			x = last_route(&g, &root);
			CHECK(num(x, "reported_cached_tokens") == 288 && num(x, "status") == 200,
			      "router_done: the reported cached tokens and status in the record");
			cJSON_Delete(root);
			/* vLLM leaves prompt_tokens_details out when nothing was cached: from a
			 * worker that has reported them, a usage without them means 0 */
			pick(&g, "/v1/completions", b1, 0, &t);
			router_done(g.r, &t, &o);
			x = last_route(&g, &root);
			CHECK(num(x, "reported_cached_tokens") == 0,
			      "usage without cached_tokens from a worker that reports them: 0");
			cJSON_Delete(root);
			free(b1);
		}
		/* a hot prefix gets replicas, and loses them when it cools */
		{
			char *b1 = ids_body(ids.v, ids.n);
			struct router_ticket hot[12] = {{0}};
			int seen[NW] = {0}, nseen = 0, home_after = 0;

			for (int i = 0; i < 12; i++) {
				w = pick(&g, "/v1/completions", b1, 0, &hot[i]);
				if (w >= 0 && !seen[w]++)
					nseen++;
			}
			CHECK(seen[3] >= 4 && nseen >= 2,
			      "hot: 12 requests in flight at once: the holder takes %d, %d workers "
			      "in all",
			      seen[3], nseen);
			for (int i = 0; i < 12; i++)
				done(&g, &hot[i], 0);
			for (int i = 0; i < 10; i++) {
				home_after += pick(&g, "/v1/completions", b1, 0, &t) == 3;
				done(&g, &t, 0);
			}
			CHECK_EQ(home_after, 10, "cooled: one request at a time goes home again");
			free(b1);
		}
		/* a terminating endpoint gets no new request while another is up */
		{
			char *b1 = ids_body(ids.v, ids.n);
			int n3 = 0;

			g.eps[3].terminating = true;
			for (int i = 0; i < 6; i++) {
				n3 += pick(&g, "/v1/completions", b1, 0, &t) == 3;
				done(&g, &t, 0);
			}
			CHECK_EQ(n3, 0, "terminating: the holder, shutting down, gets none");
			CHECK_EQ(pick(&g, "/v1/completions", b1, 0x37, &t), 3,
				 "terminating: the only endpoint left still serves (kube-proxy's "
				 "fallback)");
			done(&g, &t, 0);
			g.eps[3].terminating = false;
			free(b1);
		}
		/* a Service naming its own policy: round-robin here while the router's is kv */
		{
			char *b1 = ids_body(ids.v, ids.n);
			int seen[NW] = {0}, nseen = 0;
			bool named = true;

			snprintf(g.svc.policy, sizeof(g.svc.policy), "round-robin");
			for (int i = 0; i < NW; i++) {
				w = pick(&g, "/v1/completions", b1, 0, &t);
				if (w >= 0 && !seen[w]++)
					nseen++;
				x = last_route(&g, &root);
				named &= !strcmp(str(x, "policy"), "round-robin");
				cJSON_Delete(root);
				done(&g, &t, 0);
			}
			CHECK(nseen == NW && named,
			      "per-Service policy: round-robin over all %d workers (%d), recorded "
			      "as such",
			      NW, nseen);
			g.svc.policy[0] = '\0';
			w = pick(&g, "/v1/completions", b1, 0, &t);
			x = last_route(&g, &root);
			CHECK(w == 3 && !strcmp(str(x, "policy"), "kv"),
			      "no policy named: the router's own (kv) again, to the holder (%d)",
			      w);
			cJSON_Delete(root);
			done(&g, &t, 0);
			free(b1);
		}
		rig_free(&g);
		tok_ids_free(&ids);
		buf_free(&body);
		buf_free(&prompt);
		tokenizer_free(tk);
	}

	/* --- two routers, the same events, requests in different orders: the same homes --------
	 */
	{
		enum { NP = 60, STEPS = 4 };
		static uint32_t pt[NP][PLEN + 2 * BS];
		struct rig a, b;
		int home_a[NP], home_b[NP], same = 1, placed = 0, used[NW] = {0}, nused = 0;

		rig_init(&a, "kv", m, 11);
		rig_init(&b, "kv", m, 987654321);
		for (int p = 0; p < NP; p++)
			prefix_tokens((uint32_t)p, pt[p], PLEN + 2 * BS);
		/* some history both saw: prefixes 0..9 on workers p % 4 */
		for (int p = 0; p < 10; p++) {
			store(&a, (uint32_t)(p % 4), pt[p], PLEN, 1000 + (uint64_t)p);
			store(&b, (uint32_t)(p % 4), pt[p], PLEN, 1000 + (uint64_t)p);
		}
		/* each step: A asks about the step's new prefixes in order, B in reverse order with
		 * requests for old prefixes in between; then the workers' events for what was
		 * placed reach both */
		for (int s = 0; s < STEPS; s++) {
			int lo = 10 + s * (NP - 10) / STEPS, hi = 10 + (s + 1) * (NP - 10) / STEPS;

			for (int p = lo; p < hi; p++) {
				char *bd = ids_body(pt[p], PLEN + BS);

				home_a[p] = pick(&a, "/v1/completions", bd, 0, &t);
				done(&a, &t, 0);
				free(bd);
			}
			for (int p = hi - 1; p >= lo; p--) {
				char *bd = ids_body(pt[p], PLEN + BS),
				     *old = ids_body(pt[p % 10], PLEN);

				pick(&b, "/v1/completions", old, 0, &t);
				done(&b, &t, 0);
				home_b[p] = pick(&b, "/v1/completions", bd, 0, &t);
				done(&b, &t, 0);
				free(bd);
				free(old);
			}
			for (int p = lo; p < hi; p++) {
				same &= home_a[p] == home_b[p];
				placed++;
				if (home_a[p] >= 0 && !used[home_a[p]]++)
					nused++;
				store(&a, (uint32_t)home_a[p], pt[p], PLEN, 5000 + (uint64_t)p);
				store(&b, (uint32_t)home_a[p], pt[p], PLEN, 5000 + (uint64_t)p);
			}
		}
		CHECK(same,
		      "two routers, same events, different request orders and seeds: the same "
		      "home for all %d new prefixes",
		      placed);
		CHECK_EQ(nused, NW, "the new prefixes spread over every worker");
		rig_free(&a);
		rig_free(&b);
	}
	/* --- bounded load: prefixes placed one after another share the workers evenly -------- */
	{
		enum { NP = 60 };
		static uint32_t pt[NP][PLEN];
		struct rig a;
		int lo_k = 1 << 30, hi_k = 0;

		rig_init(&a, "kv", m, 5);
		for (int p = 0; p < NP; p++) {
			char *bd;

			prefix_tokens(1000 + (uint32_t)p, pt[p], PLEN);
			bd = ids_body(pt[p], PLEN);
			w = pick(&a, "/v1/completions", bd, 0, &t);
			done(&a, &t, 0);
			free(bd);
			/* the worker's events arrive before the next new prefix */
			store(&a, (uint32_t)w, pt[p], PLEN, 7000 + (uint64_t)p);
		}
		for (uint32_t x = 0; x < NW; x++) {
			int k = (int)index_worker_blocks_at(a.idx, x, 0);

			lo_k = k < lo_k ? k : lo_k;
			hi_k = k > hi_k ? k : hi_k;
		}
		CHECK(lo_k == NP / NW && hi_k == NP / NW,
		      "bounded load: 60 prefixes in turn, 10 on each worker (%d..%d)", lo_k, hi_k);
		rig_free(&a);
	}
	/* --- lazy tokenization: as far as a worker's cache reaches, the rest once sent
	 * ------------
	 */
	{
		struct tokenizer *tk = tokenizer_load(tokpath, err, sizeof(err));
		const char *words[] = {"kernel", "socket", "buffer", "packet", "router", "cache",
				       "worker", "prefix", "token",  "block",  "chain",	 "index"};
		struct tok_ids ids = {0};
		struct buf body = {0}, prompt = {0}, wj = {0};
		uint64_t x = 42;
		size_t nb;
		cJSON *root, *rec;

		/* ~3,000 tokens of text no worker holds */
		for (int i = 0; i < 2400; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			buf_puts(&prompt, words[(x >> 33) % 12]);
			buf_puts(&prompt, (x >> 20) % 9 ? " " : ". ");
		}
		tokenizer_encode(tk, prompt.data, prompt.len, &ids);
		nb = ids.n / BS;
		buf_puts(&body, "{\"model\":\"Qwen/Qwen3-0.6B\",\"prompt\":");
		buf_json_str(&body, prompt.data, prompt.len);
		buf_puts(&body, "}");
		for (int whole = 0; whole < 2; whole++) {
			rig_whole_prompt = whole;
			rig_init(&g, "kv", m, 1);
			w = pick(&g, "/v1/completions", body.data, 0, &t);
			rec = last_route(&g, &root);
			if (!whole) {
				CHECK(
				    num(rec, "blocks") >= ROUTER_LAZY_TOKENS / BS &&
					num(rec, "blocks") < 2 * ROUTER_LAZY_TOKENS / BS &&
					fabs(num(rec, "prompt_tokens") - (double)ids.n) <
					    0.1 * (double)ids.n,
				    "never-seen text: decided on its first ~%d tokens (%g blocks), "
				    "its size estimated (%g of %zu tokens)",
				    ROUTER_LAZY_TOKENS, num(rec, "blocks"),
				    num(rec, "prompt_tokens"), ids.n);
			} else {
				CHECK(num(rec, "blocks") == (double)nb &&
					  num(rec, "prompt_tokens") == (double)ids.n,
				      "--whole-prompt: every block hashed before deciding (%g)",
				      num(rec, "blocks"));
			}
			cJSON_Delete(root);
			buf_reset(&wj);
			router_workers_json(g.r, &wj);
			{
				/* before it is sent: its unhashed rest counts in its worker's
				 * active blocks, estimated (Dynamo's cost reads them) */
				cJSON *wr = cJSON_Parse(wj.data), *x2;
				double act = -1;

				cJSON_ArrayForEach(x2,
						   cJSON_GetObjectItem(
						       wr, "workers")) if (num(x2, "inflight") == 1)
				    act = num(x2, "active_blocks");
				CHECK(
				    fabs(act - (double)nb) < 0.1 * (double)nb,
				    "%s: before it is sent, its worker has ~%zu active blocks (%g)",
				    whole ? "whole" : "lazy", nb, act);
				cJSON_Delete(wr);
			}
			router_sent(g.r, &t);
			router_sent(g.r, &t); /* idempotent: queued once */
			{
				/* sent: the rest waits for router_work, a slice at a time */
				int slices = 0;
				bool still = false;

				CHECK(router_busy(g.r) == !whole,
				      "%s: once sent, work is queued (%d)",
				      whole ? "whole" : "lazy", router_busy(g.r));
				while (router_work(g.r)) {
					if (++slices == 1) {
						rec = last_route(&g, &root);
						still = num(rec, "blocks") < (double)nb;
						cJSON_Delete(root);
					}
					if (slices > 1000)
						break;
				}
				CHECK(whole
					  ? slices == 0
					  : still &&
						slices >= (int)(ids.n / ROUTER_SLICE_TOKENS) - 2 &&
						slices <= (int)(ids.n / ROUTER_SLICE_TOKENS) + 2,
				      "%s: the rest in %d slices of ~%d tokens, the record exact "
				      "only at the end",
				      whole ? "whole" : "lazy", slices, ROUTER_SLICE_TOKENS);
				CHECK(!router_busy(g.r) && !router_work(g.r),
				      "%s: then no work left", whole ? "whole" : "lazy");
			}
			rec = last_route(&g, &root);
			buf_reset(&wj);
			router_workers_json(g.r, &wj);
			CHECK(
			    num(rec, "blocks") == (double)nb &&
				num(rec, "prompt_tokens") == (double)ids.n &&
				(whole
				     ? num(rec, "decided_on_blocks") == (double)nb
				     : num(rec, "decided_on_blocks") < 2 * ROUTER_LAZY_TOKENS / BS),
			    "%s: once sent, the record has all %zu tokens and %zu blocks (decided "
			    "on %g)",
			    whole ? "whole" : "lazy", ids.n, nb, num(rec, "decided_on_blocks"));
			{
				/* the worker's backlog is the prompt's blocks, exact */
				char want[64];

				snprintf(want, sizeof(want), "\"prefill_blocks\":%zu,", nb);
				CHECK(strstr(wj.data, want) != NULL,
				      "%s: its worker's prefill backlog is all %zu blocks",
				      whole ? "whole" : "lazy", nb);
			}
			cJSON_Delete(root);
			{
				/* the same prompt again while the first is in flight (its blocks
				 * not cached anywhere yet, but computed there): read to its end, so
				 * the overlap with the request in flight is seen whole */
				struct router_ticket t2 = {0};

				pick(&g, "/v1/completions", body.data, 0, &t2);
				rec = last_route(&g, &root);
				CHECK(num(rec, "decided_on_blocks") == (double)nb,
				      "%s: the same prompt while the first is in flight: decided "
				      "on all "
				      "%zu blocks (%g)",
				      whole ? "whole" : "lazy", nb, num(rec, "decided_on_blocks"));
				cJSON_Delete(root);
				done(&g, &t2, 0);
			}
			done(&g, &t, 0);
			/* a worker holds its first 1,000 tokens: tokenized until a block past them
			 */
			store(&g, 2, ids.v, 1000, 5);
			w = pick(&g, "/v1/completions", body.data, 0, &t);
			rec = last_route(&g, &root);
			CHECK(w == 2 && num(rec, "predicted_cached_tokens") == 1000 / BS * BS &&
				  (whole ? num(rec, "blocks") == (double)nb
					 : num(rec, "blocks") > 1000 / BS &&
					       num(rec, "blocks") <= 2 * (1000 / BS + 1)),
			      "%s: to the worker holding 1,000 of its tokens, %d cached predicted, "
			      "%g blocks hashed",
			      whole ? "whole" : "lazy", 1000 / BS * BS, num(rec, "blocks"));
			cJSON_Delete(root);
			{
				double tok0 = tokens_metric(&g, "prompt");

				done(&g, &t, 992);
				/* done: off its worker at once; the rest of a lazy prompt is
				 * counted by router_work, and only then booked */
				CHECK(
				    router_busy(g.r) == !whole &&
					workers_sum(&g, "inflight") == 0 &&
					workers_sum(&g, "active_blocks") == 0 &&
					workers_sum(&g, "prefill_blocks") == 0 &&
					tokens_metric(&g, "prompt") ==
					    tok0 + (whole ? (double)ids.n : 0),
				    "%s: done without router_sent (never sent): off its worker at "
				    "once, its rest %s (%g prompt tokens booked)",
				    whole ? "whole" : "lazy", whole ? "none" : "queued",
				    tokens_metric(&g, "prompt") - tok0);
				while (router_work(g.r))
					;
				rec = last_route(&g, &root);
				CHECK(
				    num(rec, "blocks") == (double)nb &&
					num(rec, "prompt_tokens") == (double)ids.n &&
					tokens_metric(&g, "prompt") == tok0 + (double)ids.n,
				    "%s: then the counts exact, all %zu prompt tokens booked (%g)",
				    whole ? "whole" : "lazy", ids.n,
				    tokens_metric(&g, "prompt") - tok0);
				cJSON_Delete(root);
			}
			if (!whole) {
				/* done with its rest half tokenized: finished there, then released
				 */
				pick(&g, "/v1/completions", body.data, 0, &t);
				router_sent(g.r, &t);
				router_work(g.r);
				done(&g, &t, 0);
				CHECK(
				    router_busy(g.r) && workers_sum(&g, "inflight") == 0 &&
					workers_sum(&g, "active_blocks") == 0 &&
					workers_sum(&g, "prefill_blocks") == 0,
				    "done while its rest is queued: nothing left on the workers at "
				    "once (%g active, %g prefill), its rest still queued",
				    workers_sum(&g, "active_blocks"),
				    workers_sum(&g, "prefill_blocks"));
				{
					/* a request picked meanwhile is not disturbed by it */
					struct router_ticket t3 = {0};
					int slices = 0;

					double tok0 = tokens_metric(&g, "prompt");

					pick(&g, "/v1/completions", body.data, 0, &t3);
					router_sent(g.r, &t3);
					/* a read of /metrics settles what is done, nothing else */
					router_settle(g.r);
					CHECK(router_busy(g.r) && tokens_metric(&g, "prompt") ==
								      tok0 + (double)ids.n,
					      "settled: the done one's %zu prompt tokens booked "
					      "(%g), "
					      "the one in flight still queued",
					      ids.n, tokens_metric(&g, "prompt") - tok0);
					while (router_work(g.r) && slices < 1000)
						slices++;
					rec = last_route(&g, &root);
					CHECK(!router_busy(g.r) &&
						  num(rec, "blocks") == (double)nb &&
						  workers_sum(&g, "inflight") == 1 &&
						  workers_sum(&g, "active_blocks") == (double)nb,
					      "then both finished: the new one's %zu blocks on its "
					      "worker (%g active), the done one's nowhere",
					      nb, workers_sum(&g, "active_blocks"));
					cJSON_Delete(root);
					done(&g, &t3, 0);
				}
				/* retried elsewhere with its rest half tokenized: the new worker
				 * gets it whole once finished, the failed one nothing */
				w = pick(&g, "/v1/completions", body.data, 0, &t);
				router_sent(g.r, &t);
				router_work(g.r);
				router_work(g.r);
				{
					int w2 =
					    pick(&g, "/v1/completions", body.data, 1ULL << w, &t);

					router_sent(g.r, &t);
					while (router_work(g.r))
						;
					CHECK(w2 >= 0 && w2 != w &&
						  workers_sum(&g, "inflight") == 1 &&
						  workers_sum(&g, "active_blocks") == (double)nb,
					      "a retry while queued: on %d instead of %d, its %zu "
					      "blocks "
					      "active there (%g in all)",
					      w2, w, nb, workers_sum(&g, "active_blocks"));
				}
				done(&g, &t, 0);
				CHECK(workers_sum(&g, "inflight") == 0 &&
					  workers_sum(&g, "active_blocks") == 0 &&
					  workers_sum(&g, "prefill_blocks") == 0,
				      "and after it, nothing left on the workers");
			}
			rig_free(&g);
		}
		rig_whole_prompt = false;
		tok_ids_free(&ids);
		buf_free(&body);
		buf_free(&prompt);
		buf_free(&wj);
		tokenizer_free(tk);
	}
	models_free(m);
	return tap_done();
}
