// SPDX-License-Identifier: Apache-2.0
/* Unit tests of userspace/prompt/regex: refusals named at compile time, each construct, case
 * folding, lookahead, ill-formed UTF-8, the step and stack bounds, and the exact matches of each
 * model family's Split pattern on hand-picked strings (contractions, digit runs, \r\n runs,
 * trailing white space, CJK, marks, letters and digits new in Unicode 15 and 16). The expected
 * matches of the family patterns were produced by the reference (HF tokenizers 0.22 through
 * tests/js/ref_split.mjs); tests/e2e/test_regex_parity.sh checks thousands more at test time. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "prompt/regex.h"
#include "prompt/unicode_tables.h"
#include "tap.h"

/* The Split patterns of the families, as the regex text of their tokenizer.json (JSON unescaped;
 * in DeepSeek's B3 the \r and \n are literal CR and LF characters). */
#define PAT_LLAMA3                                                                                 \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "                 \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN2                                                                                  \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                      \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_B1 "\\p{N}{1,3}"
#define PAT_B2 "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+"
#define PAT_B3                                                                                     \
	"[!\"#$%&'()*+,\\-./"                                                                      \
	":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "           \
	"?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define PAT_GPTOSS                                                                                 \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]" \
	"+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"                                                          \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]" \
	"*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"                                                          \
	"\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_NEMO                                                                                   \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]" \
	"+|"                                                                                       \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]" \
	"*|"                                                                                       \
	"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const family_names[] = {"llama3",	  "qwen2",  "deepseek_b1", "deepseek_b2",
					   "deepseek_b3", "gptoss", "nemo"};
static const char *const family_pats[] = {PAT_LLAMA3, PAT_QWEN2,  PAT_B1,  PAT_B2,
					  PAT_B3,     PAT_GPTOSS, PAT_NEMO};
#define NFAM 7

/* pat for a TAP line: control characters as \xHH (two buffers, for two calls in one line). */
static const char *show(const char *pat)
{
	static char buf[2][512];
	static int which;
	char *o = buf[which ^= 1];
	size_t k = 0;

	for (; *pat && k < sizeof(buf[0]) - 5; pat++)
		if ((unsigned char)*pat < 0x20)
			k += (size_t)snprintf(o + k, 5, "\\x%02x", (unsigned char)*pat);
		else
			o[k++] = *pat;
	o[k] = 0;
	return o;
}

static unsigned opts; /* each test runs twice: the direct backtracker, then REGEX_PROGRAM_ONLY */

static struct regex *compile(const char *pat)
{
	char err[256];
	struct regex *re = regex_compile_opts(pat, strlen(pat), opts, err, sizeof(err));

	if (!re)
		printf("# compile %s: %s\n", show(pat), err);
	return re;
}

/* All matches of re in s[0..n) as the reference iterates them, "s,e" joined by spaces; empty
 * matches included when with_empty. */
static const char *matches(const struct regex *re, const char *s, size_t n, int with_empty)
{
	static char out[8192];
	struct regex_iter it = {0};
	size_t a, b, k = 0;
	int r;

	out[0] = 0;
	while ((r = regex_next(re, (const uint8_t *)s, n, &it, &a, &b)) == 1) {
		if (a == b && !with_empty)
			continue;
		k += (size_t)snprintf(out + k, sizeof(out) - k, "%s%zu,%zu", k ? " " : "", a, b);
		if (k >= sizeof(out) - 32)
			break;
	}
	if (r < 0)
		snprintf(out + k, sizeof(out) - k, "%serror %d", k ? " " : "", r);
	return out;
}

/* The matches of pat in text (a C string), empty ones included. */
static int match_is(const char *pat, const char *text, const char *want)
{
	struct regex *re = compile(pat);
	int ok;

	if (!re)
		return CHECK(0, "/%s/ compiles", pat);
	const char *got = matches(re, text, strlen(text), 1);
	ok = CHECK(!strcmp(got, want), "/%s/ on \"%s\": %s", show(pat), show(text), want);
	if (!ok)
		printf("#   got %s\n", got);
	regex_free(re);
	return ok;
}

