// SPDX-License-Identifier: Apache-2.0
/* The keys a vLLM block hash carries besides its tokens (cache_salt on block 0, a LoRA adapter's
 * name on every block), end to end without sockets: kvsim's cache and event encoder (the
 * simulated vLLM, compiled in) publish a request's blocks; the events decoder and the index hash
 * them; the router hashes the same request and must meet those hashes exactly, on the workers
 * that serve its model only. Golden vectors pin the bytes and hashes both sides compute, so that
 * a change on either side shows here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../../tools/kvsim/kvcache.c"
#include "../../tools/kvsim/kvevents.c"
#include "core/metrics.h"
#include "kv/blockhash.h"
#include "kv/events.h"
#include "kv/events_decode.h"
#include "kv/index.h"
#include "prompt/models.h"
#include "route/router.h"
#include "tap.h"

#define BS 16
#define NW 3
#define NTOK 50 /* 3 full blocks */

static const char *const BASE = "Qwen/Qwen3-0.6B";

struct apply {
	struct index *idx;
	uint32_t w;
};

static int apply_cb(void *arg, const struct events_event *ev)
{
	struct apply *a = arg;

	return events_apply_event(a->idx, a->w, ev) < 0 ? -1 : 0;
}

/* kvsim serves tokens on a fresh cache (adapter lora, salt, both may be NULL), publishes the
 * events in format fmt, and worker w of idx ingests them. Returns the blocks the index added. */
static int serve(struct index *idx, uint32_t w, enum kvev_format fmt, const uint32_t *tokens,
		 const char *lora, const char *salt)
{
	struct kvcache *c = kvc_new(64, BS, "seed", 4);
	struct kvc_seq seq = {0};
	struct kvc_events ev = {0};
	struct kvev_opts o = {.format = fmt, .int_hashes = true, .block_size = BS};
	struct events_decoder *d = NULL;
	struct apply a = {idx, w};
	uint64_t before, after;
	char *out = NULL;
	size_t len = 0;
	struct index_stats st;
	int rc;

	if (lora) {
		SHA256((const unsigned char *)lora, strlen(lora), seq.lora);
		seq.has_lora = true;
		seq.lora_name = lora;
		seq.lora_id = 1;
	}
	if (salt) {
		SHA256((const unsigned char *)salt, strlen(salt), seq.salt);
		seq.has_salt = true;
		seq.cache_salt = salt;
	}
	kvc_seq_hash(c, &seq, tokens, NTOK);
	kvc_allocate(c, &seq, NULL, 0, 0, NTOK, tokens, NTOK);
	kvc_take_events(c, &ev);
	kvc_take_events(c, &ev);
	rc = kvev_encode(&o, &ev, 1.0, &out, &len);
	index_stats(idx, &st);
	before = st.stored;
	events_decoder_new(&d);
	index_write_lock(idx);
	if (rc == 0)
		rc = events_decode(d, out, len, apply_cb, &a, NULL, NULL);
	index_write_unlock(idx);
	index_stats(idx, &st);
	after = st.stored;
	events_decoder_free(d);
	free(out);
	kvc_events_clear(&ev);
	free(ev.v);
	kvc_release(c, &seq);
	kvc_seq_free(&seq);
	kvc_free(c);
	return rc < 0 ? rc : (int)(after - before);
}

struct rig {
	struct index *idx;
	struct events *ev;
	struct router *r;
	struct metrics *m;
	struct service svc;
	struct endpoint eps[NW];
	struct services svcs;
};

