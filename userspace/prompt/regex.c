// SPDX-License-Identifier: Apache-2.0
/* regex: a backtracking matcher over code points for the tokenizer's Split patterns (regex.h).
 *
 * Compilation: the pattern is parsed into a tree, then emitted as a small program. Every single
 * code point matcher (a literal, a case-folded literal, `.`, a class, `\p{..}`) becomes one class:
 * a bitmap over ASCII and, for other code points, a short list of ranges and a bitmap over the
 * property byte of unicode_tables (General_Category, White_Space, \w). A quantified class is one
 * RUN instruction (consume greedily, give back one code point at a time on backtracking), which is
 * all the families' patterns need; other quantified groups are unrolled into SPLIT/JMP loops.
 * Each alternative carries the set of code points it can start with, so an alternative that
 * cannot match at the current code point is skipped without pushing a backtrack entry.
 *
 * Matching is Oniguruma's: at each start position from left to right, a depth-first search in
 * the pattern's order (alternatives in order, greedy quantifiers longest first, lazy ones
 * shortest first, lookaheads atomic); the first path that reaches the end is the match. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ascii.h"
#include "core/utf8.h"
#include "prompt/regex.h"
#include "prompt/unicode_tables.h"

/* Compile-time bounds (they bound compile memory, not matching). */
#define RX_PAT_MAX (64u << 10) /* bytes of pattern */
#define RX_NODES_MAX 8192      /* tree nodes */
#define RX_PROG_MAX 16384      /* instructions, after unrolling counted repetitions */
#define RX_REPEAT_MAX 1000     /* largest m and n of {m,n} */
#define RX_DEPTH_MAX 64	       /* nesting of groups */
#define RX_LOOK_MAX 8 /* nesting of lookaheads (each costs a C stack frame when matching) */
#define RX_FOLD_MAX 8 /* code points one case-folded literal may stand for */
#define RX_INF UINT32_MAX

/* --- classes -------------------------------------------------------------------------------- */

struct rx_range {
	uint32_t lo, hi;
};

/* A set of code points. Membership of c >= 0x80: in one of the ranges -> range_in, else the bit
 * of its property byte in prop (negation already applied to both). */
struct rx_class {
	uint8_t byte[256]; /* by first byte: 1 an ASCII member, 0 not, 2 a code point >= 0x80
			      (decode) */
	uint64_t prop[2];
	uint32_t range_off, nrange;
	bool range_in;
};

/* The set of code points a piece of pattern can start with (a superset): exact over ASCII; for
 * other code points a property-byte bitmap, or all of them (any_high). */
struct rx_first {
	uint64_t ascii[2];
	uint64_t prop[2];
	bool any_high;
};

enum { OP_RUN, OP_SPLIT, OP_JMP, OP_LOOK, OP_MATCH };

struct rx_inst {
	uint8_t op;
	uint8_t greedy; /* RUN */
	uint8_t neg;	/* LOOK: negative */
	int32_t first;	/* SPLIT: index of x's first set in re->first, or -1 (x may match empty) */
	uint32_t cls;	/* RUN */
	uint32_t min, max;
	uint32_t x, y; /* SPLIT: try x, then y; JMP: x; LOOK: continue at x (the body follows) */
};

/* One element of a simple alternative (below). */
enum { E_RUN, E_LOOK, E_STRS };

struct rx_elem {
	uint8_t kind;
	uint8_t greedy;	   /* RUN, STRS */
	uint8_t neg;	   /* LOOK: negative */
	uint8_t final;	   /* its first choice is the only one worth trying (see elems_final) */
	uint32_t cls;	   /* RUN, LOOK: the class */
	uint32_t min, max; /* RUN: the repetition; STRS: 0 or 1, 1 */
	uint32_t str_off, nstr; /* STRS: the literal sequences, in re->strs */
	uint8_t start[256];	/* STRS: by byte, whether a sequence may start there (2: >= 0x80) */
	/* By byte at the element's position (256: the end of the text), whether the elements from
	 * this one on may match there: 0 means no (a cheap early failure), 1 maybe. */
	uint8_t rest[257];
};

/* A sequence of single code point classes, re->strcls[off..off + len). */
struct rx_str {
	uint32_t off, len;
};

/* A top-level alternative. Simple ones (a sequence of class repetitions, lookaheads at one
 * class, and groups of alternative fixed sequences, optional or not: all the families'
 * alternatives are) run in seq_match, a direct backtracker; others run as a program in vm_run. */
struct rx_alt {
	int32_t pc; /* program start, or -1: simple */
	uint32_t elem_off, nelem;
};

#define RX_ALTS_MAX 64	/* top-level alternatives told apart by the start masks */
#define RX_ELEMS_MAX 16 /* elements of a simple alternative (seq_match recurses once each) */

struct regex {
	struct rx_inst *prog;
	struct rx_class *cls;
	struct rx_range *ranges;
	struct rx_first *first;
	struct rx_alt alts[RX_ALTS_MAX];
	struct rx_elem *elems;
	struct rx_str *strs;
	uint32_t *strcls;
	uint32_t nprog, ncls, nranges, nfirst, nalts, nelems, nstrs, nstrcls;
	/* The alternatives that can start at a code point: by ASCII byte, by property byte (for
	 * those whose first set is a property set), always for code points >= 0x80 (high_any), and
	 * at the end of the text (nullable, also in every other mask). Bit i: alternative i. */
	uint64_t mask_ascii[128], mask_prop[128], mask_high_any, mask_nullable;
	size_t bytes;
};

static inline bool bit128(const uint64_t b[2], unsigned i)
{
	return (b[i >> 6] >> (i & 63)) & 1;
}

static inline void set128(uint64_t b[2], unsigned i)
{
	b[i >> 6] |= 1ull << (i & 63);
}

static inline bool class_high(const struct regex *re, const struct rx_class *k, uint32_t c)
{
	const struct rx_range *r = re->ranges + k->range_off;

	for (uint32_t i = 0; i < k->nrange; i++)
		if (c >= r[i].lo && c <= r[i].hi)
			return k->range_in;
	return bit128(k->prop, unicode_prop(c));
}

/* The length of the code point at s[p] if class k holds it, else 0 (also at the end). */
static inline size_t class_at(const struct regex *re, const struct rx_class *k, const uint8_t *s,
			      size_t n, size_t p)
{
	uint32_t c;
	size_t l;

	if (p >= n)
		return 0;
	if (k->byte[s[p]] < 2)
		return k->byte[s[p]];
	l = utf8_get(s + p, n - p, &c);
	return class_high(re, k, c) ? l : 0;
}

static inline bool first_at(const struct rx_first *f, const uint8_t *s, size_t n, size_t p)
{
	uint32_t c;

	if (p >= n)
		return false;
	if (s[p] < 0x80)
		return bit128(f->ascii, s[p]);
	if (f->any_high)
		return true;
	utf8_get(s + p, n - p, &c);
	return bit128(f->prop, unicode_prop(c));
}

/* --- parser --------------------------------------------------------------------------------- */

enum { N_EMPTY, N_CLASS, N_CAT, N_ALT, N_REP, N_LOOK };

struct rx_node {
	uint8_t kind;
	uint8_t greedy, neg;
	uint32_t min, max;
	int32_t child, next; /* first child, next sibling (-1: none) */
	int32_t cls;	     /* N_CLASS: index into the parser's class items */
	uint32_t lit;	     /* N_CLASS from a literal under (?i): its simple folding; else 0 */
	bool is_lit;
};

/* A class as parsed: ranges and a property-byte set, then negation. */
struct rx_pclass {
	uint64_t prop[2];
	uint32_t range_off, nrange;
	bool neg;
};

struct parser {
	const uint8_t *p, *end, *pat;
	char *err;
	size_t errlen;
	bool failed;
	struct rx_node *nodes;
	uint32_t nnodes, capnodes;
	struct rx_pclass *pcls;
	uint32_t npcls, cappcls;
	struct rx_range *ranges;
	uint32_t nranges, capranges;
	int depth, looks;
	bool seq_start; /* no piece parsed yet in the current alternative */
};

__attribute__((format(printf, 2, 3))) static int perr(struct parser *ps, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (ps->failed)
		return -1;
	ps->failed = true;
	if (ps->errlen) {
		va_start(ap, fmt);
		n = vsnprintf(ps->err, ps->errlen, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < ps->errlen)
			snprintf(ps->err + n, ps->errlen - (size_t)n,
				 " (at byte %zu of the pattern)", (size_t)(ps->p - ps->pat));
	}
	return -1;
}

static int32_t node_new(struct parser *ps, int kind)
{
	struct rx_node *nd;

	if (ps->nnodes >= RX_NODES_MAX)
		return perr(ps, "pattern too large (more than %d nodes)", RX_NODES_MAX);
	if (ps->nnodes == ps->capnodes) {
		uint32_t cap = ps->capnodes ? ps->capnodes * 2 : 64;
		struct rx_node *v = realloc(ps->nodes, cap * sizeof(*v));
		if (!v)
			return perr(ps, "out of memory");
		ps->nodes = v;
		ps->capnodes = cap;
	}
	nd = &ps->nodes[ps->nnodes];
	memset(nd, 0, sizeof(*nd));
	nd->kind = (uint8_t)kind;
	nd->child = nd->next = -1;
	nd->cls = -1;
	return (int32_t)ps->nnodes++;
}