/* Constructs, one pattern each; want: the reference's matches (tests/js/ref_split.mjs). */
static const struct {
	const char *pat, *text, *want;
} constructs[] = {
    {"a|ab", "abab", "0,1 2,3"},
    {"ab|a", "abab", "0,2 2,4"},
    {"(a|ab)(c|bcd)", "abcd", "0,4"},
    {"(\077:ab)+", "ababa ab", "0,4 6,8"},
    {"x(\077:ab){2}", "xababab xab", "0,5"},
    {"x(\077:ab){1,2}\077", "xabab", "0,3"},
    {"x(\077:ab){2,}", "xab xababab", "4,11"},
    {"a{2}", "aaaaa", "0,2 2,4"},
    {"a{2,3}", "aaaaaaa", "0,3 3,6"},
    {"a{2,}", "a aa aaaa", "2,4 5,9"},
    {"a{,2}b", "aaab", "1,4"},
    {"a+\077b", "aaab", "0,4"},
    {"a*\077b", "xaab", "1,4"},
    {"a\077\077b", "aab", "1,3"},
    {"a.c", "abc a\012c a\303\251c", "0,3 8,12"},
    {"\134s+", "a \011\343\200\200\302\205\341\240\216 b", "1,8 11,12"},
    {"\134S+", "ab c\302\240d", "0,2 3,4 6,7"},
    {"\134d+", "12\331\243\302\262\342\205\247 x", "0,4"},
    {"\134D+", "12ab3", "2,4"},
    {"\134w+", "\302\262\302\274x\302\255", "0,5"}, /* Oniguruma's Latin-1 word characters */
    {"\134w+", "ab_1\303\251\314\201\342\205\247\342\200\215-x\342\221\240", "0,11 15,16"},
    {"\134W+", "a-+ b", "1,4"},
    {"[a-c]+", "abcd", "0,3"},
    {"[^a-c]+", "abcdxy", "3,6"},
    {"[\134-a]+", "a-b", "0,2"},
    {"[a-]+", "a-b", "0,2"},
    {"[-a]+", "a-b", "0,2"},
    {"[\134]\134[]+", "a[]b", "1,3"},
    {"[\134\134]+", "a\134\134b", "1,3"},
    {"[\134t\134n]+", "a\011\012b", "1,3"},
    {"\134p{Lu}+", "abCDe\307\205", "2,4"},
    {"\134p{Ll}+", "abCDe", "0,2 4,5"},
    {"\134p{Lt}", "A\307\205a", "1,3"},
    {"\134p{Lm}", "a\312\260b", "1,3"},
    {"\134p{Lo}+", "a\344\270\255\346\226\207b", "1,7"},
    {"\134p{M}+", "e\314\201\314\210x\342\203\235", "1,5 6,9"},
    {"\134p{Mn}", "e\314\201\340\244\203", "1,3"},
    {"\134p{Mc}", "e\314\201\340\244\203", "3,6"},
    {"\134p{P}+", "a.,;!b", "1,5"},
    {"\134p{S}+", "a$+^`b", "1,5"},
    {"\134p{Sc}", "a$\342\202\254b", "1,2 2,5"},
    {"\134p{Nd}+", "12\302\262", "0,2"},
    {"\134p{No}+", "12\302\262", "2,4"},
    {"\134p{Nl}", "\342\205\247", "0,3"},
    {"\134p{Zs}+", "a \343\200\200\011b", "1,5"},
    {"\134p{Cc}+", "a\011\001b", "1,3"},
    {"\134p{Cf}", "a\342\200\215b", "1,4"},
    {"\134P{L}+", "ab12 cd", "2,5"},
    {"\134p{^L}+", "ab12 cd", "2,5"},
    {"[\134P{L}]+", "ab12 cd", "2,5"},
    {"[^\134P{L}]+", "ab12 cd", "0,2 5,7"},
    {"\134p{Letter}+", "ab1", "0,2"},
    {"\134p{Uppercase_Letter}+", "aBC", "1,3"},
    {"\134p{uppercase letter}+", "aBC", "1,3"},
    {"[\134p{L}\134p{N}]+", "a1 b", "0,2 3,4"},
    {"[^\134s\134p{L}]+", "a1. b", "1,3"},
    {"(\077i:'s|'t)", "'S 's 'T '\305\277", "0,2 3,5 6,8 9,12"},
    {"(\077i:k)", "kK\342\204\252", "0,1 1,2 2,5"},
    {"(\077i:abc)", "ABC aBc abd", "0,3 4,7"},
    {"(\077i)ab|cd", "AB CD", "0,2 3,5"},
    {"(\077i:\303\251)", "\303\211\303\251", "0,2 2,4"},
    {"(\077i:\317\203)", "\316\243\317\203\317\202", "0,2 2,4 4,6"},
    {"(\077i:\316\270)", "\316\230\316\270\317\221\317\264", "0,2 2,4 4,6 6,8"},
    {"(\077i:i)", "iI\304\260\304\261", "0,1 1,2"},
    {"a(\077!b)", "ab ac a", "3,4 6,7"},
    {"a(\077=b)", "ab ac", "0,1"},
    {"\134s+(\077!\134S)", "a   b  ", "1,3 5,7"},
    {"x(\077!a|b)", "xa xb xc", "6,7"},
    {"(\077:a(\077!b))+", "aaab", "0,2"},
    {"\134x41\134x{1F600}\134u00e9", "A\360\237\230\200\303\251", "0,7"},
    {"\134.\134*\134+\134\077", "a.*+\077", "1,5"},
    {"\134(\134)\134{\134}\134|", "(){}|", "0,5"},
    {"[\015\012]+", "a\015\012b", "1,3"},
    {"\134t", "a\011b", "1,2"},
    {"\344\270\255+", "\344\270\255\344\270\255\346\226\207", "0,6"},
    {"[\344\270\200-\351\276\245]+", "a\344\270\255\346\226\207\351\276\246", "1,7"},
    {"(ab|a)c", "abc ac", "0,3 4,6"},
    {"(a|b)*c", "abbac", "0,5"},
};

