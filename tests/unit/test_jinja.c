// SPDX-License-Identifier: Apache-2.0
/* Unit tests for userspace/prompt/jinja: statements, scoping, filters, tests, methods, Python's
 * printing, errors and bounds, each expected output the one Python's jinja2 3.1 gives in
 * transformers' environment (tests/e2e/ref_jinja.py renders the same cases: the table below is
 * checked against it by tests/e2e/test_jinja_parity.sh through --table).
 *
 * Also a driver: `test_jinja --render [--config] [--clock S,OFF] TEMPLATE` renders the template
 * file (or a tokenizer_config.json's "chat_template") with each stdin line's JSON variables and
 * writes {"status":"ok","text":...} or {"status":KIND,"why":...} a line, as ref_jinja.py does.
 * `test_jinja --table` prints the table's cases as {"template":...,"vars":...} lines. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "prompt/jinja.h"
#include "tap.h"

static const struct jinja_clock test_clock = {1700000000, 0};

static char *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)len + 1)) && fread(s, 1, (size_t)len, f) == (size_t)len) {
		s[len] = 0;
		*n = (size_t)len;
	} else {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* The "chat_template" string of a tokenizer_config.json (malloc'd), NULL if none. */
static char *config_template(const char *path, size_t *n)
{
	size_t len;
	char *text = read_file(path, &len), *t = NULL;
	cJSON *j = text ? cJSON_ParseWithLength(text, len) : NULL;
	const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");

	if (cJSON_IsString(ct)) {
		t = strdup(ct->valuestring);
		*n = t ? strlen(t) : 0;
	}
	cJSON_Delete(j);
	free(text);
	return t;
}

static void put_result(struct buf *o, int rc, const struct buf *text, const struct jinja_error *e)
{
	buf_reset(o);
	if (rc == 0) {
		buf_puts(o, "{\"status\":\"ok\",\"text\":");
		buf_json_str(o, text->data ? text->data : "", text->len);
	} else {
		buf_printf(o, "{\"status\":\"%s\",\"why\":",
			   rc < 0 ? "nomem" : jinja_status_name(e->status));
		buf_json_str(o, e->msg, strlen(e->msg));
	}
	buf_puts(o, "}\n");
}

static int render_mode(int argc, char **argv)
{
	struct jinja_clock clock = test_clock;
	struct jinja_template *t = NULL;
	struct jinja_error le = {0};
	struct buf out = {0}, text = {0};
	bool config = false;
	char *src, *line = NULL;
	size_t n = 0, cap = 0;
	ssize_t len;
	int i = 2, lrc;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--config")) {
			config = true;
		} else if (!strcmp(argv[i], "--clock") && i + 1 < argc) {
			long long s;
			int off;
			if (sscanf(argv[++i], "%lld,%d", &s, &off) != 2)
				return 2;
			clock.unix_s = s;
			clock.utc_offset_s = off;
		} else {
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: test_jinja --render [--config] [--clock S,OFF] TEMPLATE\n");
		return 2;
	}
	src = config ? config_template(argv[i], &n) : read_file(argv[i], &n);
	if (!src) {
		fprintf(stderr, "test_jinja: cannot read a template from %s\n", argv[i]);
		return 1;
	}
	lrc = jinja_load(src, n, &t, &le);
	while ((len = getline(&line, &cap, stdin)) > 0) {
		struct jinja_error e = {0};
		int rc;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (!len)
			continue;
		buf_reset(&text);
		if (lrc) {
			rc = lrc;
			e = le;
		} else {
			rc = jinja_render(t, line, (size_t)len, NULL, &clock, &text, &e);
		}
		put_result(&out, rc, &text, &e);
		fwrite(out.data, 1, out.len, stdout);
	}
	fflush(stdout);
	jinja_free(t);
	free(src);
	free(line);
	buf_free(&out);
	buf_free(&text);
	return 0;
}

/* `--cases`: each stdin line {"template": T, "vars": V} rendered on its own (the template loaded
 * for that line), written as --render writes. For the differential fuzzing of
 * tests/e2e/jinja_fuzz.py. */