static int32_t pclass_new(struct parser *ps)
{
	if (ps->npcls == ps->cappcls) {
		uint32_t cap = ps->cappcls ? ps->cappcls * 2 : 32;
		struct rx_pclass *v = realloc(ps->pcls, cap * sizeof(*v));
		if (!v)
			return perr(ps, "out of memory");
		ps->pcls = v;
		ps->cappcls = cap;
	}
	memset(&ps->pcls[ps->npcls], 0, sizeof(ps->pcls[0]));
	ps->pcls[ps->npcls].range_off = ps->nranges;
	return (int32_t)ps->npcls++;
}

/* Adds a range to the class being built (always the last one). */
static int range_add(struct parser *ps, uint32_t lo, uint32_t hi)
{
	if (ps->nranges == ps->capranges) {
		uint32_t cap = ps->capranges ? ps->capranges * 2 : 64;
		struct rx_range *v = realloc(ps->ranges, cap * sizeof(*v));
		if (!v)
			return perr(ps, "out of memory");
		ps->ranges = v;
		ps->capranges = cap;
	}
	ps->ranges[ps->nranges++] = (struct rx_range){lo, hi};
	ps->pcls[ps->npcls - 1].nrange++;
	return 0;
}

/* Property bytes whose category is in the mask of UGC_* bits (bit 30: White_Space, 31: \w). */
static void prop_set(uint64_t prop[2], uint32_t gcmask, bool invert)
{
	for (unsigned b = 0; b < 128; b++) {
		bool in = (gcmask >> (b & UPROP_GC_MASK)) & 1;
		if ((b & UPROP_GC_MASK) >= UGC_COUNT)
			in = false;
		if ((gcmask & (1u << 30)) && (b & UPROP_SPACE))
			in = true;
		if ((gcmask & (1u << 31)) && (b & UPROP_WORD))
			in = true;
		if (in != invert)
			set128(prop, b);
	}
}

#define GC(x) (1u << UGC_##x)
#define PROP_SPACE_BIT (1u << 30)
#define PROP_WORD_BIT (1u << 31)

static const struct {
	const char *name;
	uint32_t mask;
} gc_names[] = {
    {"l", GC(LU) | GC(LL) | GC(LT) | GC(LM) | GC(LO)},
    {"letter", GC(LU) | GC(LL) | GC(LT) | GC(LM) | GC(LO)},
    {"lc", GC(LU) | GC(LL) | GC(LT)},
    {"casedletter", GC(LU) | GC(LL) | GC(LT)},
    {"lu", GC(LU)},
    {"uppercaseletter", GC(LU)},
    {"ll", GC(LL)},
    {"lowercaseletter", GC(LL)},
    {"lt", GC(LT)},
    {"titlecaseletter", GC(LT)},
    {"lm", GC(LM)},
    {"modifierletter", GC(LM)},
    {"lo", GC(LO)},
    {"otherletter", GC(LO)},
    {"m", GC(MN) | GC(MC) | GC(ME)},
    {"mark", GC(MN) | GC(MC) | GC(ME)},
    {"combiningmark", GC(MN) | GC(MC) | GC(ME)},
    {"mn", GC(MN)},
    {"nonspacingmark", GC(MN)},
    {"mc", GC(MC)},
    {"spacingmark", GC(MC)},
    {"me", GC(ME)},
    {"enclosingmark", GC(ME)},
    {"n", GC(ND) | GC(NL) | GC(NO)},
    {"number", GC(ND) | GC(NL) | GC(NO)},
    {"nd", GC(ND)},
    {"decimalnumber", GC(ND)},
    {"nl", GC(NL)},
    {"letternumber", GC(NL)},
    {"no", GC(NO)},
    {"othernumber", GC(NO)},
    {"p", GC(PC) | GC(PD) | GC(PS) | GC(PE) | GC(PI) | GC(PF) | GC(PO)},
    {"punctuation", GC(PC) | GC(PD) | GC(PS) | GC(PE) | GC(PI) | GC(PF) | GC(PO)},
    {"pc", GC(PC)},
    {"connectorpunctuation", GC(PC)},
    {"pd", GC(PD)},
    {"dashpunctuation", GC(PD)},
    {"ps", GC(PS)},
    {"openpunctuation", GC(PS)},
    {"pe", GC(PE)},
    {"closepunctuation", GC(PE)},
    {"pi", GC(PI)},
    {"initialpunctuation", GC(PI)},
    {"pf", GC(PF)},
    {"finalpunctuation", GC(PF)},
    {"po", GC(PO)},
    {"otherpunctuation", GC(PO)},
    {"s", GC(SM) | GC(SC) | GC(SK) | GC(SO)},
    {"symbol", GC(SM) | GC(SC) | GC(SK) | GC(SO)},
    {"sm", GC(SM)},
    {"mathsymbol", GC(SM)},
    {"sc", GC(SC)},
    {"currencysymbol", GC(SC)},
    {"sk", GC(SK)},
    {"modifiersymbol", GC(SK)},
    {"so", GC(SO)},
    {"othersymbol", GC(SO)},
    {"z", GC(ZS) | GC(ZL) | GC(ZP)},
    {"separator", GC(ZS) | GC(ZL) | GC(ZP)},
    {"zs", GC(ZS)},
    {"spaceseparator", GC(ZS)},
    {"zl", GC(ZL)},
    {"lineseparator", GC(ZL)},
    {"zp", GC(ZP)},
    {"paragraphseparator", GC(ZP)},
    {"c", GC(CC) | GC(CF) | GC(CS) | GC(CO) | GC(CN)},
    {"other", GC(CC) | GC(CF) | GC(CS) | GC(CO) | GC(CN)},
    {"cc", GC(CC)},
    {"control", GC(CC)},
    {"cf", GC(CF)},
    {"format", GC(CF)},
    {"cs", GC(CS)},
    {"surrogate", GC(CS)},
    {"co", GC(CO)},
    {"privateuse", GC(CO)},
    {"cn", GC(CN)},
    {"unassigned", GC(CN)},
};

