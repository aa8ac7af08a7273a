/* SPDX-License-Identifier: Apache-2.0 */
/* options: a program's command line from one table. Each entry names a long option, its kind,
 * where its value goes (an offset into the program's config struct), its range and one line of
 * help. The same table parses argv, prints --help, prints the Markdown reference
 * (docs/reference/flags.md is generated from it) and prints a config back as flags
 * (--print-config). Defaults are never typed in help text: --help and the reference show the
 * values the table's defaults function puts in a fresh config, which is the config the program
 * then parses its flags into.
 *
 * The values a kind takes:
 *   OPT_SIZE    bytes: "4096", "64K", "32M", "1.5G" (also "KiB", "MB"); "0" only when min is 0
 *   OPT_MS      a duration into an int of milliseconds: "1.5" or "1.5s" (seconds), "250ms"; a
 *               negative value in a config is unset (shown as none: the entry's dflt applies)
 *   OPT_INT, OPT_U32, OPT_U64   decimal ("0x" hexadecimal too for OPT_U32 and OPT_U64; with
 *               OPT_BASE0, C's rules: a leading 0 is octal)
 *   OPT_DOUBLE  a decimal number
 *   OPT_CHOICE  one of choices[] into an int (its index)
 *   OPT_ADDR    "A.B.C.D:PORT" into a struct sockaddr_in
 *   OPT_FUNC    the entry's own parse and show functions (lists, checks only the program knows)
 * Numbers outside [min, max] are refused (both 0: the kind's own range; max 0 alone: no bound
 * above but the type's). */
#ifndef KVS_OPTIONS_H
#define KVS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum opt_kind {
	OPT_SECTION, /* not an option: a heading in --help and the reference (name is its title) */
	OPT_FLAG,    /* no argument: a bool set true */
	OPT_CLEAR,   /* no argument: a bool set false (a --no-... flag) */
	OPT_STR,     /* const char *: the argv string itself (not copied) */
	OPT_INT,
	OPT_U32,
	OPT_U64,
	OPT_SIZE, /* size_t */
	OPT_MS,	  /* int milliseconds */
	OPT_DOUBLE,
	OPT_CHOICE,
	OPT_ADDR,
	OPT_FUNC,
	OPT_INCLUDE, /* not an option: the entries of another table (sub, nsub), their offsets
		      * relative to off (a config struct inside this one); no OPT_FUNC there */
};

/* What an entry's parse or check returns when it refused a value and said why on stderr. */
#define OPT_SAID (-2)

/* Entry flags. */
#define OPT_HEX 0x1u	    /* OPT_U32/OPT_U64: shown in hexadecimal */
#define OPT_NO_DEFAULT 0x2u /* no "(default ...)": the help says what happens without it */
#define OPT_BASE0 0x4u	    /* OPT_U32/OPT_U64: C's prefixes (0x hexadecimal, 0 octal) */
#define OPT_FIRST                                                                                  \
	0x8u /* parsed before every other option, wherever it stands: one that                     \
	      * sets the others' values (a profile), which any flag then overrides */

struct opt {
	const char *name; /* long name without "--"; OPT_SECTION: the heading */
	enum opt_kind kind;
	size_t off;	  /* offsetof(the config struct, the destination field) */
	const char *arg;  /* the argument's name in --help ("SIZE"); NULL: the kind's own */
	double min, max;  /* range of a numeric kind, in its unit (bytes, ms); both 0: any value
			   * the destination type holds (never negative) */
	const char *help; /* one sentence; --help wraps it */
	unsigned flags;
	const char *const *choices; /* OPT_CHOICE: the names, NULL-terminated */
	/* OPT_FUNC: parse arg into cfg (0; -1: refused, "bad value for --name" is printed;
	 * OPT_SAID: refused, the function printed why); show writes the value held in cfg
	 * (returns 0 when there is none to show, e.g. an empty list). */
	int (*parse)(void *cfg, const char *arg);
	int (*show)(const void *cfg, char *buf, size_t n);
	/* the default as a rule, for the few decided at run time (e.g. a path looked up beside the
	 * binary); NULL: the value in a fresh config */
	const char *dflt;
	const struct opt *sub; /* OPT_INCLUDE */
	size_t nsub;
	/* OPT_STR: 0 to take arg, -1 or OPT_SAID to refuse it (as parse above) */
	int (*check)(const char *arg);
};

struct opt_table {
	const char *prog;     /* "kvsplice": the prefix of messages */
	const char *synopsis; /* "Usage: ..." line(s), each ending in '\n' */
	const char *about;    /* a paragraph after the synopsis (wrapped), or NULL */
	const char *epilog;   /* text after the options (printed as is), or NULL */
	const struct opt *v;
	size_t n;
	size_t cfg_size;	     /* sizeof the config struct */
	void (*defaults)(void *cfg); /* fills a config with the defaults */
};

/* What opt_parse asks of its caller. */
enum opt_result {
	OPT_RUN = 0,   /* parsed: run with cfg */
	OPT_EXIT = 1,  /* --help or --print-config printed on stdout: exit 0 */
	OPT_ERROR = 2, /* a bad option or value (said on stderr): exit 2 */
};

/* Parses argv[1..argc) into cfg, which holds the defaults already (t->defaults): OPT_FIRST
 * entries first, then the rest in order. Handles
 * -h/--help (usage on stdout) and --print-config (the parsed config as flags on stdout, one a
 * line, after every other option is read). A non-option argument is an error. */
enum opt_result opt_parse(const struct opt_table *t, int argc, char **argv, void *cfg);

/* --help: the synopsis, about, every option with its help and default, the epilog. */
void opt_usage(const struct opt_table *t, FILE *f);
/* The reference page: one table row per option (flag, argument, default, range, help) under the
 * sections' headings. */
void opt_markdown(const struct opt_table *t, FILE *f);
/* cfg as flags, one "--name value" a line (flags that are set, lists one item a line), each
 * value one shell word (quoted where it must be), so the lines pasted into a shell give cfg. */
void opt_print_config(const struct opt_table *t, const void *cfg, FILE *f);

/* The value option o holds in cfg, as its flag would take it ("64K", "30s", "0x6b76").
 * Returns 0 when there is none (an unset string, an empty list), else 1. */
int opt_show(const struct opt *o, const void *cfg, char *buf, size_t n);
/* Finds the option named name in t (in included tables too), or NULL; *base (when not NULL) gets
 * the offset its off is relative to, so its field is at cfg + *base + off. */
const struct opt *opt_find(const struct opt_table *t, const char *name, size_t *base);

/* The value parsers, for OPT_FUNC entries and other callers. Each returns 0, or -1 for text
 * that is not such a value or lies outside [min, max] (both 0: no bound but the type's). */
int opt_parse_size(const char *s, double min, double max, size_t *out);
int opt_parse_ms(const char *s, double min, double max, int *out);
int opt_parse_addr(const char *s, void *sockaddr_in_out);

/* For an OPT_FUNC list's show: v[0..n) joined by sep into buf. Returns 0 when n is 0, else 1. */
int opt_show_list(const char *const *v, size_t n, char sep, char *buf, size_t len);

#endif