static int cases_mode(void)
{
	struct buf out = {0}, text = {0}, vars = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	while ((len = getline(&line, &cap, stdin)) > 0) {
		/* {"template":"...","vars":...}: the string read by cJSON alone, the variables
		 * given to jinja_render as their own text (numbers keep their spelling; NaN and
		 * Infinity, which cJSON refuses, are fine) */
		const char *ts = line + 12, *te = ts, *vs, *ve;
		cJSON *j = NULL;
		const cJSON *tj;
		struct jinja_template *t = NULL;
		struct jinja_error e = {0};
		int rc;

		if (len < 12 || strncmp(line, "{\"template\":\"", 13)) {
			fprintf(stderr,
				"test_jinja --cases: a line not {\"template\":...,\"vars\":...}\n");
			return 1;
		}
		for (te = ts + 1; *te && *te != '"'; te++)
			if (*te == '\\' && te[1])
				te++;
		j = cJSON_ParseWithLength(ts, (size_t)(te + 1 - ts));
		tj = j;
		vs = te + 1;
		if (!cJSON_IsString(tj) || strncmp(vs, ",\"vars\":", 8)) {
			cJSON_Delete(j);
			fprintf(stderr,
				"test_jinja --cases: a line not {\"template\":...,\"vars\":...}\n");
			return 1;
		}
		vs += 8;
		ve = line + len;
		while (ve > vs && (ve[-1] == '\n' || ve[-1] == '\r' || ve[-1] == ' '))
			ve--;
		if (ve > vs && ve[-1] == '}')
			ve--; /* the line's closing brace */
		buf_reset(&vars);
		buf_append(&vars, vs, (size_t)(ve - vs));
		buf_reset(&text);
		rc = jinja_load(tj->valuestring, strlen(tj->valuestring), &t, &e);
		if (rc == 0)
			rc = jinja_render(t, vars.data, vars.len, NULL, &test_clock, &text, &e);
		put_result(&out, rc, &text, &e);
		fwrite(out.data, 1, out.len, stdout);
		jinja_free(t);
		cJSON_Delete(j);
	}
	fflush(stdout);
	free(line);
	buf_free(&out);
	buf_free(&text);
	buf_free(&vars);
	return 0;
}

/* --- the table ---------------------------------------------------------------------------------
 */

struct tcase {
	const char *what, *tmpl, *vars;
	const char *want;   /* expected text, or NULL when an error is expected */
	int status;	    /* expected status when want is NULL */
	const char *errmsg; /* expected message (NULL: any) */
};

#define OK(w, t, v, out)                                                                           \
	{                                                                                          \
		w, t, v, out, 0, NULL                                                              \
	}
#define ERR(w, t, v, st, msg)                                                                      \
	{                                                                                          \
		w, t, v, NULL, st, msg                                                             \
	}