/* \p{NAME} / \P{NAME} / \p{^NAME} after the "\p": the property bytes it holds, into prop. */
static int parse_property(struct parser *ps, bool neg, uint64_t prop[2])
{
	char name[48];
	size_t k = 0;

	if (ps->p >= ps->end || *ps->p != '{')
		return perr(ps, "\\p or \\P without {...}");
	ps->p++;
	if (ps->p < ps->end && *ps->p == '^') {
		neg = !neg;
		ps->p++;
	}
	while (ps->p < ps->end && *ps->p != '}') {
		uint8_t c = *ps->p++;
		if (c == ' ' || c == '_' || c == '-')
			continue; /* Oniguruma ignores these and case in property names */
		if (k + 1 >= sizeof(name))
			return perr(ps, "property name too long");
		name[k++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	if (ps->p >= ps->end)
		return perr(ps, "unterminated \\p{...}");
	ps->p++;
	name[k] = 0;
	for (size_t i = 0; i < sizeof(gc_names) / sizeof(gc_names[0]); i++)
		if (!strcmp(gc_names[i].name, name)) {
			prop_set(prop, gc_names[i].mask, neg);
			return 0;
		}
	return perr(ps, "unsupported property \\p{%s} (only General_Category values)", name);
}

/* A code point written \xHH, \x{H...} or \uHHHH, after the x or u. */
static int parse_hex(struct parser *ps, bool brace_ok, int digits, uint32_t *cp)
{
	uint32_t v = 0;
	int k = 0, h;

	if (brace_ok && ps->p < ps->end && *ps->p == '{') {
		ps->p++;
		while (ps->p < ps->end && (h = hex_digit(*ps->p)) >= 0 && k < 8) {
			v = v * 16 + (uint32_t)h;
			ps->p++;
			k++;
		}
		if (!k || ps->p >= ps->end || *ps->p != '}')
			return perr(ps, "bad \\x{...}");
		ps->p++;
	} else {
		while (k < digits && ps->p < ps->end && (h = hex_digit(*ps->p)) >= 0) {
			v = v * 16 + (uint32_t)h;
			ps->p++;
			k++;
		}
		if (k != digits)
			return perr(ps, "bad hexadecimal escape (want %d digits)", digits);
	}
	if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return perr(ps, "escape U+%X is not a Unicode scalar value", v);
	*cp = v;
	return 0;
}

/* What an escape stands for: a code point (*cp set, returns 1) or a set of property bytes (prop
 * filled, returns 2). After the backslash. in_class: inside [...]. */
static int parse_escape(struct parser *ps, bool in_class, uint32_t *cp, uint64_t prop[2])
{
	uint8_t c;

	if (ps->p >= ps->end)
		return perr(ps, "pattern ends with a backslash");
	c = *ps->p++;
	switch (c) {
	case 't':
		*cp = '\t';
		return 1;
	case 'n':
		*cp = '\n';
		return 1;
	case 'r':
		*cp = '\r';
		return 1;
	case 'f':
		*cp = '\f';
		return 1;
	case 'v':
		*cp = '\v';
		return 1;
	case 'a':
		*cp = 7;
		return 1;
	case 'e':
		*cp = 27;
		return 1;
	case 'x':
		return parse_hex(ps, true, 2, cp) ? -1 : 1;
	case 'u':
		return parse_hex(ps, false, 4, cp) ? -1 : 1;
	case 's':
	case 'S':
		prop_set(prop, PROP_SPACE_BIT, c == 'S');
		return 2;
	case 'd':
	case 'D':
		prop_set(prop, GC(ND), c == 'D');
		return 2;
	case 'w':
	case 'W':
		prop_set(prop, PROP_WORD_BIT, c == 'W');
		return 2;
	case 'p':
	case 'P':
		return parse_property(ps, c == 'P', prop) ? -1 : 2;
	case 'b':
		return perr(ps, in_class ? "unsupported \\b in a class" : "unsupported anchor \\b");
	case 'B':
	case 'A':
	case 'z':
	case 'Z':
	case 'G':
		return perr(ps, "unsupported anchor \\%c", c);
	case 'k':
	case 'g':
		return perr(ps, "unsupported backreference or subexpression call \\%c", c);
	case 'K':
	case 'R':
	case 'X':
	case 'N':
	case 'O':
	case 'h':
	case 'H':
	case 'y':
	case 'Y':
	case 'c':
	case 'C':
	case 'M':
		return perr(ps, "unsupported escape \\%c", c);
	default:
		break;
	}
	if (c >= '0' && c <= '9')
		return perr(ps, "unsupported backreference or octal escape \\%c", c);
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return perr(ps, "unknown escape \\%c", c);
	if (c >= 0x80)
		return perr(ps, "backslash before a non-ASCII character");
	*cp = c; /* escaped punctuation, space or control character: itself */
	return 1;
}

/* The next pattern code point (well-formed UTF-8 required). */
static int pat_char(struct parser *ps, uint32_t *cp)
{
	size_t l = utf8_get(ps->p, (size_t)(ps->end - ps->p), cp);

	if (*cp == 0xFFFD && !(l == 3 && ps->p[0] == 0xEF && ps->p[1] == 0xBF && ps->p[2] == 0xBD))
		return perr(ps, "pattern is not well-formed UTF-8");
	ps->p += l;
	return 0;
}

static int32_t class_node(struct parser *ps, int32_t pc)
{
	int32_t n = node_new(ps, N_CLASS);

	if (n >= 0)
		ps->nodes[n].cls = pc;
	return n;
}

/* A literal code point: a class of itself, or of its simple case-folding orbit under (?i). */
static int32_t literal_node(struct parser *ps, uint32_t cp, bool icase)
{
	int32_t pc = pclass_new(ps), n;
	uint32_t orbit[RX_FOLD_MAX];
	size_t k = 1;

	if (pc < 0)
		return -1;
	orbit[0] = cp;
	if (icase) {
		for (size_t i = 0; i < UNICODE_FOLD_MULTI_COUNT; i++)
			if (unicode_fold_multi[i][0] == cp)
				return perr(
				    ps,
				    "unsupported (?i) literal U+%04X (it case-folds to several "
				    "characters)",
				    cp);
		k = unicode_fold_orbit(cp, orbit, RX_FOLD_MAX);
		if (k > RX_FOLD_MAX)
			return perr(ps, "unsupported (?i) literal U+%04X (too many case variants)",
				    cp);
	}
	for (size_t i = 0; i < k; i++)
		if (range_add(ps, orbit[i], orbit[i]))
			return -1;
	n = class_node(ps, pc);
	if (n >= 0 && icase) {
		ps->nodes[n].is_lit = true;
		ps->nodes[n].lit = unicode_fold_simple(cp);
	}
	return n;
}

/* [...] after the '['. */
static int32_t parse_class(struct parser *ps, bool icase)
{
	int32_t pc = pclass_new(ps);
	bool first = true;

	if (pc < 0)
		return -1;
	if (icase)
		return perr(ps, "unsupported character class inside (?i:...)");
	if (ps->p < ps->end && *ps->p == '^') {
		ps->pcls[pc].neg = true;
		ps->p++;
	}
	for (;;) {
		uint32_t lo, hi;
		uint64_t prop[2] = {0, 0};
		int r;

		if (ps->p >= ps->end)
			return perr(ps, "unterminated character class");
		if (*ps->p == ']') {
			if (first)
				return perr(
				    ps,
				    "unsupported empty class or ']' first in a class (write \\])");
			ps->p++;
			break;
		}
		first = false;
		if (*ps->p == '[')
			return perr(ps, "unsupported nested class or POSIX bracket inside a class");
		if (*ps->p == '&' && ps->p + 1 < ps->end && ps->p[1] == '&')
			return perr(ps, "unsupported class intersection &&");
		if (*ps->p == '\\') {
			ps->p++;
			r = parse_escape(ps, true, &lo, prop);
			if (r < 0)
				return -1;
			if (r == 2) {
				ps->pcls[pc].prop[0] |= prop[0];
				ps->pcls[pc].prop[1] |= prop[1];
				if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']')
					return perr(ps, "unsupported range from a class escape");
				continue;
			}
		} else if (pat_char(ps, &lo)) {
			return -1;
		}
		hi = lo;
		if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
			ps->p++;
			if (*ps->p == '\\') {
				ps->p++;
				r = parse_escape(ps, true, &hi, prop);
				if (r < 0)
					return -1;
				if (r == 2)
					return perr(ps, "unsupported range to a class escape");
			} else if (*ps->p == '[') {
				return perr(ps, "unsupported nested class inside a class");
			} else if (pat_char(ps, &hi)) {
				return -1;
			}
			if (hi < lo)
				return perr(ps, "empty range in character class");
		}
		if (range_add(ps, lo, hi))
			return -1;
	}
	return class_node(ps, pc);
}

static int32_t parse_alt(struct parser *ps, bool icase);

/* Is the node (a group's content) able to match the empty string? */
static bool nullable(const struct parser *ps, int32_t n)
{
	const struct rx_node *nd = &ps->nodes[n];

	switch (nd->kind) {
	case N_EMPTY:
	case N_LOOK:
		return true;
	case N_CLASS:
		return false;
	case N_REP:
		return nd->min == 0 || nullable(ps, nd->child);
	case N_CAT:
		for (int32_t c = nd->child; c >= 0; c = ps->nodes[c].next)
			if (!nullable(ps, c))
				return false;
		return true;
	case N_ALT:
		for (int32_t c = nd->child; c >= 0; c = ps->nodes[c].next)
			if (nullable(ps, c))
				return true;
		return false;
	}
	return true;
}

/* {m,n} {m} {m,} {,n} after the '{': returns 1 with *min, *max; -1 on error. */
static int parse_interval(struct parser *ps, uint32_t *min, uint32_t *max)
{
	uint32_t a = 0, b;
	bool have_a = false, have_b = false;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		a = a * 10 + (uint32_t)(*ps->p++ - '0');
		have_a = true;
		if (a > RX_REPEAT_MAX)
			return perr(ps, "repetition count above %d", RX_REPEAT_MAX);
	}
	b = a;
	if (ps->p < ps->end && *ps->p == ',') {
		ps->p++;
		b = RX_INF;
		if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
			b = 0;
			while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
				b = b * 10 + (uint32_t)(*ps->p++ - '0');
				have_b = true;
				if (b > RX_REPEAT_MAX)
					return perr(ps, "repetition count above %d", RX_REPEAT_MAX);
			}
		}
	} else {
		have_b = have_a;
	}
	if ((!have_a && !have_b) || ps->p >= ps->end || *ps->p != '}')
		return perr(ps, "unsupported '{' that is not an interval {m,n} (write \\{)");
	ps->p++;
	if (b < a)
		return perr(ps, "interval {%u,%u} with max below min", a, b);
	*min = a;
	*max = b;
	return 1;
}

