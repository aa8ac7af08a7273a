// SPDX-License-Identifier: Apache-2.0
/* options: parsing, --help, the reference and --print-config from one table (options.h). */
#include "core/options.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HELP_WIDTH 80 /* --help lines */
#define HELP_COL 30   /* where the help text starts */
#define VAL_HELP 1    /* getopt values of the built-in options */
#define VAL_PRINT 2
#define VAL_BASE 256   /* getopt value of entry i: VAL_BASE + i */
#define SIZE_HI 0x1p50 /* the largest OPT_SIZE: no buffer of a petabyte */
#define MS_HI 2e9      /* the largest OPT_MS (about 23 days): it must fit an int */

static void *field(void *cfg, const struct opt *o)
{
	return (char *)cfg + o->off;
}

static const void *cfield(const void *cfg, const struct opt *o)
{
	return (const char *)cfg + o->off;
}

static bool takes_arg(const struct opt *o)
{
	return o->kind != OPT_FLAG && o->kind != OPT_CLEAR && o->kind != OPT_SECTION &&
	       o->kind != OPT_INCLUDE;
}

static const char *arg_name(const struct opt *o)
{
	static __thread char alts[256];

	if (o->arg)
		return o->arg;
	if (o->kind == OPT_CHOICE) { /* "copy|splice" */
		size_t at = 0;

		alts[0] = '\0';
		for (int i = 0; o->choices[i] && at < sizeof(alts); i++)
			at += (size_t)snprintf(alts + at, sizeof(alts) - at, "%s%s", i ? "|" : "",
					       o->choices[i]);
		return alts;
	}
	switch (o->kind) {
	case OPT_SIZE:
		return "SIZE";
	case OPT_MS:
		return "SECS";
	case OPT_DOUBLE:
		return "X";
	case OPT_ADDR:
		return "ADDR:PORT";
	case OPT_CHOICE:
		return "NAME";
	case OPT_STR:
	case OPT_FUNC:
		return "VALUE";
	default:
		return "N";
	}
}

/* An unsigned number: decimal, or hexadecimal after "0x"; no sign, no space. With base0, C's
 * rules instead (strtoull's base 0: "0x" hexadecimal, a leading 0 octal, a '-' wraps around). */
static int parse_unsigned(const char *s, bool base0, unsigned long long *out)
{
	int base = 10;
	char *end;

	if (base0) {
		if (!*s || isspace((unsigned char)*s))
			return -1;
		errno = 0;
		*out = strtoull(s, &end, 0);
		return errno || *end || end == s ? -1 : 0;
	}
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s || strspn(s, base == 16 ? "0123456789abcdefABCDEF" : "0123456789") != strlen(s))
		return -1;
	errno = 0;
	*out = strtoull(s, &end, base);
	return errno || *end ? -1 : 0;
}

/* v in [min, max]; both 0: the kind's [lo, hi]; max 0 alone: no bound above but hi. */
static bool in_range(double v, double min, double max, double lo, double hi)
{
	if (min == 0 && max == 0)
		min = lo;
	if (max == 0)
		max = hi;
	return v >= min && v <= max;
}

int opt_parse_size(const char *s, double min, double max, size_t *out)
{
	char *end;
	double v, mul = 1, bytes;

	if (strcmp(s, "0") == 0) {
		if (!(min == 0 && max > 0))
			return -1;
		*out = 0;
		return 0;
	}
	v = strtod(s, &end);
	if (end == s || !(v > 0))
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1024;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1024.0 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1024.0 * 1024 * 1024;
		end++;
		break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
	bytes = v * mul;
	if (*end || bytes > SIZE_HI || !in_range(bytes, min, max, 1, SIZE_HI))
		return -1;
	*out = (size_t)bytes;
	return 0;
}

