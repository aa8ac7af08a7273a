/* SPDX-License-Identifier: Apache-2.0 */
/* catalog: every module's table of /metrics families in one list, with the module that serves
 * them and the condition under which they appear. tools/kvref prints docs/reference/metrics.md
 * from it (`make reference`); tests/style/test_reference.sh fails when that file is stale, and
 * tests/e2e/test_metrics_reference.sh compares it with a running daemon's /metrics.
 *
 * A module declares its families once, in a static table next to the code that updates them
 * (core/metrics.h: struct metrics_family), registers its series with metrics_counter_of & co.
 * and writes its collector's HELP/TYPE lines with metrics_head; its table gets one line below. */
#ifndef KVS_CATALOG_H
#define KVS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/metrics.h"

/* When a module's families are on /metrics. */
enum catalog_when {
	CATALOG_ALWAYS,	 /* every run, the degraded one too (node not ready, nodesetup.h) */
	CATALOG_SERVING, /* once the node is ready (not in the degraded run) */
	CATALOG_EVENTS,	 /* serving with KV events (--events, the default; not --no-events) */
	CATALOG_BPF,	 /* serving with BPF interception (not --no-bpf) */
	CATALOG_FILE,	 /* serving with Services from a file (--services) */
	CATALOG_K8S,	 /* serving with Services from the API server (--kubernetes) */
	CATALOG_SCRAPE,	 /* serving and scraping the workers' /metrics (not --scrape-interval 0) */
	CATALOG_WHEN_COUNT
};

/* The key of a condition as the reference writes it ("events") and what it means. */
const char *catalog_when_key(enum catalog_when w);
const char *catalog_when_text(enum catalog_when w);

/* One table of families: families[0 .. *n - 1] of module (a path under userspace/), on /metrics
 * under condition when. A module whose families appear under several conditions has a table
 * for each. */
struct catalog_metrics {
	const char *module;
	const struct metrics_family *families;
	const size_t *n;
	enum catalog_when when;
};

extern const struct catalog_metrics catalog_metrics[];
extern const size_t catalog_nmetrics;

/* True: every family served is in the list above. A module whose families could not be listed
 * yet would be named in catalog_metrics_pending (NULL-terminated, empty now) with this false; the
 * reference then says so and tests/e2e/test_metrics_reference.sh skips its "every served family
 * is documented" check. */
extern const bool catalog_metrics_complete;
extern const char *const catalog_metrics_pending[];

#endif
