// SPDX-License-Identifier: Apache-2.0
/* workers: when a worker is down and when it is tried again. A table of steps {op, time, expected
 * state, description} drives one worker through failed connects (down at once, backoff doubling
 * from WORKERS_BACKOFF_MIN_MS to WORKERS_BACKOFF_MAX_MS, one probe per backoff), a connect that
 * works (up, backoff reset), failed scrapes (down after WORKERS_DOWN_AFTER, up at the next good
 * one, which also lifts a down by connects) and both reasons at once; then the router on three
 * endpoints: a worker whose connect failed is left out of the next decisions, gets one probe
 * request once its backoff is over, and is back after a good connect. Last, the load estimate: of
 * a worker's queue only the part others' requests make counts (a table of gauges and this
 * router's requests there). And the cause a failed scrape is counted under
 * (kvsplice_worker_scrape_errors_total). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "discovery/discovery.h"
#include "route/router.h"
#include "route/scrape.h"
#include "tap.h"
#include "route/workers.h"

enum op { FAIL, OK, PROBE, SCRAPE_FAIL, SCRAPE_OK, CHECK };

struct step {
	enum op op;
	uint64_t t;	  /* ms */
	bool down, avoid; /* expected after the step, at time t */
	uint32_t backoff; /* expected backoff, ms */
	const char *what;
};

#define MIN WORKERS_BACKOFF_MIN_MS
static const struct step steps[] = {
    {CHECK, 0, false, false, 0, "a new worker is up"},
    {FAIL, 1000, true, true, MIN, "a failed connect: down at once, first backoff"},
    {CHECK, 1000 + MIN - 1, true, true, MIN, "avoided until the backoff is over"},
    {CHECK, 1000 + MIN, true, false, MIN, "then a request may go (the probe)"},
    {PROBE, 1000 + MIN, true, true, MIN, "the probe sent: the next one waits another backoff"},
    {FAIL, 1000 + MIN + 5, true, true, 2 * MIN, "the probe failed: backoff doubled"},
    {CHECK, 1000 + 3 * MIN + 4, true, true, 2 * MIN, "avoided for the doubled backoff"},
    {CHECK, 1000 + 3 * MIN + 5, true, false, 2 * MIN, "then probed again"},
    {FAIL, 2000, true, true, 4 * MIN, "doubled again"},
    {OK, 2100, false, false, 0, "a connect that works: up, backoff reset"},
    {PROBE, 2100, false, false, 0, "a request to an up worker is no probe"},
    {FAIL, 3000, true, true, MIN, "down again: the backoff starts over"},
    {OK, 3001, false, false, 0, "up"},
    {SCRAPE_FAIL, 4000, false, false, 0, "one failed scrape: still up"},
    {SCRAPE_FAIL, 4250, false, false, 0, "two"},
    {SCRAPE_FAIL, 4500, true, true, 0, "WORKERS_DOWN_AFTER failed scrapes: down, avoided"},
    {OK, 4600, true, true, 0, "a good connect does not lift a down by scrapes (hung worker)"},
    {SCRAPE_OK, 4750, false, false, 0, "the next good scrape: up"},
    {FAIL, 5000, true, true, MIN, "a failed connect again"},
    {SCRAPE_OK, 5100, false, false, 0, "a good scrape lifts it too (it connects and answers)"},
    {SCRAPE_FAIL, 6000, false, false, 0, "a refused scrape"},
    {FAIL, 6001, true, true, MIN, "and a refused connect: down by its connects"},
    {SCRAPE_FAIL, 6250, true, true, MIN, "two refused scrapes"},
    {SCRAPE_FAIL, 6500, true, true, MIN, "three: down by both"},
    {OK, 6600, true, true, 0, "a good connect lifts one reason: still down by its scrapes"},
};