/* One atom and its quantifiers. Returns the node, -2 at the end of a sequence ('|', ')', end). */
static int32_t parse_piece(struct parser *ps, bool *icase)
{
	int32_t atom;
	uint32_t cp, min = 0, max = 0;
	uint64_t prop[2] = {0, 0};
	uint8_t c;
	int r;

	if (ps->p >= ps->end || *ps->p == '|' || *ps->p == ')')
		return -2;
	c = *ps->p;
	switch (c) {
	case '(': {
		bool inner = *icase, look = false, neg = false;
		ps->p++;
		if (ps->p < ps->end && *ps->p == '?') {
			ps->p++;
			if (ps->p >= ps->end)
				return perr(ps, "unterminated group");
			c = *ps->p;
			if (c == ':') {
				ps->p++;
			} else if (c == '=' || c == '!') {
				look = true;
				neg = c == '!';
				ps->p++;
			} else if (c == '<' && ps->p + 1 < ps->end &&
				   (ps->p[1] == '=' || ps->p[1] == '!')) {
				return perr(ps, "unsupported lookbehind (?<%c", ps->p[1]);
			} else if (c == '>') {
				return perr(ps, "unsupported atomic group (?>");
			} else if (c == '<' || c == 'P' || c == '\'') {
				return perr(ps, "unsupported named group");
			} else if (c == '#') {
				return perr(ps, "unsupported comment group (?#");
			} else if (c == '~') {
				return perr(ps, "unsupported absent operator (?~");
			} else {
				/* options: (?i) (?-i) (?i:...) (?-i:...) */
				bool on = true, setting = false;
				while (ps->p < ps->end && *ps->p != ':' && *ps->p != ')') {
					c = *ps->p++;
					if (c == '-' && on) {
						on = false;
					} else if (c == 'i') {
						inner = on;
						setting = true;
					} else {
						ps->p--;
						return perr(
						    ps, "unsupported group option '%c' (only i)",
						    c);
					}
				}
				if (ps->p >= ps->end || !setting)
					return perr(ps, "unterminated or empty group options");
				if (*ps->p == ')') {
					/* (?i) applies to the rest of the enclosing group.
					 * Oniguruma reads a(?i)b|c as a(?i:b|c): only where both
					 * readings agree. */
					if (!ps->seq_start)
						return perr(ps, "unsupported (?i) after the start "
								"of an alternative "
								"(write (?i:...))");
					ps->p++;
					*icase = inner;
					return node_new(ps, N_EMPTY);
				}
				ps->p++;
			}
		}
		if (++ps->depth > RX_DEPTH_MAX)
			return perr(ps, "groups nested deeper than %d", RX_DEPTH_MAX);
		if (look && ++ps->looks > RX_LOOK_MAX)
			return perr(ps, "lookaheads nested deeper than %d", RX_LOOK_MAX);
		atom = parse_alt(ps, inner);
		if (atom < 0)
			return -1;
		if (ps->p >= ps->end || *ps->p != ')')
			return perr(ps, "missing ')'");
		ps->p++;
		ps->depth--;
		if (look) {
			int32_t l = node_new(ps, N_LOOK);
			if (l < 0)
				return -1;
			ps->looks--;
			ps->nodes[l].child = atom;
			ps->nodes[l].neg = neg;
			atom = l;
		}
		break;
	}
	case '[':
		ps->p++;
		atom = parse_class(ps, *icase);
		break;
	case '.': {
		int32_t pc = pclass_new(ps);
		ps->p++;
		if (pc < 0)
			return -1;
		/* any code point but newline (Oniguruma without the multiline option) */
		ps->pcls[pc].neg = true;
		if (range_add(ps, '\n', '\n'))
			return -1;
		atom = class_node(ps, pc);
		break;
	}
	case '\\':
		ps->p++;
		r = parse_escape(ps, false, &cp, prop);
		if (r < 0)
			return -1;
		if (r == 2) {
			int32_t pc;
			if (*icase)
				return perr(ps, "unsupported class escape inside (?i:...)");
			pc = pclass_new(ps);
			if (pc < 0)
				return -1;
			ps->pcls[pc].prop[0] = prop[0];
			ps->pcls[pc].prop[1] = prop[1];
			atom = class_node(ps, pc);
		} else {
			atom = literal_node(ps, cp, *icase);
		}
		break;
	case '^':
	case '$':
		return perr(ps, "unsupported anchor '%c'", c);
	case '*':
	case '+':
	case '?':
		return perr(ps, "quantifier '%c' with nothing to repeat", c);
	case '{':
		return perr(ps, "unsupported '{' with nothing to repeat (write \\{)");
	default:
		if (pat_char(ps, &cp))
			return -1;
		atom = literal_node(ps, cp, *icase);
		break;
	}
	if (atom < 0)
		return -1;
	/* quantifiers */
	if (ps->p >= ps->end)
		return atom;
	c = *ps->p;
	if (c == '*' || c == '+' || c == '?') {
		min = c == '+' ? 1 : 0;
		max = c == '?' ? 1 : RX_INF;
		ps->p++;
	} else if (c == '{') {
		ps->p++;
		if (parse_interval(ps, &min, &max) < 0)
			return -1;
	} else {
		return atom;
	}
	{
		int32_t rep;
		bool greedy = true;
		if (ps->nodes[atom].kind == N_LOOK)
			return perr(ps, "unsupported quantifier on a lookahead");
		if (ps->p < ps->end && *ps->p == '?') {
			greedy = false;
			ps->p++;
		} else if (ps->p < ps->end && *ps->p == '+') {
			return perr(ps, c == '{' ? "unsupported quantifier after an interval"
						 : "unsupported possessive quantifier");
		}
		if (ps->p < ps->end &&
		    (*ps->p == '*' || *ps->p == '+' || *ps->p == '?' || *ps->p == '{'))
			return perr(ps, "unsupported quantifier after a quantifier");
		if (ps->nodes[atom].kind != N_CLASS && nullable(ps, atom))
			return perr(ps, "unsupported quantifier on a group that can match empty");
		rep = node_new(ps, N_REP);
		if (rep < 0)
			return -1;
		ps->nodes[rep].child = atom;
		ps->nodes[rep].min = min;
		ps->nodes[rep].max = max;
		ps->nodes[rep].greedy = greedy;
		return rep;
	}
}

/* Refuses, under (?i), a run of literals that spells a multi-code-point case folding (Oniguruma
 * would let "ss" match U+00DF; this engine folds code point by code point only). */
static int check_multi_fold(struct parser *ps, int32_t cat)
{
	for (int32_t a = ps->nodes[cat].child; a >= 0; a = ps->nodes[a].next) {
		for (size_t i = 0; i < UNICODE_FOLD_MULTI_COUNT; i++) {
			int32_t b = a;
			size_t k = 1;
			while (k < 4 && unicode_fold_multi[i][k] && b >= 0 && ps->nodes[b].is_lit &&
			       ps->nodes[b].lit == unicode_fold_multi[i][k]) {
				b = ps->nodes[b].next;
				k++;
			}
			if (k == 4 || !unicode_fold_multi[i][k])
				return perr(
				    ps, "unsupported (?i) literal run that case-folds like U+%04X",
				    unicode_fold_multi[i][0]);
		}
	}
	return 0;
}

static int32_t parse_seq(struct parser *ps, bool *icase)
{
	int32_t cat = node_new(ps, N_CAT), last = -1, n;

	if (cat < 0)
		return -1;
	ps->seq_start = true;
	while ((n = parse_piece(ps, icase)) >= 0) {
		if (ps->nodes[n].kind == N_EMPTY)
			continue;
		ps->seq_start = false;
		if (last < 0)
			ps->nodes[cat].child = n;
		else
			ps->nodes[last].next = n;
		last = n;
	}
	if (n == -1 || check_multi_fold(ps, cat))
		return -1;
	return cat;
}

static int32_t parse_alt(struct parser *ps, bool icase)
{
	int32_t alt = node_new(ps, N_ALT), last = -1, n;

	if (alt < 0)
		return -1;
	for (;;) {
		n = parse_seq(ps,
			      &icase); /* (?i) inside one alternative reaches the later ones too */
		if (n < 0)
			return -1;
		if (last < 0)
			ps->nodes[alt].child = n;
		else
			ps->nodes[last].next = n;
		last = n;
		if (ps->p < ps->end && *ps->p == '|') {
			ps->p++;
			continue;
		}
		return alt;
	}
}

/* --- emitter -------------------------------------------------------------------------------- */

struct emitter {
	struct parser *ps;
	struct rx_inst *prog;
	uint32_t n, cap;
	struct rx_first *first;
	uint32_t nfirst, capfirst;
};

static int32_t emit(struct emitter *em, int op)
{
	if (em->n >= RX_PROG_MAX)
		return perr(em->ps, "pattern too large (more than %d instructions)", RX_PROG_MAX);
	if (em->n == em->cap) {
		uint32_t cap = em->cap ? em->cap * 2 : 32;
		struct rx_inst *v = realloc(em->prog, cap * sizeof(*v));
		if (!v)
			return perr(em->ps, "out of memory");
		em->prog = v;
		em->cap = cap;
	}
	memset(&em->prog[em->n], 0, sizeof(em->prog[0]));
	em->prog[em->n].op = (uint8_t)op;
	em->prog[em->n].first = -1;
	return (int32_t)em->n++;
}

