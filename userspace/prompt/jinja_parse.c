// SPDX-License-Identifier: Apache-2.0
/*
 * jinja_parse: a template's source to the tree jinja_eval.c walks, as jinja2 3.1's lexer and
 * parser read it (jinja2/lexer.py, jinja2/parser.py) in transformers' environment:
 * - Newlines: \r\n and \r become \n everywhere, and one trailing newline is dropped
 *   (keep_trailing_newline=False).
 * - trim_blocks: a newline right after %} or #} is dropped. lstrip_blocks: spaces and tabs
 *   between the start of a line and {% or {# are dropped ({%+ keeps them; not for {{). The start
 *   of the template counts as a line start, and so does the text after a tag whose end took a
 *   newline. {%- / {{- / {#- strip all white space before, -%} / -}} / -#} all after.
 * - Inside a tag, }} and %} end it only where brackets are balanced ({{ {'a': {}} }}).
 * - String literals are decoded as Python's "unicode-escape" codec decodes them (jinja2 does so):
 *   \n \t \\ \' \" \xhh \ooo \uXXXX ..., an unknown escape is kept as written.
 * - Precedence, loosest first: a if c else b; or; and; not; comparisons (chained, in, not in);
 *   + -; ~; * / // %; **; unary - +; then postfix . [] () and, on the result, | filters and `is`
 *   tests: `a + b is none` is `a + (b is none)`, `-x|f` is `(-x)|f`.
 * Anything else jinja2 reads but this module does not run is refused here, naming it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ascii.h"
#include "prompt/jinja_int.h"
#include "core/utf8.h"

#define PARSE_DEPTH_MAX 200 /* nesting of expressions and blocks in the source */
#define TREE_DEPTH_MAX 400  /* depth of an expression's tree (chains of + . | included) */

enum tk {
	TK_EOF,
	TK_DATA,
	TK_VBEGIN,
	TK_VEND,
	TK_BBEGIN,
	TK_BEND,
	TK_NAME,
	TK_STR,
	TK_INT,
	TK_FLOAT,
	TK_OP,
};

struct tok {
	uint8_t t;
	uint8_t op; /* TK_OP: the character, or OP_FLOORDIV, OP_POW, OP_EQ, ... */
	int line;
	const char *p; /* TK_NAME: the name; TK_STR, TK_DATA: the text (decoded) */
	size_t n;
	int64_t i;
	double f;
};

struct parser {
	struct jinja_template *t;
	struct jinja_error *err;
	struct tok *toks;
	size_t ntok, cap, pos;
	int depth;
	int loops; /* enclosing for loops (break / continue allowed) */
	int macros;
	int blocks; /* enclosing set and generation blocks */
	int status; /* set on the first error */
};