static void table(void)
{
	struct workers *ws;
	struct services s = {0};
	struct service svc = {0};
	struct endpoint ep = {0};
	struct worker *w;
	struct scrape_metrics m;

	snprintf(svc.name, sizeof(svc.name), "qwen");
	snprintf(ep.name, sizeof(ep.name), "w1");
	ep.addr.sin_family = AF_INET;
	ep.addr.sin_addr.s_addr = htonl(0x0af40101);
	ep.addr.sin_port = htons(8000);
	svc.endpoints = &ep;
	svc.nendpoints = 1;
	s.n = 1;
	s.v = &svc;
	memset(&m, 0xff, sizeof(m)); /* every field -1: unknown */
	m.running = m.waiting = m.kv_usage = m.prefix_queries = m.prefix_hits = m.start_time = -1;
	if (!CHECK(workers_new(&ws) == 0 && workers_sync(ws, &s) == 0, "a table with one worker"))
		return;
	w = workers_find(ws, "qwen", &ep);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const struct step *st = &steps[i];

		switch (st->op) {
		case FAIL:
			workers_connect_failed(w, st->t);
			break;
		case OK:
			workers_connect_ok(w);
			break;
		case PROBE:
			workers_probe(w, st->t);
			break;
		case SCRAPE_FAIL:
			workers_metrics(ws, w, NULL, -ECONNREFUSED, st->t);
			break;
		case SCRAPE_OK:
			workers_metrics(ws, w, &m, 0, st->t);
			break;
		case CHECK:
			break;
		}
		CHECK(workers_down(w) == st->down && workers_avoid(w, st->t) == st->avoid &&
			  w->backoff_ms == st->backoff,
		      "%s (down %d avoid %d backoff %u)", st->what, workers_down(w),
		      workers_avoid(w, st->t), w->backoff_ms);
	}
	for (int i = 0; i < 20; i++)
		workers_connect_failed(w, 10000);
	CHECK_EQ(w->backoff_ms, WORKERS_BACKOFF_MAX_MS, "the backoff stops growing at its maximum");
	CHECK_EQ(w->downs, 5,
		 "counted: down five times (four by its connects, once by its scrapes)");
	workers_free(ws);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

#define NEP 3

/* Picks one request (round-robin over NEP endpoints, skipping tried) and ends it at once. */
static int pick_one(struct router *r, const struct service *svc, uint64_t tried)
{
	struct router_request rq = {
	    .method = "GET", .method_len = 3, .target = "/", .target_len = 1, .tried = tried};
	struct router_outcome o = {.status = 200, .cached_tokens = -1, .prompt_tokens = -1};
	struct router_ticket t = {0};
	int ep = router_pick(r, svc, &rq, &t);

	router_done(r, &t, &o);
	return ep;
}