static void rig_init(struct rig *g, const struct models *mods)
{
	struct index_cfg icfg;
	struct events_cfg ecfg;
	struct router_cfg rc;

	memset(g, 0, sizeof(*g));
	index_cfg_default(&icfg);
	icfg.max_workers = 8;
	events_cfg_default(&ecfg);
	router_cfg_default(&rc);
	rc.tokcache_bytes = 0;
	rc.models = mods;
	rc.whole_prompt = true;
	index_new(&icfg, &g->idx);
	ecfg.index = g->idx;
	events_new(&ecfg, &g->ev);
	snprintf(g->svc.name, sizeof(g->svc.name), "qwen");
	for (int i = 0; i < NW; i++) {
		char name[64], pub[64];

		snprintf(g->eps[i].name, sizeof(g->eps[i].name), "w%d", i);
		g->eps[i].addr.sin_family = AF_INET;
		g->eps[i].addr.sin_addr.s_addr = htonl(0x0af40201 + (uint32_t)i);
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

/* Routes a completions request for the token ids tokens[0..NTOK) (model NULL: none named; salt
 * NULL: none); *pred gets its predicted cached tokens, fb its fallback ("" none). */
static int route(struct rig *g, const uint32_t *tokens, const char *model, const char *salt,
		 long *pred, char *fb, size_t fblen)
{
	char body[1024];
	size_t n = 0;
	struct router_ticket t = {0};
	struct router_outcome o = {.status = 200, .cached_tokens = -1, .prompt_tokens = -1};
	struct buf b = {0};
	cJSON *root, *x, *f;
	int w;

	n += (size_t)snprintf(body + n, sizeof(body) - n, "{");
	if (model)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "\"model\":\"%s\",", model);
	if (salt)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "\"cache_salt\":\"%s\",", salt);
	n += (size_t)snprintf(body + n, sizeof(body) - n, "\"max_tokens\":2,\"prompt\":[");
	for (int i = 0; i < NTOK; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s%u", i ? "," : "", tokens[i]);
	snprintf(body + n, sizeof(body) - n, "]}");
	struct router_request rq = {.method = "POST",
				    .method_len = 4,
				    .target = "/v1/completions",
				    .target_len = 15,
				    .body = body,
				    .body_len = strlen(body)};
	w = router_pick(g->r, &g->svc, &rq, &t);
	router_debug_json(g->r, &b);
	root = cJSON_Parse(b.data);
	x = cJSON_GetObjectItem(root, "routes")->child;
	*pred = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(x, "predicted_cached_tokens"));
	f = cJSON_GetObjectItem(x, "fallback");
	snprintf(fb, fblen, "%s", cJSON_IsString(f) ? f->valuestring : "");
	cJSON_Delete(root);
	buf_free(&b);
	router_done(g->r, &t, &o);
	return w;
}

static const char *models_json(const char *adapter)
{
	static char b[512];

	snprintf(b, sizeof(b),
		 "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
		 "\"root\":\"%s\",\"parent\":null,\"max_model_len\":4096}%s%s%s%s]}",
		 BASE, BASE, adapter ? ",{\"id\":\"" : "", adapter ? adapter : "",
		 adapter ? "\",\"root\":\"/a\",\"parent\":\"" : "",
		 adapter ? "Qwen/Qwen3-0.6B\",\"max_model_len\":null}" : "");
	return b;
}