int opt_parse_ms(const char *s, double min, double max, int *out)
{
	char *end;
	double v = strtod(s, &end), ms;

	if (end == s || !(v >= 0))
		return -1;
	if (strcmp(end, "ms") == 0)
		ms = v;
	else if (!*end || strcmp(end, "s") == 0)
		ms = v * 1000;
	else
		return -1;
	if (!in_range(ms, min, max, 0, MS_HI) || ms > MS_HI)
		return -1;
	*out = (int)ms;
	return 0;
}

int opt_parse_addr(const char *s, void *sockaddr_in_out)
{
	struct sockaddr_in *out = sockaddr_in_out;
	char host[INET_ADDRSTRLEN];
	const char *colon = strrchr(s, ':');
	unsigned long long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host) ||
	    parse_unsigned(colon + 1, false, &port) || port > 65535 ||
	    (colon[1] == '0' && (colon[2] == 'x' || colon[2] == 'X')))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

int opt_show_list(const char *const *v, size_t n, char sep, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? (char[]){sep, 0} : "", v[i]);
	return n > 0;
}

/* Parses arg into o's field of cfg. 0 or -1. */
static int parse_value(const struct opt *o, void *cfg, const char *arg)
{
	void *p = field(cfg, o);
	unsigned long long u;
	char *end;

	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)p = true;
		return 0;
	case OPT_CLEAR:
		*(bool *)p = false;
		return 0;
	case OPT_STR:
		if (o->check) {
			int rc = o->check(arg);

			if (rc < 0)
				return rc;
		}
		*(const char **)p = arg;
		return 0;
	case OPT_INT: {
		long v;

		errno = 0;
		v = strtol(arg, &end, 10);
		if (end == arg || *end || errno || !in_range((double)v, o->min, o->max, 0, INT_MAX))
			return -1;
		*(int *)p = (int)v;
		return 0;
	}
	case OPT_U32:
		if (parse_unsigned(arg, o->flags & OPT_BASE0, &u) || u > UINT32_MAX ||
		    !in_range((double)u, o->min, o->max, 0, UINT32_MAX))
			return -1;
		*(uint32_t *)p = (uint32_t)u;
		return 0;
	case OPT_U64:
		if (parse_unsigned(arg, o->flags & OPT_BASE0, &u) ||
		    !in_range((double)u, o->min, o->max, 0, 18446744073709551615.0))
			return -1;
		*(uint64_t *)p = (uint64_t)u;
		return 0;
	case OPT_SIZE:
		return opt_parse_size(arg, o->min, o->max, p);
	case OPT_MS:
		return opt_parse_ms(arg, o->min, o->max, p);
	case OPT_DOUBLE: {
		double v = strtod(arg, &end);

		if (end == arg || *end || !in_range(v, o->min, o->max, 0, 1e300))
			return -1;
		*(double *)p = v;
		return 0;
	}
	case OPT_CHOICE:
		for (int i = 0; o->choices[i]; i++)
			if (strcmp(arg, o->choices[i]) == 0) {
				*(int *)p = i;
				return 0;
			}
		return -1;
	case OPT_ADDR:
		return opt_parse_addr(arg, p);
	case OPT_FUNC:
		return o->parse(cfg, arg);
	case OPT_SECTION:
	case OPT_INCLUDE:
		break;
	}
	return -1;
}

static void show_size(size_t v, char *buf, size_t n)
{
	static const char unit[] = "GMK";

	for (int i = 0; i < 3 && v; i++) {
		size_t m = (size_t)1 << (10 * (3 - i));

		if (v % m == 0) {
			snprintf(buf, n, "%zu%c", v / m, unit[i]);
			return;
		}
	}
	snprintf(buf, n, "%zu", v);
}

/* Exact, as a flag takes it: "30s", "250ms", "1.5s", "1000.001s". */
static void show_ms(int v, char *buf, size_t n)
{
	if (v % 1000 == 0) {
		snprintf(buf, n, "%ds", v / 1000);
	} else if (v < 1000) {
		snprintf(buf, n, "%dms", v);
	} else {
		char frac[8];
		int k;

		snprintf(frac, sizeof(frac), "%03d", v % 1000);
		for (k = 2; k > 0 && frac[k] == '0'; k--)
			frac[k] = '\0';
		snprintf(buf, n, "%d.%ss", v / 1000, frac);
	}
}

