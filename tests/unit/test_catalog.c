// SPDX-License-Identifier: Apache-2.0
/* catalog: every family of daemon/catalog.c is one docs/reference/metrics.md can list and a
 * Prometheus server can read: a valid, unique name; counters end in _total; a help line; label
 * names that are identifiers; a known condition and module. Then: what the list says about the
 * modules not converted yet agrees with catalog_metrics_complete. */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "daemon/catalog.h"
#include "tap.h"

static bool prom_name(const char *s)
{
	if (!s || !(isalpha((unsigned char)*s) || *s == '_' || *s == ':'))
		return false;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || *s == ':'))
			return false;
	return true;
}

/* "a,b_c": identifiers separated by single commas, none reserved (le, __*); NULL is none. */
static bool label_names(const char *s)
{
	while (s && *s) {
		size_t l = strcspn(s, ",");

		if (!l || !(isalpha((unsigned char)*s) || *s == '_') ||
		    (l == 2 && !strncmp(s, "le", 2)) || !strncmp(s, "__", 2))
			return false;
		for (size_t i = 1; i < l; i++)
			if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
				return false;
		s += l;
		if (*s == ',' && !*++s)
			return false;
	}
	return true;
}

int main(void)
{
	size_t nfam = 0, bad_name = 0, dup = 0, bad_counter = 0, bad_help = 0, bad_labels = 0,
	       bad_when = 0, bad_module = 0, npending = 0;

	CHECK(catalog_nmetrics > 0, "the catalog lists tables");
	for (size_t t = 0; t < catalog_nmetrics; t++) {
		const struct catalog_metrics *c = &catalog_metrics[t];
		size_t ml = c->module ? strlen(c->module) : 0;

		bad_module +=
		    !ml || c->module[0] == '/' || strstr(c->module, "userspace/") ||
		    !(ml > 2 && (!strcmp(c->module + ml - 2, ".c") || c->module[ml - 1] == '/'));
		bad_when += (unsigned)c->when >= CATALOG_WHEN_COUNT;
		CHECK(*c->n > 0, "%s: a table of %zu families", c->module, *c->n);
		for (size_t i = 0; i < *c->n; i++) {
			const struct metrics_family *f = &c->families[i];
			size_t l = f->name ? strlen(f->name) : 0;

			nfam++;
			if (!prom_name(f->name)) {
				bad_name++;
				printf("# bad name: %s\n", f->name ? f->name : "(null)");
				continue;
			}
			bad_counter += (f->type == METRICS_COUNTER) !=
				       (l > 6 && !strcmp(f->name + l - 6, "_total"));
			bad_help +=
			    !f->help || !*f->help || strchr(f->help, '\n') || strchr(f->help, '\\');
			bad_labels += !label_names(f->labels);
			for (size_t u = 0; u <= t; u++)
				for (size_t j = 0; j < (u == t ? i : *catalog_metrics[u].n); j++)
					if (!strcmp(catalog_metrics[u].families[j].name, f->name)) {
						dup++;
						printf("# listed twice: %s\n", f->name);
					}
		}
	}
	CHECK_EQ(bad_name, 0, "every family name is a Prometheus metric name");
	CHECK_EQ(dup, 0, "every family is listed once");
	CHECK_EQ(bad_counter, 0, "counters, and only counters, end in _total");
	CHECK_EQ(bad_help, 0, "every family has a help text of one line, nothing to escape");
	CHECK_EQ(bad_labels, 0, "label names are identifiers, comma separated, none reserved");
	CHECK_EQ(bad_when, 0, "every table appears under a known condition");
	CHECK_EQ(bad_module, 0, "every module is a path under userspace/ (file.c or folder/)");
	for (int w = 0; w < CATALOG_WHEN_COUNT; w++)
		CHECK(strcmp(catalog_when_key(w), "?") && strcmp(catalog_when_text(w), "?"),
		      "condition %d has a key (%s) and a text", w, catalog_when_key(w));
	while (catalog_metrics_pending[npending])
		npending++;
	CHECK_EQ(catalog_metrics_complete, npending == 0,
		 "complete exactly when no module is pending");
	printf("# %zu families in %zu tables, %zu modules pending\n", nfam, catalog_nmetrics,
	       npending);
	return tap_done();
}