static const struct tcase cases[] = {
    /* whitespace control, trim_blocks, lstrip_blocks */
    OK("text alone", "hello", "{}", "hello"),
    OK("one trailing newline dropped", "a\n", "{}", "a"),
    OK("only one trailing newline dropped", "a\n\n", "{}", "a\n"),
    OK("CRLF normalized", "a\r\nb\rc", "{}", "a\nb\nc"),
    OK("trim_blocks drops the newline after %}", "{% if true %}\nx{% endif %}\n", "{}", "x"),
    OK("lstrip_blocks strips indentation before {%", "a\n    {% if true %}b{% endif %}", "{}",
       "a\nb"),
    OK("lstrip_blocks does not apply to {{", "a\n  {{ 1 }}", "{}", "a\n  1"),
    OK("{%+ keeps the indentation", "a\n  {%+ if true %}b{% endif %}", "{}", "a\n  b"),
    OK("{%- strips all white space before", "a \n\t {%- if true %}b{% endif %}", "{}", "ab"),
    OK("-%} strips all white space after", "{% if true -%}  \n\n b{% endif %}", "{}", "b"),
    OK("{{- and -}}", "a  {{- 1 -}}  b", "{}", "a1b"),
    OK("comments vanish, with trim", "a{# c #}\nb", "{}", "ab"),
    OK("comment with dashes", "a  {#- c -#}  b", "{}", "ab"),
    OK("lstrip after a tag ending a line", "{% if true %}\n  {% if true %}x{% endif %}{% endif %}",
       "{}", "x"),
    OK("no lstrip mid-line", "{{ 'a' }}  {% if true %}x{% endif %}", "{}", "a  x"),
    OK("}} inside a dict literal", "{{ {'a': {'b': 1}} }}", "{}", "{'a': {'b': 1}}"),
    /* printing as Python */
    OK("None True False", "{{ none }} {{ true }} {{ False }}", "{}", "None True False"),
    OK("floats as repr", "{{ 1.0 }} {{ 1e-05 }} {{ 1e16 }} {{ 0.1 }} {{ 1.5e300 }} {{ 123.456 }}",
       "{}", "1.0 1e-05 1e+16 0.1 1.5e+300 123.456"),
    OK("float repr from JSON", "{{ a }} {{ b }} {{ c }}", "{\"a\":1,\"b\":1.0,\"c\":1e5}",
       "1 1.0 100000.0"),
    OK("containers as repr", "{{ [1, 'a', none, 2.5, (1,), ()] }}", "{}",
       "[1, 'a', None, 2.5, (1,), ()]"),
    OK("dict repr", "{{ d }}", "{\"d\":{\"k\":[true,null],\"q\":\"it's\"}}",
       "{'k': [True, None], 'q': \"it's\"}"),
    OK("repr escapes", "{{ ['a\\nb', 'x\"y\\'z', '\\\\'] }}", "{}",
       "['a\\nb', 'x\"y\\'z', '\\\\']"),
    OK("repr of control characters", "{{ [s] }}", "{\"s\":\"\\u0001\\u007f\\u00a0é\"}",
       "['\\x01\\x7f\\xa0é']"),
    OK("string filter is str()", "{{ {'a': 1}|string }}", "{}", "{'a': 1}"),
    OK("tuple printing", "{{ (1, 2) }}", "{}", "(1, 2)"),
    OK("print a tuple expression", "{{ 1, 2 }}", "{}", "(1, 2)"),
    OK("namespace printing", "{{ namespace(a=1) }}", "{}", "<Namespace {'a': 1}>"),
    OK("macro printing", "{% macro m() %}{% endmacro %}{{ m }}", "{}", "<Macro 'm'>"),
    OK("range printing", "{{ range(3) }} {{ range(1, 5, 2) }}", "{}", "range(0, 3) range(1, 5, 2)"),
    OK("dict views", "{{ {'a': 1}.items() }} {{ {'a': 1}.keys() }}", "{}",
       "dict_items([('a', 1)]) dict_keys(['a'])"),
    OK("negative zero", "{{ -0.0 }} {{ 0 * -1 }}", "{}", "-0.0 0"),
    OK("inf and nan", "{{ x }} {{ -x }} {{ [x] }}", "{\"x\":Infinity}", "inf -inf [inf]"),
    /* literals */
    OK("adjacent strings concatenate", "{{ 'a' \"b\" 'c' }}", "{}", "abc"),
    OK("string escapes", "{{ '\\x41\\u00e9\\t|\\q' }}", "{}", "Aé\t|\\q"),
    OK("integer with underscores", "{{ 1_000 }}", "{}", "1000"),
    OK("hex literal", "{{ 0x1F }}", "{}", "31"),
    /* arithmetic */
    OK("int arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 2 ** 10 }}", "{}",
       "3 -4 -2 2 1024"),
    OK("true division is float", "{{ 4 / 2 }} {{ 1 / 4 }}", "{}", "2.0 0.25"),
    OK("float floor and modulo", "{{ 7.5 // 2 }} {{ -7.5 % 2 }}", "{}", "3.0 0.5"),
    OK("string times int", "{{ 'ab' * 3 }}|{{ 2 * 'x' }}|{{ 'a' * -1 }}", "{}", "ababab|xx|"),
    OK("list concatenation", "{{ [1] + [2] }} {{ [0] * 2 }}", "{}", "[1, 2] [0, 0]"),
    OK("bool arithmetic", "{{ true + 1 }} {{ -true }}", "{}", "2 -1"),
    OK("tilde concatenation", "{{ 1 ~ 'a' ~ none ~ u }}", "{}", "1aNone"),
    OK("unary minus binds before a filter", "{{ -1|abs }}", "{}", "1"),
    OK("is binds tighter than +", "{{ 1 + 1 is number }}", "{}", "2"),
    ERR("str + int is a TypeError", "{{ 'a' + 1 }}", "{}", JINJA_TYPE,
	"can only concatenate str (not \"int\") to str"),
    ERR("int + str", "{{ 1 + 'a' }}", "{}", JINJA_TYPE,
	"unsupported operand type(s) for +: 'int' and 'str'"),
    ERR("division by zero", "{{ 1 / 0 }}", "{}", JINJA_TYPE, "division by zero"),
    ERR("modulo by zero", "{{ 1 % 0 }}", "{}", JINJA_TYPE, "integer modulo by zero"),
    ERR("integer overflow is refused, not wrapped", "{{ 9223372036854775807 + 1 }}", "{}",
	JINJA_UNSUPPORTED, NULL),
    /* comparisons and logic */
    OK("chained comparison", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }}", "{}", "True False"),
    OK("deep equality", "{{ {'a': [1, 2]} == {'a': [1, 2.0]} }} {{ [1] == (1,) }}", "{}",
       "True False"),
    OK("1 == 1.0 == True", "{{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' == 'a' }}", "{}",
       "True True True"),
    OK("and/or return operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ [] and 1 }}", "{}", "x b []"),
    OK("in and not in",
       "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", "{}",
       "True True True True"),
    OK("in undefined is false", "{{ 1 in u }}", "{}", "False"),
    OK("conditional expression", "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}]",
       "{}", "y n []"),
    ERR("ordering str and int", "{{ 'a' < 1 }}", "{}", JINJA_TYPE,
	"'<' not supported between instances of 'str' and 'int'"),
    /* undefined */
    OK("undefined prints empty", "[{{ u }}]", "{}", "[]"),
    OK("missing attribute of a dict is undefined", "[{{ d.x }}]", "{\"d\":{}}", "[]"),
    OK("undefined is false and has length 0", "{{ u|length }} {{ not u }}", "{}", "0 True"),
    OK("missing list element is undefined", "[{{ [1][5] }}]", "{}", "[]"),
    ERR("attribute of undefined raises", "{{ u.a }}", "{}", JINJA_UNDEFINED, "'u' is undefined"),
    ERR("two levels", "{{ d.a.b }}", "{\"d\":{}}", JINJA_UNDEFINED,
	"'dict object' has no attribute 'a'"),
    ERR("element message", "{{ [1][5].x }}", "{}", JINJA_UNDEFINED, "list object has no element 5"),
    ERR("arithmetic on undefined", "{{ u + 1 }}", "{}", JINJA_UNDEFINED, "'u' is undefined"),
    ERR("inline if without else, then used", "{{ (1 if false).x }}", "{}", JINJA_UNDEFINED,
	"the inline if-expression on line 1 evaluated to false and no else section was defined."),
    /* statements and scoping */
    OK("if elif else",
       "{% for i in [1, 2, 3] %}{% if i == 1 %}a{% elif i == 2 %}b{% else %}c{% endif %}{% endfor "
       "%}",
       "{}", "abc"),
    OK("for body is its own scope",
       "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}",
       "{}", "111,111,1"),
    OK("set inside if is not scoped", "{% if true %}{% set x = 5 %}{% endif %}{{ x }}", "{}", "5"),
    OK("namespace carries out of loops",
       "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor "
       "%}{{ ns.n }}",
       "{}", "3"),
    OK("loop attributes",
       "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 "
       "}}{{ loop.first|int }}{{ loop.last|int }}{{ loop.length }} {% endfor %}",
       "{}", "0132103 1221003 2310013 "),
    OK("previtem and nextitem",
       "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}", "{}",
       "-2,1-3,2-,"),
    OK("filtered loop counts kept items",
       "{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }} {% endfor %}",
       "{}", "1/2 2/2 "),
    OK("for else", "{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty"),
    OK("tuple unpacking", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
       "{}", "a=1;b=2;"),
    OK("break and continue",
       "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break "
       "%}{% endif %}{{ i }}{% endfor %}",
       "{}", "023"),
    OK("rebinding a variable at top level",
       "{% set messages = messages[1:] %}{{ messages|length }}", "{\"messages\":[1,2,3]}", "2"),
    OK("set block", "{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]", "{}", "[a1b]"),
    OK("set tuple", "{% set a, b = 1, 2 %}{{ b }}{{ a }}", "{}", "21"),
    OK("macro with defaults and keywords",
       "{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "{}",
       "1B23"),
    OK("macro sees the top level when called",
       "{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}", "{}", "6"),
    OK("macro does not see the caller's loop",
       "{% macro m() %}{{ x }}{% endmacro %}{% for x in [1] %}{{ m() }}{% endfor %}", "{\"x\":9}",
       "9"),
    OK("recursive macro",
       "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
       "{}", "321"),
    OK("macro result is a string", "{% macro m() %}ab{% endmacro %}{{ m()|length }}{{ m() + 'c' }}",
       "{}", "2abc"),
    OK("missing macro parameter is undefined", "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}",
       "{}", "[]"),
    ERR("too many macro arguments", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{}", JINJA_TYPE,
	"macro 'm' takes not more than 1 argument(s)"),
    OK("generation renders its body", "{% generation %}x{{ 1 }}{% endgeneration %}", "{}", "x1"),
    /* filters */
    OK("trim", "[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}]", "{}", "[a b][a]"),
    OK("tojson", "{{ d|tojson }}", "{\"d\":{\"a\":[1,1.0,\"é\\n\",null,true]}}",
       "{\"a\": [1, 1.0, \"é\\n\", null, true]}"),
    OK("tojson indent", "{{ d|tojson(indent=2) }}", "{\"d\":{\"a\":[1],\"b\":{}}}",
       "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}"),
    OK("tojson sort_keys, separators, ensure_ascii",
       "{{ d|tojson(sort_keys=true, separators=(',', ':'), ensure_ascii=true) }}",
       "{\"d\":{\"b\":\"é😀\",\"a\":1}}", "{\"a\":1,\"b\":\"\\u00e9\\ud83d\\ude00\"}"),
    ERR("tojson of undefined", "{{ u|tojson }}", "{}", JINJA_TYPE,
	"Object of type Undefined is not JSON serializable"),
    OK("length counts code points", "{{ 'é😀'|length }} {{ [1, 2]|length }} {{ {'a': 1}|count }}",
       "{}", "2 2 1"),
    OK("list of a string", "{{ 'ab'|list }}", "{}", "['a', 'b']"),
    OK("join",
       "{{ [1, 'a', none]|join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}]|join('-', attribute='n') }}",
       "{}", "1, a, None x-y"),
    OK("map attribute", "{{ [{'n': 1}, {}]|map(attribute='n', default=0)|list }}", "{}", "[1, 0]"),
    OK("map filter", "{{ ['a', 'b']|map('upper')|join }}", "{}", "AB"),
    OK("selectattr and rejectattr",
       "{{ m|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}{{ "
       "m|rejectattr('role', 'equalto', 'user')|map(attribute='c')|join }}",
       "{\"m\":[{\"role\":\"user\",\"c\":\"1\"},{\"role\":\"bot\",\"c\":\"2\"}]}", "12"),
    OK("selectattr undefined", "{{ m|selectattr('t', 'undefined')|list|length }}",
       "{\"m\":[{\"t\":1},{}]}", "1"),
    OK("select", "{{ [0, 1, 2, 3]|select('odd')|list }} {{ [0, 1, '']|select|list }}", "{}",
       "[1, 3] [1]"),
    OK("default", "{{ u|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }}", "{}",
       "d  d"),
    OK("first and last", "{{ [1, 2]|first }}{{ [1, 2]|last }}{{ 'ab'|last }}", "{}", "12b"),
    OK("upper lower", "{{ 'aB'|upper }}{{ 'aB'|lower }}", "{}", "ABab"),
    OK("replace filter", "{{ 'aaa'|replace('a', 'b', 2) }}", "{}", "bba"),
    OK("items", "{% for k, v in {'x': 1}|items %}{{ k }}{{ v }}{% endfor %}", "{}", "x1"),
    OK("title (jinja2's)", "{{ \"hello wORLD it's-x\"|title }}", "{}", "Hello World It's-X"),
    OK("int and float", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ '2.5'|float }}", "{}",
       "42 4 7 2.5"),
    OK("reverse", "{{ 'abc'|reverse }} {{ [1, 2]|reverse|list }}", "{}", "cba [2, 1]"),
    /* tests */
    OK("type tests",
       "{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is string "
       "}}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ none is none }}",
       "{}", "TrueTrueTrueTrueTrueTrueTrueTrueTrue"),
    OK("false and true are identity tests",
       "{{ false is false }}{{ 0 is false }}{{ none is false }}", "{}", "TrueFalseFalse"),
    OK("defined", "{{ u is defined }}{{ u is undefined }}{{ d.x is defined }}", "{\"d\":{}}",
       "FalseTrueFalse"),
    OK("test without parentheses", "{{ 2 is divisibleby 2 }}{{ 3 is equalto 3 }}", "{}",
       "TrueTrue"),
    OK("is not", "{{ none is not none }}", "{}", "False"),
    /* methods */
    OK("strip family",
       "[{{ '  a  '.strip() }}][{{ '\\n\\na\\n'.lstrip('\\n') }}][{{ 'xay'.rstrip('y') }}]", "{}",
       "[a][a\n][xa]"),
    OK("split",
       "{{ ' a  b '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ "
       "'a,b,c'.rsplit(',', 1) }}",
       "{}", "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a,b', 'c']"),
    OK("startswith endswith", "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}", "{}",
       "TrueTrue"),
    OK("str methods",
       "{{ 'ab'.upper() }}{{ 'hello world'.title() }}{{ 'aXb'.replace('X', '-') }}{{ "
       "'abc'.find('c') }}",
       "{}", "ABHello Worlda-b2"),
    OK("dict methods",
       "{{ d.get('a') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }}",
       "{\"d\":{\"a\":1}}", "1 0 ['a'] [1]"),
    OK("dict method wins over a key", "{{ d.items()|list }}", "{\"d\":{\"items\":5}}",
       "[('items', 5)]"),
    OK("key lookup through getattr", "{{ d.content }}", "{\"d\":{\"content\":\"c\"}}", "c"),
    /* strings by code point */
    OK("index and slice by code point", "{{ s[1] }} {{ s[-1] }} {{ s[1:] }} {{ s[::-1] }}",
       "{\"s\":\"é😀x\"}", "😀 x 😀x x😀é"),
    OK("slices of lists", "{{ [1, 2, 3][1:] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3][:-1] }}", "{}",
       "[2, 3] [3, 2, 1] [1, 2]"),
    /* JSON input */
    OK("repeated key: last value, first place", "{{ d }}", "{\"d\":{\"a\":1,\"b\":2,\"a\":3}}",
       "{'a': 3, 'b': 2}"),
    OK("NUL inside a value", "{{ s|length }}", "{\"s\":\"a\\u0000b\"}", "3"),
    /* globals */
    OK("strftime_now with the supplied clock", "{{ strftime_now('%d %b %Y %H:%M') }}", "{}",
       "14 Nov 2023 22:13"),
    OK("strftime_now is defined", "{{ strftime_now is defined }}", "{}", "True"),
    ERR("raise_exception", "{{ raise_exception('Conversation roles must alternate!') }}", "{}",
	JINJA_RAISED, "Conversation roles must alternate!"),
    ERR("range beyond the sandbox's bound", "{{ range(100001)|length }}", "{}", JINJA_TYPE,
	"Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."),
    /* the sandbox */
    OK("dunder attribute prints empty", "[{{ d.__class__ }}]", "{\"d\":{}}", "[]"),
    OK("underscore key of a dict is fine", "{{ d._a }}", "{\"d\":{\"_a\":1}}", "1"),
    ERR("list.append refused", "{{ [].append(1) }}", "{}", JINJA_SECURITY,
	"access to attribute 'append' of 'list' object is unsafe."),
    ERR("dict.update refused", "{{ {}.update({}) }}", "{}", JINJA_SECURITY,
	"access to attribute 'update' of 'dict' object is unsafe."),
    /* refused at load, naming it */
    ERR("unknown filter", "{{ 1|nosuch }}", "{}", JINJA_SYNTAX, "No filter named 'nosuch'."),
    ERR("jinja2 filter not implemented", "{{ [1]|batch(2) }}", "{}", JINJA_UNSUPPORTED,
	"the filter 'batch'"),
    ERR("statement not implemented", "{% include 'x' %}", "{}", JINJA_UNSUPPORTED,
	"the include statement"),
    ERR("cycler refused", "{{ cycler(1) }}", "{}", JINJA_UNSUPPORTED, "the name 'cycler'"),
    ERR("method not implemented", "{{ 'a'.zfill(3) }}", "{}", JINJA_UNSUPPORTED,
	"the method 'zfill'"),
    ERR("syntax error", "{% if %}", "{}", JINJA_SYNTAX, NULL),
    ERR("unclosed block", "{% if true %}x", "{}", JINJA_SYNTAX, NULL),
    ERR("unclosed comment", "{# x", "{}", JINJA_SYNTAX, NULL),
    ERR("break outside a loop", "{% break %}", "{}", JINJA_SYNTAX, NULL),
};

