/* SPDX-License-Identifier: Apache-2.0 */
/* routecheck: what bench/overhead asks kvsplice's admin server after a chat case, to prove the
 * requests it timed were decided on tokens (not on the raw-bytes fallback, not by load alone)
 * and to say what the decision cost inside kvsplice:
 *   - /metrics, before and after a case: kvsplice_route_decision_seconds (sum, count),
 *     kvsplice_route_fallbacks_total (every cause), kvsplice_route_tokens_total{kind="prompt"};
 *     the difference covers every request of the case;
 *   - /debug/route after it: the last ROUTER_LOG decisions (128), each with its view, fallback,
 *     prompt_tokens, blocks and decision_us.
 * Blocking I/O with a timeout; the admin server answers one request per connection. */
#ifndef KVS_BENCH_ROUTECHECK_H
#define KVS_BENCH_ROUTECHECK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>

/* Counters of /metrics at one moment. */
struct rc_snap {
	double dec_sum_s;     /* kvsplice_route_decision_seconds_sum */
	double dec_count;     /* kvsplice_route_decision_seconds_count */
	double fallbacks;     /* kvsplice_route_fallbacks_total, all causes */
	double prompt_tokens; /* kvsplice_route_tokens_total{kind="prompt"} */
};

/* What a case's decisions looked like. */
struct rc_result {
	/* from /debug/route, records of the case's target only */
	char router[24]; /* the policy ("kv") */
	int records;
	char view[16];		   /* the view of every record ("mixed" if they differ) */
	double decision_us_p50;	   /* median decision_us */
	double decision_us_max;	   /* largest decision_us */
	double prompt_tokens_p50;  /* median prompt_tokens */
	double blocks_p50;	   /* median blocks */
	double decided_blocks_p50; /* median blocks hashed when decided (lazy: fewer) */
	int bad_view, bad_fallback, no_tokens; /* records failing each check */
	/* from the /metrics difference over the case */
	double decisions;	   /* decisions counted by the histogram */
	double mean_decision_us;   /* histogram sum / count, µs */
	double fallbacks;	   /* fallbacks counted */
	double mean_prompt_tokens; /* prompt tokens of completed requests / decisions */
};

/* Reads the counters of /metrics from the admin server at admin. Returns 0, or -1 (message on
 * stderr) when it cannot be fetched or lacks the decision histogram. */
int routecheck_snap(const struct sockaddr_in *admin, struct rc_snap *out);

/* Reads /debug/route from admin and summarises the records whose target is target (e.g.
 * "/v1/chat/completions") into out; fills the /metrics part from before and after (after NULL:
 * from before alone, i.e. since kvsplice started). Returns 0, or -1 when /debug/route cannot be
 * fetched or parsed. */
int routecheck_read(const struct sockaddr_in *admin, const char *target,
		    const struct rc_snap *before, const struct rc_snap *after,
		    struct rc_result *out);

/* Did kvsplice decide on tokens? True when there is at least one record and every record has
 * view "events" or "approx", fallback null and prompt_tokens > 0, the /metrics difference
 * counts no fallback, at least min_decisions decisions and prompt tokens for them. Otherwise
 * prints why on stderr, naming what. */
bool routecheck_ok(const struct rc_result *r, double min_decisions, const char *what);

/* One line: "router kv, view approx, fallback none; /debug/route (last N): prompt_tokens p50 ..,
 * ...". */
void routecheck_print(FILE *f, const struct rc_result *r);

#endif