/* The first set of a parser class (property bytes -> a superset for code points >= 0x80). */
static void first_of_class(const struct parser *ps, const struct rx_pclass *k, struct rx_first *f)
{
	for (uint32_t c = 0; c < 0x80; c++) {
		bool in = bit128(k->prop, unicode_prop(c));
		for (uint32_t i = 0; i < k->nrange && !in; i++)
			in = c >= ps->ranges[k->range_off + i].lo &&
			     c <= ps->ranges[k->range_off + i].hi;
		if (in != k->neg)
			set128(f->ascii, c);
	}
	if (k->neg) {
		bool high = false;
		for (uint32_t i = 0; i < k->nrange; i++)
			high |= ps->ranges[k->range_off + i].hi >= 0x80;
		if (high)
			f->any_high = true;
		else
			for (unsigned b = 0; b < 128; b++)
				if (!bit128(k->prop, b))
					set128(f->prop, b);
	} else {
		for (uint32_t i = 0; i < k->nrange; i++)
			if (ps->ranges[k->range_off + i].hi >= 0x80)
				f->any_high = true;
		f->prop[0] |= k->prop[0];
		f->prop[1] |= k->prop[1];
	}
}

/* Adds the first set of node n to f; returns whether n can match empty. */
static bool first_of(const struct parser *ps, int32_t n, struct rx_first *f)
{
	const struct rx_node *nd = &ps->nodes[n];
	bool null;

	switch (nd->kind) {
	case N_CLASS:
		first_of_class(ps, &ps->pcls[nd->cls], f);
		return false;
	case N_REP:
		null = first_of(ps, nd->child, f);
		return null || nd->min == 0;
	case N_CAT:
		for (int32_t c = nd->child; c >= 0; c = ps->nodes[c].next)
			if (!first_of(ps, c, f))
				return false;
		return true;
	case N_ALT:
		null = false;
		for (int32_t c = nd->child; c >= 0; c = ps->nodes[c].next)
			null |= first_of(ps, c, f);
		return null;
	default:
		return true; /* empty, lookahead: consume nothing */
	}
}

/* The index of n's first set in em->first, or -1 when n may match empty. */
static int32_t first_index(struct emitter *em, int32_t n)
{
	struct rx_first f;

	memset(&f, 0, sizeof(f));
	if (first_of(em->ps, n, &f))
		return -1;
	if (em->nfirst == em->capfirst) {
		uint32_t cap = em->capfirst ? em->capfirst * 2 : 16;
		struct rx_first *v = realloc(em->first, cap * sizeof(*v));
		if (!v)
			return perr(em->ps, "out of memory"), -1;
		em->first = v;
		em->capfirst = cap;
	}
	em->first[em->nfirst] = f;
	return (int32_t)em->nfirst++;
}

static int emit_node(struct emitter *em, int32_t n);

/* One optional copy of node (greedy: try it first), or a loop of them (max RX_INF). */
static int emit_rep(struct emitter *em, const struct rx_node *nd)
{
	uint32_t i;
	int32_t sp, fi = first_index(em, nd->child);
	uint32_t chain = UINT32_MAX;

	if (em->ps->failed)
		return -1;
	for (i = 0; i < nd->min; i++)
		if (emit_node(em, nd->child))
			return -1;
	if (nd->max == RX_INF) {
		/* L: SPLIT body, out; body; JMP L */
		if ((sp = emit(em, OP_SPLIT)) < 0)
			return -1;
		if (nd->greedy) {
			em->prog[sp].x = (uint32_t)sp + 1;
			em->prog[sp].first = fi;
		} else {
			em->prog[sp].y = (uint32_t)sp + 1;
		}
		if (emit_node(em, nd->child))
			return -1;
		int32_t j = emit(em, OP_JMP);
		if (j < 0)
			return -1;
		em->prog[j].x = (uint32_t)sp;
		if (nd->greedy)
			em->prog[sp].y = em->n;
		else
			em->prog[sp].x = em->n;
		return 0;
	}
	/* the optional copies: each SPLIT's "skip" side is patched to the end, through a list */
	for (i = nd->min; i < nd->max; i++) {
		if ((sp = emit(em, OP_SPLIT)) < 0)
			return -1;
		if (nd->greedy) {
			em->prog[sp].x = (uint32_t)sp + 1;
			em->prog[sp].first = fi;
			em->prog[sp].y = chain;
		} else {
			em->prog[sp].y = (uint32_t)sp + 1;
			em->prog[sp].x = chain;
		}
		chain = (uint32_t)sp;
		if (emit_node(em, nd->child))
			return -1;
	}
	while (chain != UINT32_MAX) {
		uint32_t *slot = nd->greedy ? &em->prog[chain].y : &em->prog[chain].x;
		chain = *slot;
		*slot = em->n;
	}
	return 0;
}

static int emit_node(struct emitter *em, int32_t n)
{
	const struct rx_node *nd = &em->ps->nodes[n];
	int32_t i;

	switch (nd->kind) {
	case N_EMPTY:
		return 0;
	case N_CLASS:
		if ((i = emit(em, OP_RUN)) < 0)
			return -1;
		em->prog[i].cls = (uint32_t)nd->cls;
		em->prog[i].min = em->prog[i].max = 1;
		em->prog[i].greedy = 1;
		return 0;
	case N_CAT:
		for (int32_t c = nd->child; c >= 0; c = em->ps->nodes[c].next)
			if (emit_node(em, c))
				return -1;
		return 0;
	case N_ALT: {
		/* SPLIT alt1, next; alt1; JMP end; next: SPLIT alt2, ...; the JMPs patched through
		 * a list */
		uint32_t chain = UINT32_MAX;
		int32_t c = nd->child;
		if (em->ps->nodes[c].next < 0)
			return emit_node(em, c);
		for (; c >= 0; c = em->ps->nodes[c].next) {
			int32_t sp = -1, j;
			if (em->ps->nodes[c].next < 0) {
				if (emit_node(em, c))
					return -1;
				break;
			}
			int32_t fi = first_index(em, c);
			if (em->ps->failed || (sp = emit(em, OP_SPLIT)) < 0)
				return -1;
			em->prog[sp].x = (uint32_t)sp + 1;
			em->prog[sp].first = fi;
			if (emit_node(em, c) || (j = emit(em, OP_JMP)) < 0)
				return -1;
			em->prog[j].x = chain;
			chain = (uint32_t)j;
			em->prog[sp].y = em->n;
		}
		while (chain != UINT32_MAX) {
			uint32_t next = em->prog[chain].x;
			em->prog[chain].x = em->n;
			chain = next;
		}
		return 0;
	}
	case N_REP: {
		const struct rx_node *ch = &em->ps->nodes[nd->child];
		/* a group holding one class: unwrap */
		while ((ch->kind == N_ALT || ch->kind == N_CAT) && ch->child >= 0 &&
		       em->ps->nodes[ch->child].next < 0)
			ch = &em->ps->nodes[ch->child];
		if (ch->kind == N_CLASS) {
			if ((i = emit(em, OP_RUN)) < 0)
				return -1;
			em->prog[i].cls = (uint32_t)ch->cls;
			em->prog[i].min = nd->min;
			em->prog[i].max = nd->max;
			em->prog[i].greedy = nd->greedy;
			return 0;
		}
		return emit_rep(em, nd);
	}
	case N_LOOK:
		if ((i = emit(em, OP_LOOK)) < 0)
			return -1;
		em->prog[i].neg = nd->neg;
		if (emit_node(em, nd->child) || emit(em, OP_MATCH) < 0)
			return -1;
		em->prog[i].x = em->n;
		return 0;
	}
	return perr(em->ps, "internal error: node kind %d", nd->kind);
}

/* The class of node n if it is one single code point matcher (through groups of one), or -1. */
static int32_t single_class(const struct parser *ps, int32_t n)
{
	const struct rx_node *nd = &ps->nodes[n];

	while ((nd->kind == N_ALT || nd->kind == N_CAT) && nd->child >= 0 &&
	       ps->nodes[nd->child].next < 0)
		nd = &ps->nodes[nd->child];
	return nd->kind == N_CLASS ? nd->cls : -1;
}