/* The shortest text that reads back as v. */
static void show_double(double v, char *buf, size_t n)
{
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

int opt_show(const struct opt *o, const void *cfg, char *buf, size_t n)
{
	const void *p = cfield(cfg, o);

	buf[0] = '\0';
	switch (o->kind) {
	case OPT_FLAG:
		snprintf(buf, n, "%s", *(const bool *)p ? "on" : "off");
		return 1;
	case OPT_CLEAR:
		snprintf(buf, n, "%s", *(const bool *)p ? "off" : "on");
		return 1;
	case OPT_STR: {
		const char *s = *(const char *const *)p;

		if (!s)
			return 0;
		snprintf(buf, n, "%s", s);
		return 1;
	}
	case OPT_INT:
		snprintf(buf, n, "%d", *(const int *)p);
		return 1;
	case OPT_U32:
		snprintf(buf, n, o->flags & OPT_HEX ? "0x%x" : "%u", *(const uint32_t *)p);
		return 1;
	case OPT_U64:
		snprintf(buf, n, o->flags & OPT_HEX ? "0x%llx" : "%llu",
			 (unsigned long long)*(const uint64_t *)p);
		return 1;
	case OPT_SIZE:
		show_size(*(const size_t *)p, buf, n);
		return 1;
	case OPT_MS: /* a negative duration: unset, the entry's dflt rule decides */
		if (*(const int *)p < 0)
			return 0;
		show_ms(*(const int *)p, buf, n);
		return 1;
	case OPT_DOUBLE:
		show_double(*(const double *)p, buf, n);
		return 1;
	case OPT_CHOICE:
		snprintf(buf, n, "%s", o->choices[*(const int *)p]);
		return 1;
	case OPT_ADDR: {
		const struct sockaddr_in *a = p;
		char s[INET_ADDRSTRLEN];

		if (a->sin_family == 0) /* never set: an address that is off by default */
			return 0;

		inet_ntop(AF_INET, &a->sin_addr, s, sizeof(s));
		snprintf(buf, n, "%s:%u", s, ntohs(a->sin_port));
		return 1;
	}
	case OPT_FUNC:
		return o->show ? o->show(cfg, buf, n) : 0;
	case OPT_SECTION:
	case OPT_INCLUDE:
		break;
	}
	return 0;
}

/* The entry named name in v[0..n) (searching included tables), or NULL; *base gets the offset
 * its off is relative to. */
static const struct opt *find_in(const struct opt *v, size_t n, const char *name, size_t *base)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].kind == OPT_INCLUDE) {
			size_t b = *base;
			const struct opt *o;

			*base += v[i].off;
			if ((o = find_in(v[i].sub, v[i].nsub, name, base)))
				return o;
			*base = b;
		} else if (v[i].kind != OPT_SECTION && strcmp(v[i].name, name) == 0) {
			return &v[i];
		}
	}
	return NULL;
}

const struct opt *opt_find(const struct opt_table *t, const char *name, size_t *base)
{
	size_t b = 0;
	const struct opt *o = find_in(t->v, t->n, name, &b);

	if (base)
		*base = b;
	return o;
}

/* The default shown for o: the rule, the value a fresh config holds, or "" for none. */
static void default_text(const struct opt *o, const void *def, char *buf, size_t n)
{
	buf[0] = '\0';
	if (o->flags & OPT_NO_DEFAULT || o->kind == OPT_FLAG || o->kind == OPT_CLEAR)
		return;
	if (o->dflt) {
		snprintf(buf, n, "%s", o->dflt);
		return;
	}
	if (!opt_show(o, def, buf, n))
		buf[0] = '\0';
	else if (!buf[0])
		snprintf(buf, n, "\"\""); /* an empty string */
	for (char *c = buf; *c; c++)
		if (*c == '\n')
			*c = ',';
}