static int run_case(const struct tcase *c, const struct jinja_limits *lim, struct buf *out,
		    struct jinja_error *e)
{
	struct jinja_template *t = NULL;
	int rc = jinja_load(c->tmpl, strlen(c->tmpl), &t, e);

	buf_reset(out);
	if (rc == 0)
		rc = jinja_render(t, c->vars, strlen(c->vars), lim, &test_clock, out, e);
	jinja_free(t);
	return rc;
}

static void test_table(void)
{
	struct buf out = {0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct tcase *c = &cases[i];
		struct jinja_error e = {0};
		int rc = run_case(c, NULL, &out, &e);
		const char *text = out.data ? out.data : "";
		bool pass;

		if (c->want)
			pass = rc == 0 && !strcmp(text, c->want);
		else
			pass = rc == c->status && (!c->errmsg || !strcmp(e.msg, c->errmsg));
		if (!CHECK(pass, "%s", c->what)) {
			printf("#   template [%s]\n#   rc %d (%s: %s)\n#   got  [%s]\n", c->tmpl,
			       rc, jinja_status_name(e.status), e.msg, text);
			if (c->want)
				printf("#   want [%s]\n", c->want);
			else
				printf("#   want %s [%s]\n", jinja_status_name(c->status),
				       c->errmsg ? c->errmsg : "");
		}
	}
	buf_free(&out);
}