/* Appends to re the elements of alternative n if it is simple; 0 when it is not. */
static int simple_build(struct regex *re, struct parser *ps, int32_t n, uint32_t *cap_e,
			uint32_t *cap_s, uint32_t *cap_c)
{
	const struct rx_node *nd = &ps->nodes[n];
	uint32_t ne = 0, off = re->nelems;

	while (nd->kind == N_ALT && nd->child >= 0 && ps->nodes[nd->child].next < 0)
		nd = &ps->nodes[nd->child];
	if (nd->kind != N_CAT)
		return 0;
	for (int32_t c = nd->child; c >= 0; c = ps->nodes[c].next, ne++) {
		const struct rx_node *cn = &ps->nodes[c];
		struct rx_elem e = {0};
		int32_t k;

		if (ne >= RX_ELEMS_MAX)
			goto not_simple;
		if (cn->kind == N_CLASS ||
		    (cn->kind == N_REP && single_class(ps, cn->child) >= 0)) {
			e.kind = E_RUN;
			e.cls =
			    (uint32_t)(cn->kind == N_CLASS ? cn->cls : single_class(ps, cn->child));
			e.min = cn->kind == N_CLASS ? 1 : cn->min;
			e.max = cn->kind == N_CLASS ? 1 : cn->max;
			e.greedy = cn->kind == N_CLASS ? 1 : cn->greedy;
		} else if (cn->kind == N_LOOK && (k = single_class(ps, cn->child)) >= 0) {
			e.kind = E_LOOK;
			e.cls = (uint32_t)k;
			e.neg = cn->neg;
		} else {
			/* a group of fixed sequences, or such a group made optional */
			const struct rx_node *g = cn;
			e.kind = E_STRS;
			e.min = e.max = 1;
			e.greedy = 1;
			if (cn->kind == N_REP) {
				if (cn->max != 1)
					goto not_simple;
				e.min = cn->min;
				e.greedy = cn->greedy;
				g = &ps->nodes[cn->child];
			}
			while (g->kind == N_CAT && g->child >= 0 && ps->nodes[g->child].next < 0)
				g = &ps->nodes[g->child];
			if (g->kind != N_ALT)
				goto not_simple;
			e.str_off = re->nstrs;
			for (int32_t a = g->child; a >= 0; a = ps->nodes[a].next) {
				const struct rx_node *an = &ps->nodes[a];
				struct rx_str st = {re->nstrcls, 0};
				if (an->kind != N_CAT)
					goto not_simple;
				for (int32_t x = an->child; x >= 0; x = ps->nodes[x].next) {
					if (ps->nodes[x].kind != N_CLASS)
						goto not_simple;
					if (re->nstrcls == *cap_c) {
						uint32_t *v =
						    realloc(re->strcls, (*cap_c = *cap_c * 2 + 16) *
									    sizeof(*v));
						if (!v)
							return perr(ps, "out of memory");
						re->strcls = v;
					}
					re->strcls[re->nstrcls++] = (uint32_t)ps->nodes[x].cls;
					st.len++;
				}
				if (re->nstrs == *cap_s) {
					struct rx_str *v = realloc(
					    re->strs, (*cap_s = *cap_s * 2 + 8) * sizeof(*v));
					if (!v)
						return perr(ps, "out of memory");
					re->strs = v;
				}
				re->strs[re->nstrs++] = st;
				e.nstr++;
			}
		}
		if (re->nelems == *cap_e) {
			struct rx_elem *v =
			    realloc(re->elems, (*cap_e = *cap_e * 2 + 16) * sizeof(*v));
			if (!v)
				return perr(ps, "out of memory");
			re->elems = v;
		}
		re->elems[re->nelems++] = e;
	}
	return 1;
not_simple:
	re->nelems = off; /* the strings appended stay, unused */
	return 0;
}

/* The first set of class k (as first_of_class gives it for the parser's class). */
static void first_of_rclass(const struct regex *re, const struct rx_class *k, struct rx_first *f)
{
	for (unsigned c = 0; c < 0x80; c++)
		if (k->byte[c] == 1)
			set128(f->ascii, c);
	if (k->nrange && k->range_in) {
		f->any_high = true;
	} else if (k->nrange) {
		f->any_high = true; /* a negated class with ranges: anything but them */
	}
	f->prop[0] |= k->prop[0];
	f->prop[1] |= k->prop[1];
	(void)re;
}

static bool first_disjoint(const struct rx_first *a, const struct rx_first *b)
{
	bool ah = a->any_high || a->prop[0] || a->prop[1],
	     bh = b->any_high || b->prop[0] || b->prop[1];

	if ((a->ascii[0] & b->ascii[0]) || (a->ascii[1] & b->ascii[1]))
		return false;
	if ((a->any_high && bh) || (b->any_high && ah))
		return false;
	return !(a->prop[0] & b->prop[0]) && !(a->prop[1] & b->prop[1]);
}

/* The rest tables: for element i, the first set of elements i.. (up to the first that cannot match
 * empty; a lookahead is skipped over, it consumes nothing), as a byte table; all 1 where the
 * elements from i on may all match empty. */
static void elems_rest(struct regex *re, struct rx_elem *e, uint32_t ne)
{
	for (uint32_t i = 0; i < ne; i++) {
		struct rx_first f;
		bool nullable = true;

		memset(&f, 0, sizeof(f));
		for (uint32_t j = i; j < ne && nullable; j++) {
			if (e[j].kind == E_LOOK)
				continue;
			if (e[j].kind == E_RUN) {
				first_of_rclass(re, &re->cls[e[j].cls], &f);
			} else {
				bool empty = false;
				for (uint32_t a = 0; a < e[j].nstr; a++) {
					const struct rx_str *st = &re->strs[e[j].str_off + a];
					if (st->len)
						first_of_rclass(re, &re->cls[re->strcls[st->off]],
								&f);
					else
						empty = true;
				}
				if (empty || e[j].min == 0)
					continue;
				nullable = false;
				continue;
			}
			nullable = e[j].min == 0;
		}
		if (nullable) {
			memset(e[i].rest, 1, sizeof(e[i].rest));
			continue;
		}
		for (unsigned b = 0; b < 0x80; b++)
			e[i].rest[b] = bit128(f.ascii, b);
		memset(e[i].rest + 0x80, f.any_high || f.prop[0] || f.prop[1], 0x80);
		e[i].rest[256] = 0;
	}
}

/* Marks the elements whose first choice is the only one worth trying, so that seq_match does not
 * backtrack into them: a lookahead (atomic), a run of fixed count, any element when all after it
 * may match empty and cannot fail (runs and groups with minimum 0), and a greedy run whose class
 * is disjoint from the code points the rest must start with (what it gives back could never
 * start the rest). This is what makes the families' words and numbers one pass each. */
static void elems_rest(struct regex *re, struct rx_elem *e, uint32_t ne);

static void elems_final(struct regex *re, struct rx_elem *e, uint32_t ne)
{
	elems_rest(re, e, ne);
	for (uint32_t i = 0; i < ne; i++) {
		/* the bytes a STRS sequence may start at */
		for (uint32_t a = 0; e[i].kind == E_STRS && a < e[i].nstr; a++) {
			const struct rx_str *st = &re->strs[e[i].str_off + a];
			const struct rx_class *k = st->len ? &re->cls[re->strcls[st->off]] : NULL;
			for (unsigned b = 0; b < 256; b++)
				if (!k || (b < 0x80 ? k->byte[b] == 1
						    : k->nrange || k->prop[0] || k->prop[1]))
					e[i].start[b] = 1;
		}
	}
	for (uint32_t i = 0; i < ne; i++) {
		bool rest_empty_ok = true, rest_nullable = true;
		struct rx_first f, k;

		for (uint32_t j = i + 1; j < ne; j++)
			if (e[j].kind == E_LOOK || e[j].min > 0)
				rest_empty_ok = false;
		if (e[i].kind == E_LOOK || (e[i].kind == E_RUN && e[i].min == e[i].max) ||
		    rest_empty_ok) {
			e[i].final = 1;
			continue;
		}
		if (e[i].kind != E_RUN || !e[i].greedy)
			continue;
		/* first set of the rest: elements while they may match empty; a lookahead stops it
		 */
		memset(&f, 0, sizeof(f));
		for (uint32_t j = i + 1; j < ne && rest_nullable; j++) {
			if (e[j].kind == E_LOOK)
				break;
			if (e[j].kind == E_RUN) {
				first_of_rclass(re, &re->cls[e[j].cls], &f);
			} else {
				for (uint32_t a = 0; a < e[j].nstr; a++) {
					const struct rx_str *st = &re->strs[e[j].str_off + a];
					if (st->len)
						first_of_rclass(re, &re->cls[re->strcls[st->off]],
								&f);
					else
						f.any_high = true,
						memset(f.ascii, 0xff, sizeof(f.ascii));
				}
			}
			rest_nullable = e[j].min == 0;
		}
		if (rest_nullable)
			continue;
		memset(&k, 0, sizeof(k));
		first_of_rclass(re, &re->cls[e[i].cls], &k);
		if (first_disjoint(&k, &f))
			e[i].final = 1;
	}
}

/* The top-level alternatives of root: each simple, or a program of its own; and the masks of
 * the alternatives each code point can start. */