static void test_constructs(void)
{
	for (size_t i = 0; i < sizeof(constructs) / sizeof(constructs[0]); i++) {
		struct regex *re = compile(constructs[i].pat);
		const char *got;
		if (!CHECK(re, "/%s/ compiles", show(constructs[i].pat)))
			continue;
		got = matches(re, constructs[i].text, strlen(constructs[i].text), 0);
		if (!CHECK(!strcmp(got, constructs[i].want), "/%s/ matches as the reference (%s)",
			   show(constructs[i].pat), constructs[i].want))
			printf("#   got %s\n", got);
		regex_free(re);
	}
}

/* Empty matches, which the reference's pieces cannot show: Oniguruma's order, and the iteration
 * that skips an empty match right after the previous match. */
static void test_empty(void)
{
	match_is("a*", "baac", "0,0 1,3 4,4");
	match_is("a?", "ab", "0,1 2,2");
	match_is("x*", "", "0,0");
	match_is("(?!a)", "ab", "1,1 2,2");
	match_is("a|", "ab", "0,1 2,2");
	match_is("|a", "ab", "0,0 1,1 2,2");
	match_is("a*?", "aa", "0,0 1,1 2,2");
}

static void test_search(void)
{
	struct regex *re = compile("\\p{N}{1,3}");
	size_t a = 7, b = 7;
	const uint8_t s[] = "ab 12345 \xd9\xa3";

	CHECK(re, "B1 compiles");
	CHECK_EQ(regex_search(re, s, sizeof(s) - 1, 0, &a, &b), 1, "search finds the first digits");
	CHECK(a == 3 && b == 6, "at 3..6 (got %zu..%zu)", a, b);
	CHECK_EQ(regex_search(re, s, sizeof(s) - 1, 4, &a, &b), 1, "search from inside the run");
	CHECK(a == 4 && b == 7, "at 4..7 (got %zu..%zu)", a, b);
	CHECK_EQ(regex_search(re, s, sizeof(s) - 1, 8, &a, &b), 1, "search finds Arabic-Indic 3");
	CHECK(a == 9 && b == 11, "at 9..11 (got %zu..%zu)", a, b);
	CHECK_EQ(regex_search(re, s, 9, 8, &a, &b), 0, "no match in a digitless tail");
	CHECK_EQ(regex_search(re, s, 9, 10, &a, &b), 0, "from past the end: none");
	CHECK(regex_memory(re) > 0, "regex_memory %zu", regex_memory(re));
	regex_free(re);
	regex_free(NULL);
}