static int fail(struct parser *p, int status, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct parser *p, int status, int line, const char *fmt, ...)
{
	va_list ap;

	if (p->status)
		return -1;
	p->status = status;
	if (p->err) {
		p->err->status = status;
		p->err->line = line;
		va_start(ap, fmt);
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int oom(struct parser *p)
{
	if (!p->status) {
		p->status = -ENOMEM;
		if (p->err) {
			p->err->status = JINJA_LIMIT;
			snprintf(p->err->msg, sizeof(p->err->msg), "out of memory");
		}
	}
	return -1;
}

/* --- lexer ---------------------------------------------------------------------------------- */

static bool is_space_at(const char *s, size_t n, size_t i, size_t *len)
{
	unsigned char c = (unsigned char)s[i];

	if (c < 0x80) {
		*len = 1;
		return py_isspace(c);
	}
	return py_isspace(utf8_next(s + i, n - i, len));
}

/* Length of s[0..n) with trailing Python white space removed. */
static size_t rstrip_len(const char *s, size_t n)
{
	size_t end = 0, i = 0, l;

	while (i < n) {
		if (!is_space_at(s, n, i, &l))
			end = i + l;
		i += l;
	}
	return end;
}

/* Python white space at s[i..n): its length (0 if none). */
static size_t space_run(const char *s, size_t n, size_t i)
{
	size_t j = i, l;

	while (j < n && is_space_at(s, n, j, &l))
		j += l;
	return j - i;
}

static struct tok *push_tok(struct parser *p, int t, int line)
{
	if (p->ntok == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct tok *nt = realloc(p->toks, cap * sizeof(*nt));
		if (!nt)
			return NULL;
		p->toks = nt;
		p->cap = cap;
	}
	memset(&p->toks[p->ntok], 0, sizeof(p->toks[0]));
	p->toks[p->ntok].t = (uint8_t)t;
	p->toks[p->ntok].line = line;
	return &p->toks[p->ntok++];
}

static int count_nl(const char *s, size_t n)
{
	int c = 0;

	for (size_t i = 0; i < n; i++)
		c += s[i] == '\n';
	return c;
}

/* Decodes a string literal's body s[0..n) as Python's unicode-escape codec does. */
static int decode_string(struct parser *p, const char *s, size_t n, int line, struct tok *tk)
{
	char *o = ja_alloc(&p->t->arena, n + 1);
	size_t j = 0;

	if (!o)
		return oom(p);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		uint32_t cp;
		int digits;

		if (c != '\\') {
			o[j++] = (char)c;
			continue;
		}
		if (i + 1 >= n)
			return fail(p, JINJA_SYNTAX, line, "\\ at end of string");
		c = (unsigned char)s[++i];
		switch (c) {
		case '\n':
			continue;
		case '\\':
		case '\'':
		case '"':
			o[j++] = (char)c;
			continue;
		case 'a':
			o[j++] = 7;
			continue;
		case 'b':
			o[j++] = 8;
			continue;
		case 'f':
			o[j++] = 12;
			continue;
		case 'n':
			o[j++] = '\n';
			continue;
		case 'r':
			o[j++] = '\r';
			continue;
		case 't':
			o[j++] = '\t';
			continue;
		case 'v':
			o[j++] = 11;
			continue;
		case 'x':
		case 'u':
		case 'U':
			digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			cp = 0;
			for (int k = 0; k < digits; k++) {
				int h = i + 1 < n ? hex_digit(s[i + 1]) : -1;
				if (h < 0)
					return fail(p, JINJA_SYNTAX, line, "truncated \\%c escape",
						    c);
				cp = cp * 16 + (uint32_t)h;
				i++;
			}
			if (cp > 0x10FFFF)
				return fail(p, JINJA_SYNTAX, line, "illegal Unicode character");
			if (cp >= 0xD800 && cp < 0xE000)
				return fail(p, JINJA_UNSUPPORTED, line,
					    "a surrogate escape in a string literal");
			j += utf8_put((uint8_t *)o + j, cp);
			continue;
		case 'N':
			return fail(p, JINJA_UNSUPPORTED, line, "\\N{...} escapes");
		default:
			break;
		}
		if (c >= '0' && c <= '7') {
			cp = c - '0';
			for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7';
			     k++)
				cp = cp * 8 + (uint32_t)(s[++i] - '0');
			j += utf8_put((uint8_t *)o + j, cp);
			continue;
		}
		if (c >= 0x80)
			return fail(p, JINJA_UNSUPPORTED, line,
				    "a backslash before a non-ASCII character in a string literal");
		o[j++] = '\\';
		o[j++] = (char)c;
	}
	o[j] = 0;
	tk->p = o;
	tk->n = j;
	return 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Digits with single underscores between them, as jinja2's (\d+_)*\d+ : their length. */
static size_t digit_run(const char *s, size_t n, size_t i)
{
	size_t j = i;

	if (j >= n || !is_digit(s[j]))
		return 0;
	while (j < n) {
		if (is_digit(s[j]))
			j++;
		else if (s[j] == '_' && j + 1 < n && is_digit(s[j + 1]))
			j++;
		else
			break;
	}
	return j - i;
}

/* A float at s[i..n) as jinja2's float_re: its length, 0 if none. */
static size_t float_len(const char *s, size_t n, size_t i)
{
	size_t d = digit_run(s, n, i), j, f = 0, e;

	if (!d || (i > 0 && s[i - 1] == '.'))
		return 0;
	j = i + d;
	if (j < n && s[j] == '.') {
		f = digit_run(s, n, j + 1);
		if (f)
			j += 1 + f;
	}
	if (j < n && (s[j] == 'e' || s[j] == 'E')) {
		size_t k = j + 1;
		if (k < n && (s[k] == '+' || s[k] == '-'))
			k++;
		e = digit_run(s, n, k);
		if (e)
			return k + e - i;
	}
	return f ? j - i : 0;
}

static int lex_number(struct parser *p, const char *s, size_t n, size_t *pos, int line)
{
	size_t i = *pos, fl = float_len(s, n, i), j;
	char tmp[128];
	size_t k = 0;
	struct tok *tk;

	if (fl) {
		for (j = i; j < i + fl && k < sizeof(tmp) - 1; j++)
			if (s[j] != '_')
				tmp[k++] = s[j];
		tmp[k] = 0;
		if (!(tk = push_tok(p, TK_FLOAT, line)))
			return oom(p);
		tk->f = strtod(tmp, NULL);
		*pos = i + fl;
		return 0;
	}
	if (s[i] == '0' && i + 1 < n && strchr("bBoOxX", s[i + 1])) {
		int base = strchr("bB", s[i + 1]) ? 2 : strchr("oO", s[i + 1]) ? 8 : 16;
		uint64_t v = 0;
		bool any = false;
		j = i + 2;
		while (j < n) {
			int h = hex_digit(s[j]);
			if (s[j] == '_' && j + 1 < n && hex_digit(s[j + 1]) >= 0 &&
			    hex_digit(s[j + 1]) < base) {
				j++;
				continue;
			}
			if (h < 0 || h >= base)
				break;
			if (v > (UINT64_MAX >> 4) || v * (uint64_t)base + (uint64_t)h > INT64_MAX)
				return fail(p, JINJA_UNSUPPORTED, line,
					    "an integer literal beyond 64 bits");
			v = v * (uint64_t)base + (uint64_t)h;
			any = true;
			j++;
		}
		if (any) {
			if (!(tk = push_tok(p, TK_INT, line)))
				return oom(p);
			tk->i = (int64_t)v;
			*pos = j;
			return 0;
		}
	}
	{
		uint64_t v = 0;
		/* [1-9](_?\d)* or 0(_?0)* */
		j = i;
		if (s[j] == '0') {
			j++;
			while (j < n &&
			       (s[j] == '0' || (s[j] == '_' && j + 1 < n && s[j + 1] == '0')))
				j++;
		} else {
			j += digit_run(s, n, i);
			for (size_t q = i; q < j; q++) {
				if (s[q] == '_')
					continue;
				if (v > (uint64_t)(INT64_MAX - 9) / 10)
					return fail(p, JINJA_UNSUPPORTED, line,
						    "an integer literal beyond 64 bits");
				v = v * 10 + (uint64_t)(s[q] - '0');
			}
		}
		if (!(tk = push_tok(p, TK_INT, line)))
			return oom(p);
		tk->i = (int64_t)v;
		*pos = j;
	}
	return 0;
}

/* The operator at s[i..n): its code and length (0 if none). */
static size_t lex_op(const char *s, size_t n, size_t i, uint8_t *op)
{
	char c = s[i], d = i + 1 < n ? s[i + 1] : 0;

	if (c == '/' && d == '/')
		return *op = OP_FLOORDIV, 2;
	if (c == '*' && d == '*')
		return *op = OP_POW, 2;
	if (c == '=' && d == '=')
		return *op = OP_EQ, 2;
	if (c == '!' && d == '=')
		return *op = OP_NE, 2;
	if (c == '<' && d == '=')
		return *op = OP_LE, 2;
	if (c == '>' && d == '=')
		return *op = OP_GE, 2;
	if (c && strchr("+-/*%~[](){},.:|=<>;", c))
		return *op = (uint8_t)c, 1;
	return 0;
}

/* The tokens of one tag, from *pos to its end; kind TK_VBEGIN or TK_BBEGIN. Returns the end
 * tag's kind of strip: 0, '-' (strip white space after), and whether it took a newline. */
static int lex_tag(struct parser *p, const char *s, size_t n, size_t *pos, int *line, int kind,
		   bool *ends_nl)
{
	size_t i = *pos;
	char stack[PARSE_DEPTH_MAX];
	int depth = 0;
	int start_line = *line;

	for (;;) {
		uint8_t op;
		size_t l;

		if (i >= n)
			return fail(p, JINJA_SYNTAX, start_line, "unexpected end of template");
		if (depth == 0) {
			char e = kind == TK_VBEGIN ? '}' : '%';
			size_t end = 0;
			if (s[i] == '-' && i + 2 < n + 0 && s[i + 1] == e && s[i + 2] == '}') {
				end = i + 3;
				end += space_run(s, n, end);
			} else if (kind == TK_BBEGIN && s[i] == '+' && i + 2 < n && s[i + 1] == e &&
				   s[i + 2] == '}') {
				end = i + 3;
			} else if (s[i] == e && i + 1 < n && s[i + 1] == '}') {
				end = i + 2;
				if (kind == TK_BBEGIN && end < n && s[end] == '\n')
					end++;
			}
			if (end) {
				*ends_nl = s[end - 1] == '\n';
				*line += count_nl(s + i, end - i);
				if (!push_tok(p, kind == TK_VBEGIN ? TK_VEND : TK_BEND, *line))
					return oom(p);
				*pos = end;
				return 0;
			}
		}
		if ((l = space_run(s, n, i))) {
			*line += count_nl(s + i, l);
			i += l;
			continue;
		}
		if (is_digit(s[i])) {
			if (lex_number(p, s, n, &i, *line))
				return -1;
			continue;
		}
		if (is_name_start(s[i])) {
			struct tok *tk;
			size_t j = i + 1;
			while (j < n && (is_name_start(s[j]) || is_digit(s[j])))
				j++;
			if (!(tk = push_tok(p, TK_NAME, *line)))
				return oom(p);
			tk->p = s + i;
			tk->n = j - i;
			i = j;
			continue;
		}
		if (s[i] == '\'' || s[i] == '"') {
			char q = s[i];
			size_t j = i + 1;
			struct tok *tk;
			while (j < n && s[j] != q)
				j += s[j] == '\\' ? 2 : 1;
			if (j >= n)
				return fail(p, JINJA_SYNTAX, *line, "unexpected char %c", q);
			if (!(tk = push_tok(p, TK_STR, *line)))
				return oom(p);
			if (decode_string(p, s + i + 1, j - i - 1, *line, tk))
				return -1;
			*line += count_nl(s + i, j - i);
			i = j + 1;
			continue;
		}
		if ((l = lex_op(s, n, i, &op))) {
			struct tok *tk;
			if (op == '(' || op == '[' || op == '{') {
				if (depth == PARSE_DEPTH_MAX)
					return fail(p, JINJA_UNSUPPORTED, *line,
						    "brackets nested deeper than %d",
						    PARSE_DEPTH_MAX);
				stack[depth++] = (char)op;
			} else if (op == ')' || op == ']' || op == '}') {
				char want = op == ')' ? '(' : op == ']' ? '[' : '{';
				if (!depth)
					return fail(p, JINJA_SYNTAX, *line, "unexpected '%c'", op);
				if (stack[depth - 1] != want)
					return fail(p, JINJA_SYNTAX, *line,
						    "unexpected '%c', expected the closing of '%c'",
						    op, stack[depth - 1]);
				depth--;
			}
			if (!(tk = push_tok(p, TK_OP, *line)))
				return oom(p);
			tk->op = op;
			i += l;
			continue;
		}
		if ((unsigned char)s[i] >= 0x80)
			return fail(p, JINJA_UNSUPPORTED, *line, "a non-ASCII name or character");
		return fail(p, JINJA_SYNTAX, *line, "unexpected char '%c'", s[i]);
	}
}

static int lex(struct parser *p, const char *s, size_t n)
{
	size_t pos = 0;
	int line = 1;
	bool line_starting = true;

	while (pos < n) {
		size_t t = pos, text_n, j;
		int kind = 0;
		char sign = 0;
		struct tok *tk;

		while (t + 1 < n) {
			if (s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))
				break;
			t++;
		}
		if (t + 1 >= n) {
			if (!(tk = push_tok(p, TK_DATA, line)))
				return oom(p);
			tk->p = s + pos;
			tk->n = n - pos;
			line += count_nl(s + pos, n - pos);
			break;
		}
		kind = s[t + 1];
		if (t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+'))
			sign = s[t + 2];
		text_n = t - pos;
		if (sign == '-') {
			text_n = rstrip_len(s + pos, text_n);
		} else if (sign != '+' && kind != '{') {
			size_t l_pos = 0;
			for (j = text_n; j > 0; j--)
				if (s[pos + j - 1] == '\n') {
					l_pos = j;
					break;
				}
			if ((l_pos > 0 || line_starting) && l_pos < text_n &&
			    space_run(s, pos + text_n, pos + l_pos) == text_n - l_pos)
				text_n = l_pos;
		}
		if (text_n) {
			if (!(tk = push_tok(p, TK_DATA, line)))
				return oom(p);
			tk->p = s + pos;
			tk->n = text_n;
		}
		line += count_nl(s + pos, t - pos);
		pos = t + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			size_t i = pos, end = 0;
			for (; i + 1 < n; i++) {
				if ((s[i] == '+' || s[i] == '-') && i + 2 < n && s[i + 1] == '#' &&
				    s[i + 2] == '}') {
					end = i + 3;
					if (s[i] == '-')
						end += space_run(s, n, end);
					break;
				}
				if (s[i] == '#' && s[i + 1] == '}') {
					end = i + 2;
					if (end < n && s[end] == '\n')
						end++;
					break;
				}
			}
			if (!end)
				return fail(p, JINJA_SYNTAX, line, "Missing end of comment tag");
			line += count_nl(s + pos, end - pos);
			line_starting = s[end - 1] == '\n';
			pos = end;
			continue;
		}
		if (kind == '%') {
			/* {% raw %} */
			size_t i = pos + space_run(s, n, pos);
			if (n - i >= 3 && !memcmp(s + i, "raw", 3) &&
			    (i + 3 >= n || !(is_name_start(s[i + 3]) || is_digit(s[i + 3]))))
				return fail(p, JINJA_UNSUPPORTED, line, "the raw statement");
		}
		if (!(tk = push_tok(p, kind == '{' ? TK_VBEGIN : TK_BBEGIN, line)))
			return oom(p);
		if (lex_tag(p, s, n, &pos, &line, kind == '{' ? TK_VBEGIN : TK_BBEGIN,
			    &line_starting))
			return -1;
		if (pos < n && p->toks[p->ntok - 1].t == TK_VEND)
			(void)0;
	}
	if (!push_tok(p, TK_EOF, line))
		return oom(p);
	return 0;
}

/* --- parser --------------------------------------------------------------------------------- */