static int alts_build(struct regex *re, struct emitter *em, int32_t root, unsigned opts)
{
	struct parser *ps = em->ps;
	int32_t list[RX_ALTS_MAX];
	uint32_t na = 0, cap_e = 0, cap_s = 0, cap_c = 0;
	const struct rx_node *rn = &ps->nodes[root];

	/* never NULL, so that an empty alternative's elements are a valid (empty) range */
	if (!(re->elems = malloc((cap_e = 16) * sizeof(*re->elems))))
		return perr(ps, "out of memory");
	for (int32_t c = rn->child; c >= 0 && na <= RX_ALTS_MAX; c = ps->nodes[c].next)
		if (na++ < RX_ALTS_MAX)
			list[na - 1] = c;
	if (rn->kind != N_ALT || na > RX_ALTS_MAX) {
		list[0] = root; /* too many alternatives to tell apart: one program */
		na = 1;
	}
	for (uint32_t i = 0; i < na; i++) {
		struct rx_alt *a = &re->alts[i];
		struct rx_first f;
		uint64_t bit = 1ull << i;
		int r;

		memset(&f, 0, sizeof(f));
		if (first_of(ps, list[i], &f)) {
			re->mask_nullable |= bit;
			f.any_high = true;
			memset(f.ascii, 0xff, sizeof(f.ascii));
		}
		for (unsigned b = 0; b < 128; b++) {
			if (bit128(f.ascii, b))
				re->mask_ascii[b] |= bit;
			if (bit128(f.prop, b))
				re->mask_prop[b] |= bit;
		}
		if (f.any_high)
			re->mask_high_any |= bit;
		a->elem_off = re->nelems;
		r = opts & REGEX_PROGRAM_ONLY
			? 0
			: simple_build(re, ps, list[i], &cap_e, &cap_s, &cap_c);
		if (r < 0)
			return -1;
		if (r) {
			a->pc = -1;
			a->nelem = re->nelems - a->elem_off;
			elems_final(re, re->elems + a->elem_off, a->nelem);
			continue;
		}
		a->pc = (int32_t)em->n;
		a->nelem = 0;
		if (emit_node(em, list[i]) || emit(em, OP_MATCH) < 0)
			return -1;
	}
	re->nalts = na;
	return 0;
}

/* --- compile -------------------------------------------------------------------------------- */

void regex_free(struct regex *re)
{
	if (!re)
		return;
	free(re->prog);
	free(re->cls);
	free(re->ranges);
	free(re->first);
	free(re->elems);
	free(re->strs);
	free(re->strcls);
	free(re);
}

size_t regex_memory(const struct regex *re)
{
	return re ? re->bytes : 0;
}

/* The matching classes from the parser's: ASCII decided once, ranges kept only above 0x7F. */
static int classes_build(struct regex *re, const struct parser *ps)
{
	uint32_t nr = 0;

	re->cls = calloc(ps->npcls ? ps->npcls : 1, sizeof(*re->cls));
	re->ranges = calloc(ps->nranges ? ps->nranges : 1, sizeof(*re->ranges));
	if (!re->cls || !re->ranges)
		return -1;
	for (uint32_t i = 0; i < ps->npcls; i++) {
		const struct rx_pclass *p = &ps->pcls[i];
		struct rx_class *k = &re->cls[i];
		for (uint32_t c = 0; c < 0x80; c++) {
			bool in = bit128(p->prop, unicode_prop(c));
			for (uint32_t j = 0; j < p->nrange && !in; j++)
				in = c >= ps->ranges[p->range_off + j].lo &&
				     c <= ps->ranges[p->range_off + j].hi;
			k->byte[c] = in != p->neg;
		}
		memset(k->byte + 0x80, 2, 0x80);
		k->range_off = nr;
		for (uint32_t j = 0; j < p->nrange; j++) {
			struct rx_range r = ps->ranges[p->range_off + j];
			if (r.hi < 0x80)
				continue;
			if (r.lo < 0x80)
				r.lo = 0x80;
			re->ranges[nr++] = r;
		}
		k->nrange = nr - k->range_off;
		k->range_in = !p->neg;
		k->prop[0] = p->neg ? ~p->prop[0] : p->prop[0];
		k->prop[1] = p->neg ? ~p->prop[1] : p->prop[1];
	}
	re->ncls = ps->npcls;
	re->nranges = nr;
	return 0;
}

struct regex *regex_compile(const char *pat, size_t len, char *err, size_t errlen)
{
	return regex_compile_opts(pat, len, 0, err, errlen);
}

struct regex *regex_compile_opts(const char *pat, size_t len, unsigned opts, char *err,
				 size_t errlen)
{
	struct parser ps = {0};
	struct emitter em = {0};
	struct regex *re = NULL;
	int32_t root;

	if (errlen)
		err[0] = 0;
	ps.pat = ps.p = (const uint8_t *)pat;
	ps.end = ps.p + len;
	ps.err = err;
	ps.errlen = errlen;
	if (len > RX_PAT_MAX) {
		perr(&ps, "pattern longer than %u bytes", RX_PAT_MAX);
		return NULL;
	}
	re = calloc(1, sizeof(*re));
	if (!re) {
		perr(&ps, "out of memory");
		goto fail;
	}
	root = parse_alt(&ps, false);
	if (root < 0)
		goto fail;
	if (ps.p < ps.end) {
		perr(&ps, "unmatched ')'");
		goto fail;
	}
	em.ps = &ps;
	if (classes_build(re, &ps)) {
		perr(&ps, "out of memory");
		goto fail;
	}
	if (alts_build(re, &em, root, opts) || ps.failed)
		goto fail;
	/* shrink (none left when every alternative is simple) */
	if (!em.n) {
		free(em.prog);
	} else if (!(re->prog = realloc(em.prog, em.n * sizeof(*em.prog)))) {
		re->prog = em.prog;
	}
	em.prog = NULL;
	re->nprog = em.n;
	re->first = em.first;
	re->nfirst = em.nfirst;
	em.first = NULL;
	re->bytes = sizeof(*re) + re->nprog * sizeof(*re->prog) + re->ncls * sizeof(*re->cls) +
		    re->nranges * sizeof(*re->ranges) + re->nfirst * sizeof(*re->first) +
		    re->nelems * sizeof(*re->elems) + re->nstrs * sizeof(*re->strs) +
		    re->nstrcls * sizeof(uint32_t);
	free(ps.nodes);
	free(ps.pcls);
	free(ps.ranges);
	return re;
fail:
	free(ps.nodes);
	free(ps.pcls);
	free(ps.ranges);
	free(em.prog);
	free(em.first);
	regex_free(re);
	return NULL;
}

/* --- matcher -------------------------------------------------------------------------------- */

enum { BT_ALT, BT_BACKOFF, BT_EXTEND };

struct bt {
	uint32_t kind, pc;
	size_t pos; /* ALT: where to resume; BACKOFF, EXTEND: the run's current end */
	size_t aux; /* BACKOFF: the run's end after its minimum; EXTEND: its count */
};

struct vm {
	const struct regex *re;
	const uint8_t *s;
	size_t n;
	uint64_t steps, budget;
	uint32_t top;
	struct bt *stack;
};

/* Runs the program from pc at pos until OP_MATCH (1, *end set), failure (0) or a budget
 * exhausted (-E2BIG). Backtrack entries it pushes are popped before it returns (a lookahead's
 * body is atomic). */
static int vm_run(struct vm *m, uint32_t pc, size_t pos, size_t *end)
{
	const struct regex *re = m->re;
	const uint8_t *s = m->s;
	size_t n = m->n;
	uint32_t base = m->top;

	for (;;) {
		const struct rx_inst *in = &re->prog[pc];

		if (++m->steps > m->budget)
			return -E2BIG;
		switch (in->op) {
		case OP_RUN: {
			const struct rx_class *k = &re->cls[in->cls];
			size_t p = pos, l, lo;
			uint32_t cnt = 0;

			while (cnt < in->min) {
				if (!(l = class_at(re, k, s, n, p)))
					goto fail;
				p += l;
				cnt++;
			}
			if (in->greedy) {
				lo = p;
				if (in->max == RX_INF) {
					/* ASCII fast path: one bit test a byte */
					for (;;) {
						while (p < n && s[p] < 0x80 && k->byte[s[p]] == 1)
							p++;
						if (p >= n || s[p] < 0x80 ||
						    !(l = class_at(re, k, s, n, p)))
							break;
						p += l;
					}
					m->steps += p - lo;
				} else {
					while (cnt < in->max && (l = class_at(re, k, s, n, p))) {
						p += l;
						cnt++;
					}
				}
				if (p > lo) {
					if (m->top >= REGEX_STACK_MAX)
						return -E2BIG;
					m->stack[m->top++] = (struct bt){BT_BACKOFF, pc, p, lo};
				}
			} else if (cnt < in->max) {
				if (m->top >= REGEX_STACK_MAX)
					return -E2BIG;
				m->stack[m->top++] = (struct bt){BT_EXTEND, pc, p, cnt};
			}
			pos = p;
			pc++;
			continue;
		}
		case OP_SPLIT:
			if (in->first >= 0 && !first_at(&re->first[in->first], s, n, pos)) {
				pc = in->y;
				continue;
			}
			if (m->top >= REGEX_STACK_MAX)
				return -E2BIG;
			m->stack[m->top++] = (struct bt){BT_ALT, in->y, pos, 0};
			pc = in->x;
			continue;
		case OP_JMP:
			pc = in->x;
			continue;
		case OP_LOOK: {
			size_t e;
			int r = vm_run(m, pc + 1, pos, &e);
			if (r < 0)
				return r;
			if (r == !in->neg) {
				pc = in->x;
				continue;
			}
			goto fail;
		}
		case OP_MATCH:
			*end = pos;
			m->top = base;
			return 1;
		}
	fail:
		for (;;) {
			struct bt *b;

			if (m->top == base)
				return 0;
			if (++m->steps > m->budget)
				return -E2BIG;
			b = &m->stack[m->top - 1];
			if (b->kind == BT_ALT) {
				pc = b->pc;
				pos = b->pos;
				m->top--;
				break;
			}
			if (b->kind == BT_BACKOFF) {
				size_t p = utf8_prev(s, b->aux, b->pos);
				if (p == b->aux)
					m->top--;
				else
					b->pos = p;
				pos = p;
				pc = b->pc + 1;
				break;
			}
			/* BT_EXTEND: one more code point of a lazy run */
			{
				const struct rx_inst *ri = &re->prog[b->pc];
				size_t l = class_at(re, &re->cls[ri->cls], s, n, b->pos);
				if (!l) {
					m->top--;
					continue;
				}
				b->pos += l;
				b->aux++;
				pos = b->pos;
				pc = b->pc + 1;
				if (b->aux >= ri->max)
					m->top--;
				break;
			}
		}
	}
}