static const struct {
	const char *pat, *err;
} refusals[] = {
    {"(a", "missing ')'"},
    {"a)", "unmatched ')'"},
    {"[a", "unterminated character class"},
    {"[]a]", "']' first"},
    {"[b-a]", "empty range"},
    {"*a", "nothing to repeat"},
    {"a|+", "nothing to repeat"},
    {"a**", "quantifier after a quantifier"},
    {"a*+", "possessive"},
    {"a++", "possessive"},
    {"a?+", "possessive"},
    {"a{2}+", "after an interval"},
    {"(?>a)", "atomic group"},
    {"(?<=a)b", "lookbehind"},
    {"(?<!a)b", "lookbehind"},
    {"(?<n>a)", "named group"},
    {"(?P<n>a)", "named group"},
    {"(a)\\1", "backreference"},
    {"\\k<n>", "backreference"},
    {"^a", "anchor '^'"},
    {"a$", "anchor '$'"},
    {"\\ba", "anchor \\b"},
    {"\\Aa", "anchor \\A"},
    {"a\\z", "anchor \\z"},
    {"\\p{Han}", "unsupported property \\p{han}"},
    {"\\p{Alphabetic}", "unsupported property"},
    {"\\pL", "without {"},
    {"[[:alpha:]]", "nested class"},
    {"[a[b]]", "nested class"},
    {"[a&&b]", "intersection"},
    {"(?i:[a-z])", "class inside (?i"},
    {"(?i:\\p{L})", "class escape inside (?i"},
    {"(?i:\xc3\x9f)", "case-folds to several"},
    {"(?i:ss)", "case-folds like U+00DF"},
    {"(?i:st)", "case-folds like"},
    {"a(?i)b", "(?i) after the start"},
    {"(?m:a)", "group option 'm'"},
    {"(?x)a", "group option 'x'"},
    {"(?#c)a", "comment group"},
    {"(?:)*", "can match empty"},
    {"(?:a*)+", "can match empty"},
    {"(?=a)*", "quantifier on a lookahead"},
    {"a{1001}", "above 1000"},
    {"a{3,2}", "max below min"},
    {"a{x}", "not an interval"},
    {"{", "nothing to repeat"},
    {"\\q", "unknown escape \\q"},
    {"\\h", "escape \\h"},
    {"\\R", "escape \\R"},
    {"\\X", "escape \\X"},
    {"\\", "ends with a backslash"},
    {"\\x{110000}", "not a Unicode scalar"},
    {"\\uD800", "not a Unicode scalar"},
    {"\\xZ", "hexadecimal"},
    {"a\xff", "not well-formed UTF-8"},
    {"(?=(?=(?=(?=(?=(?=(?=(?=(?=a)))))))))", "lookaheads nested deeper"},
};

static void test_refusals(void)
{
	char err[256];

	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		struct regex *re =
		    regex_compile(refusals[i].pat, strlen(refusals[i].pat), err, sizeof(err));
		CHECK(!re && strstr(err, refusals[i].err), "/%s/ refused: %s (%s)",
		      show(refusals[i].pat), refusals[i].err, re ? "compiled" : err);
		regex_free(re);
	}
	/* err is always terminated, even when too small; NUL inside the pattern is a literal */
	CHECK(!regex_compile("(", 1, err, 8) && strlen(err) == 7,
	      "a short err buffer is filled and terminated");
	CHECK(!regex_compile("(", 1, NULL, 0), "no err buffer: still refused");
	{
		struct regex *re = regex_compile("a\0b", 3, err, sizeof(err));
		CHECK(re && !strcmp(matches(re, "xa\0b", 4, 0), "1,4"),
		      "a NUL in the pattern matches a NUL");
		regex_free(re);
	}
}

