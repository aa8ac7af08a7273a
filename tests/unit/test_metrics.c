// SPDX-License-Identifier: Apache-2.0
/* metrics: Prometheus text of counters, gauges, histograms and collectors. */
#include <string.h>

#include "core/metrics.h"
#include "tap.h"

static void collector(struct buf *out, void *arg)
{
	buf_printf(out, "# TYPE ext_total counter\next_total %d\n", *(int *)arg);
}

int main(void)
{
	static const double bounds[] = {0.1, 1};
	static const struct metrics_family fam[] = {
	    {"x_total", METRICS_COUNTER, "X things.", "k"},
	    {"y", METRICS_GAUGE, "Y now.", NULL},
	    {"lat_seconds", METRICS_HISTOGRAM, "Latency.", NULL},
	    {"bad", METRICS_HISTOGRAM, NULL, NULL},
	};
	struct metrics *m;
	struct buf b = {0};
	uint64_t *c1, *c2;
	int64_t *g;
	struct metrics_hist *h;
	int ext = 7, rc;

	rc = metrics_new(&m);
	CHECK_EQ(rc, 0, "registry");
	c1 = metrics_counter_of(m, &fam[0], "k=\"a\"");
	g = metrics_gauge_of(m, &fam[1], NULL);
	c2 = metrics_counter_of(m, &fam[0], "k=\"b\"");
	h = metrics_histogram_of(m, &fam[2], NULL, bounds, 2);
	CHECK(c1 && c2 && g && h, "series registered");
	CHECK_EQ(metrics_failed(m), 0, "no registration refused so far");
	CHECK(!metrics_histogram_of(m, &fam[3], NULL, bounds, 0),
	      "histogram without bounds refused");
	CHECK_EQ(metrics_failed(m), 1, "a refused registration is counted (metrics_failed)");
	metrics_inc(c1);
	metrics_add(c2, 5);
	metrics_gauge_add(g, -3);
	metrics_observe(h, 0.05);
	metrics_observe(h, 0.5);
	metrics_observe(h, 5);
	metrics_add_collector(m, collector, &ext);
	rc = metrics_render(m, &b);
	CHECK_EQ(rc, 0, "render");
	CHECK(strstr(b.data,
		     "# HELP x_total X things.\n# TYPE x_total counter\nx_total{k=\"a\"} 1\n"
		     "x_total{k=\"b\"} 5\n"),
	      "series of one name grouped under one HELP/TYPE");
	CHECK(strstr(b.data, "# TYPE y gauge\ny -3\n"), "gauge");
	CHECK(strstr(b.data, "lat_seconds_bucket{le=\"0.1\"} 1\nlat_seconds_bucket{le=\"1\"} 2\n"
			     "lat_seconds_bucket{le=\"+Inf\"} 3\nlat_seconds_sum 5.55\n"
			     "lat_seconds_count 3\n"),
	      "histogram buckets are cumulative");
	CHECK(strstr(b.data, "ext_total 7\n"), "collector text appended");
	{
		const char *p = b.data;
		int helps = 0;

		while ((p = strstr(p, "# HELP x_total")))
			helps++, p++;
		CHECK_EQ(helps, 1, "one HELP per name");
	}
	buf_free(&b);
	metrics_free(m);

	/* A family of another type is refused; a collector's head comes from the table. */
	metrics_new(&m);
	CHECK(!metrics_counter_of(m, &fam[1], NULL) && !metrics_gauge_of(m, &fam[0], NULL) &&
		  !metrics_histogram_of(m, &fam[0], NULL, bounds, 2),
	      "a family of another type is refused");
	CHECK_EQ(metrics_failed(m), 3, "and counted (metrics_failed)");
	rc = metrics_render(m, &b);
	CHECK(rc == 0 && b.len == 0, "and nothing of it rendered");
	buf_free(&b);
	CHECK_EQ(metrics_head(&b, &fam[0]), 0, "metrics_head");
	CHECK(strcmp(b.data, "# HELP x_total X things.\n# TYPE x_total counter\n") == 0,
	      "metrics_head writes the HELP and TYPE lines the registry writes");
	buf_free(&b);
	metrics_free(m);
	return tap_done();
}