/* Takes the first choice of a STRS element, from choice c on, at p: the choice's index (a
 * literal sequence, or e->nstr for "none" when the group is optional) and its end in *q; -1
 * when none is left. Choice order: the sequences in order, "none" last (greedy) or first
 * (lazy). */
static int strs_choice(const struct regex *re, const struct rx_elem *e, uint32_t c,
		       const uint8_t *s, size_t n, size_t p, size_t *q)
{
	uint32_t nch = e->nstr + (e->min == 0);

	if (p >= n || !e->start[s[p]]) {
		/* no sequence can start here: only "none" is left, if optional */
		uint32_t none = e->greedy ? e->nstr : 0;
		if (e->min || c > none)
			return -1;
		*q = p;
		return (int)none;
	}
	for (; c < nch; c++) {
		uint32_t k = e->min == 0 && !e->greedy ? (c == 0 ? e->nstr : c - 1) : c;
		const struct rx_str *st;
		size_t x = p, l;
		uint32_t j;

		if (k == e->nstr) {
			*q = p;
			return (int)c;
		}
		st = &re->strs[e->str_off + k];
		for (j = 0; j < st->len; j++) {
			if (!(l = class_at(re, &re->cls[re->strcls[st->off + j]], s, n, x)))
				break;
			x += l;
		}
		if (j == st->len) {
			*q = x;
			return (int)c;
		}
	}
	return -1;
}

/* Matches the simple alternative e[0..ne) at pos: 1 and *end, 0, or -E2BIG. A depth-first search
 * over the elements' choices in the regex's order: a greedy run takes what it can, then gives
 * back one code point at a time; a lazy one takes its minimum, then one more at a time; a group of
 * sequences tries them in order. Elements marked final have no other choice worth trying. */
static int seq_match(struct vm *m, const struct rx_elem *e, uint32_t ne, size_t pos, size_t *end)
{
	const struct regex *re = m->re;
	const uint8_t *s = m->s;
	size_t n = m->n, p = pos, l;
	size_t at[RX_ELEMS_MAX], cur[RX_ELEMS_MAX], lo[RX_ELEMS_MAX];
	uint32_t ch[RX_ELEMS_MAX];
	uint32_t i = 0;
	int c;

forward:
	for (; i < ne; i++) {
		const struct rx_elem *x = &e[i];
		const struct rx_class *k;
		uint32_t cnt = 0;

		if (!x->rest[p < n ? s[p] : 256])
			goto back;
		at[i] = p;
		switch (x->kind) {
		case E_RUN:
			k = &re->cls[x->cls];
			while (cnt < x->min) {
				if (!(l = class_at(re, k, s, n, p)))
					goto back;
				p += l;
				cnt++;
			}
			lo[i] = p;
			if (!x->greedy) {
				ch[i] = cnt;
			} else if (x->max == RX_INF) {
				for (;;) {
					while (p < n && k->byte[s[p]] == 1)
						p++;
					if (p >= n || s[p] < 0x80 ||
					    !(l = class_at(re, k, s, n, p)))
						break;
					p += l;
				}
				m->steps += p - lo[i];
			} else {
				while (cnt < x->max && (l = class_at(re, k, s, n, p))) {
					p += l;
					cnt++;
				}
			}
			break;
		case E_LOOK:
			if ((class_at(re, &re->cls[x->cls], s, n, p) != 0) == x->neg)
				goto back;
			break;
		default: /* E_STRS */
			if ((c = strs_choice(re, x, 0, s, n, p, &p)) < 0)
				goto back;
			ch[i] = (uint32_t)c;
			break;
		}
		cur[i] = p;
	}
	if (m->steps > m->budget)
		return -E2BIG;
	*end = p;
	return 1;
back:
	while (i > 0) {
		const struct rx_elem *x = &e[--i];

		if (x->final)
			continue;
		if (++m->steps > m->budget)
			return -E2BIG;
		if (x->kind == E_RUN && x->greedy) {
			if (cur[i] == lo[i])
				continue;
			p = cur[i] = utf8_prev(s, lo[i], cur[i]);
		} else if (x->kind == E_RUN) {
			if (ch[i] >= x->max || !(l = class_at(re, &re->cls[x->cls], s, n, cur[i])))
				continue;
			p = cur[i] += l;
			ch[i]++;
		} else if (x->kind == E_STRS) {
			if ((c = strs_choice(re, x, ch[i] + 1, s, n, at[i], &p)) < 0)
				continue;
			ch[i] = (uint32_t)c;
			cur[i] = p;
		} else {
			continue;
		}
		i++;
		goto forward;
	}
	return 0;
}

/* The alternatives that may match at s[p] (p == n: the end). */
static inline uint64_t alts_at(const struct regex *re, const uint8_t *s, size_t n, size_t p,
			       size_t *len)
{
	uint32_t c;

	if (p >= n) {
		*len = 1;
		return re->mask_nullable;
	}
	if (s[p] < 0x80) {
		*len = 1;
		return re->mask_ascii[s[p]];
	}
	*len = utf8_get(s + p, n - p, &c);
	return re->mask_prop[unicode_prop(c)] | re->mask_high_any;
}

/* The search loop: at each start position from `from` on, the alternatives that may start
 * there, in order. m->stack is the backtracking stack when the pattern has program alternatives. */
static inline int search_loop(struct vm *m, size_t from, size_t *ms, size_t *me)
{
	const struct regex *re = m->re;
	const uint8_t *s = m->s;
	size_t n = m->n, p = from, e, len;

	for (;;) {
		uint64_t mask = alts_at(re, s, n, p, &len);

		while (mask) {
			const struct rx_alt *a = &re->alts[__builtin_ctzll(mask)];
			int r;
			if (a->pc < 0) {
				r = seq_match(m, re->elems + a->elem_off, a->nelem, p, &e);
			} else {
				m->top = 0;
				r = vm_run(m, (uint32_t)a->pc, p, &e);
			}
			if (r < 0)
				return r;
			if (r) {
				*ms = p;
				*me = e;
				return 1;
			}
			mask &= mask - 1;
		}
		if (p >= n)
			return 0;
		p += len;
		if (++m->steps > m->budget)
			return -E2BIG;
	}
}

/* search_loop with a backtracking stack, for patterns with program alternatives (kept out of
 * regex_search so that simple patterns do not pay for the stack frame). */
__attribute__((noinline)) static int search_prog(struct vm *m, size_t from, size_t *ms, size_t *me)
{
	struct bt stack[REGEX_STACK_MAX];
	int r;

	m->stack = stack;
	r = search_loop(m, from, ms, me);
	m->stack = NULL;
	return r;
}

int regex_search(const struct regex *re, const uint8_t *s, size_t n, size_t from, size_t *ms,
		 size_t *me)
{
	struct vm m = {re, s, n, 0, 0, 0, NULL};

	if (from > n)
		return 0;
	m.budget = REGEX_STEPS_BASE + (uint64_t)REGEX_STEPS_PER_BYTE * (n - from);
	return re->nprog ? search_prog(&m, from, ms, me) : search_loop(&m, from, ms, me);
}

int regex_next(const struct regex *re, const uint8_t *s, size_t n, struct regex_iter *it,
	       size_t *ms, size_t *me)
{
	uint32_t c;

	for (;;) {
		size_t a, b;
		int r;

		if (it->pos > n)
			return 0;
		r = regex_search(re, s, n, it->pos, &a, &b);
		if (r <= 0)
			return r;
		if (a == b && it->have_last && it->last_end == b) {
			it->pos += it->pos < n ? utf8_get(s + it->pos, n - it->pos, &c) : 1;
			continue;
		}
		it->pos = it->last_end = b;
		it->have_last = 1;
		*ms = a;
		*me = b;
		return 1;
	}
}