static int table_mode(void)
{
	struct buf o = {0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		buf_reset(&o);
		buf_puts(&o, "{\"template\":");
		buf_json_str(&o, cases[i].tmpl, strlen(cases[i].tmpl));
		buf_printf(&o, ",\"vars\":%s}\n", cases[i].vars);
		fwrite(o.data, 1, o.len, stdout);
	}
	buf_free(&o);
	return 0;
}

/* --- bounds ---------------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void expect_limit(const char *what, const char *tmpl, const struct jinja_limits *lim)
{
	struct tcase c = {what, tmpl, "{}", NULL, JINJA_LIMIT, NULL};
	struct buf out = {0};
	struct jinja_error e = {0};
	double t0 = now_s();
	int rc = run_case(&c, lim, &out, &e);
	double dt = now_s() - t0;

	if (!CHECK(rc == JINJA_LIMIT && dt < 2.0 && out.len == 0, "%s: a limit error (%.3f s)",
		   what, dt))
		printf("#   rc %d (%s: %s)\n", rc, jinja_status_name(e.status), e.msg);
	buf_free(&out);
}

static void test_bounds(void)
{
	struct jinja_limits lim;

	jinja_limits_default(&lim);
	expect_limit(
	    "nested loops beyond the iteration bound",
	    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
	    &lim);
	expect_limit("unbounded recursion",
		     "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &lim);
	expect_limit("string multiplication", "{{ 'x' * 1000000000 }}", &lim);
	expect_limit("doubling strings",
		     "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + "
		     "ns.s %}{% endfor %}",
		     &lim);
	expect_limit("output bound", "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
		     &lim);
	lim.steps = 1000;
	expect_limit("step bound", "{% for i in range(10000) %}{{ i }}{% endfor %}", &lim);
	jinja_limits_default(&lim);
	lim.mem_bytes = 1 << 20;
	expect_limit("memory bound",
		     "{% set ns = namespace(l=[]) %}{% for i in range(50000) %}{% set ns.l = ns.l "
		     "+ [i] %}{% endfor %}",
		     &lim);
	{
		/* deep nesting in the source: refused at load, no stack overflow */
		size_t n = 100000;
		char *s = malloc(n * 2 + 16);
		struct jinja_template *t = NULL;
		struct jinja_error e = {0};
		int rc;
		memcpy(s, "{{ ", 3);
		for (size_t i = 0; i < n; i++)
			s[3 + i] = '(';
		s[3 + n] = '1';
		for (size_t i = 0; i < n; i++)
			s[4 + n + i] = ')';
		memcpy(s + 4 + 2 * n, " }}", 4);
		rc = jinja_load(s, strlen(s), &t, &e);
		CHECK(rc == JINJA_UNSUPPORTED, "100,000 nested parentheses refused at load (%s)",
		      e.msg);
		jinja_free(t);
		for (size_t i = 0; i < n; i++)
			s[3 + i] = '[';
		for (size_t i = 0; i < n; i++)
			s[4 + n + i] = ']';
		rc = jinja_load(s, strlen(s), &t, &e);
		CHECK(rc == JINJA_UNSUPPORTED, "100,000 nested lists refused at load");
		jinja_free(t);
		free(s);
	}
}