/* The family patterns on strings chosen to reach each rule; want: the reference's matches. */
static const struct {
	const char *text;
	const char *want[NFAM];
} family_cases[] = {
    {"I'm can't WE'LL they'RE he'S \305\277'\305\277 '\305\277 x'\342\204\252 o'\342\204\252ay "
     "'LL'll'Ll",
     {"0,1 1,3 3,7 7,9 9,12 12,15 15,20 20,23 23,26 26,28 28,31 31,34 34,36 36,38 38,40 40,44 "
      "44,46 46,52 52,54 54,56 56,59 59,62",
      "0,1 1,3 3,7 7,9 9,12 12,15 15,20 20,23 23,26 26,28 28,31 31,34 34,36 36,38 38,40 40,44 "
      "44,46 46,52 52,54 54,56 56,59 59,62",
      "", "",
      "0,1 1,3 3,7 7,9 9,12 12,15 15,20 20,23 23,26 26,28 28,31 31,32 32,34 34,36 36,38 38,40 "
      "40,41 41,44 44,46 46,47 47,52 52,54 54,56 56,59 59,62",
      "0,3 3,9 9,15 15,23 23,28 28,34 34,36 36,38 38,40 40,44 44,46 46,52 52,54 54,59 59,62",
      "0,1 1,3 3,7 7,9 9,12 12,15 15,20 20,23 23,26 26,28 28,31 31,34 34,36 36,38 38,40 40,44 "
      "44,46 46,52 52,54 54,56 56,59 59,62"}},
    {"12345678 1 22 333 4444 x12345y",
     {"0,3 3,6 6,8 8,9 9,10 10,11 11,13 13,14 14,17 17,18 18,21 21,22 22,24 24,27 27,29 29,30",
      "0,1 1,2 2,3 3,4 4,5 5,6 6,7 7,8 8,9 9,10 10,11 11,12 12,13 13,14 14,15 15,16 16,17 17,18 "
      "18,19 19,20 20,21 21,22 22,24 24,25 25,26 26,27 27,28 28,29 29,30",
      "0,3 3,6 6,8 9,10 11,13 14,17 18,21 21,22 24,27 27,29", "",
      "8,9 10,11 13,14 17,18 22,24 28,30",
      "0,3 3,6 6,8 8,9 9,10 10,11 11,13 13,14 14,17 17,18 18,21 21,22 22,24 24,27 27,29 29,30",
      "0,1 1,2 2,3 3,4 4,5 5,6 6,7 7,8 8,9 9,10 10,11 11,12 12,13 13,14 14,15 15,16 16,17 17,18 "
      "18,19 19,20 20,21 21,22 22,24 24,25 25,26 26,27 27,28 28,29 29,30"}},
    {"a\015\012\015\012  b\012\012\012 c\015\015\012",
     {"0,1 1,5 5,6 6,8 8,11 11,13 13,16", "0,1 1,5 5,6 6,8 8,11 11,13 13,16", "", "",
      "0,1 1,5 5,6 6,8 8,11 11,13 13,16", "0,1 1,5 5,6 6,8 8,11 11,13 13,16",
      "0,1 1,5 5,6 6,8 8,11 11,13 13,16"}},
    {"trailing   \011  x  ",
     {"0,8 8,13 13,15 15,17", "0,8 8,13 13,15 15,17", "", "", "0,8 8,13 13,15 15,17",
      "0,8 8,13 13,15 15,17", "0,8 8,13 13,15 15,17"}},
    {"\344\270\255\346\226\207\345\255\227\347\254\246\343\203\206\343\202\271\343\203\210 "
     "\346\227\245\346\234\254\350\252\236\343\201\262\343\202\211\343\201\214\343\201\252\343\202"
     "\253\343\202\277\343\202\253\343\203\212\351\276\245\351\276\246",
     {"0,21 21,61", "0,21 21,61", "", "0,21 22,58", "0,21 21,61", "0,21 21,61", "0,21 21,61"}},
    {"e\314\201 a\314\210b \340\244\225\340\244\277 \314\201x",
     {"0,1 1,3 3,5 5,8 8,12 12,15 15,18 18,19", "0,1 1,3 3,5 5,8 8,12 12,15 15,18 18,19", "", "",
      "0,3 3,8 8,15 15,19", "0,3 3,8 8,15 15,19", "0,3 3,8 8,15 15,19"}},
    {"\341\262\211\341\262\212 \352\237\213\352\237\214 "
     "\360\220\265\200\360\220\265\201\360\220\265\211\360\220\265\212 x\360\220\265\202",
     {"0,6 6,13 13,14 14,26 26,30 30,32 32,36",
      "0,6 6,13 13,14 14,18 18,22 22,26 26,30 30,32 32,36", "14,26 32,36", "",
      "0,6 6,13 13,14 22,30 30,32", "0,6 6,13 13,14 14,26 26,30 30,32 32,36",
      "0,6 6,13 13,14 14,18 18,22 22,26 26,30 30,32 32,36"}},
    {"Hello, World! (test) [x] {y} a/b c//d 3.14 -x ...\012",
     {"0,5 5,6 6,12 12,13 13,15 15,19 19,20 20,22 22,23 23,24 24,26 26,27 27,28 28,30 30,32 32,34 "
      "34,36 36,37 37,38 38,39 39,40 40,42 42,44 44,45 45,50",
      "0,5 5,6 6,12 12,13 13,15 15,19 19,20 20,22 22,23 23,24 24,26 26,27 27,28 28,30 30,32 32,34 "
      "34,36 36,37 37,38 38,39 39,40 40,41 41,42 42,44 44,45 45,50",
      "38,39 40,42", "",
      "0,5 5,6 6,12 12,13 13,15 15,19 19,20 20,22 22,23 23,24 24,26 26,27 27,28 28,30 30,32 32,34 "
      "34,36 36,37 37,38 39,40 42,44 44,45 45,50",
      "0,5 5,6 6,12 12,13 13,15 15,19 19,20 20,22 22,23 23,24 24,26 26,27 27,28 28,30 30,32 32,34 "
      "34,36 36,37 37,38 38,39 39,40 40,42 42,44 44,45 45,50",
      "0,5 5,6 6,12 12,13 13,15 15,19 19,20 20,22 22,23 23,24 24,26 26,27 27,28 28,30 30,32 32,34 "
      "34,36 36,37 37,38 38,39 39,40 40,41 41,42 42,44 44,45 45,50"}},
    {"  \302\240\343\200\200x \342\200\250\342\200\251y\302\205z\341\240\216w",
     {"0,4 4,8 8,12 12,16 16,19 19,23", "0,4 4,8 8,12 12,16 16,19 19,23", "", "",
      "0,4 4,8 8,12 12,16 16,19 19,23", "0,4 4,8 8,12 12,16 16,19 19,23",
      "0,4 4,8 8,12 12,16 16,19 19,23"}},
    {"ABCdef DEFghi XYZ abc \307\205ungla \312\260ello A\307\205b",
     {"0,6 6,13 13,17 17,21 21,29 29,36 36,41", "0,6 6,13 13,17 17,21 21,29 29,36 36,41", "", "",
      "0,6 6,13 13,17 17,21 21,29 29,36 36,41", "0,6 6,13 13,17 17,21 21,29 29,36 36,41",
      "0,6 6,13 13,17 17,21 21,29 29,36 36,41"}},
    {"\360\237\230\200\360\237\221\215\360\237\217\275 emoji\342\200\215zwj",
     {"0,12 12,18 18,24", "0,12 12,18 18,24", "", "", "0,12 12,18 18,24", "0,12 12,18 18,24",
      "0,12 12,18 18,24"}},
    {"$x=@y#z ~!\042 \077!a",
     {"0,2 2,4 4,5 5,7 7,11 11,14 14,15", "0,2 2,4 4,5 5,7 7,11 11,14 14,15", "", "",
      "0,2 2,4 4,5 5,7 7,11 11,14 14,15", "0,2 2,4 4,5 5,7 7,11 11,14 14,15",
      "0,2 2,4 4,5 5,7 7,11 11,14 14,15"}},
    {"\011\011code();\015\012\011return 0;\012}",
     {"0,1 1,6 6,11 11,18 18,19 19,20 20,22 22,23", "0,1 1,6 6,11 11,18 18,19 19,20 20,22 22,23",
      "19,20", "", "0,1 1,6 6,11 11,18 18,19 20,22 22,23",
      "0,1 1,6 6,11 11,18 18,19 19,20 20,22 22,23", "0,1 1,6 6,11 11,18 18,19 19,20 20,22 22,23"}},
    {"don't I've we're she'd you'll\012",
     {"0,3 3,5 5,7 7,10 10,13 13,16 16,20 20,22 22,26 26,29 29,30",
      "0,3 3,5 5,7 7,10 10,13 13,16 16,20 20,22 22,26 26,29 29,30", "", "",
      "0,3 3,5 5,7 7,10 10,13 13,16 16,20 20,22 22,26 26,29 29,30",
      "0,5 5,10 10,16 16,22 22,29 29,30",
      "0,3 3,5 5,7 7,10 10,13 13,16 16,20 20,22 22,26 26,29 29,30"}},
    {"'S'T'RE'VE'M'LL'D",
     {"0,2 2,4 4,7 7,10 10,12 12,15 15,17", "0,2 2,4 4,7 7,10 10,12 12,15 15,17", "", "",
      "0,2 2,4 4,7 7,10 10,12 12,15 15,17", "0,4 4,10 10,15 15,17",
      "0,2 2,4 4,7 7,10 10,12 12,15 15,17"}},
    {"   ", {"0,3", "0,3", "", "", "0,3", "0,3", "0,3"}},
    {"a \012", {"0,1 1,3", "0,1 1,3", "", "", "0,1 1,3", "0,1 1,3", "0,1 1,3"}},
    {"x\302\240\302\240y",
     {"0,1 1,3 3,6", "0,1 1,3 3,6", "", "", "0,1 1,3 3,6", "0,1 1,3 3,6", "0,1 1,3 3,6"}},
};