static void router_backoff(void)
{
	struct router_cfg cfg;
	router_cfg_default(&cfg);
	cfg.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
	cfg.policy = "round-robin";
	cfg.scrape_interval_ms = 0;
	struct router_request rq = {
	    .method = "GET", .method_len = 3, .target = "/", .target_len = 1};
	struct router_ticket t = {0};
	struct endpoint eps[NEP] = {0};
	struct service svc = {0};
	struct services s = {0};
	struct router *r;
	struct buf b = {0};
	int ep, seen[NEP] = {0};

	snprintf(svc.name, sizeof(svc.name), "qwen");
	for (int i = 0; i < NEP; i++) {
		snprintf(eps[i].name, sizeof(eps[i].name), "w%d", i);
		eps[i].addr.sin_family = AF_INET;
		eps[i].addr.sin_addr.s_addr = htonl(0x0af40101 + (uint32_t)i);
		eps[i].addr.sin_port = htons(8000);
	}
	svc.endpoints = eps;
	svc.nendpoints = NEP;
	s.refs = 1;
	s.n = 1;
	s.v = &svc;
	if (!CHECK(router_new(&cfg, &r) == 0, "router (round-robin, no scraping)"))
		return;
	router_set_services(r, &s);
	ep = router_pick(r, &svc, &rq, &t);
	router_connect_failed(r, &t);
	rq.tried = 1ULL << ep;
	CHECK(router_pick(r, &svc, &rq, &t) != ep, "the retry of a failed connect goes elsewhere");
	router_connect_ok(r, &t);
	router_done(r, &t, &(struct router_outcome){.status = 200, .cached_tokens = -1});
	for (int i = 0; i < 30; i++)
		seen[pick_one(r, &svc, 0)]++;
	CHECK(seen[ep] == 0,
	      "the worker whose connect failed gets no request during its backoff "
	      "(30 requests: %d/%d/%d)",
	      seen[0], seen[1], seen[2]);
	router_workers_json(r, &b);
	CHECK(strstr(b.data, "\"down_by\":\"connects\"") && strstr(b.data, "\"backoff_ms\":500"),
	      "/debug/workers shows it down by its connects, backoff 500 ms");
	buf_free(&b);
	sleep_ms(WORKERS_BACKOFF_MIN_MS + 50);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 30; i++)
		seen[pick_one(r, &svc, 0)]++;
	CHECK(seen[ep] == 1,
	      "once the backoff is over it gets one probe request, not more (%d of 30)", seen[ep]);
	/* that probe connected */
	rq.tried = 0;
	memset(&t, 0, sizeof(t));
	do {
		router_done(r, &t, &(struct router_outcome){.status = 200, .cached_tokens = -1});
		sleep_ms(WORKERS_BACKOFF_MIN_MS + 50);
	} while (router_pick(r, &svc, &rq, &t) != ep);
	router_connect_ok(r, &t);
	router_done(r, &t, &(struct router_outcome){.status = 200, .cached_tokens = -1});
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 30; i++)
		seen[pick_one(r, &svc, 0)]++;
	CHECK(seen[ep] == 10, "after a good connect it is up: its share again (%d of 30)",
	      seen[ep]);
	router_free(r);
}

/* The queue that counts as pressure is others' only: {requests of this router in flight at the
 * scrape, the worker's running and waiting gauges} -> {others' requests, others' queue}. A queue
 * of this router's own requests is its prefill backlog (policy_kv.c) and must not count twice. */
static void test_load_waiting(void)
{
	static const struct {
		uint32_t ours;		 /* this router's requests there at the scrape */
		double running, waiting; /* the worker's gauges */
		double remote, others_q; /* expected */
		const char *what;
	} t[] = {
	    {0, 0, 0, 0, 0, "idle"},
	    {3, 2, 1, 0, 0, "our three: two running, one queued: no one else's queue"},
	    {4, 4, 0, 0, 0, "our four running"},
	    {2, 4, 2, 4, 2, "two of others queued behind our two"},
	    {3, 3, 2, 2, 2, "ours running, two of others queued"},
	    {4, 2, 3, 1, 1, "five in all, four ours: one of the queued is others'"},
	    {0, 1, 3, 4, 3, "only others'"},
	    {2, 1, -1, 0, -1, "no waiting gauge: unknown"},
	};
	struct endpoint ep = {.name = "w0"};
	struct service svc = {.name = "qwen", .nendpoints = 1, .endpoints = &ep};
	struct services s = {.refs = 1, .n = 1, .v = &svc};
	struct workers *ws;
	uint64_t chain[1] = {42};

	ep.addr.sin_family = AF_INET;
	ep.addr.sin_addr.s_addr = htonl(0x0a000001);
	ep.addr.sin_port = htons(8000);
	CHECK(workers_new(&ws) == 0 && workers_sync(ws, &s) == 0, "load: one worker");
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct worker *w = workers_find(ws, "qwen", &ep);
		struct scrape_metrics m = {.running = t[i].running,
					   .waiting = t[i].waiting,
					   .kv_usage = -1,
					   .num_gpu_blocks = -1,
					   .block_size = -1,
					   .prefix_queries = -1,
					   .prefix_hits = -1,
					   .start_time = -1};
		double remote, waiting, free_blocks, cap;
		uint32_t slot = 0;

		for (uint32_t j = 0; j < workers_count(ws); j++)
			if (workers_at(ws, j) == w)
				slot = j;
		for (uint32_t j = 0; j < t[i].ours; j++)
			workers_flight_add(ws, slot, chain, 1, 0);
		workers_metrics(ws, w, &m, 0, 1000);
		workers_load(ws, w, 1010, 0, &remote, &waiting, &free_blocks, &cap);
		CHECK(remote == t[i].remote && waiting == t[i].others_q,
		      "load: %s (others %.0f, their queue %.0f; want %.0f, %.0f)", t[i].what,
		      remote, waiting, t[i].remote, t[i].others_q);
		for (uint32_t j = 0; j < t[i].ours; j++)
			workers_flight_del(ws, slot, chain, 1, 0);
	}
	workers_free(ws);
}