static void test_api(void)
{
	struct jinja_template *t = NULL;
	struct jinja_error e = {0};
	struct buf out = {0};
	int rc;

	rc = jinja_load("{{ a }}", 7, &t, &e);
	CHECK(rc == 0, "load");
	buf_puts(&out, "keep");
	rc = jinja_render(t, "[1]", 3, NULL, &test_clock, &out, &e);
	CHECK(rc == JINJA_INPUT && out.len == 4, "variables not an object: refused, out untouched");
	rc = jinja_render(t, "{\"a\":", 5, NULL, &test_clock, &out, &e);
	CHECK(rc == JINJA_INPUT && out.len == 4, "variables not JSON: refused");
	rc = jinja_render(t, "{\"a\":123456789012345678901234}", 30, NULL, &test_clock, &out, &e);
	CHECK(rc == JINJA_UNSUPPORTED, "an integer beyond 64 bits in the variables: refused");
	rc = jinja_render(t, "{\"a\":\"\\ud800\"}", 14, NULL, &test_clock, &out, &e);
	CHECK(rc == JINJA_INPUT, "a lone surrogate in the variables: refused");
	rc = jinja_render(t, "{\"a\":\"x\"}", 9, NULL, &test_clock, &out, &e);
	CHECK(rc == 0 && !strcmp(out.data, "keepx"), "render appends");
	jinja_free(t);
	buf_free(&out);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--render"))
		return render_mode(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "--table"))
		return table_mode();
	if (argc > 1 && !strcmp(argv[1], "--cases"))
		return cases_mode();
	test_table();
	test_bounds();
	test_api();
	return tap_done();
}