int main(void)
{
	uint32_t tokens[NTOK];
	struct buf b = {0};
	const char *k = "tenant-a";
	size_t kl = strlen(k);
	struct models *mods = NULL;
	char err[256], fb[32];
	long pred;
	int w;

	for (int i = 0; i < NTOK; i++)
		tokens[i] = 2000 + (uint32_t)i;

	/* golden: the extra bytes of [salt], as msgpack-c re-packs a decoded event's keys */
	{
		static const unsigned char want[] = {0x91, 0xa8, 't', 'e', 'n',
						     'a',  'n',	 't', '-', 'a'};
		char longs[41];
		const char *lk = longs;
		size_t ll = 40;

		CHECK(events_extra_strings(&k, &kl, 1, &b) == 0 && b.len == sizeof(want) &&
			  memcmp(b.data, want, sizeof(want)) == 0,
		      "[\"tenant-a\"] packs as 91 a8 'tenant-a'");
		memset(longs, 'x', 40);
		longs[40] = 0;
		buf_reset(&b);
		CHECK(events_extra_strings(&lk, &ll, 1, &b) == 0 && b.len == 43 &&
			  (unsigned char)b.data[0] == 0x91 && (unsigned char)b.data[1] == 0xd9 &&
			  (unsigned char)b.data[2] == 40,
		      "a 40-byte salt packs as str8 (91 d9 28 ...)");
		buf_reset(&b);
		events_extra_strings(&k, &kl, 1, &b);
	}
	/* golden: the own hashes both sides compute (seed 1337, block size 16) */
	{
		uint64_t h0 = blockhash_block(BLOCKHASH_DEFAULT_SEED, 0, tokens, BS, b.data, b.len);
		uint64_t r = blockhash_root(BLOCKHASH_DEFAULT_SEED, "sql-lora", 8);
		uint64_t plain = blockhash_block(BLOCKHASH_DEFAULT_SEED, 0, tokens, BS, NULL, 0);

		CHECK(h0 == 0xe10c3afb10e96f17ULL, "salted block 0: %016llx",
		      (unsigned long long)h0);
		CHECK(r == 0x04da810f18e297baULL, "root of adapter sql-lora: %016llx",
		      (unsigned long long)r);
		CHECK(plain != h0, "the salt changes block 0's hash");
	}

	if (models_new(&mods) ||
	    models_add(mods, NULL, "models/qwen3/tokenizer.json", err, sizeof(err))) {
		printf("not ok - tokenizer: %s\n", err);
		return 1;
	}
	{
		struct rig g;
		long best;

		rig_init(&g, mods);
		/* w0 and w2 serve the base model, w1 also the adapter sql-lora */
		CHECK(router_worker_models(g.r, &g.svc, 0, models_json(NULL),
					   strlen(models_json(NULL))) == 0 &&
			  router_worker_models(g.r, &g.svc, 1, models_json("sql-lora"),
					       strlen(models_json("sql-lora"))) == 0 &&
			  router_worker_models(g.r, &g.svc, 2, models_json(NULL),
					       strlen(models_json(NULL))) == 0,
		      "each worker's /v1/models read");
		CHECK(router_worker_models(g.r, &g.svc, 0, "{\"data\":5}", 10) == -ENODATA,
		      "a body that is no model list is refused (the last list stays)");
		/* map form (vLLM now): w0 holds the salted blocks, w1 the adapter's salted ones */
		CHECK_EQ(serve(g.idx, 0, KVEV_MAP, tokens, NULL, "tenant-a"), 3,
			 "map form, salted: 3 blocks indexed on w0");
		CHECK_EQ(serve(g.idx, 1, KVEV_MAP, tokens, "sql-lora", "tenant-a"), 3,
			 "map form, adapter + salt: 3 blocks indexed on w1");
		w = route(&g, tokens, BASE, "tenant-a", &pred, fb, sizeof(fb));
		CHECK(w == 0 && pred == 48 && !fb[0],
		      "salted request: exact, to the worker holding its salted blocks (w%d, %ld "
		      "predicted, fallback '%s')",
		      w, pred, fb);
		w = route(&g, tokens, BASE, "tenant-b", &pred, fb, sizeof(fb));
		CHECK(pred == 0 && !fb[0], "another salt: nothing predicted (%ld)", pred);
		w = route(&g, tokens, NULL, "tenant-a", &pred, fb, sizeof(fb));
		CHECK(w == 0 && pred == 48, "no model named: the base model's chain (w%d, %ld)", w,
		      pred);
		w = route(&g, tokens, "sql-lora", "tenant-a", &pred, fb, sizeof(fb));
		CHECK(w == 1 && pred == 48 && !fb[0],
		      "adapter + salt: on the chain rooted at its name, only on w1 (w%d, %ld)", w,
		      pred);
		best = 0;
		for (int i = 0; i < 6; i++) {
			w = route(&g, tokens, "sql-lora", NULL, &pred, fb, sizeof(fb));
			best |= w != 1;
		}
		CHECK(!best && pred == 0,
		      "adapter without the salt: w1 only (the one serving it), nothing held");
		w = route(&g, tokens, "nope", NULL, &pred, fb, sizeof(fb));
		CHECK(w >= 0 && !strcmp(fb, "model"),
		      "a model no worker serves: routed, fallback 'model' (%s)", fb);
		/* array form (older vLLM): no extra_keys, the salted blocks look unsalted */
		CHECK_EQ(serve(g.idx, 2, KVEV_ARRAY, tokens, NULL, "tenant-a"), 3,
			 "array form, salted: 3 blocks indexed on w2 (as if unsalted)");
		w = route(&g, tokens, BASE, "tenant-a", &pred, fb, sizeof(fb));
		CHECK(w == 0 && pred == 48, "a salted request still meets only true salted blocks");
		w = route(&g, tokens, BASE, NULL, &pred, fb, sizeof(fb));
		CHECK(w == 2 && pred == 48,
		      "array form: an unsalted request is predicted to hit w2's salted blocks "
		      "(w%d, %ld): the one over-estimate, documented",
		      w, pred);
		rig_free(&g);
	}
	/* lists not known yet: every worker takes the Service's model, none an adapter */
	{
		struct rig g;
		int seen[NW] = {0};

		rig_init(&g, mods);
		snprintf(g.svc.model, sizeof(g.svc.model), "%s", BASE);
		for (int i = 0; i < 24; i++) {
			uint32_t other[NTOK];

			for (int j = 0; j < NTOK; j++)
				other[j] = 3000 + (uint32_t)(i * NTOK + j);
			w = route(&g, other, BASE, NULL, &pred, fb, sizeof(fb));
			if (w >= 0 && w < NW)
				seen[w]++;
		}
		CHECK(seen[0] && seen[1] && seen[2] && !fb[0],
		      "unknown lists: the Service's model goes anywhere (%d %d %d)", seen[0],
		      seen[1], seen[2]);
		w = route(&g, tokens, "other-model", NULL, &pred, fb, sizeof(fb));
		CHECK(!strcmp(fb, "model"),
		      "unknown lists: another model than the Service's is a fallback 'model'");
		router_worker_models(g.r, &g.svc, 2, models_json("sql-lora"),
				     strlen(models_json("sql-lora")));
		for (int i = 0; i < 4; i++) {
			w = route(&g, tokens, "sql-lora", NULL, &pred, fb, sizeof(fb));
			CHECK(w == 2 && !fb[0],
			      "an adapter known on one worker goes there only (w%d)", w);
		}
		rig_free(&g);
	}
	models_free(mods);
	buf_free(&b);
	return tap_done();
}