/* Writes text wrapped at HELP_WIDTH, lines after the first indented by col; *at is the column
 * the cursor is at, updated. */
static void wrap(FILE *f, const char *text, int col, int *at)
{
	const char *w = text;

	while (*w) {
		size_t len;

		while (*w == ' ')
			w++;
		len = strcspn(w, " ");
		if (!len)
			break;
		if (*at > col && *at + 1 + (int)len > HELP_WIDTH) {
			fprintf(f, "\n%*s", col, "");
			*at = col;
		} else if (*at > col) {
			fputc(' ', f);
			(*at)++;
		}
		fwrite(w, 1, len, f);
		*at += (int)len;
		w += len;
	}
}

static size_t count(const struct opt *v, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += v[i].kind == OPT_INCLUDE ? count(v[i].sub, v[i].nsub) : 1;
	return k;
}

static size_t fill(struct opt *out, const struct opt *v, size_t n, size_t base)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].kind == OPT_INCLUDE) {
			k += fill(out + k, v[i].sub, v[i].nsub, base + v[i].off);
			continue;
		}
		out[k] = v[i];
		out[k++].off += base;
	}
	return k;
}

/* t's entries with every OPT_INCLUDE expanded and its offsets made absolute (malloc'ed, *n
 * entries), or NULL when out of memory. */
static struct opt *flatten(const struct opt_table *t, size_t *n)
{
	struct opt *v;

	*n = count(t->v, t->n);
	v = calloc(*n ? *n : 1, sizeof(*v));
	if (v)
		fill(v, t->v, t->n, 0);
	return v;
}

static void *fresh_defaults(const struct opt_table *t)
{
	void *def = calloc(1, t->cfg_size);

	if (def && t->defaults)
		t->defaults(def);
	return def;
}

void opt_usage(const struct opt_table *t, FILE *f)
{
	void *def = fresh_defaults(t);
	size_t nv;
	struct opt *v = flatten(t, &nv);
	char dv[512], head[128], *help;
	int at;

	if (!def || !v) {
		free(def);
		free(v);
		return;
	}
	fputs(t->synopsis, f);
	if (t->about) {
		fputc('\n', f);
		at = 0;
		wrap(f, t->about, 0, &at);
		fputc('\n', f);
	}
	for (size_t i = 0; i < nv; i++) {
		const struct opt *o = &v[i];

		if (o->kind == OPT_SECTION) {
			fprintf(f, "\n%s:\n", o->name);
			continue;
		}
		if (takes_arg(o))
			snprintf(head, sizeof(head), "  --%s %s", o->name, arg_name(o));
		else
			snprintf(head, sizeof(head), "  --%s", o->name);
		fputs(head, f);
		at = (int)strlen(head);
		if (at + 2 > HELP_COL) {
			fprintf(f, "\n%*s", HELP_COL, "");
		} else {
			fprintf(f, "%*s", HELP_COL - at, "");
		}
		at = HELP_COL;
		default_text(o, def, dv, sizeof(dv));
		if (dv[0] && asprintf(&help, o->dflt ? "%s (default: %s)" : "%s (default %s)",
				      o->help, dv) >= 0) {
			wrap(f, help, HELP_COL, &at);
			free(help);
		} else {
			wrap(f, o->help, HELP_COL, &at);
		}
		fputc('\n', f);
	}
	fprintf(f, "  -h, --help%*s", HELP_COL - 12, "");
	at = HELP_COL;
	wrap(f, "this text", HELP_COL, &at);
	fprintf(f, "\n  --print-config%*s", HELP_COL - 16, "");
	at = HELP_COL;
	wrap(f, "print the configuration these options make, as flags, and exit", HELP_COL, &at);
	fputc('\n', f);
	if (t->epilog)
		fprintf(f, "\n%s", t->epilog);
	free(def);
	free(v);
}

