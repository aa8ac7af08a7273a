/* SPDX-License-Identifier: Apache-2.0 */
/* jinja_int: what the parts of the Jinja interpreter share (not a public contract; include
 * prompt/jinja.h). jinja_parse.c turns the source into a tree of struct node, jinja_value.c
 * holds the values (an arena per render, Python's printing, equality and ordering, JSON in and
 * out), jinja_eval.c walks the tree. */
#ifndef KVS_JINJA_INT_H
#define KVS_JINJA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "prompt/jinja.h"

/* --- values -------------------------------------------------------------------------------- */

enum jv_type {
	JV_UNDEF,
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST, /* sub: enum jl_kind */
	JV_DICT,
	JV_NS,	  /* namespace(...): d, the one mutable value */
	JV_MACRO, /* m */
	JV_LOOP,  /* lp */
	JV_FUNC,  /* sub: enum jfunc (a global function) */
};

/* What a JV_LIST is to Python: what it prints as and which operations it allows. */
enum jl_kind {
	JL_LIST,
	JL_TUPLE,
	JL_GEN,	   /* a generator (map, select, items filters): iterable only */
	JL_ITEMS,  /* dict.items() */
	JL_KEYS,   /* dict.keys() */
	JL_VALUES, /* dict.values() */
	JL_RANGE,  /* range(...): prints as range(a, b[, c]) */
};

enum jfunc {
	JF_RANGE,
	JF_NAMESPACE,
	JF_RAISE,
	JF_STRFTIME,
	JF_DICT,
	JF_COUNT,
};

/* Why a value is undefined, for jinja2's UndefinedError message when it is used. */
enum ju_kind {
	JU_PLAIN,  /* no hint: "... is undefined" of nothing in particular */
	JU_NAME,   /* name: 'x' is undefined */
	JU_ATTR,   /* obj has no attribute name: '<type> object' has no attribute 'x' */
	JU_ELEM,   /* obj has no element key: <type> object has no element 5 */
	JU_HINT,   /* hint as is */
	JU_UNSAFE, /* the sandbox: hint, raised as a SecurityError */
	JU_UNSUP,  /* using it is refused as unsupported (hint says why) */
};

struct jlist;
struct jdict;
struct jloop;
struct jundef;
struct node;

struct jv {
	uint8_t t;   /* enum jv_type */
	uint8_t sub; /* JV_LIST: enum jl_kind; JV_FUNC: enum jfunc */
	uint32_t n;  /* JV_STR: bytes */
	union {
		int64_t i; /* JV_INT, JV_BOOL */
		double f;
		const char *s;
		struct jlist *l;
		struct jdict *d;
		const struct node *m;
		struct jloop *lp;
		struct jundef *u; /* JV_UNDEF: NULL is JU_PLAIN */
	};
};

struct jlist {
	uint32_t n, cap;
	struct jv *v;
	int64_t start, stop, step; /* JL_RANGE */
	/* JL_GEN: Python's generators are lazy, so an error the map/select/items filter met at
	 * item n (or before any) is raised only where the generator is consumed that far: the
	 * first n items are v, err_msg says what (NULL: no error). */
	const char *err_msg;
	int err_status, err_line;
	const char *tname; /* JL_GEN: Python's type name when not "generator" (reversed(...)) */
};

/* Insertion-ordered; keys compared with Python's ==. Small dicts are searched in order, larger
 * ones through a hash index of string keys built on demand. */
struct jdict {
	uint32_t n, cap;
	struct jv *k, *v;
	uint32_t *idx; /* open addressing over string keys: slot -> i + 1, 0 empty */
	uint32_t idx_cap;
	bool idx_bad; /* a non-string key: no index */
};

struct jloop {
	int64_t index0, length;
	const struct jlist *items; /* the kept items, for previtem / nextitem */
};

struct jundef {
	uint8_t kind; /* enum ju_kind */
	const char *name;
	size_t name_n;
	const char *obj_type; /* "dict object", "None", ... */
	int64_t elem;	      /* JU_ELEM with an int key */
	bool elem_is_str;
};

/* --- the arena of one render ---------------------------------------------------------------- */

struct jchunk;

struct jarena {
	struct jchunk *head;
	size_t used, limit; /* bytes taken, bound (0: none) */
	bool over;	    /* limit was exceeded */
};

void *ja_alloc(struct jarena *a, size_t n);
void ja_free_all(struct jarena *a);
/* A copy of s[0..n) (NUL-terminated) in the arena, NULL when out of memory or over the limit. */
char *ja_strdup(struct jarena *a, const char *s, size_t n);

/* --- the tree --------------------------------------------------------------------------------- */

