/* SPDX-License-Identifier: Apache-2.0 */
/* jinja: a Jinja2 interpreter for chat templates, rendering exactly as transformers renders them
 * for vLLM: jinja2 3.1's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[loopcontrols, AssistantTracker]) with no autoescape, keep_trailing_newline=False,
 * plain Undefined, transformers' tojson (json.dumps(x, ensure_ascii=False, indent=,
 * separators=, sort_keys=)) and its globals raise_exception(msg) and strftime_now(fmt).
 *
 * A template is parsed once (jinja_load) into a tree, then rendered per request (jinja_render)
 * with variables given as JSON text, read as Python's json.loads reads it (1 is an int, 1.0 and
 * 1e5 floats; the last of repeated keys wins, in the first one's place). Values print as Python's
 * str() prints them (True, None, 1e-05, {'a': [1, "it's"]}), strings are indexed by code point.
 *
 * What the interpreter does not implement is refused, never approximated: at load, naming it
 * (a statement, filter, test, method, or a name such as cycler that jinja2 defines and this
 * module does not); at render where only the values tell (a method object printed, upper() of a
 * non-ASCII string, an integer beyond 64 bits). Rendering is bounded (struct jinja_limits): each
 * exceeded bound is a render error, so a hostile template costs bounded time and memory.
 *
 * A loaded template is immutable: any number of threads may render it at once. */
#ifndef KVS_JINJA_H
#define KVS_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Bounds of one render. 0 in a field is refused by jinja_render (use jinja_limits_default). */
struct jinja_limits {
	unsigned depth;	     /* nested macro calls, loops and expressions */
	uint64_t loop_iters; /* loop iterations, all loops of the render together */
	uint64_t steps;	     /* evaluation steps (nodes visited): the bound on time */
	size_t out_bytes;    /* bytes of the rendered text, and of any one string built */
	size_t mem_bytes;    /* bytes the render's values may take (strings, lists, dicts) */
};

#define JINJA_DEPTH_MAX 200	       /* nesting: jinja2 itself stops near Python's 1,000 frames */
#define JINJA_LOOP_ITERS_MAX 200000    /* iterations of one render */
#define JINJA_STEPS_MAX 5000000	       /* nodes evaluated: ~0.3 s at worst */
#define JINJA_OUT_BYTES_MAX (4u << 20) /* bytes: a prompt is at most a few MiB */
#define JINJA_MEM_BYTES_MAX (32u << 20) /* bytes of values built by one render */

/* The clock strftime_now() reads: seconds since the epoch and the offset of the server's local
 * time from UTC (transformers formats datetime.now(), a naive local time: %z and %Z print ""). */
struct jinja_clock {
	int64_t unix_s;
	int32_t utc_offset_s;
};

enum jinja_status {
	JINJA_OK = 0,
	JINJA_SYNTAX = 1,      /* load: not a template jinja2 parses (TemplateSyntaxError) */
	JINJA_UNSUPPORTED = 2, /* load or render: valid jinja2 this module does not implement */
	JINJA_RAISED = 3,      /* render: the template called raise_exception(msg) */
	JINJA_UNDEFINED = 4,   /* render: jinja2's UndefinedError */
	JINJA_TYPE = 5,	    /* render: another error jinja2 raises (TypeError, ValueError, ...) */
	JINJA_SECURITY = 6, /* render: the sandbox refused (list.append, an unsafe attribute) */
	JINJA_LIMIT = 7,    /* render: a bound of struct jinja_limits */
	JINJA_INPUT = 8,    /* render: the variables are not a JSON object this module reads */
};

/* What went wrong: the status, the template line (0 if none) and a message. For JINJA_RAISED the
 * message is raise_exception's argument as given; for JINJA_UNDEFINED it is jinja2's ("'x' is
 * undefined", "'dict object' has no attribute 'y'"). */
struct jinja_error {
	int status;
	int line;
	char msg[512];
};

struct jinja_template;

/* Sets l to the defaults above. */
void jinja_limits_default(struct jinja_limits *l);

/* Parses src[0..n) (UTF-8, no NUL) into *out. Returns 0, a jinja_status (SYNTAX, UNSUPPORTED;
 * err says what and where) or -ENOMEM. */
int jinja_load(const char *src, size_t n, struct jinja_template **out, struct jinja_error *err);

/* Frees a loaded template (NULL is fine). */
void jinja_free(struct jinja_template *t);

/* Renders t with the variables of the JSON object vars[0..n) and appends the text to out.
 * limits NULL: the defaults; clock NULL: the current time in UTC. Returns 0, a jinja_status
 * (err says what; out is then left as it was) or -ENOMEM. */
int jinja_render(const struct jinja_template *t, const char *vars, size_t n,
		 const struct jinja_limits *limits, const struct jinja_clock *clock,
		 struct buf *out, struct jinja_error *err);

/* The name of a status ("ok", "syntax", "unsupported", "raised", ...). */
const char *jinja_status_name(int status);

/* Python's str.isspace() of code point c (what str.strip() removes). */
bool py_isspace(uint32_t c);

/* Python's s.strip(chars) (left: lstrip, right: rstrip) of UTF-8 s[0..n): sets [*b, *e).
 * chars NULL: white space (py_isspace); else the code points of chars[0..nchars). */
void py_strip(const char *s, size_t n, const char *chars, size_t nchars, bool left, bool right,
	      size_t *b, size_t *e);

#endif