/* Writes s with '|' escaped for a Markdown table cell. */
static void md_cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s, f);
	}
}

/* The range of o as text ("1 – 1G"), or "" when it has none worth saying. */
static void range_text(const struct opt *o, char *buf, size_t n)
{
	char lo[64], hi[64];

	buf[0] = '\0';
	if (o->kind == OPT_CHOICE) {
		size_t at = 0;

		for (int i = 0; o->choices[i] && at < n; i++)
			at += (size_t)snprintf(buf + at, n - at, "%s`%s`", i ? ", " : "",
					       o->choices[i]);
		return;
	}
	if (o->min == 0 && o->max == 0)
		return;
	switch (o->kind) {
	case OPT_SIZE:
		show_size((size_t)o->min, lo, sizeof(lo));
		show_size((size_t)o->max, hi, sizeof(hi));
		if (o->max >= SIZE_HI) /* no bound but the kind's */
			hi[0] = '\0';
		break;
	case OPT_MS:
		show_ms((int)o->min, lo, sizeof(lo));
		show_ms((int)o->max, hi, sizeof(hi));
		if (o->max >= MS_HI)
			hi[0] = '\0';
		break;
	case OPT_INT:
	case OPT_U32:
	case OPT_U64:
	case OPT_DOUBLE:
		snprintf(lo, sizeof(lo), "%g", o->min);
		snprintf(hi, sizeof(hi), "%g", o->max);
		if (o->max == 0) /* no bound but the type's */
			hi[0] = '\0';
		break;
	default:
		return;
	}
	if (hi[0])
		snprintf(buf, n, "%s – %s", lo, hi);
	else
		snprintf(buf, n, "≥ %s", lo);
}

void opt_markdown(const struct opt_table *t, FILE *f)
{
	void *def = fresh_defaults(t);
	size_t nv;
	struct opt *v = flatten(t, &nv);
	char dv[512], rv[256];
	bool open = false;

	if (!def || !v) {
		free(def);
		free(v);
		return;
	}
	for (size_t i = 0; i < nv; i++) {
		const struct opt *o = &v[i];

		if (o->kind == OPT_SECTION || !open) {
			fprintf(f, "\n## %s\n\n", o->kind == OPT_SECTION ? o->name : "Options");
			fputs("| flag | default | range | what it does |\n|---|---|---|---|\n", f);
			open = true;
			if (o->kind == OPT_SECTION)
				continue;
		}
		default_text(o, def, dv, sizeof(dv));
		range_text(o, rv, sizeof(rv));
		fprintf(f, "| `--%s%s", o->name, takes_arg(o) ? " " : "");
		md_cell(f, takes_arg(o) ? arg_name(o) : "");
		fputs("` | ", f);
		if (dv[0]) {
			fputc(o->dflt ? ' ' : '`', f);
			md_cell(f, dv);
			fputc(o->dflt ? ' ' : '`', f);
		}
		fputs(" | ", f);
		md_cell(f, rv);
		fputs(" | ", f);
		md_cell(f, o->help);
		fputs(" |\n", f);
	}
	free(def);
	free(v);
}

/* Writes s as one shell word: as is when it is plain, else in single quotes. */
static void shell_word(FILE *f, const char *s)
{
	if (*s &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,@%+-") ==
		strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++)
		fputs(*s == '\'' ? "'\\''" : (char[]){*s, 0}, f);
	fputc('\'', f);
}

