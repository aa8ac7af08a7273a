// SPDX-License-Identifier: Apache-2.0
/* The option table (core/options.h) on a table of every kind, and the daemon's table
 * (daemon/config.h): values parsed and refused, ranges, sections and included tables, --help's
 * defaults read from the defaults function, --print-config parsing back to the same config; and
 * the daemon's phase graph (daemon/daemon.h). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/options.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "tap.h"

struct inner {
	double x;
	int n;
};

struct cfg {
	bool flag, on;
	const char *str;
	int i;
	uint32_t u;
	uint64_t big;
	size_t size, size0;
	int ms;
	double d;
	int choice;
	struct sockaddr_in addr;
	int nlist;
	const char *list[4];
	struct inner in;
};

static int parse_list(void *cfg, const char *arg)
{
	struct cfg *c = cfg;

	if (c->nlist == 4 || !*arg)
		return -1;
	c->list[c->nlist++] = arg;
	return 0;
}

static int show_list(const void *cfg, char *buf, size_t n)
{
	const struct cfg *c = cfg;
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < c->nlist; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? "\n" : "", c->list[i]);
	return c->nlist > 0;
}

/* --preset NAME (OPT_FIRST): "high" sets --int 50 and --d 0.75, as a profile sets others. */
static int parse_preset(void *cfg, const char *arg)
{
	struct cfg *c = cfg;

	if (strcmp(arg, "high") != 0)
		return -1;
	c->i = 50;
	c->d = 0.75;
	return 0;
}

static int show_preset(const void *cfg, char *buf, size_t n)
{
	(void)cfg;
	(void)buf;
	(void)n;
	return 0;
}

static const char *const colours[] = {"red", "green", "blue", NULL};

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct opt inner_opts[] = {
    {"x", OPT_DOUBLE, offsetof(struct inner, x), "X", 1, 10, "an included double"},
    {"n", OPT_INT, offsetof(struct inner, n), "N", 0, 5, "an included int"},
};

#define F(f) offsetof(struct cfg, f)
static const struct opt opts[] = {
    {"First", OPT_SECTION},
    {"flag", OPT_FLAG, F(flag), NULL, 0, 0, "a flag"},
    {"no-on", OPT_CLEAR, F(on), NULL, 0, 0, "turns on off"},
    {"str", OPT_STR, F(str), "S", 0, 0, "a string"},
    {"int", OPT_INT, F(i), "N", -5, 100, "an int from -5"},
    {"u32", OPT_U32, F(u), "N", 1, 1000, "a u32", OPT_HEX},
    {"big", OPT_U64, F(big), "N", 0, 0, "a u64"},
    {"Second", OPT_SECTION},
    {"size", OPT_SIZE, F(size), NULL, 1, 1 << 30, "a size"},
    {"size0", OPT_SIZE, F(size0), NULL, 0, 1 << 20, "a size, 0 allowed"},
    {"ms", OPT_MS, F(ms), NULL, 1, 60000, "a duration"},
    {"d", OPT_DOUBLE, F(d), "X", 0, 1, "a fraction"},
    {"colour", OPT_CHOICE, F(choice), NULL, 0, 0, "a choice", .choices = colours},
    {"addr", OPT_ADDR, F(addr), NULL, 0, 0, "an address"},
    {"item", OPT_FUNC, 0, "V", 0, 0, "repeatable", .parse = parse_list, .show = show_list},
    {"preset", OPT_FUNC, 0, "NAME", 0, 0, "sets --int and --d", .flags = OPT_FIRST,
     .parse = parse_preset, .show = show_preset},
    {"", OPT_INCLUDE, F(in), .sub = inner_opts, .nsub = 2},
};

static void defaults(void *p)
{
	struct cfg *c = p;

	memset(c, 0, sizeof(*c));
	c->on = true;
	c->i = 7;
	c->u = 0x20;
	c->size = 64 << 10;
	c->ms = 1500;
	c->d = 0.25;
	c->choice = 1;
	opt_parse_addr("127.0.0.1:80", &c->addr);
	c->in.x = 2;
	c->in.n = 3;
}