static void test_families(void)
{
	struct regex *re[NFAM];

	for (int f = 0; f < NFAM; f++)
		CHECK(re[f] = compile(family_pats[f]), "%s pattern compiles", family_names[f]);
	for (size_t i = 0; i < sizeof(family_cases) / sizeof(family_cases[0]); i++)
		for (int f = 0; f < NFAM; f++) {
			const char *got;
			if (!re[f])
				continue;
			got = matches(re[f], family_cases[i].text, strlen(family_cases[i].text), 0);
			if (!CHECK(!strcmp(got, family_cases[i].want[f]),
				   "%s on case %zu as the reference", family_names[f], i))
				printf("#   want %s\n#   got  %s\n", family_cases[i].want[f], got);
		}
	for (int f = 0; f < NFAM; f++)
		regex_free(re[f]);
}

/* Ill-formed UTF-8 is read as U+FFFD per maximal subpart, as utf8_get reads it, and a run gives
 * back code points at those boundaries. */
static void test_ill_formed(void)
{
	struct regex *so = compile("\\p{So}+"), *any = compile(".");
	struct regex *back = compile("\\p{So}+\\p{So}x");
	/* E0 A0 (truncated 3-byte), C0 (never valid), 80 (lone), F0 90 80 (truncated 4-byte) */
	const char s[] = "a\xe0\xa0\xc0\x80\xf0\x90\x80x";
	uint32_t c;

	CHECK(so && any && back, "compile");
	CHECK_EQ(utf8_get((const uint8_t *)"\xe0\xa0", 2, &c), 2,
		 "utf8_get: a truncated sequence is one U+FFFD");
	CHECK_EQ(c, 0xFFFD, "U+FFFD");
	CHECK_EQ(utf8_get((const uint8_t *)"\xed\xa0\x80", 3, &c), 1,
		 "utf8_get: a surrogate: 1 byte at a time");
	CHECK_EQ(utf8_get((const uint8_t *)"\xf4\x8f\xbf\xbf", 4, &c), 4, "utf8_get: U+10FFFF");
	CHECK_EQ(c, 0x10FFFF, "U+10FFFF");
	CHECK_STREQ(matches(so, s, sizeof(s) - 1, 0), "1,8",
		    "U+FFFD is So: the run of ill-formed bytes");
	CHECK_STREQ(matches(any, s, sizeof(s) - 1, 0), "0,1 1,3 3,4 4,5 5,8 8,9",
		    ". steps by maximal subparts");
	CHECK_STREQ(matches(back, s, sizeof(s) - 1, 0), "1,9",
		    "a greedy run gives back the last subpart (3 bytes)");
	{
		static const uint8_t t[] = "\xe0\xa0\x80\x80\x80\xc2\x80\xf0\x90\x80\x80\xbf";
		size_t bounds[16], nb = 0;
		for (size_t i = 0; i < sizeof(t) - 1; i += utf8_get(t + i, sizeof(t) - 1 - i, &c))
			bounds[nb++] = i;
		bounds[nb] = sizeof(t) - 1;
		int ok = 1;
		for (size_t k = nb; k > 0; k--)
			ok &= utf8_prev(t, 0, bounds[k]) == bounds[k - 1];
		CHECK(ok, "utf8_prev walks back over utf8_get's boundaries (%zu sequences)", nb);
	}
	regex_free(so);
	regex_free(any);
	regex_free(back);
}