void opt_print_config(const struct opt_table *t, const void *cfg, FILE *f)
{
	size_t nv;
	struct opt *all = flatten(t, &nv);
	size_t vn = 1 << 17; /* room for the longest list (32 paths) */
	char *v = malloc(vn);

	for (size_t i = 0; all && v && i < nv; i++) {
		const struct opt *o = &all[i];

		if (o->kind == OPT_SECTION)
			continue;
		if (o->kind == OPT_FLAG || o->kind == OPT_CLEAR) {
			bool b = *(const bool *)cfield(cfg, o);

			if (b == (o->kind == OPT_FLAG))
				fprintf(f, "--%s\n", o->name);
			continue;
		}
		if (!opt_show(o, cfg, v, vn))
			continue;
		for (char *line = v, *nl; line; line = nl) {
			nl = strchr(line, '\n');
			if (nl)
				*nl++ = '\0';
			fprintf(f, "--%s ", o->name);
			shell_word(f, line);
			fputc('\n', f);
		}
	}
	free(v);
	free(all);
}

/* Says why o refused arg (unless its function did: rc == OPT_SAID); returns OPT_ERROR. */
static enum opt_result bad_value(const struct opt_table *t, const struct opt *o, const char *arg,
				 int rc)
{
	char rv[256];

	if (rc == OPT_SAID)
		return OPT_ERROR;
	range_text(o, rv, sizeof(rv));
	fprintf(stderr, "%s: bad value for --%s: %s%s%s%s\n", t->prog, o->name, arg,
		rv[0] ? " (" : "", rv, rv[0] ? ")" : "");
	return OPT_ERROR;
}

enum opt_result opt_parse(const struct opt_table *t, int argc, char **argv, void *cfg)
{
	size_t nv, k = 0;
	struct opt *v = flatten(t, &nv);
	struct option *lo = calloc(nv + 3, sizeof(*lo));
	enum opt_result res = OPT_RUN;
	bool print = false;
	int c, rc;

	if (!lo || !v) {
		fprintf(stderr, "%s: out of memory\n", t->prog);
		free(lo);
		free(v);
		return OPT_ERROR;
	}
	for (size_t i = 0; i < nv; i++)
		if (v[i].kind != OPT_SECTION)
			lo[k++] =
			    (struct option){v[i].name, takes_arg(&v[i]), NULL, VAL_BASE + (int)i};
	lo[k++] = (struct option){"help", no_argument, NULL, VAL_HELP};
	lo[k++] = (struct option){"print-config", no_argument, NULL, VAL_PRINT};
	opterr = 0;
	/* pass 0: the OPT_FIRST entries only (the rest, errors too, wait for pass 1) */
	optind = 0; /* 0, not 1: glibc then also forgets where it was inside a "-xyz" */
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		const struct opt *o = c >= VAL_BASE ? &v[c - VAL_BASE] : NULL;

		if (!o || !(o->flags & OPT_FIRST))
			continue;
		if ((rc = parse_value(o, cfg, optarg)) < 0) {
			res = bad_value(t, o, optarg, rc);
			break;
		}
	}
	optind = 0;
	while (res == OPT_RUN && (c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		const struct opt *o;

		if (c == 'h' || c == VAL_HELP) {
			opt_usage(t, stdout);
			res = OPT_EXIT;
			break;
		}
		if (c == VAL_PRINT) {
			print = true;
			continue;
		}
		if (c == ':' || c == '?') {
			char shortopt[3] = {'-', (char)optopt, 0};
			const char *what = optopt ? shortopt : argv[optind - 1];

			fprintf(stderr, "%s: %s %s (see --help)\n", t->prog,
				c == ':' ? "missing value for" : "unknown option", what);
			res = OPT_ERROR;
			break;
		}
		o = &v[c - VAL_BASE];
		if (o->flags & OPT_FIRST) /* taken in pass 0 */
			continue;
		if ((rc = parse_value(o, cfg, optarg)) < 0) {
			res = bad_value(t, o, optarg, rc);
			break;
		}
	}
	free(lo);
	free(v);
	if (res != OPT_RUN)
		return res;
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s (see --help)\n", t->prog, argv[optind]);
		return OPT_ERROR;
	}
	if (print) {
		opt_print_config(t, cfg, stdout);
		return OPT_EXIT;
	}
	return OPT_RUN;
}