static struct tok *cur(struct parser *p)
{
	return &p->toks[p->pos];
}

static struct tok *peek(struct parser *p, size_t k)
{
	size_t i = p->pos + k;
	return &p->toks[i < p->ntok ? i : p->ntok - 1];
}

static void next(struct parser *p)
{
	if (p->pos + 1 < p->ntok)
		p->pos++;
}

static bool is_op(struct parser *p, int op)
{
	return cur(p)->t == TK_OP && cur(p)->op == op;
}

static bool is_name(struct parser *p, const char *name)
{
	struct tok *t = cur(p);
	size_t l = strlen(name);
	return t->t == TK_NAME && t->n == l && !memcmp(t->p, name, l);
}

static bool tok_is_name(const struct tok *t, const char *name)
{
	size_t l = strlen(name);
	return t->t == TK_NAME && t->n == l && !memcmp(t->p, name, l);
}

static const char *tok_desc(const struct tok *t)
{
	switch (t->t) {
	case TK_EOF:
		return "end of template";
	case TK_DATA:
		return "template data";
	case TK_VBEGIN:
		return "begin of print statement";
	case TK_VEND:
		return "end of print statement";
	case TK_BBEGIN:
		return "begin of statement block";
	case TK_BEND:
		return "end of statement block";
	case TK_NAME:
		return "name";
	case TK_STR:
		return "string";
	case TK_INT:
		return "integer";
	case TK_FLOAT:
		return "float";
	}
	return "operator";
}

static int unexpected(struct parser *p)
{
	struct tok *t = cur(p);
	if (t->t == TK_NAME)
		return fail(p, JINJA_SYNTAX, t->line, "unexpected name '%.*s'", (int)t->n, t->p);
	if (t->t == TK_OP)
		return fail(p, JINJA_SYNTAX, t->line, "unexpected '%c'", t->op > 32 ? t->op : '?');
	return fail(p, JINJA_SYNTAX, t->line, "unexpected %s", tok_desc(t));
}

static int expect_op(struct parser *p, int op)
{
	if (!is_op(p, op))
		return unexpected(p);
	next(p);
	return 0;
}

static struct node *mk(struct parser *p, int kind, int line)
{
	struct node *n = ja_alloc(&p->t->arena, sizeof(*n));
	if (!n) {
		oom(p);
		return NULL;
	}
	memset(n, 0, sizeof(*n));
	n->kind = (uint8_t)kind;
	n->line = line;
	n->sym = -1;
	return n;
}

/* Sets n's depth (in flags) from its children's and refuses a tree deeper than TREE_DEPTH_MAX:
 * chains such as a + a + ... or x|f|f|... are built by loops, not recursion, so the nesting
 * count of the parser does not see them, and every pass over the tree recurses. */
static struct node *grow(struct parser *p, struct node *n)
{
	unsigned d = 0;
	const struct node *k[5];

	if (!n)
		return NULL;
	k[0] = n->a, k[1] = n->b, k[2] = n->c, k[3] = n->d, k[4] = n->e;
	for (int i = 0; i < 5; i++)
		if (k[i] && k[i]->flags > d)
			d = k[i]->flags;
	for (uint32_t i = 0; i < n->nv; i++)
		if (n->v[i]->flags > d)
			d = n->v[i]->flags;
	for (uint32_t i = 0; i < n->nkw; i++)
		if (n->kw[i]->flags > d)
			d = n->kw[i]->flags;
	if (d + 1 > TREE_DEPTH_MAX) {
		fail(p, JINJA_UNSUPPORTED, n->line, "an expression nested deeper than %d",
		     TREE_DEPTH_MAX);
		return NULL;
	}
	n->flags = (uint16_t)(d + 1);
	return n;
}

/* A growable array of node pointers in the arena (copied when grown: the old one is wasted,
 * which is bounded by twice the final size). */
