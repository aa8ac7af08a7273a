// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"

#define HIST_MAX_BOUNDS 32

struct metrics_hist {
	int nb;
	double bounds[HIST_MAX_BOUNDS];
	uint64_t counts[HIST_MAX_BOUNDS + 1]; /* per bucket, not cumulative; last is +Inf */
	double sum;
	uint64_t count;
};

struct series {
	enum metrics_type kind;
	char *name, *labels, *help;
	union {
		uint64_t counter;
		int64_t gauge;
	} v;
	struct metrics_hist *hist;
};

struct collector {
	void (*fn)(struct buf *out, void *arg);
	void *arg;
};

struct metrics {
	struct series **s;
	size_t n, cap;
	struct collector *c;
	size_t nc;
	int failed; /* registrations refused (metrics_failed) */
};

int metrics_new(struct metrics **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->s[i]->name);
		free(m->s[i]->labels);
		free(m->s[i]->help);
		free(m->s[i]->hist);
		free(m->s[i]);
	}
	free(m->s);
	free(m->c);
	free(m);
}

/* A new series of family f (its name, type and help copied). NULL on ENOMEM. */
static struct series *series_add(struct metrics *m, const struct metrics_family *f,
				 const char *labels)
{
	struct series *s;

	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		struct series **p = realloc(m->s, cap * sizeof(*p));

		if (!p)
			return NULL;
		m->s = p;
		m->cap = cap;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->kind = f->type;
	s->name = strdup(f->name);
	s->labels = strdup(labels ? labels : "");
	s->help = strdup(f->help ? f->help : "");
	if (!s->name || !s->labels || !s->help) {
		free(s->name);
		free(s->labels);
		free(s->help);
		free(s);
		return NULL;
	}
	m->s[m->n++] = s;
	return s;
}

uint64_t *metrics_counter_of(struct metrics *m, const struct metrics_family *f, const char *labels)
{
	struct series *s = f->type == METRICS_COUNTER ? series_add(m, f, labels) : NULL;

	m->failed += !s;
	return s ? &s->v.counter : NULL;
}

int64_t *metrics_gauge_of(struct metrics *m, const struct metrics_family *f, const char *labels)
{
	struct series *s = f->type == METRICS_GAUGE ? series_add(m, f, labels) : NULL;

	m->failed += !s;
	return s ? &s->v.gauge : NULL;
}

struct metrics_hist *metrics_histogram_of(struct metrics *m, const struct metrics_family *f,
					  const char *labels, const double *bounds, int nb)
{
	struct metrics_hist *h = NULL;
	struct series *s = NULL;

	if (f->type == METRICS_HISTOGRAM && nb > 0 && nb <= HIST_MAX_BOUNDS)
		h = calloc(1, sizeof(*h));
	if (h)
		s = series_add(m, f, labels);
	if (!s) {
		m->failed++;
		free(h);
		return NULL;
	}
	h->nb = nb;
	memcpy(h->bounds, bounds, (size_t)nb * sizeof(*bounds));
	s->hist = h;
	return h;
}

int metrics_failed(const struct metrics *m)
{
	return m->failed;
}

const char *metrics_type_name(enum metrics_type t)
{
	switch (t) {
	case METRICS_COUNTER:
		return "counter";
	case METRICS_GAUGE:
		return "gauge";
	case METRICS_HISTOGRAM:
		return "histogram";
	}
	return "untyped";
}

int metrics_head(struct buf *out, const struct metrics_family *f)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help ? f->help : "",
			  f->name, metrics_type_name(f->type))
		   ? -ENOMEM
		   : 0;
}

void metrics_observe(struct metrics_hist *h, double v)
{
	int i = 0;

	while (i < h->nb && v > h->bounds[i])
		i++;
	__atomic_add_fetch(&h->counts[i], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
	h->sum += v; /* the sum is updated by the owning thread only */
}

int metrics_add_collector(struct metrics *m, void (*fn)(struct buf *out, void *arg), void *arg)
{
	struct collector *c = realloc(m->c, (m->nc + 1) * sizeof(*c));

	if (!c)
		return -ENOMEM;
	m->c = c;
	m->c[m->nc].fn = fn;
	m->c[m->nc].arg = arg;
	m->nc++;
	return 0;
}

static int render_hist(struct buf *out, const struct series *s)
{
	const struct metrics_hist *h = s->hist;
	const char *sep = s->labels[0] ? "," : "";
	uint64_t cum = 0;
	int rc = 0;

	for (int i = 0; i <= h->nb; i++) {
		cum += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
		if (i < h->nb)
			rc |= buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", s->name, s->labels,
					 sep, h->bounds[i], (unsigned long long)cum);
		else
			rc |= buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", s->name,
					 s->labels, sep, (unsigned long long)cum);
	}
	if (s->labels[0]) {
		rc |= buf_printf(out, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", s->name, s->labels,
				 h->sum, s->name, s->labels,
				 (unsigned long long)__atomic_load_n(&h->count, __ATOMIC_RELAXED));
	} else {
		rc |= buf_printf(out, "%s_sum %.9g\n%s_count %llu\n", s->name, h->sum, s->name,
				 (unsigned long long)__atomic_load_n(&h->count, __ATOMIC_RELAXED));
	}
	return rc ? -ENOMEM : 0;
}

int metrics_render(struct metrics *m, struct buf *out)
{
	int rc = 0;

	/* Series are grouped by name (HELP/TYPE once), in the order names were first registered. */
	for (size_t i = 0; i < m->n; i++) {
		const struct series *s = m->s[i];
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(m->s[j]->name, s->name) == 0;
		if (seen)
			continue;
		rc |= buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", s->name, s->help, s->name,
				 metrics_type_name(s->kind));
		for (size_t j = i; j < m->n; j++) {
			const struct series *t = m->s[j];
			const char *lb = t->labels[0] ? "{" : "", *rb = t->labels[0] ? "}" : "";

			if (strcmp(t->name, s->name) != 0)
				continue;
			if (t->kind == METRICS_COUNTER)
				rc |= buf_printf(out, "%s%s%s%s %llu\n", t->name, lb, t->labels, rb,
						 (unsigned long long)__atomic_load_n(
						     &t->v.counter, __ATOMIC_RELAXED));
			else if (t->kind == METRICS_GAUGE)
				rc |= buf_printf(
				    out, "%s%s%s%s %lld\n", t->name, lb, t->labels, rb,
				    (long long)__atomic_load_n(&t->v.gauge, __ATOMIC_RELAXED));
			else
				rc |= render_hist(out, t);
		}
	}
	for (size_t i = 0; i < m->nc; i++)
		m->c[i].fn(out, m->c[i].arg);
	return rc ? -ENOMEM : 0;
}