static const struct opt_table table = {
    .prog = "t",
    .synopsis = "Usage: t [OPTIONS]\n",
    .about = "about text",
    .v = opts,
    .n = sizeof(opts) / sizeof(opts[0]),
    .cfg_size = sizeof(struct cfg),
    .defaults = defaults,
};

/* Parses the NULL-terminated arguments into c (from the defaults); stdout and stderr of the
 * parse go to /dev/null. Returns the result. */
static enum opt_result parse(struct cfg *c, ...)
{
	char *argv[32] = {"t"};
	int argc = 1, out = dup(1), err = dup(2), null = open("/dev/null", 1);
	enum opt_result r;
	va_list ap;

	va_start(ap, c);
	while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	defaults(c);
	fflush(stdout);
	dup2(null, 1);
	dup2(null, 2);
	r = opt_parse(&table, argc, argv, c);
	fflush(stdout);
	dup2(out, 1);
	dup2(err, 2);
	close(out);
	close(err);
	close(null);
	return r;
}

/* What f printed, through fn(t, f), as a malloc'ed string. */
static char *capture(void (*fn)(const struct opt_table *, FILE *), const struct opt_table *t)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	fn(t, f);
	fclose(f);
	return s;
}

/* An OPT_FIRST entry is parsed before the others wherever it stands, so flags override it. */
static void test_first(void)
{
	struct cfg c;
	enum opt_result r;

	r = parse(&c, "--int", "9", "--preset", "high", NULL);
	CHECK(r == OPT_RUN && c.i == 9 && c.d == 0.75,
	      "first: a flag before --preset overrides it (int %d, d %g)", c.i, c.d);
	r = parse(&c, "--preset=high", "--d", "0.5", NULL);
	CHECK(r == OPT_RUN && c.i == 50 && c.d == 0.5, "first: and after it (int %d, d %g)", c.i,
	      c.d);
	CHECK(parse(&c, "--preset", "low", NULL) == OPT_ERROR, "first: its bad value is refused");
	CHECK(parse(&c, "--nope", "--preset", "high", NULL) == OPT_ERROR,
	      "first: an unknown option elsewhere is still refused");
	CHECK(parse(&c, "--int", "500", "--preset", "high", NULL) == OPT_ERROR,
	      "first: another flag's bad value is still refused");
}