static int vpush(struct parser *p, struct node ***v, uint32_t *nv, struct node *x)
{
	uint32_t n = *nv;
	if ((n & (n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to the next power of two */
		uint32_t cap = n ? n * 2 : 1;
		struct node **nvv = ja_alloc(&p->t->arena, cap * sizeof(*nvv));
		if (!nvv)
			return oom(p);
		if (n)
			memcpy(nvv, *v, n * sizeof(*nvv));
		*v = nvv;
	}
	(*v)[n] = x;
	*nv = n + 1;
	return 0;
}

static int intern(struct parser *p, const char *s, size_t n)
{
	struct jinja_template *t = p->t;
	char *c;

	for (uint32_t i = 0; i < t->nsyms; i++)
		if (strlen(t->syms[i]) == n && !memcmp(t->syms[i], s, n))
			return (int)i;
	if ((t->nsyms & (t->nsyms - 1)) == 0) {
		uint32_t cap = t->nsyms ? t->nsyms * 2 : 16;
		char **ns = realloc(t->syms, cap * sizeof(*ns));
		if (!ns)
			return oom(p);
		t->syms = ns;
	}
	if (t->nsyms == 16 && 0)
		return -1;
	if (!(c = ja_strdup(&t->arena, s, n)))
		return oom(p);
	t->syms[t->nsyms] = c;
	return (int)t->nsyms++;
}

static struct jv const_str(struct parser *p, const char *s, size_t n)
{
	char *c = ja_strdup(&p->t->arena, s, n);
	if (!c)
		oom(p);
	return jv_str(c ? c : "", c ? n : 0);
}

static struct node *parse_expr(struct parser *p, bool condexpr);
static struct node *parse_tuple(struct parser *p, bool condexpr, bool explicit_parens);
static struct node *parse_or(struct parser *p);
static struct node *parse_unary(struct parser *p, bool with_filter);

static bool names_refused(const char *s, size_t n)
{
	static const char *const refused[] = {"cycler",	 "joiner", "lipsum", "self",
					      "varargs", "kwargs", "caller"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (strlen(refused[i]) == n && !memcmp(refused[i], s, n))
			return true;
	return false;
}

static int parse_call_args(struct parser *p, struct node *call)
{
	bool kw_seen = false;

	if (expect_op(p, '('))
		return -1;
	while (!is_op(p, ')')) {
		if (call->nv || call->nkw)
			if (expect_op(p, ','))
				return -1;
		if (is_op(p, ')'))
			break;
		if (is_op(p, '*') || is_op(p, OP_POW))
			return fail(p, JINJA_UNSUPPORTED, cur(p)->line,
				    "*args and **kwargs in calls");
		if (cur(p)->t == TK_NAME && peek(p, 1)->t == TK_OP && peek(p, 1)->op == '=') {
			struct node *kw = mk(p, N_KW, cur(p)->line);
			if (!kw)
				return -1;
			kw->k = const_str(p, cur(p)->p, cur(p)->n);
			next(p);
			next(p);
			if (!(kw->a = parse_expr(p, true)))
				return -1;
			if (vpush(p, &call->kw, &call->nkw, kw))
				return -1;
			kw_seen = true;
		} else {
			struct node *a;
			if (kw_seen)
				return fail(p, JINJA_SYNTAX, cur(p)->line,
					    "invalid syntax for function call expression");
			if (!(a = parse_expr(p, true)) || vpush(p, &call->v, &call->nv, a))
				return -1;
		}
	}
	next(p);
	return 0;
}

static int method_id(const char *s, size_t n)
{
	static const char *const names[] = {
	    [M_STRIP] = "strip",       [M_LSTRIP] = "lstrip",	[M_RSTRIP] = "rstrip",
	    [M_SPLIT] = "split",       [M_RSPLIT] = "rsplit",	[M_STARTSWITH] = "startswith",
	    [M_ENDSWITH] = "endswith", [M_REPLACE] = "replace", [M_UPPER] = "upper",
	    [M_LOWER] = "lower",       [M_TITLE] = "title",	[M_CAPITALIZE] = "capitalize",
	    [M_FIND] = "find",	       [M_COUNT] = "count",	[M_JOIN] = "join",
	    [M_ITEMS] = "items",       [M_KEYS] = "keys",	[M_VALUES] = "values",
	    [M_GET] = "get",	       [M_INDEX] = "index",
	};
	static const char *const unsafe[] = {"append",	"clear",      "extend",	 "insert",
					     "pop",	"remove",     "reverse", "sort",
					     "popitem", "setdefault", "update"};
	/* Python attributes of str, dict and list this module does not implement. */
	static const char *const other[] = {"casefold",	    "center",	    "encode",
					    "expandtabs",   "format",	    "format_map",
					    "isalnum",	    "isalpha",	    "isascii",
					    "isdecimal",    "isdigit",	    "isidentifier",
					    "islower",	    "isnumeric",    "isprintable",
					    "isspace",	    "istitle",	    "isupper",
					    "ljust",	    "maketrans",    "partition",
					    "removeprefix", "removesuffix", "rfind",
					    "rindex",	    "rjust",	    "rpartition",
					    "splitlines",   "swapcase",	    "translate",
					    "zfill",	    "copy",	    "fromkeys",
					    "cycle",	    "changed",	    "conjugate",
					    "bit_length",   "to_bytes",	    "as_integer_ratio",
					    "is_integer",   "hex"};

	for (int i = 0; i < M_UNSAFE; i++)
		if (strlen(names[i]) == n && !memcmp(names[i], s, n))
			return i;
	for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
		if (strlen(unsafe[i]) == n && !memcmp(unsafe[i], s, n))
			return M_UNSAFE;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (strlen(other[i]) == n && !memcmp(other[i], s, n))
			return -1;
	if (n > 1 && s[0] == '_' && s[1] == '_')
		return M_UNSAFE;
	return M_OTHER;
}

static struct node *parse_postfix(struct parser *p, struct node *node);

static struct node *parse_primary(struct parser *p)
{
	struct tok *t = cur(p);
	struct node *n;

	if (++p->depth > PARSE_DEPTH_MAX) {
		fail(p, JINJA_UNSUPPORTED, t->line, "expressions nested deeper than %d",
		     PARSE_DEPTH_MAX);
		return NULL;
	}
	switch (t->t) {
	case TK_NAME:
		if (!(n = mk(p, N_CONST, t->line)))
			return NULL;
		if (tok_is_name(t, "true") || tok_is_name(t, "True")) {
			n->k = jv_bool(true);
		} else if (tok_is_name(t, "false") || tok_is_name(t, "False")) {
			n->k = jv_bool(false);
		} else if (tok_is_name(t, "none") || tok_is_name(t, "None")) {
			n->k = jv_none();
		} else {
			if (names_refused(t->p, t->n)) {
				fail(p, JINJA_UNSUPPORTED, t->line, "the name '%.*s'", (int)t->n,
				     t->p);
				return NULL;
			}
			n->kind = N_NAME;
			if ((n->sym = intern(p, t->p, t->n)) < 0)
				return NULL;
		}
		next(p);
		break;
	case TK_STR: {
		size_t total = 0, k = 0;
		char *s;
		for (size_t i = p->pos; i < p->ntok && p->toks[i].t == TK_STR; i++)
			total += p->toks[i].n;
		if (!(n = mk(p, N_CONST, t->line)) || !(s = ja_alloc(&p->t->arena, total + 1))) {
			oom(p);
			return NULL;
		}
		while (cur(p)->t == TK_STR) {
			memcpy(s + k, cur(p)->p, cur(p)->n);
			k += cur(p)->n;
			next(p);
		}
		s[k] = 0;
		n->k = jv_str(s, k);
		break;
	}
	case TK_INT:
	case TK_FLOAT:
		if (!(n = mk(p, N_CONST, t->line)))
			return NULL;
		n->k = t->t == TK_INT ? jv_int(t->i) : jv_float(t->f);
		next(p);
		break;
	case TK_OP:
		if (t->op == '(') {
			next(p);
			if (!(n = parse_tuple(p, true, true)) || expect_op(p, ')'))
				return NULL;
			break;
		}
		if (t->op == '[') {
			next(p);
			if (!(n = mk(p, N_LIST, t->line)))
				return NULL;
			while (!is_op(p, ']')) {
				struct node *x;
				if (n->nv && expect_op(p, ','))
					return NULL;
				if (is_op(p, ']'))
					break;
				if (!(x = parse_expr(p, true)) || vpush(p, &n->v, &n->nv, x))
					return NULL;
			}
			next(p);
			break;
		}
		if (t->op == '{') {
			next(p);
			if (!(n = mk(p, N_DICT, t->line)))
				return NULL;
			while (!is_op(p, '}')) {
				struct node *k, *v;
				if (n->nv && expect_op(p, ','))
					return NULL;
				if (is_op(p, '}'))
					break;
				if (!(k = parse_expr(p, true)) || expect_op(p, ':') ||
				    !(v = parse_expr(p, true)) || vpush(p, &n->v, &n->nv, k) ||
				    vpush(p, &n->kw, &n->nkw, v))
					return NULL;
			}
			next(p);
			break;
		}
		/* fallthrough */
	default:
		unexpected(p);
		return NULL;
	}
	p->depth--;
	return n;
}

static struct node *parse_subscript_arg(struct parser *p)
{
	/* a, a:b, a:b:c, :b, ::c ... as N_SLICE without obj, or an expression */
	int line = cur(p)->line;
	struct node *args[3] = {NULL, NULL, NULL};
	struct node *s;

	if (!is_op(p, ':')) {
		if (!(args[0] = parse_expr(p, true)))
			return NULL;
		if (!is_op(p, ':'))
			return args[0];
	}
	next(p); /* ':' */
	if (!is_op(p, ']') && !is_op(p, ',') && !is_op(p, ':'))
		if (!(args[1] = parse_expr(p, true)))
			return NULL;
	if (is_op(p, ':')) {
		next(p);
		if (!is_op(p, ']') && !is_op(p, ','))
			if (!(args[2] = parse_expr(p, true)))
				return NULL;
	}
	if (!(s = mk(p, N_SLICE, line)))
		return NULL;
	s->b = args[0];
	s->c = args[1];
	s->d = args[2];
	return s;
}

static struct node *parse_postfix(struct parser *p, struct node *node)
{
	for (;;) {
		struct tok *t = cur(p);
		struct node *n;

		if (t->t == TK_OP && t->op == '.') {
			struct tok *a = peek(p, 1);
			next(p);
			if (a->t == TK_NAME) {
				next(p);
				if (is_op(p, '(')) {
					int id = method_id(a->p, a->n);
					if (id < 0) {
						fail(p, JINJA_UNSUPPORTED, a->line,
						     "the method '%.*s'", (int)a->n, a->p);
						return NULL;
					}
					if (!(n = mk(p, N_METHOD, a->line)))
						return NULL;
					n->op = (uint8_t)id;
					n->a = node;
					n->k = const_str(p, a->p, a->n);
					if (parse_call_args(p, n))
						return NULL;
					if (!(node = grow(p, n)))
						return NULL;
					continue;
				}
				if (!(n = mk(p, N_GETATTR, a->line)))
					return NULL;
				n->a = node;
				n->k = const_str(p, a->p, a->n);
				if (!(node = grow(p, n)))
					return NULL;
				continue;
			}
			if (a->t == TK_INT) {
				next(p);
				if (!(n = mk(p, N_GETITEM, a->line)) ||
				    !(n->b = mk(p, N_CONST, a->line)))
					return NULL;
				n->a = node;
				n->b->k = jv_int(a->i);
				if (!(node = grow(p, n)))
					return NULL;
				continue;
			}
			fail(p, JINJA_SYNTAX, a->line, "expected name or number");
			return NULL;
		}
		if (t->t == TK_OP && t->op == '[') {
			struct node *arg, *tuple = NULL;
			next(p);
			if (is_op(p, ']')) { /* x[] is x[()] to jinja2 */
				if (!(arg = mk(p, N_TUPLE, t->line)))
					return NULL;
			} else if (!(arg = parse_subscript_arg(p))) {
				return NULL;
			}
			if (is_op(p, ',')) {
				if (!(tuple = mk(p, N_TUPLE, t->line)) ||
				    vpush(p, &tuple->v, &tuple->nv, arg))
					return NULL;
				while (is_op(p, ',')) {
					next(p);
					if (is_op(p, ']'))
						break;
					if (!(arg = parse_subscript_arg(p)) ||
					    vpush(p, &tuple->v, &tuple->nv, arg))
						return NULL;
				}
				fail(p, JINJA_UNSUPPORTED, t->line, "tuple subscripts");
				return NULL;
			}
			if (expect_op(p, ']'))
				return NULL;
			if (arg->kind == N_SLICE && !arg->a) {
				arg->a = node;
				if (!(node = grow(p, arg)))
					return NULL;
			} else {
				if (!(n = mk(p, N_GETITEM, t->line)))
					return NULL;
				n->a = node;
				n->b = arg;
				if (!(node = grow(p, n)))
					return NULL;
			}
			continue;
		}
		if (t->t == TK_OP && t->op == '(') {
			if (!(n = mk(p, N_CALL, t->line)))
				return NULL;
			n->a = node;
			if (parse_call_args(p, n))
				return NULL;
			if (!(node = grow(p, n)))
				return NULL;
			continue;
		}
		return node;
	}
}

static const char *const jinja_filters[] = {
    "abs",    "attr",	    "batch",	   "capitalize", "center",   "count",
    "d",      "default",    "dictsort",	   "e",		 "escape",   "filesizeformat",
    "first",  "float",	    "forceescape", "format",	 "groupby",  "indent",
    "int",    "items",	    "join",	   "last",	 "length",   "list",
    "lower",  "map",	    "max",	   "min",	 "pprint",   "random",
    "reject", "rejectattr", "replace",	   "reverse",	 "round",    "safe",
    "select", "selectattr", "slice",	   "sort",	 "string",   "striptags",
    "sum",    "title",	    "tojson",	   "trim",	 "truncate", "unique",
    "upper",  "urlencode",  "urlize",	   "wordcount",	 "wordwrap", "xmlattr"};

int jinja_filter_id(const char *s, size_t n)
{
	static const struct {
		const char *name;
		int id;
	} map[] = {
	    {"trim", FL_TRIM},
	    {"tojson", FL_TOJSON},
	    {"length", FL_LENGTH},
	    {"count", FL_LENGTH},
	    {"list", FL_LIST},
	    {"string", FL_STRING},
	    {"join", FL_JOIN},
	    {"map", FL_MAP},
	    {"selectattr", FL_SELECTATTR},
	    {"rejectattr", FL_REJECTATTR},
	    {"select", FL_SELECT},
	    {"reject", FL_REJECT},
	    {"default", FL_DEFAULT},
	    {"d", FL_DEFAULT},
	    {"first", FL_FIRST},
	    {"last", FL_LAST},
	    {"upper", FL_UPPER},
	    {"lower", FL_LOWER},
	    {"replace", FL_REPLACE},
	    {"items", FL_ITEMS},
	    {"capitalize", FL_CAPITALIZE},
	    {"title", FL_TITLE},
	    {"abs", FL_ABS},
	    {"int", FL_INT},
	    {"float", FL_FLOAT},
	    {"reverse", FL_REVERSE},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strlen(map[i].name) == n && !memcmp(map[i].name, s, n))
			return map[i].id;
	for (size_t i = 0; i < sizeof(jinja_filters) / sizeof(jinja_filters[0]); i++)
		if (strlen(jinja_filters[i]) == n && !memcmp(jinja_filters[i], s, n))
			return -2; /* jinja2's, not implemented */
	return -1;
}

int jinja_test_id(const char *s, size_t n)
{
	static const struct {
		const char *name;
		int id;
	} map[] = {
	    {"defined", TS_DEFINED},
	    {"undefined", TS_UNDEFINED},
	    {"none", TS_NONE},
	    {"string", TS_STRING},
	    {"mapping", TS_MAPPING},
	    {"iterable", TS_ITERABLE},
	    {"false", TS_FALSE},
	    {"true", TS_TRUE},
	    {"number", TS_NUMBER},
	    {"boolean", TS_BOOLEAN},
	    {"sequence", TS_SEQUENCE},
	    {"equalto", TS_EQ},
	    {"eq", TS_EQ},
	    {"==", TS_EQ},
	    {"ne", TS_NE},
	    {"!=", TS_NE},
	    {"lt", TS_LT},
	    {"<", TS_LT},
	    {"lessthan", TS_LT},
	    {"le", TS_LE},
	    {"<=", TS_LE},
	    {"gt", TS_GT},
	    {">", TS_GT},
	    {"greaterthan", TS_GT},
	    {"ge", TS_GE},
	    {">=", TS_GE},
	    {"sameas", TS_SAMEAS},
	    {"integer", TS_INTEGER},
	    {"float", TS_FLOAT},
	    {"callable", TS_CALLABLE},
	    {"odd", TS_ODD},
	    {"even", TS_EVEN},
	    {"divisibleby", TS_DIVISIBLEBY},
	    {"in", TS_IN},
	    {"lower", TS_LOWER},
	    {"upper", TS_UPPER},
	};
	static const char *const jinja_tests[] = {"escaped", "filter", "test"};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strlen(map[i].name) == n && !memcmp(map[i].name, s, n))
			return map[i].id;
	for (size_t i = 0; i < sizeof(jinja_tests) / sizeof(jinja_tests[0]); i++)
		if (strlen(jinja_tests[i]) == n && !memcmp(jinja_tests[i], s, n))
			return -2;
	return -1;
}

static struct node *parse_filter_expr(struct parser *p, struct node *node)
{
	for (;;) {
		if (is_op(p, '|')) {
			struct tok *name;
			struct node *f;
			int id;
			next(p);
			name = cur(p);
			if (name->t != TK_NAME) {
				unexpected(p);
				return NULL;
			}
			next(p);
			if (is_op(p, '.')) {
				fail(p, JINJA_UNSUPPORTED, name->line, "dotted filter names");
				return NULL;
			}
			id = jinja_filter_id(name->p, name->n);
			if (id == -2) {
				fail(p, JINJA_UNSUPPORTED, name->line, "the filter '%.*s'",
				     (int)name->n, name->p);
				return NULL;
			}
			if (id < 0) {
				fail(p, JINJA_SYNTAX, name->line, "No filter named '%.*s'.",
				     (int)name->n, name->p);
				return NULL;
			}
			if (!(f = mk(p, N_FILTER, name->line)))
				return NULL;
			f->op = (uint8_t)id;
			f->a = node;
			if (is_op(p, '(') && parse_call_args(p, f))
				return NULL;
			if (!(node = grow(p, f)))
				return NULL;
			continue;
		}
		if (is_name(p, "is")) {
			struct tok *name;
			struct node *tn, *neg = NULL;
			int id;
			int line = cur(p)->line;
			next(p);
			if (is_name(p, "not")) {
				next(p);
				if (!(neg = mk(p, N_NOT, line)))
					return NULL;
			}
			name = cur(p);
			if (name->t != TK_NAME) {
				unexpected(p);
				return NULL;
			}
			next(p);
			if (is_op(p, '.')) {
				fail(p, JINJA_UNSUPPORTED, name->line, "dotted test names");
				return NULL;
			}
			id = jinja_test_id(name->p, name->n);
			if (id == -2) {
				fail(p, JINJA_UNSUPPORTED, name->line, "the test '%.*s'",
				     (int)name->n, name->p);
				return NULL;
			}
			if (id < 0) {
				fail(p, JINJA_SYNTAX, name->line, "No test named '%.*s'.",
				     (int)name->n, name->p);
				return NULL;
			}
			if (!(tn = mk(p, N_TEST, line)))
				return NULL;
			tn->op = (uint8_t)id;
			tn->a = node;
			if (is_op(p, '(')) {
				if (parse_call_args(p, tn))
					return NULL;
			} else {
				struct tok *c = cur(p);
				bool arg = c->t == TK_NAME || c->t == TK_STR || c->t == TK_INT ||
					   c->t == TK_FLOAT ||
					   (c->t == TK_OP &&
					    (c->op == '(' || c->op == '[' || c->op == '{'));
				if (arg && !is_name(p, "else") && !is_name(p, "or") &&
				    !is_name(p, "and")) {
					struct node *a;
					if (is_name(p, "is")) {
						fail(p, JINJA_SYNTAX, c->line,
						     "You cannot chain multiple tests with is");
						return NULL;
					}
					if (!(a = parse_primary(p)) || !(a = parse_postfix(p, a)) ||
					    vpush(p, &tn->v, &tn->nv, a))
						return NULL;
				}
			}
			if (!grow(p, tn))
				return NULL;
			if (neg) {
				neg->a = tn;
				tn = grow(p, neg);
			}
			if (!(node = tn))
				return NULL;
			continue;
		}
		if (is_op(p, '(')) {
			struct node *c = mk(p, N_CALL, cur(p)->line);
			if (!c)
				return NULL;
			c->a = node;
			if (parse_call_args(p, c))
				return NULL;
			if (!(node = grow(p, c)))
				return NULL;
			continue;
		}
		return node;
	}
}

static struct node *parse_unary(struct parser *p, bool with_filter)
{
	struct node *n;
	int line = cur(p)->line;

	if (++p->depth > PARSE_DEPTH_MAX) {
		fail(p, JINJA_UNSUPPORTED, line, "expressions nested deeper than %d",
		     PARSE_DEPTH_MAX);
		return NULL;
	}
	if (is_op(p, '-') || is_op(p, '+')) {
		int kind = is_op(p, '-') ? N_NEG : N_POS;
		next(p);
		if (!(n = mk(p, kind, line)) || !(n->a = parse_unary(p, false)) || !grow(p, n))
			return NULL;
	} else if (!(n = parse_primary(p))) {
		return NULL;
	}
	if (!(n = parse_postfix(p, n)))
		return NULL;
	if (with_filter && !(n = parse_filter_expr(p, n)))
		return NULL;
	p->depth--;
	return n;
}

static struct node *bin(struct parser *p, int op, struct node *a, struct node *b, int line)
{
	struct node *n = mk(p, N_BIN, line);
	if (!n)
		return NULL;
	n->op = (uint8_t)op;
	n->a = a;
	n->b = b;
	return grow(p, n);
}

static struct node *parse_pow(struct parser *p)
{
	struct node *l = parse_unary(p, true);
	while (l && is_op(p, OP_POW)) {
		int line = cur(p)->line;
		struct node *r;
		next(p);
		if (!(r = parse_unary(p, true)))
			return NULL;
		l = bin(p, OP_POW, l, r, line);
	}
	return l;
}

static struct node *parse_math2(struct parser *p)
{
	struct node *l = parse_pow(p);
	while (l && (is_op(p, '*') || is_op(p, '/') || is_op(p, OP_FLOORDIV) || is_op(p, '%'))) {
		int op = cur(p)->op, line = cur(p)->line;
		struct node *r;
		next(p);
		if (!(r = parse_pow(p)))
			return NULL;
		l = bin(p, op, l, r, line);
	}
	return l;
}

static struct node *parse_concat(struct parser *p)
{
	struct node *l = parse_math2(p), *c;
	if (!l || !is_op(p, '~'))
		return l;
	if (!(c = mk(p, N_CONCAT, l->line)) || vpush(p, &c->v, &c->nv, l))
		return NULL;
	while (is_op(p, '~')) {
		next(p);
		if (!(l = parse_math2(p)) || vpush(p, &c->v, &c->nv, l))
			return NULL;
	}
	return grow(p, c);
}

static struct node *parse_math1(struct parser *p)
{
	struct node *l = parse_concat(p);
	while (l && (is_op(p, '+') || is_op(p, '-'))) {
		int op = cur(p)->op, line = cur(p)->line;
		struct node *r;
		next(p);
		if (!(r = parse_concat(p)))
			return NULL;
		l = bin(p, op, l, r, line);
	}
	return l;
}

static struct node *parse_compare(struct parser *p)
{
	struct node *l = parse_math1(p), *c = NULL;

	while (l) {
		int op = 0, line = cur(p)->line;
		struct node *o, *r;
		if (cur(p)->t == TK_OP) {
			switch (cur(p)->op) {
			case OP_EQ:
			case OP_NE:
			case OP_LE:
			case OP_GE:
				op = cur(p)->op;
				break;
			case '<':
				op = OP_LT;
				break;
			case '>':
				op = OP_GT;
				break;
			}
			if (op)
				next(p);
		} else if (is_name(p, "in")) {
			op = OP_IN;
			next(p);
		} else if (is_name(p, "not") && tok_is_name(peek(p, 1), "in")) {
			op = OP_NOTIN;
			next(p);
			next(p);
		}
		if (!op)
			break;
		if (!(r = parse_math1(p)))
			return NULL;
		if (!c) {
			if (!(c = mk(p, N_CMP, line)))
				return NULL;
			c->a = l;
		}
		if (!(o = mk(p, N_CMPOP, line)))
			return NULL;
		o->op = (uint8_t)op;
		o->a = r;
		if (!grow(p, o) || vpush(p, &c->v, &c->nv, o))
			return NULL;
	}
	return c ? grow(p, c) : l;
}

static struct node *parse_not(struct parser *p)
{
	if (is_name(p, "not")) {
		struct node *n = mk(p, N_NOT, cur(p)->line);
		if (++p->depth > PARSE_DEPTH_MAX) {
			fail(p, JINJA_UNSUPPORTED, cur(p)->line,
			     "expressions nested deeper than %d", PARSE_DEPTH_MAX);
			return NULL;
		}
		next(p);
		if (!n || !(n->a = parse_not(p)))
			return NULL;
		p->depth--;
		return grow(p, n);
	}
	return parse_compare(p);
}

static struct node *parse_and(struct parser *p)
{
	struct node *l = parse_not(p);
	while (l && is_name(p, "and")) {
		struct node *n = mk(p, N_AND, cur(p)->line);
		next(p);
		if (!n || !(n->b = parse_not(p)))
			return NULL;
		n->a = l;
		if (!(l = grow(p, n)))
			return NULL;
	}
	return l;
}

static struct node *parse_or(struct parser *p)
{
	struct node *l = parse_and(p);
	while (l && is_name(p, "or")) {
		struct node *n = mk(p, N_OR, cur(p)->line);
		next(p);
		if (!n || !(n->b = parse_and(p)))
			return NULL;
		n->a = l;
		if (!(l = grow(p, n)))
			return NULL;
	}
	return l;
}

static struct node *parse_condexpr(struct parser *p)
{
	struct node *e1 = parse_or(p);
	while (e1 && is_name(p, "if")) {
		struct node *c = mk(p, N_COND, cur(p)->line);
		if (++p->depth > PARSE_DEPTH_MAX) {
			fail(p, JINJA_UNSUPPORTED, cur(p)->line,
			     "expressions nested deeper than %d", PARSE_DEPTH_MAX);
			return NULL;
		}
		next(p);
		if (!c || !(c->a = parse_or(p)))
			return NULL;
		c->b = e1;
		if (is_name(p, "else")) {
			next(p);
			if (!(c->c = parse_condexpr(p)))
				return NULL;
		}
		p->depth--;
		if (!(e1 = grow(p, c)))
			return NULL;
	}
	return e1;
}

static struct node *parse_expr(struct parser *p, bool condexpr)
{
	return condexpr ? parse_condexpr(p) : parse_or(p);
}

/* jinja2's parse_tuple: an expression, or several separated by commas as a tuple. Stops before
 * the end of a tag, ')' and the words in `stop`. */
static bool tuple_end(struct parser *p, const char *stop)
{
	struct tok *t = cur(p);
	if (t->t == TK_VEND || t->t == TK_BEND || t->t == TK_EOF)
		return true;
	if (t->t == TK_OP &&
	    (t->op == ')' || t->op == ']' || t->op == '}' || t->op == ':' || t->op == '='))
		return false;
	return stop && is_name(p, stop);
}

static struct node *parse_tuple_ex(struct parser *p, bool condexpr, bool explicit_parens,
				   const char *stop)
{
	int line = cur(p)->line;
	struct node *t = NULL, *e;
	bool is_tuple = false;

	for (;;) {
		if (t || is_tuple) {
			if (!is_op(p, ','))
				break;
			next(p);
		}
		if (tuple_end(p, stop) || (explicit_parens && is_op(p, ')')))
			break;
		if (!(e = parse_expr(p, condexpr)))
			return NULL;
		if (!t) {
			if (!(t = mk(p, N_TUPLE, line)))
				return NULL;
		}
		if (vpush(p, &t->v, &t->nv, e))
			return NULL;
		if (is_op(p, ','))
			is_tuple = true;
		else
			break;
	}
	if (!t) {
		if (!explicit_parens) {
			fail(p, JINJA_SYNTAX, line, "Expected an expression, got '%s'",
			     tok_desc(cur(p)));
			return NULL;
		}
		return mk(p, N_TUPLE, line);
	}
	if (!is_tuple)
		return t->v[0];
	return t;
}

static struct node *parse_tuple(struct parser *p, bool condexpr, bool explicit_parens)
{
	return parse_tuple_ex(p, condexpr, explicit_parens, NULL);
}

/* An assignment target: a name, names separated by commas, or (for set) ns.attr. */
static struct node *parse_target(struct parser *p, bool with_ns, const char *stop)
{
	int line = cur(p)->line;
	struct node *t = NULL;
	bool paren = false;

	if (with_ns && cur(p)->t == TK_NAME && peek(p, 1)->t == TK_OP && peek(p, 1)->op == '.' &&
	    peek(p, 2)->t == TK_NAME) {
		struct node *n = mk(p, N_NSATTR, line);
		if (!n || (n->sym = intern(p, cur(p)->p, cur(p)->n)) < 0)
			return NULL;
		next(p);
		next(p);
		n->k = const_str(p, cur(p)->p, cur(p)->n);
		next(p);
		return n;
	}
	if (is_op(p, '(')) {
		paren = true;
		next(p);
	}
	for (;;) {
		struct tok *c = cur(p);
		struct node *n;
		if (c->t != TK_NAME) {
			unexpected(p);
			return NULL;
		}
		if (tok_is_name(c, "true") || tok_is_name(c, "false") || tok_is_name(c, "none") ||
		    tok_is_name(c, "True") || tok_is_name(c, "False") || tok_is_name(c, "None")) {
			fail(p, JINJA_SYNTAX, c->line, "Can't assign to 'Const'");
			return NULL;
		}
		if (names_refused(c->p, c->n)) {
			fail(p, JINJA_UNSUPPORTED, c->line, "the name '%.*s'", (int)c->n, c->p);
			return NULL;
		}
		if (!(n = mk(p, N_NAME, c->line)) || (n->sym = intern(p, c->p, c->n)) < 0)
			return NULL;
		next(p);
		if (!t && !is_op(p, ',')) {
			t = n;
			break;
		}
		if (!t) {
			if (!(t = mk(p, N_TUPLE, line)))
				return NULL;
		}
		if (vpush(p, &t->v, &t->nv, n))
			return NULL;
		if (!is_op(p, ','))
			break;
		next(p);
		if ((stop && is_name(p, stop)) || is_op(p, '=') || is_op(p, ')'))
			break;
	}
	if (paren && expect_op(p, ')'))
		return NULL;
	return t;
}

static int expect_bend(struct parser *p)
{
	if (cur(p)->t != TK_BEND)
		return unexpected(p);
	next(p);
	return 0;
}

static struct node *parse_body(struct parser *p, const char *const *ends);

/* After {% name: parses the statement. */
static struct node *parse_stmt(struct parser *p)
{
	struct tok *t = cur(p);
	int line = t->line;
	struct node *n;

	if (t->t != TK_NAME) {
		unexpected(p);
		return NULL;
	}
	if (++p->depth > PARSE_DEPTH_MAX) {
		fail(p, JINJA_UNSUPPORTED, line, "blocks nested deeper than %d", PARSE_DEPTH_MAX);
		return NULL;
	}
	if (tok_is_name(t, "if")) {
		static const char *const ends[] = {"elif", "else", "endif", NULL};
		struct node *top, *ifn;
		next(p);
		/* jinja2 reads the condition without a conditional expression */
		if (!(top = ifn = mk(p, N_IF, line)) || !(ifn->a = parse_tuple(p, false, false)) ||
		    expect_bend(p))
			return NULL;
		for (;;) {
			if (!(ifn->b = parse_body(p, ends)))
				return NULL;
			if (is_name(p, "elif")) {
				struct node *e = mk(p, N_IF, cur(p)->line);
				next(p);
				if (!e || !(e->a = parse_tuple(p, false, false)) || expect_bend(p))
					return NULL;
				ifn->c = e;
				ifn = e;
				continue;
			}
			if (is_name(p, "else")) {
				static const char *const end[] = {"endif", NULL};
				next(p);
				if (expect_bend(p) || !(ifn->c = parse_body(p, end)))
					return NULL;
			}
			next(p); /* endif */
			if (expect_bend(p))
				return NULL;
			break;
		}
		n = top;
	} else if (tok_is_name(t, "for")) {
		static const char *const ends[] = {"endfor", "else", NULL};
		static const char *const end[] = {"endfor", NULL};
		next(p);
		if (!(n = mk(p, N_FOR, line)) || !(n->a = parse_target(p, false, "in")))
			return NULL;
		if (!is_name(p, "in")) {
			unexpected(p);
			return NULL;
		}
		next(p);
		if (!(n->b = parse_tuple_ex(p, false, false, "recursive")))
			return NULL;
		if (is_name(p, "if")) {
			next(p);
			if (!(n->c = parse_expr(p, true)))
				return NULL;
		}
		if (is_name(p, "recursive")) {
			fail(p, JINJA_UNSUPPORTED, line, "recursive for loops");
			return NULL;
		}
		if (expect_bend(p))
			return NULL;
		p->loops++;
		n->d = parse_body(p, ends);
		p->loops--;
		if (!n->d)
			return NULL;
		if (is_name(p, "else")) {
			next(p);
			if (expect_bend(p) || !(n->e = parse_body(p, end)))
				return NULL;
		}
		next(p);
		if (expect_bend(p))
			return NULL;
	} else if (tok_is_name(t, "set")) {
		next(p);
		if (!(n = mk(p, N_SET, line)) || !(n->a = parse_target(p, true, NULL)))
			return NULL;
		if (is_op(p, '=')) {
			next(p);
			if (!(n->b = parse_tuple(p, true, false)) || expect_bend(p))
				return NULL;
		} else {
			static const char *const end[] = {"endset", NULL};
			if (is_op(p, '|')) {
				fail(p, JINJA_UNSUPPORTED, line, "filtered set blocks");
				return NULL;
			}
			n->kind = N_SETB;
			if (expect_bend(p))
				return NULL;
			p->blocks++;
			n->b = parse_body(p, end);
			p->blocks--;
			if (!n->b)
				return NULL;
			next(p);
			if (expect_bend(p))
				return NULL;
		}
	} else if (tok_is_name(t, "macro")) {
		static const char *const end[] = {"endmacro", NULL};
		bool dflt = false;
		int loops = p->loops;
		next(p);
		if (p->loops || p->macros || p->blocks) {
			/* a macro sees the frame it is defined in: here only the template's */
			fail(p, JINJA_UNSUPPORTED, line,
			     "a macro defined inside a loop, macro, set or generation block");
			return NULL;
		}
		if (cur(p)->t != TK_NAME) {
			unexpected(p);
			return NULL;
		}
		if (!(n = mk(p, N_MACRO, line)) || (n->sym = intern(p, cur(p)->p, cur(p)->n)) < 0)
			return NULL;
		n->k = const_str(p, cur(p)->p, cur(p)->n);
		next(p);
		if (expect_op(p, '('))
			return NULL;
		while (!is_op(p, ')')) {
			struct node *a;
			if (n->nv && expect_op(p, ','))
				return NULL;
			if (is_op(p, ')'))
				break;
			if (cur(p)->t != TK_NAME) {
				unexpected(p);
				return NULL;
			}
			if (names_refused(cur(p)->p, cur(p)->n)) {
				fail(p, JINJA_UNSUPPORTED, cur(p)->line, "the name '%.*s'",
				     (int)cur(p)->n, cur(p)->p);
				return NULL;
			}
			if (!(a = mk(p, N_NAME, cur(p)->line)) ||
			    (a->sym = intern(p, cur(p)->p, cur(p)->n)) < 0)
				return NULL;
			a->k = const_str(p, cur(p)->p, cur(p)->n);
			next(p);
			if (is_op(p, '=')) {
				next(p);
				if (!(a->a = parse_expr(p, true)))
					return NULL;
				dflt = true;
			} else if (dflt) {
				fail(p, JINJA_SYNTAX, a->line,
				     "non-default argument follows default argument");
				return NULL;
			}
			if (vpush(p, &n->v, &n->nv, a))
				return NULL;
		}
		next(p);
		if (expect_bend(p))
			return NULL;
		p->macros++;
		p->loops = 0;
		n->b = parse_body(p, end);
		p->loops = loops;
		p->macros--;
		if (!n->b)
			return NULL;
		next(p);
		if (cur(p)->t == TK_NAME)
			next(p); /* {% endmacro name %} */
		if (expect_bend(p))
			return NULL;
	} else if (tok_is_name(t, "break") || tok_is_name(t, "continue")) {
		if (!p->loops) {
			fail(p, JINJA_SYNTAX, line, "'%.*s' outside of a loop", (int)t->n, t->p);
			return NULL;
		}
		if (!(n = mk(p, tok_is_name(t, "break") ? N_BREAK : N_CONTINUE, line)))
			return NULL;
		next(p);
		if (expect_bend(p))
			return NULL;
	} else if (tok_is_name(t, "generation")) {
		static const char *const end[] = {"endgeneration", NULL};
		next(p);
		if (!(n = mk(p, N_GEN, line)) || expect_bend(p))
			return NULL;
		p->blocks++;
		n->b = parse_body(p, end);
		p->blocks--;
		if (!n->b)
			return NULL;
		next(p);
		if (expect_bend(p))
			return NULL;
	} else {
		static const char *const known[] = {
		    "filter", "call", "with",	    "block", "extends",	  "include", "import",
		    "from",   "do",   "autoescape", "trans", "pluralize", "print"};
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (tok_is_name(t, known[i])) {
				fail(p, JINJA_UNSUPPORTED, line, "the %s statement", known[i]);
				return NULL;
			}
		fail(p, JINJA_SYNTAX, line, "Encountered unknown tag '%.*s'.", (int)t->n, t->p);
		return NULL;
	}
	p->depth--;
	return n;
}

/* Statements up to {% one of ends %} (left as the current token, the name) or the end of the
 * template (ends NULL). */
static struct node *parse_body(struct parser *p, const char *const *ends)
{
	struct node *body = mk(p, N_BODY, cur(p)->line), *n;

	if (!body)
		return NULL;
	for (;;) {
		struct tok *t = cur(p);
		if (t->t == TK_EOF) {
			if (ends) {
				fail(p, JINJA_SYNTAX, t->line,
				     "Unexpected end of template. Jinja was looking for '%s'.",
				     ends[0]);
				return NULL;
			}
			return body;
		}
		if (t->t == TK_DATA) {
			if (!(n = mk(p, N_TEXT, t->line)))
				return NULL;
			n->k = jv_str(t->p, t->n);
			next(p);
		} else if (t->t == TK_VBEGIN) {
			next(p);
			if (!(n = mk(p, N_PRINT, t->line)) || !(n->a = parse_tuple(p, true, false)))
				return NULL;
			if (cur(p)->t != TK_VEND) {
				unexpected(p);
				return NULL;
			}
			next(p);
		} else if (t->t == TK_BBEGIN) {
			next(p);
			if (ends)
				for (const char *const *e = ends; *e; e++)
					if (is_name(p, *e))
						return body;
			if (!(n = parse_stmt(p)))
				return NULL;
		} else {
			unexpected(p);
			return NULL;
		}
		if (vpush(p, &body->v, &body->nv, n))
			return NULL;
	}
}

/* --- frames ------------------------------------------------------------------------------- */

/*
 * jinja2 compiles each frame (the template, a loop body, a loop's else, a macro, a set block, a
 * call block such as generation) to Python locals, initialised when the frame starts from a
 * static analysis (jinja2/idtracking.py): a name the frame assigns without having referenced
 * it before, and that no enclosing frame references, starts as undefined, even where the
 * variables or an enclosing frame hold a value. So `{% for %}{{ x }}{% endfor %}{% set x = 1 %}`
 * prints nothing for x though the render was given x, and a macro called before a top-level
 * set of a name it reads sees undefined. A name assigned in only some branches of an if
 * starts as what the variables hold. The analysis below reproduces that: it marks, per frame,
 * the names to bind to undefined at the frame's start; every other name is looked up through
 * the enclosing frames, which is what jinja2's aliases and resolves amount to at run time.
 */

struct fref {
	int sym;
	bool undef;
};

struct fsyms {
	struct fref *refs;
	uint32_t nrefs, cap;
	int *stores;
	uint32_t nstores, scap;
};

struct frame {
	struct frame *parent;
	struct fsyms *sy;
	struct node **nested; /* frame bodies found in this frame, analysed after it */
	uint32_t nnested;
	struct parser *p;
};

static struct fref *fs_find(struct fsyms *s, int sym)
{
	for (uint32_t i = 0; i < s->nrefs; i++)
		if (s->refs[i].sym == sym)
			return &s->refs[i];
	return NULL;
}

static int fs_add(struct parser *p, struct fsyms *s, int sym, bool undef)
{
	if (s->nrefs == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 8;
		struct fref *n = realloc(s->refs, cap * sizeof(*n));
		if (!n)
			return oom(p);
		s->refs = n;
		s->cap = cap;
	}
	s->refs[s->nrefs].sym = sym;
	s->refs[s->nrefs++].undef = undef;
	return 0;
}

static int fs_store_note(struct parser *p, struct fsyms *s, int sym)
{
	for (uint32_t i = 0; i < s->nstores; i++)
		if (s->stores[i] == sym)
			return 0;
	if (s->nstores == s->scap) {
		uint32_t cap = s->scap ? s->scap * 2 : 8;
		int *n = realloc(s->stores, cap * sizeof(*n));
		if (!n)
			return oom(p);
		s->stores = n;
		s->scap = cap;
	}
	s->stores[s->nstores++] = sym;
	return 0;
}

static int fs_copy(struct parser *p, struct fsyms *dst, const struct fsyms *src)
{
	memset(dst, 0, sizeof(*dst));
	for (uint32_t i = 0; i < src->nrefs; i++)
		if (fs_add(p, dst, src->refs[i].sym, src->refs[i].undef))
			return -1;
	for (uint32_t i = 0; i < src->nstores; i++)
		if (fs_store_note(p, dst, src->stores[i]))
			return -1;
	return 0;
}

static void fs_free(struct fsyms *s)
{
	free(s->refs);
	free(s->stores);
}

static bool parent_has_ref(struct frame *f, int sym)
{
	for (struct frame *q = f->parent; q; q = q->parent)
		if (fs_find(q->sy, sym))
			return true;
	return false;
}

static int fr_load(struct frame *f, int sym)
{
	if (fs_find(f->sy, sym) || parent_has_ref(f, sym))
		return 0;
	return fs_add(f->p, f->sy, sym, false);
}

static int fr_store(struct frame *f, int sym)
{
	if (fs_store_note(f->p, f->sy, sym))
		return -1;
	if (fs_find(f->sy, sym))
		return 0;
	return fs_add(f->p, f->sy, sym, !parent_has_ref(f, sym));
}

/* Notes a frame (its owner node and body) to analyse once this one is done. */
static int fr_nested(struct frame *f, const struct node *owner, struct node *body)
{
	if (!body)
		return 0;
	return vpush(f->p, &f->nested, &f->nnested, (struct node *)owner) ||
	       vpush(f->p, &f->nested, &f->nnested, body);
}

static int an_expr(struct frame *f, const struct node *n)
{
	if (!n)
		return 0;
	if (n->kind == N_NAME)
		return fr_load(f, n->sym);
	if (an_expr(f, n->a) || an_expr(f, n->b) || an_expr(f, n->c) || an_expr(f, n->d) ||
	    an_expr(f, n->e))
		return -1;
	for (uint32_t i = 0; i < n->nv; i++)
		if (an_expr(f, n->v[i]))
			return -1;
	for (uint32_t i = 0; i < n->nkw; i++)
		if (an_expr(f, n->kw[i]))
			return -1;
	return 0;
}

static int an_target(struct frame *f, const struct node *t)
{
	if (t->kind == N_NAME)
		return fr_store(f, t->sym);
	if (t->kind == N_NSATTR)
		return fr_load(f, t->sym);
	for (uint32_t i = 0; i < t->nv; i++)
		if (an_target(f, t->v[i]))
			return -1;
	return 0;
}

static int an_stmts(struct frame *f, const struct node *body);

/* One branch of an if, on a copy of the frame's symbols. */
static int an_branch(struct frame *f, const struct node *body, struct fsyms *out)
{
	struct fsyms *orig = f->sy;
	int rc;

	if (fs_copy(f->p, out, orig))
		return -1;
	f->sy = out;
	rc = body ? an_stmts(f, body) : 0;
	f->sy = orig;
	return rc;
}

static int an_if(struct frame *f, const struct node *n)
{
	struct fsyms br[3];
	const struct node *elif = n->c && n->c->kind == N_IF ? n->c : NULL;
	const struct node *els = n->c && n->c->kind == N_BODY ? n->c : NULL;
	struct fsyms *self = f->sy;
	int rc = -1;

	memset(br, 0, sizeof(br));
	if (an_expr(f, n->a) || an_branch(f, n->b, &br[0]))
		goto cleanup;
	/* jinja2 visits the elif chain (each an if, recursively) as one branch */
	if (elif) {
		struct fsyms *orig = f->sy;
		if (fs_copy(f->p, &br[1], orig))
			goto cleanup;
		f->sy = &br[1];
		rc = an_if(f, elif);
		f->sy = orig;
		if (rc)
			goto cleanup;
		rc = -1;
	} else if (fs_copy(f->p, &br[1], self)) {
		goto cleanup;
	}
	if (an_branch(f, els, &br[2]))
		goto cleanup;
	/* branch_update: names stored in some branches only start as the variables hold */
	{
		uint32_t nst = self->nstores;
		for (int b = 0; b < 3; b++)
			for (uint32_t i = 0; i < br[b].nrefs; i++)
				if (!fs_find(self, br[b].refs[i].sym) &&
				    fs_add(f->p, self, br[b].refs[i].sym, br[b].refs[i].undef))
					goto cleanup;
		for (int b = 0; b < 3; b++)
			for (uint32_t i = 0; i < br[b].nstores; i++) {
				int sym = br[b].stores[i], cnt = 0;
				bool before = false;
				for (uint32_t k = 0; k < nst; k++)
					before = before || self->stores[k] == sym;
				if (before)
					continue;
				for (int c = 0; c < 3; c++)
					for (uint32_t k = 0; k < br[c].nstores; k++)
						cnt += br[c].stores[k] == sym;
				if (cnt < 3) {
					struct fref *r = fs_find(self, sym);
					if (r)
						r->undef = false;
				}
			}
		for (int b = 0; b < 3; b++)
			for (uint32_t i = 0; i < br[b].nstores; i++)
				if (fs_store_note(f->p, self, br[b].stores[i]))
					goto cleanup;
	}
	rc = 0;
cleanup:
	for (int b = 0; b < 3; b++)
		fs_free(&br[b]);
	return rc;
}

static int an_stmts(struct frame *f, const struct node *body)
{
	for (uint32_t i = 0; i < body->nv; i++) {
		const struct node *n = body->v[i];
		switch (n->kind) {
		case N_PRINT:
			if (an_expr(f, n->a))
				return -1;
			break;
		case N_IF:
			if (an_if(f, n))
				return -1;
			break;
		case N_FOR:
			if (an_expr(f, n->b) || fr_nested(f, n, n->d) || fr_nested(f, NULL, n->e))
				return -1;
			break;
		case N_SET:
			if (an_expr(f, n->b) || an_target(f, n->a))
				return -1;
			break;
		case N_SETB:
			if (an_target(f, n->a) || fr_nested(f, NULL, n->b))
				return -1;
			break;
		case N_MACRO:
			if (fr_store(f, n->sym) || fr_nested(f, n, n->b))
				return -1;
			break;
		case N_GEN:
			if (fr_nested(f, NULL, n->b))
				return -1;
			break;
		default:
			break;
		}
	}
	return 0;
}

/* The loop, macro or other frame whose body is `body` (NULL for the template): the names it
 * binds before its statements run. */
static int an_params(struct frame *f, const struct node *owner)
{
	if (!owner)
		return 0;
	if (owner->kind == N_FOR) {
		if (an_target(f, owner->a) || fs_add(f->p, f->sy, f->p->t->sym_loop, false))
			return -1;
		/* targets are parameters, not undefined */
		for (uint32_t i = 0; i < f->sy->nrefs; i++)
			f->sy->refs[i].undef = false;
		return an_expr(f, owner->c);
	}
	if (owner->kind == N_MACRO)
		for (uint32_t i = 0; i < owner->nv; i++)
			if (fs_add(f->p, f->sy, owner->v[i]->sym, false) ||
			    an_expr(f, owner->v[i]->a))
				return -1;
	return 0;
}

static int an_frame(struct parser *p, struct frame *parent, const struct node *owner,
		    struct node *body)
{
	struct fsyms sy = {0};
	struct frame f = {.parent = parent, .sy = &sy, .p = p};
	int rc = -1;
	uint32_t k = 0;

	if (an_params(&f, owner) || an_stmts(&f, body))
		goto cleanup;
	for (uint32_t i = 0; i < sy.nrefs; i++)
		k += sy.refs[i].undef;
	if (k) {
		if (!(body->pre = ja_alloc(&p->t->arena, k * sizeof(int)))) {
			oom(p);
			goto cleanup;
		}
		for (uint32_t i = 0; i < sy.nrefs; i++)
			if (sy.refs[i].undef)
				body->pre[body->npre++] = sy.refs[i].sym;
	}
	for (uint32_t i = 0; i + 1 < f.nnested; i += 2)
		if (an_frame(p, &f, f.nested[i], f.nested[i + 1]))
			goto cleanup;
	rc = 0;
cleanup:
	fs_free(&sy);
	return rc;
}

void jinja_free(struct jinja_template *t)
{
	if (!t)
		return;
	ja_free_all(&t->arena);
	free(t->syms);
	free(t);
}

int jinja_load(const char *src, size_t n, struct jinja_template **out, struct jinja_error *err)
{
	static const char *const globals[JF_COUNT] = {
	    [JF_RANGE] = "range",
	    [JF_NAMESPACE] = "namespace",
	    [JF_RAISE] = "raise_exception",
	    [JF_STRFTIME] = "strftime_now",
	    [JF_DICT] = "dict",
	};
	struct parser p = {0};
	struct jinja_template *t;
	char *s;
	size_t k = 0;
	int rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	p.t = t;
	p.err = err;
	if (memchr(src, 0, n)) {
		fail(&p, JINJA_UNSUPPORTED, 0, "a NUL byte in the template");
		goto cleanup;
	}
	if (!utf8_valid(src, n)) {
		fail(&p, JINJA_SYNTAX, 0, "the template is not UTF-8");
		goto cleanup;
	}
	/* Newlines normalized, one trailing newline dropped. */
	if (!(s = ja_alloc(&t->arena, n + 1))) {
		oom(&p);
		goto cleanup;
	}
	for (size_t i = 0; i < n; i++) {
		if (src[i] == '\r') {
			s[k++] = '\n';
			if (i + 1 < n && src[i + 1] == '\n')
				i++;
		} else {
			s[k++] = src[i];
		}
	}
	if (k && s[k - 1] == '\n')
		k--;
	s[k] = 0;
	if (lex(&p, s, k))
		goto cleanup;
	if (!(t->root = parse_body(&p, NULL)))
		goto cleanup;
	if ((t->sym_loop = intern(&p, "loop", 4)) < 0)
		goto cleanup;
	for (int i = 0; i < JF_COUNT; i++)
		if ((t->sym_global[i] = intern(&p, globals[i], strlen(globals[i]))) < 0)
			goto cleanup;
	if (an_frame(&p, NULL, NULL, t->root))
		goto cleanup;
cleanup:
	free(p.toks);
	rc = p.status;
	if (rc) {
		jinja_free(t);
		return rc;
	}
	*out = t;
	return 0;
}