/* The bounds: exponential backtracking and deep loops end in -E2BIG, never a wrong answer. */
static void test_bounds(void)
{
	struct regex *exp = compile("(?:a|a)*b"), *loop = compile("(?:ab)*c"),
		     *ok = compile("\\s+(?!\\S)");
	char *s = malloc(200001);
	size_t a, b;

	memset(s, 'a', 64);
	CHECK_EQ(regex_search(exp, (const uint8_t *)s, 64, 0, &a, &b), -E2BIG,
		 "exponential search: -E2BIG");
	for (int i = 0; i < 2000; i++)
		memcpy(s + 2 * i, "ab", 2);
	CHECK_EQ(regex_search(loop, (const uint8_t *)s, 4000, 0, &a, &b), -E2BIG,
		 "a loop deeper than the stack: -E2BIG");
	s[20] = 'c';
	CHECK_EQ(regex_search(loop, (const uint8_t *)s, 21, 0, &a, &b), 1,
		 "a shallow loop matches");
	CHECK(a == 0 && b == 21, "all of it (%zu..%zu)", a, b);
	memset(s, ' ', 200000);
	s[200000] = 'x';
	CHECK_EQ(regex_search(ok, (const uint8_t *)s, 200001, 0, &a, &b), 1,
		 "200,000 spaces before x: within budget");
	CHECK(a == 0 && b == 199999, "all but the last space (%zu..%zu)", a, b);
	free(s);
	regex_free(exp);
	regex_free(loop);
	regex_free(ok);
}