/* A request's blocks not hashed yet (a prompt tokenized only part way) count in its worker's
 * active blocks as distinct ones, until it leaves with the same count. */
static void test_unhashed(void)
{
	struct endpoint ep = {.name = "w0"};
	struct service svc = {.name = "qwen", .nendpoints = 1, .endpoints = &ep};
	struct services s = {.refs = 1, .n = 1, .v = &svc};
	uint64_t a[3] = {11, 12, 13}, b[2] = {11, 12};
	struct workers *ws;
	struct worker *w = NULL;

	ep.addr.sin_family = AF_INET;
	ep.addr.sin_addr.s_addr = htonl(0x0a000001);
	ep.addr.sin_port = htons(8000);
	if (!CHECK(workers_new(&ws) == 0 && workers_sync(ws, &s) == 0 &&
		       (w = workers_find(ws, "qwen", &ep)) != NULL,
		   "unhashed: one worker"))
		return;
	CHECK(workers_flight_add(ws, w->slot, a, 3, 40) == 0 &&
		  workers_flight_add(ws, w->slot, b, 2, 0) == 0,
	      "3 hashed + 40 unhashed blocks, and a request sharing 2 of them, in flight");
	CHECK(workers_active(ws, w) == 43 && workers_active_depth(ws, w, b, 2) == 2,
	      "43 active (%u), the shared 2 found", workers_active(ws, w));
	workers_flight_del(ws, w->slot, a, 3, 40);
	CHECK(workers_active(ws, w) == 2 && w->inflight == 1,
	      "the first leaves with its 40: 2 active (%u), 1 in flight", workers_active(ws, w));
	workers_flight_del(ws, w->slot, b, 2, 0);
	CHECK(workers_active(ws, w) == 0 && w->unhashed == 0, "all gone: 0 active");
	workers_free(ws);
}

/* The router's share of a worker's fields, through workers_*: prefill backlog (never below 0),
 * decoding requests and their time, the routed total, the events id. */
static void test_router_share(void)
{
	struct endpoint ep = {.name = "w0"};
	struct service svc = {.name = "qwen", .nendpoints = 1, .endpoints = &ep};
	struct services s = {.refs = 1, .n = 1, .v = &svc};
	struct workers *ws;
	struct worker *w = NULL;

	ep.addr.sin_family = AF_INET;
	ep.addr.sin_addr.s_addr = htonl(0x0a000002);
	ep.addr.sin_port = htons(8000);
	if (!CHECK(workers_new(&ws) == 0 && workers_sync(ws, &s) == 0 &&
		       (w = workers_find(ws, "qwen", &ep)) != NULL,
		   "router share: one worker"))
		return;
	workers_prefill_add(w, 10);
	workers_prefill_add(w, 5);
	workers_prefill_move(w, 5, 7);
	CHECK_EQ(w->prefill, 17, "prefill: 10 + 5, the 5 estimated then 7 exact");
	workers_prefill_done(w, 10);
	workers_prefill_done(w, 30);
	CHECK_EQ(w->prefill, 0, "prefill: taken out, never below 0");
	workers_decode_start(w, 100.0);
	workers_decode_start(w, 101.5);
	CHECK(w->decoding == 2 && w->decode_since == 201.5, "two decoding since 100 and 101.5");
	workers_decode_end(w, 100.0);
	CHECK(w->decoding == 1 && w->decode_since == 101.5, "one left, since 101.5");
	workers_decode_end(w, 101.5);
	workers_decode_end(w, 101.5);
	CHECK(w->decoding == 0 && w->decode_since == 0, "none decoding; one end too many: no-op");
	workers_routed(w);
	workers_routed(w);
	workers_set_events_id(w, 3);
	workers_reports_cached(w);
	CHECK(w->routed == 2 && w->events_id == 3 && w->reports_cached,
	      "routed twice, events id 3, reports cached tokens");
	workers_free(ws);
}