enum nk {
	/* statements */
	N_BODY, /* v: statements */
	N_TEXT, /* k: the text */
	N_PRINT,
	N_IF,	/* a cond, b body, c else (N_BODY or N_IF) */
	N_FOR,	/* a target, b iter, c filter, d body, e else */
	N_SET,	/* a target, b value */
	N_SETB, /* a target, b body */
	N_MACRO,
	N_BREAK,
	N_CONTINUE,
	N_GEN, /* {% generation %}: b body */
	/* expressions */
	N_CONST,
	N_NAME,	   /* sym */
	N_NSATTR,  /* assignment target ns.attr: sym (ns), k attr */
	N_GETATTR, /* a obj, k attr name */
	N_GETITEM, /* a obj, b key */
	N_SLICE,   /* a obj, b start, c stop, d step (NULL each when absent) */
	N_CALL,	   /* a callee, v args, kw */
	N_METHOD,  /* a obj, k method name, op enum jmethod, v args, kw */
	N_FILTER,  /* a value, op enum jfilter, v args, kw */
	N_TEST,	   /* a value, op enum jtest, v args, kw */
	N_NOT,
	N_NEG,
	N_POS,
	N_BIN,	  /* op: '+', '-', '*', '/', '%', OP_FLOORDIV, OP_POW */
	N_CONCAT, /* v: operands of ~ */
	N_AND,
	N_OR,
	N_CMP, /* a first operand, v: N_CMPOP nodes (op, a operand) */
	N_CMPOP,
	N_COND, /* a cond, b then, c else (NULL: undefined) */
	N_LIST,
	N_TUPLE,
	N_DICT, /* v: keys, kw: values (N_KW nodes are not used here; kw[i] is the value node) */
	N_KW,	/* k name, a value */
};

enum {
	OP_FLOORDIV = 1,
	OP_POW,
	OP_EQ,
	OP_NE,
	OP_LE,
	OP_GE,
	OP_LT,
	OP_GT,
	OP_IN,
	OP_NOTIN,
};

struct node {
	uint8_t kind;
	uint8_t op;
	uint16_t flags;
	int line;
	int sym;
	struct jv k;
	struct node *a, *b, *c, *d, *e;
	struct node **v;
	uint32_t nv;
	struct node **kw;
	uint32_t nkw;
	/* N_BODY of a frame (the template, a loop body or else, a macro, a set block, a
	 * generation block): the names bound to an undefined when the frame starts (see
	 * jinja_parse.c, frames) */
	int *pre;
	uint32_t npre;
};

/* Filters, tests and methods resolved at load. */
enum jfilter {
	FL_TRIM,
	FL_TOJSON,
	FL_LENGTH,
	FL_LIST,
	FL_STRING,
	FL_JOIN,
	FL_MAP,
	FL_SELECTATTR,
	FL_REJECTATTR,
	FL_SELECT,
	FL_REJECT,
	FL_DEFAULT,
	FL_FIRST,
	FL_LAST,
	FL_UPPER,
	FL_LOWER,
	FL_REPLACE,
	FL_ITEMS,
	FL_CAPITALIZE,
	FL_TITLE,
	FL_ABS,
	FL_INT,
	FL_FLOAT,
	FL_REVERSE,
	FL_COUNT,
};

enum jtest {
	TS_DEFINED,
	TS_UNDEFINED,
	TS_NONE,
	TS_STRING,
	TS_MAPPING,
	TS_ITERABLE,
	TS_FALSE,
	TS_TRUE,
	TS_NUMBER,
	TS_BOOLEAN,
	TS_SEQUENCE,
	TS_EQ,
	TS_NE,
	TS_LT,
	TS_LE,
	TS_GT,
	TS_GE,
	TS_SAMEAS,
	TS_INTEGER,
	TS_FLOAT,
	TS_CALLABLE,
	TS_ODD,
	TS_EVEN,
	TS_DIVISIBLEBY,
	TS_IN,
	TS_LOWER,
	TS_UPPER,
	TS_COUNT,
};

enum jmethod {
	M_STRIP,
	M_LSTRIP,
	M_RSTRIP,
	M_SPLIT,
	M_RSPLIT,
	M_STARTSWITH,
	M_ENDSWITH,
	M_REPLACE,
	M_UPPER,
	M_LOWER,
	M_TITLE,
	M_CAPITALIZE,
	M_FIND,
	M_COUNT,
	M_JOIN,
	M_ITEMS,
	M_KEYS,
	M_VALUES,
	M_GET,
	M_INDEX,
	M_UNSAFE, /* a mutating method of list or dict: the sandbox refuses it */
	M_OTHER,  /* anything else: resolved at render (a macro in a namespace, or undefined) */
	M_COUNT_,
};