/* The property table against the class table the tokenizer uses, and the fold orbits. */
static void test_tables(void)
{
	uint32_t orbit[8];
	size_t k;
	int bad = 0;

	for (uint32_t c = 0; c < 0x110000; c++) {
		unsigned g = unicode_prop(c) & UPROP_GC_MASK, cls = unicode_cls(c) & UCLS_MASK;
		bad += (cls == UCLS_LETTER) != (g <= UGC_LO);
		bad += (cls == UCLS_NUMBER) != (g >= UGC_ND && g <= UGC_NO);
		bad += (cls == UCLS_SPACE) != !!(unicode_prop(c) & UPROP_SPACE);
		bad += g >= UGC_COUNT;
	}
	CHECK_EQ(bad, 0,
		 "General_Category agrees with the L/N/White_Space classes for every code point");
	CHECK_EQ(unicode_prop(0x1C89) & UPROP_GC_MASK, UGC_LU, "U+1C89 (Unicode 16) is Lu");
	CHECK_EQ(unicode_prop(0xA7CB) & UPROP_GC_MASK, UGC_LU, "U+A7CB (Unicode 16) is Lu");
	CHECK_EQ(unicode_prop(0x10D40) & UPROP_GC_MASK, UGC_ND,
		 "U+10D40 (Garay, Unicode 16) is Nd");
	CHECK_EQ(unicode_prop(0x088F) & UPROP_GC_MASK, UGC_CN,
		 "U+088F (Unicode 17) is unassigned here");
	k = unicode_fold_orbit('s', orbit, 8);
	CHECK(k == 3 && orbit[0] == 'S' && orbit[1] == 's' && orbit[2] == 0x17F,
	      "orbit of s: S s U+017F");
	k = unicode_fold_orbit(0x212A, orbit, 8);
	CHECK(k == 3 && orbit[0] == 'K' && orbit[1] == 'k' && orbit[2] == 0x212A,
	      "orbit of U+212A: K k U+212A");
	CHECK_EQ(unicode_fold_orbit('1', orbit, 8), 1, "a digit is its own orbit");
}

int main(void)
{
	for (opts = 0; opts <= REGEX_PROGRAM_ONLY; opts++) {
		printf("# %s\n", opts ? "every alternative as a program"
				      : "simple alternatives matched directly");
		test_constructs();
		test_empty();
		test_search();
		test_families();
		test_ill_formed();
		test_bounds();
	}
	test_refusals();
	test_tables();
	return tap_done();
}