/* Every scrape error has its cause, every cause a distinct name; workers_metrics counts each
 * failed scrape under its cause. */
static void test_scrape_causes(void)
{
	static const struct {
		int err;
		const char *cause, *what;
	} rows[] = {
	    {-ETIMEDOUT, "timeout", "no answer within --scrape-timeout"},
	    {-ECONNREFUSED, "refused", "connection refused"},
	    {-EHOSTUNREACH, "unreachable", "host unreachable"},
	    {-ENETUNREACH, "unreachable", "network unreachable"},
	    {-ECONNRESET, "closed", "closed mid-answer"},
	    {-EMSGSIZE, "too_large", "head or body over its bound"},
	    {-EPROTO, "bad_response", "not HTTP or not 200"},
	    {-ENODATA, "no_metrics", "200 without vLLM series"},
	    {-ENOMEM, "other", "anything else"},
	};
	struct workers *ws;
	struct services s = {0};
	struct service svc = {.name = "qwen"};
	struct endpoint ep = {.name = "w1"};
	struct worker *w;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *got = workers_scrape_cause_name(workers_scrape_cause_of(rows[i].err));

		CHECK(got && strcmp(got, rows[i].cause) == 0,
		      "scrape error %d (%s): cause %s (got %s)", rows[i].err, rows[i].what,
		      rows[i].cause, got ? got : "NULL");
	}
	for (int c = 0; c < WORKERS_SCRAPE_NCAUSES; c++) {
		const char *a = workers_scrape_cause_name((enum workers_scrape_cause)c);
		bool ok = a && *a;

		for (int d = 0; ok && d < c; d++)
			ok =
			    strcmp(a, workers_scrape_cause_name((enum workers_scrape_cause)d)) != 0;
		CHECK(ok, "cause %d has a name of its own (%s)", c, a ? a : "NULL");
	}
	CHECK(!workers_scrape_cause_name(WORKERS_SCRAPE_NCAUSES), "no name past the last cause");

	ep.addr.sin_family = AF_INET;
	ep.addr.sin_addr.s_addr = htonl(0x0af40101);
	ep.addr.sin_port = htons(8000);
	svc.endpoints = &ep;
	svc.nendpoints = 1;
	s.n = 1;
	s.v = &svc;
	if (!CHECK(workers_new(&ws) == 0 && workers_sync(ws, &s) == 0, "a table with one worker"))
		return;
	w = workers_find(ws, "qwen", &ep);
	for (int i = 0; i < 3; i++)
		workers_metrics(ws, w, NULL, -EMSGSIZE, 1000 + i);
	workers_metrics(ws, w, NULL, -ETIMEDOUT, 2000);
	CHECK(w->scrape_errors[WORKERS_SCRAPE_TOO_LARGE] == 3 &&
		  w->scrape_errors[WORKERS_SCRAPE_TIMEOUT] == 1 &&
		  w->scrape_errors[WORKERS_SCRAPE_REFUSED] == 0,
	      "failed scrapes counted by cause (too_large 3, timeout 1, refused 0)");
	workers_free(ws);
}

int main(void)
{
	table();
	test_scrape_causes();
	router_backoff();
	test_load_waiting();
	test_unhashed();
	test_router_share();
	return tap_done();
}