int jinja_filter_id(const char *name, size_t n);
int jinja_test_id(const char *name, size_t n);

struct jinja_template {
	struct node *root;
	char **syms; /* symbol id -> name */
	uint32_t nsyms;
	int sym_loop;
	int sym_global[JF_COUNT]; /* symbol ids of range, namespace, ... (-1: not used) */
	struct jarena arena;	  /* nodes, strings, the normalized source */
};

/* --- values: jinja_value.c ------------------------------------------------------------------ */

/* The error state shared by the value functions and the evaluator. */
struct jerr {
	struct jinja_error *e;
	bool set;
	int status;
	size_t max_out; /* bytes any text printed or dumped may reach (0: no bound) */
};

int jerr_set(struct jerr *er, int status, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline struct jv jv_none(void)
{
	struct jv v = {.t = JV_NONE};
	return v;
}
static inline struct jv jv_bool(bool b)
{
	struct jv v = {.t = JV_BOOL, .i = b};
	return v;
}
static inline struct jv jv_int(int64_t i)
{
	struct jv v = {.t = JV_INT, .i = i};
	return v;
}
static inline struct jv jv_float(double f)
{
	struct jv v = {.t = JV_FLOAT, .f = f};
	return v;
}
static inline struct jv jv_str(const char *s, size_t n)
{
	struct jv v = {.t = JV_STR, .n = (uint32_t)n, .s = s};
	return v;
}
static inline struct jv jv_undef(struct jundef *u)
{
	struct jv v = {.t = JV_UNDEF, .u = u};
	return v;
}

struct jlist *jl_new(struct jarena *a, uint32_t cap);
int jl_push(struct jarena *a, struct jlist *l, struct jv v); /* 0 or -1 (memory) */
struct jdict *jd_new(struct jarena *a, uint32_t cap);
/* Sets key to val (Python's d[key] = val: an existing key keeps its place). 0 or -1. */
int jd_set(struct jarena *a, struct jdict *d, struct jv key, struct jv val);
/* The value of key, or NULL. */
struct jv *jd_get(struct jarena *a, const struct jdict *d, struct jv key);
struct jv *jd_get_str(const struct jdict *d, const char *s, size_t n);

/* Python's truthiness. */
bool jv_truthy(const struct jv *v);
/* Python's type name of v as type(v).__name__ ("int", "NoneType", "Undefined", ...). */
const char *jv_type_name(const struct jv *v);
/* jinja2's object_type_repr: "None", "dict object", "str object", ... */
const char *jv_object_type(const struct jv *v);

/* Python's str(v) / repr(v) appended to b. 0, or -1 with er set (a value Python prints with an
 * address, such as a bound method, is refused). */
int py_str(struct buf *b, const struct jv *v, struct jerr *er);
int py_repr(struct buf *b, const struct jv *v, struct jerr *er);
/* repr(float) into o (room for 32 bytes); returns its length. */
size_t py_float_repr(double f, char *o);

/* Python's a == b (deep; 1 == 1.0 == True; list != tuple). */
bool py_eq(const struct jv *a, const struct jv *b);
/* Python's ordering of a and b: *res < 0, 0, > 0. 0, or -1 with er set (TypeError: '<' not
 * supported between instances of ...). opname names the operator in that message. */
int py_order(const struct jv *a, const struct jv *b, const char *opname, int *res, struct jerr *er);

/* Is s[0..n) valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF)? */
bool utf8_valid(const char *s, size_t n);
/* Number of code points of UTF-8 s[0..n). */
size_t utf8_count(const char *s, size_t n);
/* Byte offset of code point i (i <= count). */
size_t utf8_offset(const char *s, size_t n, size_t i);
/* Decodes one code point at s (n > 0 bytes, valid UTF-8); *len its bytes. */
uint32_t utf8_next(const char *s, size_t n, size_t *len);

/* Python's json.loads of text[0..n) into *out. 0, or -1 with er set (JINJA_INPUT). */
int jv_from_json(struct jarena *a, const char *text, size_t n, struct jv *out, struct jerr *er);

struct json_opts {
	bool ensure_ascii;
	bool sort_keys;
	bool indent_set;
	const char *indent;
	size_t indent_n;
	const char *item_sep, *key_sep;
	size_t item_sep_n, key_sep_n;
};
/* json.dumps(v, ...) appended to b. 0, or -1 with er set. */
int py_json(struct buf *b, const struct jv *v, const struct json_opts *o, struct jarena *a,
	    struct jerr *er);

#endif
