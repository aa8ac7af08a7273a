/* SPDX-License-Identifier: Apache-2.0 */
/* metrics: a registry of counters, gauges and histograms rendered in the Prometheus text format
 * (version 0.0.4), plus text collectors that other modules register to append their own series
 * (e.g. the index's). Registration happens at start-up on the main thread; updates are relaxed
 * atomics, so a value may be bumped from any thread; rendering runs on the main thread. */
#ifndef KVS_METRICS_H
#define KVS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

struct metrics;

/* A histogram with fixed upper bounds (ascending, +Inf implied). */
struct metrics_hist;

/* Creates an empty registry. Returns 0 and *out, or -ENOMEM. */
int metrics_new(struct metrics **out);
/* Frees the registry and every series (pointers handed out become invalid). */
void metrics_free(struct metrics *m);

/* A family: every series of one name, declared once in a static table next to the code that
 * updates it. The registrations below and a collector's text take their name, type and help from
 * it; daemon/catalog.c lists every module's table, and tools/kvref prints docs/reference/metrics.md
 * from that list. */
enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

struct metrics_family {
	const char *name; /* "kvsplice_requests_total" */
	enum metrics_type type;
	const char *help;   /* the HELP text, one line */
	const char *labels; /* label names for the reference ("worker,tier"), NULL: none */
};

/* Registers one series of family f: labels in Prometheus form without braces (e.g.
 * "code=\"2xx\"", or NULL). Returns a stable pointer to its value, or NULL (counted by
 * metrics_failed) on ENOMEM or when f is not of the function's type. Series of one name are
 * rendered together, under the HELP and TYPE of the first one registered. */
uint64_t *metrics_counter_of(struct metrics *m, const struct metrics_family *f, const char *labels);
/* The same for a gauge (signed integer value). */
int64_t *metrics_gauge_of(struct metrics *m, const struct metrics_family *f, const char *labels);
/* The same for a histogram with nb upper bounds (seconds or any unit; copied); also NULL when nb
 * is 0 or more than 32. */
struct metrics_hist *metrics_histogram_of(struct metrics *m, const struct metrics_family *f,
					  const char *labels, const double *bounds, int nb);

/* Appends f's "# HELP" and "# TYPE" lines, for a collector that then prints f's samples.
 * Returns 0 or -ENOMEM. */
int metrics_head(struct buf *out, const struct metrics_family *f);

/* "counter", "gauge" or "histogram". */
const char *metrics_type_name(enum metrics_type t);

/* Registrations (counter, gauge, histogram) refused since creation (out of memory, bad bounds, a
 * family of another type): a module that registers several series checks this once instead of
 * every pointer. */
int metrics_failed(const struct metrics *m);

/* Adds to a counter or gauge (relaxed atomic). */
static inline void metrics_add(uint64_t *c, uint64_t n)
{
	__atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}
static inline void metrics_inc(uint64_t *c)
{
	__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}
static inline void metrics_gauge_add(int64_t *g, int64_t n)
{
	__atomic_add_fetch(g, n, __ATOMIC_RELAXED);
}
static inline void metrics_gauge_set(int64_t *g, int64_t v)
{
	__atomic_store_n(g, v, __ATOMIC_RELAXED);
}
/* Records one observation. */
void metrics_observe(struct metrics_hist *h, double v);

/* Registers a collector: fn(out, arg) is called at every render and appends complete Prometheus
 * text (HELP/TYPE lines and samples) to out. Returns 0 or -ENOMEM. */
int metrics_add_collector(struct metrics *m, void (*fn)(struct buf *out, void *arg), void *arg);

/* Appends the whole exposition (registered series, then collectors). Returns 0 or -ENOMEM. */
int metrics_render(struct metrics *m, struct buf *out);

#endif