static void test_values(void)
{
	struct cfg c;
	char buf[256];

	CHECK_EQ(parse(&c, (char *)NULL), OPT_RUN, "no argument: run");
	CHECK(c.i == 7 && c.on && !c.flag && c.in.n == 3, "no argument leaves the defaults");
	CHECK_EQ(parse(&c, "--flag", "--no-on", "--str", "abc", "--int", "-5", "--u32", "0x3e8",
		       "--big", "18446744073709551615", (char *)NULL),
		 OPT_RUN, "flags, a string and integers");
	CHECK(c.flag && !c.on && !strcmp(c.str, "abc") && c.i == -5 && c.u == 1000 &&
		  c.big == UINT64_MAX,
	      "each went to its field");
	CHECK_EQ(parse(&c, "--size", "1.5M", "--size0", "0", "--ms", "250ms", "--d", "1",
		       "--colour", "blue", "--addr", "10.1.2.3:8080", (char *)NULL),
		 OPT_RUN, "a size, a zero size, a duration, a choice, an address");
	CHECK(c.size == 3 << 19 && c.size0 == 0 && c.ms == 250 && c.d == 1 && c.choice == 2 &&
		  ntohs(c.addr.sin_port) == 8080 && c.addr.sin_addr.s_addr == inet_addr("10.1.2.3"),
	      "parsed as their kinds say");
	CHECK_EQ(parse(&c, "--ms", "2", (char *)NULL), OPT_RUN, "seconds without a unit");
	CHECK_EQ(c.ms, 2000, "2 is 2000 ms");
	CHECK_EQ(parse(&c, "--size", "4KiB", (char *)NULL), OPT_RUN, "KiB");
	CHECK_EQ(c.size, 4096, "4KiB is 4096");
	CHECK_EQ(parse(&c, "--item", "a", "--item", "b", "--x", "10", "--n", "0", (char *)NULL),
		 OPT_RUN, "a repeatable entry and included entries");
	CHECK(c.nlist == 2 && !strcmp(c.list[1], "b") && c.in.x == 10 && c.in.n == 0,
	      "the list holds both, the included struct its values");
	opt_show(opt_find(&table, "u32", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "0x20", "OPT_HEX shows hexadecimal");
	opt_show(opt_find(&table, "size", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "64K", "sizes show in their largest whole unit");
	opt_show(opt_find(&table, "ms", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "1.5s", "durations show in seconds");
	{
		size_t base = 1;
		const struct opt *x = opt_find(&table, "x", &base);

		CHECK(x && base == offsetof(struct cfg, in) && !opt_find(&table, "First", NULL) &&
			  !opt_find(&table, "nope", NULL),
		      "opt_find searches included tables (with their base offset), not sections");
	}
	CHECK_EQ(parse(&c, "--ms", ".5", "--size", "0.5K", (char *)NULL), OPT_RUN,
		 "a number may start with its point");
	CHECK(c.ms == 500 && c.size == 512, ".5 s is 500 ms, 0.5K 512 bytes");
	CHECK_EQ(parse(&c, "--size", "1.5", (char *)NULL), OPT_RUN, "a fraction of a byte");
	CHECK_EQ(c.size, 1, "is rounded down");
	c.ms = 1000001;
	opt_show(opt_find(&table, "ms", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "1000.001s", "durations show exactly");
	c.d = 0.1234567891;
	opt_show(opt_find(&table, "d", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "0.1234567891", "doubles show as the shortest text that reads back");
	c.d = 0.35;
	opt_show(opt_find(&table, "d", NULL), &c, buf, sizeof(buf));
	CHECK_STREQ(buf, "0.35", "... and stay short");
}

static void test_refused(void)
{
	static const char *const bad[][2] = {
	    {"--int", "-6"},	   {"--int", "101"},	   {"--int", "1x"},
	    {"--u32", "0"},	   {"--u32", "1001"},	   {"--u32", "-1"},
	    {"--big", "-1"},	   {"--big", "1e3"},	   {"--size", "0"},
	    {"--size", "2G"},	   {"--size", "0.1"},	   {"--size", "-1K"},
	    {"--size", "4X"},	   {"--size0", "2M"},	   {"--ms", "0"},
	    {"--ms", "61"},	   {"--ms", "nan"},	   {"--ms", "5m"},
	    {"--d", "1.1"},	   {"--d", "inf"},	   {"--colour", "pink"},
	    {"--addr", "1.2.3.4"}, {"--addr", "1.2.3:80"}, {"--addr", "1.2.3.4:65536"},
	    {"--item", ""},	   {"--x", "0.5"},	   {"--n", "6"},
	};
	struct cfg c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(parse(&c, bad[i][0], bad[i][1], (char *)NULL), OPT_ERROR, bad[i][1]);
	CHECK_EQ(parse(&c, "--nope", (char *)NULL), OPT_ERROR, "an unknown option");
	CHECK_EQ(parse(&c, "--str", (char *)NULL), OPT_ERROR, "a missing value");
	CHECK_EQ(parse(&c, "stray", (char *)NULL), OPT_ERROR, "a stray argument");
	CHECK_EQ(parse(&c, "--help", (char *)NULL), OPT_EXIT, "--help: exit 0");
	CHECK_EQ(parse(&c, "--print-config", (char *)NULL), OPT_EXIT, "--print-config: exit 0");
}

static void test_help(void)
{
	char *h = capture(opt_usage, &table), *md = capture(opt_markdown, &table);

	CHECK(strstr(h, "Usage: t [OPTIONS]") && strstr(h, "\nFirst:\n") && strstr(h, "\nSecond:"),
	      "--help: synopsis and sections");
	CHECK(strstr(h, "an int from -5 (default 7)") && strstr(h, "(default 0x20)") &&
		  strstr(h, "(default 64K)") && strstr(h, "(default 1.5s)") &&
		  strstr(h, "(default green)") && strstr(h, "(default 127.0.0.1:80)") &&
		  strstr(h, "an included double (default 2)"),
	      "--help: every default from the defaults function");
	CHECK(strstr(h, "--colour red|green|blue"), "--help: a choice shows its names");
	CHECK(!strstr(h, "a flag (default"), "--help: flags show no default");
	CHECK(strstr(md, "## First") && strstr(md, "| `--size SIZE` | `64K` | 1 – 1G | a size |"),
	      "reference: a row per option with default and range");
	CHECK(strstr(md, "| `--colour red|green|blue`") == NULL &&
		  strstr(md, "`red`, `green`, `blue`"),
	      "reference: '|' escaped, choices listed");
	free(h);
	free(md);
}

/* --print-config's output parses back to the same output. */
static void test_print_config(void)
{
	struct cfg c, back;
	char *text = NULL, *again = NULL, *argv[64] = {"t"};
	size_t n = 0;
	int argc = 1;
	FILE *f;

	parse(&c, "--str", "it's a b", (char *)NULL);
	f = open_memstream(&text, &n);
	opt_print_config(&table, &c, f);
	fclose(f);
	CHECK(strstr(text, "--str 'it'\\''s a b'\n"), "--print-config: a value is one shell word");
	free(text);
	text = NULL;
	parse(&c, "--flag", "--str", "xy", "--item", "a", "--item", "b", "--size", "3M", "--ms",
	      "20ms", "--colour", "red", "--x", "3.5", (char *)NULL);
	f = open_memstream(&text, &n);
	opt_print_config(&table, &c, f);
	fclose(f);
	CHECK(strstr(text, "--flag\n") && strstr(text, "--str xy\n") &&
		  strstr(text, "--item a\n--item b\n") && strstr(text, "--size 3M\n") &&
		  strstr(text, "--ms 20ms\n") && strstr(text, "--x 3.5\n") &&
		  !strstr(text, "no-on"),
	      "--print-config: one line a flag, lists one line an item");
	for (char *line = strtok(text, "\n"); line && argc < 62; line = strtok(NULL, "\n")) {
		char *sp = strchr(line, ' ');

		if (sp)
			*sp = '\0';
		argv[argc++] = line;
		if (sp)
			argv[argc++] = sp + 1;
	}
	defaults(&back);
	CHECK_EQ(opt_parse(&table, argc, argv, &back), OPT_RUN, "the printed flags parse");
	f = open_memstream(&again, &n);
	opt_print_config(&table, &back, f);
	fclose(f);
	parse(&c, "--flag", "--str", "xy", "--item", "a", "--item", "b", "--size", "3M", "--ms",
	      "20ms", "--colour", "red", "--x", "3.5", (char *)NULL);
	free(text);
	text = NULL;
	f = open_memstream(&text, &n);
	opt_print_config(&table, &c, f);
	fclose(f);
	CHECK_STREQ(again, text, "... into the same configuration");
	free(text);
	free(again);
}

/* The daemon's own table: its defaults are daemon_cfg_default's, and parsing its printed config
 * gives the same config. */
static void test_daemon_table(void)
{
	struct daemon_cfg c, d;
	char *argv[] = {"kvsplice",    "--max-head",  "1M",	     "--listen",
			"127.0.0.1:1", "--listen",    "127.0.0.2:2", "--kv-backlog",
			"0.5",	       "--no-events", "--relay",     "copy"};
	char *h = capture(opt_usage, &daemon_options);

	daemon_cfg_default(&c);
	CHECK(strstr(h, "(default 64K)") && strstr(h, "(default 169.254.20.11:15001)") &&
		  strstr(h, "(default 0.25)") && strstr(h, "(default splice)"),
	      "kvsplice --help: defaults of the proxy, the listener and the kv policy");
	CHECK_EQ(c.proxy.max_head, 64 << 10, "the default --max-head the daemon uses");
	CHECK_EQ(opt_parse(&daemon_options, 12, argv, &c), OPT_RUN, "kvsplice flags parse");
	CHECK(c.proxy.max_head == 1 << 20 && c.proxy.nlisten == 2 && c.kv.backlog == 0.5 &&
		  !c.events && c.proxy.relay == PROXY_RELAY_COPY &&
		  ntohs(c.proxy.listen[1].sin_port) == 2,
	      "into the daemon's config (a --listen replaces the default address)");
	daemon_cfg_default(&d);
	CHECK(d.proxy.nlisten == 1 && d.index.max_workers == INDEX_DEFAULT_MAX_WORKERS &&
		  d.ev.rcvhwm == EVENTS_DEFAULT_RCVHWM && d.keeper_queue_ms == -1,
	      "daemon_cfg_default names every default");
	{
		char *args[] = {"kvsplice",	"--mark", "010",
				"--hash-seed",	"0x10",	  "--index-max-entries",
				"2000000000000"};

		daemon_cfg_default(&c);
		CHECK(
		    opt_parse(&daemon_options, 7, args, &c) == OPT_RUN && c.mark == 8 &&
			c.index.seed == 16 && c.index_max_entries == 2000000000000ull,
		    "--mark and --hash-seed take C's prefixes (010 is 8), --index-max-entries has "
		    "no upper bound");
	}
	free(h);
}

static void test_phases(void)
{
	static const enum daemon_phase legal[][2] = {
	    {DAEMON_STARTING, DAEMON_DEGRADED},	  {DAEMON_STARTING, DAEMON_LISTING},
	    {DAEMON_STARTING, DAEMON_SYNCING},	  {DAEMON_LISTING, DAEMON_SYNCING},
	    {DAEMON_LISTING, DAEMON_DRAINING},	  {DAEMON_SYNCING, DAEMON_SERVING},
	    {DAEMON_SYNCING, DAEMON_DRAINING},	  {DAEMON_SERVING, DAEMON_DRAINING},
	    {DAEMON_SERVING, DAEMON_HANDED_OVER},
	};
	int n = 0;

	for (int a = 0; a < DAEMON_NPHASES; a++)
		for (int b = 0; b < DAEMON_NPHASES; b++) {
			bool want = false;

			for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
				want |= legal[i][0] == (enum daemon_phase)a &&
					legal[i][1] == (enum daemon_phase)b;
			n += daemon_phase_allowed(a, b) == want;
		}
	CHECK_EQ(n, DAEMON_NPHASES * DAEMON_NPHASES,
		 "the phase graph has daemon.h's arrows and no other");
	CHECK(!daemon_phase_allowed(DAEMON_DRAINING, DAEMON_SERVING) &&
		  !daemon_phase_allowed(DAEMON_HANDED_OVER, DAEMON_DRAINING) &&
		  !daemon_phase_allowed(DAEMON_DEGRADED, DAEMON_SERVING),
	      "no way back from draining, a handover or degraded");
	CHECK_STREQ(daemon_phase_name(DAEMON_HANDED_OVER), "handed-over", "phase names");
	CHECK_STREQ(daemon_phase_name(DAEMON_NPHASES), "?", "no name out of range");
}

int main(void)
{
	test_first();
	test_values();
	test_refused();
	test_help();
	test_print_config();
	test_daemon_table();
	test_phases();
	return tap_done();
}
