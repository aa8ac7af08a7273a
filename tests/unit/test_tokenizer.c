// SPDX-License-Identifier: Apache-2.0
/* Unit tests of userspace/prompt/tokenizer: behaviour on the real Qwen3 tokenizer.json
 * (models/qwen3, from `make deps`) and on small synthetic tokenizer.json files built here (loader
 * generality and the refusals). Id-for-id parity with the reference on >= 2,000 strings is
 * tests/e2e/ test_tokenizer_parity.sh. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "tap.h"
#include "prompt/tokenizer.h"

#define QWEN3 "models/qwen3/tokenizer.json"

static struct tokenizer *qwen;

static int encode_str(const struct tokenizer *t, const char *s, size_t n, struct tok_ids *ids)
{
	ids->n = 0;
	return tokenizer_encode(t, s, n, ids);
}

static int ids_equal(const struct tok_ids *a, const struct tok_ids *b)
{
	return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, a->n * sizeof(*a->v)) == 0);
}

/* encode(a) == encode(b) */
static int same_ids(const char *a, size_t an, const char *b, size_t bn)
{
	struct tok_ids x = {0}, y = {0};
	int eq = !encode_str(qwen, a, an, &x) && !encode_str(qwen, b, bn, &y) && ids_equal(&x, &y);
	tok_ids_free(&x);
	tok_ids_free(&y);
	return eq;
}
#define SAME(a, b) same_ids(a, sizeof(a) - 1, b, sizeof(b) - 1)

static void test_roundtrip(void)
{
	static const char *const texts[] = {
	    "Hello, world! It's a test.\n\n  Indented\tline\r\n",
	    "int main(void) { return 0; }",
	    "안녕하세요 世界 😀👍🏽 ü ß ſ",
	    "<|im_start|>user\nhi<|im_end|>\n<think>\n\n</think>",
	    "   trailing spaces   ",
	    "",
	};
	struct tok_ids ids = {0};
	struct buf out = {0};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		out.len = 0;
		CHECK(encode_str(qwen, texts[i], strlen(texts[i]), &ids) == 0, "encode text %zu",
		      i);
		CHECK(tokenizer_decode(qwen, ids.v, ids.n, &out) == 0, "decode text %zu", i);
		CHECK(out.len == strlen(texts[i]) && memcmp(out.data, texts[i], out.len) == 0,
		      "decode(encode(text %zu)) gives the text back (%zu ids)", i, ids.n);
	}
	tok_ids_free(&ids);
	buf_free(&out);
}

static void test_added_tokens(void)
{
	struct tok_ids ids = {0};
	int64_t im_end = tokenizer_token_id(qwen, "<|im_end|>");

	CHECK_EQ(tokenizer_vocab_size(qwen), 151669, "vocab size is 151,643 tokens plus 26 added");
	CHECK_EQ(im_end, 151645, "<|im_end|> id");
	CHECK_EQ(tokenizer_token_id(qwen, "<think>"), 151667, "<think> id (added, not special)");
	CHECK_EQ(tokenizer_token_id(qwen, "<|no_such|>"), -1, "unknown content has no id");
	encode_str(qwen, " the", 4, &ids);
	CHECK(ids.n == 1 && tokenizer_token_id(qwen, " the") == ids.v[0],
	      "a vocab token's id by its text");
	CHECK_EQ(tokenizer_token_id(qwen, "\xc4\xa0the"), -1, "not by its byte-level spelling");
	encode_str(qwen, "<|im_end|>", 10, &ids);
	CHECK(ids.n == 1 && ids.v[0] == (uint32_t)im_end, "an added token alone is its id");
	encode_str(qwen, "a<|im_end|><|im_end|>b", 22, &ids);
	CHECK(ids.n == 4 && ids.v[1] == (uint32_t)im_end && ids.v[2] == (uint32_t)im_end,
	      "added tokens are found inside text and back to back");
	encode_str(qwen, "<|im_end|", 9, &ids);
	CHECK(ids.n >= 2, "a near miss is ordinary text (%zu ids)", ids.n);
	tok_ids_free(&ids);
}

static void test_nfc(void)
{
	CHECK(SAME("caf\x65\xcc\x81", "caf\xc3\xa9"), "e + U+0301 encodes as U+00E9");
	CHECK(SAME("\xe2\x84\xab", "\xc3\x85"), "U+212B ANGSTROM SIGN encodes as U+00C5");
	CHECK(SAME("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"),
	      "Hangul jamo L V T compose");
	CHECK(SAME("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87"),
	      "U+0307 U+0323 reorder to U+0323 U+0307");
	CHECK(!SAME("\xef\xac\x81", "fi"), "U+FB01 is not folded (NFC, not NFKC)");
	{
		/* one accent in 1 MB of ASCII: only the region around it is normalized */
		size_t n = 1 << 20;
		char *a = malloc(n + 3), *b = malloc(n + 2);
		memset(a, 'x', n);
		memset(b, ' ', n);
		memcpy(a + n - 10, " e\xcc\x81 ", 5);
		memcpy(b, a, n - 10);
		memcpy(b + n - 10, " \xc3\xa9 ", 4);
		memcpy(b + n - 6, a + n - 5, 5);
		CHECK(same_ids(a, n, b, n - 1),
		      "1 MB of text with one e + U+0301 encodes as with U+00E9");
		free(a);
		free(b);
	}
	/* U+1AC1 (Unicode 14) is a starter in the reference's Unicode 9.0 NFC: no reordering. */
	CHECK(!SAME("a\xe1\xab\x81\xcc\x96", "a\xcc\x96\xe1\xab\x81"),
	      "marks newer than Unicode 9.0 do not reorder");
}

static void test_invalid_utf8(void)
{
	/* maximal subparts: C3 alone; E2 82 truncated; ED A0 80 (surrogate) is three; F5 is one */
	CHECK(SAME("a\xc3z", "a\xef\xbf\xbdz"), "a lone lead byte is one U+FFFD");
	CHECK(SAME("a\xe2\x82z", "a\xef\xbf\xbdz"), "a truncated sequence is one U+FFFD");
	CHECK(SAME("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
	      "an encoded surrogate is three U+FFFD");
	CHECK(SAME("x\xf5\x80", "x\xef\xbf\xbd\xef\xbf\xbd"), "F5 80 is two U+FFFD");
	CHECK(SAME("\xf0\x9f\x98", "\xef\xbf\xbd"),
	      "a truncated 4-byte sequence at the end is one U+FFFD");
	CHECK(SAME("\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"), "an overlong NUL is two U+FFFD");
	CHECK(SAME("\xef"
		   "A\xef\xbf",
		   "\xef\xbf\xbd"
		   "A\xef\xbf\xbd"),
	      "a truncated EF sequence is one U+FFFD");
	CHECK(SAME("\xef\xbf\xbd", "\xef\xbf\xbd"), "a real U+FFFD is kept");
}

static void test_pretokenizer_rules(void)
{
	struct tok_ids ids = {0};

	/* ids of "'s", "'S" and "'ſ" are one contraction piece each: the folded forms split alike
	 */
	encode_str(qwen, "it's", 4, &ids);
	CHECK_EQ(ids.n, 2, "it's is two pieces");
	encode_str(qwen, "it\x27\xc5\xbf", 5, &ids);
	CHECK(ids.n >= 2, "it'ſ: U+017F matches the contraction rule");
	CHECK(SAME("x\r\n\r\n  y", "x\r\n\r\n  y"), "deterministic");
	encode_str(qwen, "a   b", 5, &ids);
	CHECK_EQ(ids.n, 3, "a + '  ' + ' b' (whitespace run gives its last space to the word)");
	encode_str(qwen, "12345", 5, &ids);
	CHECK_EQ(ids.n, 5, "digits are single pieces");
	tok_ids_free(&ids);
}

/* BPE starts from a whole character where no token next to it could merge with part of it first
 * (tokenizer.c char_rules_build); ids from the reference (tests/js/ref_tokenize.mjs). */
static void test_whole_chars(void)
{
	static const struct {
		const char *text;
		uint32_t ids[4];
		size_t n;
		const char *what;
	} rows[] = {
	    {"\xe7\xbc\x93\xe5\xad\x98", {99982, 24360}, 2, "缓存: both characters start whole"},
	    {" \xe7\xbc\x93",
	     {84238, 241},
	     2,
	     " 缓: the space merges with 缓's first byte (a left danger), 缓 starts as bytes"},
	    {"\xf0\x9f\x9a\x80\xec\x9e\xa5",
	     {123846, 54470},
	     2,
	     "🚀장: 🚀's last byte merges with 장 (a right danger), 🚀 starts as bytes"},
	    {"a\xf0\x9f\x9a\x80", {64, 145836}, 2, "a🚀"},
	    {" \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\xeb\xa1\x9c",
	     {130092, 31079, 17380},
	     3,
	     " 한국어로"},
	};
	struct tok_ids ids = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		encode_str(qwen, rows[i].text, strlen(rows[i].text), &ids);
		CHECK(ids.n == rows[i].n && memcmp(ids.v, rows[i].ids, ids.n * sizeof(*ids.v)) == 0,
		      "%s", rows[i].what);
	}
	tok_ids_free(&ids);
}

static void test_long_runs(void)
{
	size_t n = 100000;
	char *s = malloc(n);
	struct tok_ids ids = {0};
	struct buf out = {0};
	struct timespec t0, t1;
	double ms;

	memset(s, 'a', n);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(encode_str(qwen, s, n, &ids) == 0, "100 KB run of one letter encodes");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CHECK(ms < 2000, "100 KB run takes %.1f ms (n log n merges; < 2 s even under sanitizers)",
	      ms);
	CHECK(tokenizer_decode(qwen, ids.v, ids.n, &out) == 0 && out.len == n &&
		  memcmp(out.data, s, n) == 0,
	      "and decodes back (%zu ids)", ids.n);
	/* 40,000 combining marks in reverse canonical order: the reordering must stay linear */
	s[0] = 'a';
	for (size_t i = 1; i + 4 <= n; i += 4)
		memcpy(s + i, "\xcd\x85\xcc\xb4", 4); /* U+0345 (class 240) U+0334 (class 1) */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(encode_str(qwen, s, 1 + (n - 1) / 4 * 4, &ids) == 0,
	      "100 KB of marks to reorder encodes");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	CHECK(ms < 2000, "and takes %.1f ms (linear canonical ordering)", ms);
	tok_ids_free(&ids);
	buf_free(&out);
	free(s);
}

static void test_decode_errors(void)
{
	struct buf out = {0};
	uint32_t bad = 151669, ok = 151645;

	CHECK_EQ(tokenizer_decode(qwen, &bad, 1, &out), -EINVAL,
		 "an id outside the vocabulary is -EINVAL");
	CHECK(tokenizer_decode(qwen, &ok, 1, &out) == 0 && strcmp(out.data, "<|im_end|>") == 0,
	      "an added token decodes as its content");
	CHECK(tokenizer_memory(qwen) > 1000000 && tokenizer_memory(qwen) < 64u << 20,
	      "memory of the loaded tokenizer reported (%zu bytes)", tokenizer_memory(qwen));
	buf_free(&out);
}

struct thr {
	const char *text;
	struct tok_ids want;
	int ok;
};

static void *thr_run(void *arg)
{
	struct thr *th = arg;
	struct tok_ids ids = {0};

	th->ok = 1;
	for (int i = 0; i < 50; i++)
		if (encode_str(qwen, th->text, strlen(th->text), &ids) ||
		    !ids_equal(&ids, &th->want))
			th->ok = 0;
	tok_ids_free(&ids);
	return NULL;
}

static void test_threads(void)
{
	struct thr th[2] = {
	    {.text = "The quick brown fox\n\njumps over 13 lazy dogs' backs. café 😀"},
	    {.text = "def f(x):\n    return x  # 한국어 中文\r\n"}};
	pthread_t tid[2];

	for (int i = 0; i < 2; i++)
		encode_str(qwen, th[i].text, strlen(th[i].text), &th[i].want);
	for (int i = 0; i < 2; i++)
		pthread_create(&tid[i], NULL, thr_run, &th[i]);
	for (int i = 0; i < 2; i++) {
		pthread_join(tid[i], NULL);
		CHECK(th[i].ok, "thread %d: concurrent encodes give the same ids", i);
		tok_ids_free(&th[i].want);
	}
}

/* --- synthetic tokenizer.json ------------------------------------------------------------------
 */

/* byte -> GPT-2 byte-level code point */
static unsigned b2u(int b)
{
	int n = 0;
	for (int i = 0; i < 256; i++) {
		int printable =
		    (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
		if (i == b)
			return printable ? (unsigned)i : (unsigned)(256 + n);
		if (!printable)
			n++;
	}
	return 0;
}

static void bl(char *o, const char *bytes)
{
	for (; *bytes; bytes++) {
		unsigned c = b2u((unsigned char)*bytes);
		if (c < 0x80) {
			*o++ = (char)c;
		} else {
			*o++ = (char)(0xC0 | (c >> 6));
			*o++ = (char)(0x80 | (c & 0x3F));
		}
	}
	*o = '\0';
}

/* A small byte-level BPE: 256 byte symbols, merges "a b"->"ab", "ab c"->"abc", " a"; one added
 * token. */
static cJSON *mini_json(void)
{
	cJSON *root = cJSON_Parse(
	    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
	    "\"added_tokens\":[{\"id\":260,\"content\":\"<|x|>\",\"single_word\":false,\"lstrip\":"
	    "false,"
	    "\"rstrip\":false,\"normalized\":false,\"special\":true}],"
	    "\"normalizer\":{\"type\":\"NFC\"},"
	    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
	    "\"pattern\":{\"Regex\":"
	    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
	    "?[^\\\\s\\\\p{L}\\\\p{N}]+"
	    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\","
	    "\"invert\":false},"
	    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_"
	    "regex\":false}]},"
	    "\"post_processor\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"ByteLevel\"},"
	    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_"
	    "prefix\":\"\","
	    "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_"
	    "merges\":false,"
	    "\"vocab\":{},\"merges\":[]}}");
	cJSON *model = cJSON_GetObjectItem(root, "model");
	cJSON *vocab = cJSON_GetObjectItem(model, "vocab"),
	      *merges = cJSON_GetObjectItem(model, "merges");
	char k[40], l[16], r[16];

	for (int b = 0; b < 256; b++) {
		char one[2] = {(char)b, 0};
		if (b == 0) { /* bl() stops at NUL: spell byte 0 by hand (U+0100) */
			strcpy(k, "\xc4\x80");
		} else {
			bl(k, one);
		}
		cJSON_AddNumberToObject(vocab, k, b);
	}
	bl(k, "ab"), cJSON_AddNumberToObject(vocab, k, 256);
	bl(k, "abc"), cJSON_AddNumberToObject(vocab, k, 257);
	bl(k, " a"), cJSON_AddNumberToObject(vocab, k, 258);
	bl(k, "bc"), cJSON_AddNumberToObject(vocab, k, 259); /* in vocab but made by no merge */
	bl(l, "a"), bl(r, "b"), snprintf(k, sizeof(k), "%s %s", l, r),
	    cJSON_AddItemToArray(merges, cJSON_CreateString(k));
	{
		cJSON *pair = cJSON_CreateArray();
		bl(l, "ab"), bl(r, "c");
		cJSON_AddItemToArray(pair, cJSON_CreateString(l));
		cJSON_AddItemToArray(pair, cJSON_CreateString(r));
		cJSON_AddItemToArray(merges, pair);
	}
	bl(l, " "), bl(r, "a"), snprintf(k, sizeof(k), "%s %s", l, r),
	    cJSON_AddItemToArray(merges, cJSON_CreateString(k));
	return root;
}

static struct tokenizer *load_json(cJSON *j, char *err, size_t errlen)
{
	char path[] = "/tmp/kvs-test-tok-XXXXXX";
	int fd = mkstemp(path);
	char *s = cJSON_PrintUnformatted(j);
	struct tokenizer *t;

	if (fd < 0 || !s || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		snprintf(err, errlen, "cannot write temp file");
		t = NULL;
	} else {
		t = tokenizer_load(path, err, errlen);
	}
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(s);
	return t;
}

static void test_synthetic(void)
{
	cJSON *j = mini_json();
	char err[512];
	struct tokenizer *t = load_json(j, err, sizeof(err));
	struct tok_ids ids = {0};

	CHECK(t != NULL, "synthetic byte-level BPE loads (%s)", t ? "ok" : err);
	if (!t) {
		cJSON_Delete(j);
		return;
	}
	encode_str(t, "abc", 3, &ids);
	CHECK(ids.n == 1 && ids.v[0] == 257, "merges in rank order: a b -> ab, ab c -> abc");
	encode_str(t, "bc", 2, &ids);
	CHECK(ids.n == 2 && ids.v[0] == 'b' && ids.v[1] == 'c',
	      "a vocab token no merge builds is not taken whole (bc -> b c)");
	encode_str(t, "x ab<|x|>", 9, &ids);
	CHECK(ids.n == 4 && ids.v[0] == 'x' && ids.v[1] == ' ' && ids.v[2] == 256 &&
		  ids.v[3] == 260,
	      "lowest rank first: ' ab' -> ' ' ab (a b ranks before ' ' a); added token split out");
	encode_str(t, "x a", 3, &ids);
	CHECK(ids.n == 2 && ids.v[1] == 258, "' a' merges when nothing ranks lower");
	tokenizer_free(t);
	cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "ignore_merges",
				  cJSON_CreateTrue());
	t = load_json(j, err, sizeof(err));
	CHECK(t != NULL, "loads with ignore_merges (%s)", t ? "ok" : err);
	if (t) {
		encode_str(t, "bc", 2, &ids);
		CHECK(ids.n == 1 && ids.v[0] == 259,
		      "ignore_merges: a whole-piece vocab hit is taken as is");
	}
	tok_ids_free(&ids);
	tokenizer_free(t);
	cJSON_Delete(j);
}

/* Each mutation of the synthetic file must be refused, with a message naming the part. */
static void test_refusals(void)
{
	static const struct {
		const char *path, *json, *part;
	} cases[] = {
	    {"normalizer", "{\"type\":\"NFKC\"}", "normalizer"},
	    {"normalizer",
	     "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"_\"}",
	     "Replace with a Regex"},
	    {"normalizer", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}",
	     "Lowercase"},
	    {"truncation", "{\"max_length\":8}", "truncation"},
	    {"padding", "{\"length\":8}", "padding"},
	    {"pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":true}",
	     "add_prefix_space"},
	    {"pre_tokenizer", "{\"type\":\"Whitespace\"}", "Whitespace"},
	    {"pre_tokenizer",
	     "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{"
	     "\"String\":"
	     "\" \"},\"behavior\":\"Sideways\"},{\"type\":\"ByteLevel\"}]}",
	     "behavior Sideways"},
	    {"pre_tokenizer",
	     "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":"
	     "\"Split\","
	     "\"pattern\":{\"String\":\" \"},\"behavior\":\"Isolated\"}]}",
	     "after ByteLevel"},
	    {"post_processor", "{\"type\":\"TemplateProcessing\"}", "post_processor"},
	    {"post_processor", "{\"type\":\"RobertaProcessing\"}", "RobertaProcessing"},
	    {"post_processor",
	     "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
	     "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{}}",
	     "not in special_tokens"},
	    {"decoder", "{\"type\":\"WordPiece\"}", "decoder"},
	    {"model.type", "\"WordPiece\"", "model"},
	    {"model.dropout", "0.1", "dropout"},
	    {"model.continuing_subword_prefix", "\"##\"", "continuing_subword_prefix"},
	    {"model.end_of_word_suffix", "\"</w>\"", "end_of_word_suffix"},
	    {"model.merges",
	     "[\"a b\", \"x "
	     "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"]",
	     "merge 1"},
	    {"model.merges", "[\"a  b\"]", "merge 0"},
	    {"model.merges", "[[\"a\"]]", "merge 0"},
	    {"model.merges", "[\"\u00e9 b\"]", "merge 0"},
	    {"model.vocab", "{\"a\": 99999999}", "vocab id"},
	    /* one token: its lookup table was full, a missing byte's lookup never ended */
	    {"model.vocab", "{\"a\": 0}", "neither a vocab nor an added token"},
	};
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *j = mini_json(), *v = cJSON_Parse(cases[i].json), *parent = j;
		const char *key = cases[i].path;
		struct tokenizer *t;

		if (!strncmp(key, "model.", 6)) {
			parent = cJSON_GetObjectItem(j, "model");
			key += 6;
		} else if (!strncmp(key, "added.", 6)) {
			parent = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "added_tokens"), 0);
			key += 6;
		}
		cJSON_ReplaceItemInObject(parent, key, v);
		err[0] = '\0';
		t = load_json(j, err, sizeof(err));
		CHECK(!t && strstr(err, cases[i].part), "refused: %s = %s (%s)", cases[i].path,
		      cases[i].json, err);
		tokenizer_free(t);
		cJSON_Delete(j);
	}
	CHECK(!tokenizer_load("/nonexistent/tokenizer.json", err, sizeof(err)) &&
		  strstr(err, "cannot read"),
	      "a missing file is refused (%s)", err);
	{
		char path[] = "/tmp/kvs-test-tok-XXXXXX";
		int fd = mkstemp(path);
		CHECK(fd >= 0 && write(fd, "{\"model\":", 9) == 9, "write broken file");
		CHECK(!tokenizer_load(path, err, sizeof(err)) && strstr(err, "JSON"),
		      "broken JSON is refused (%s)", err);
		close(fd);
		unlink(path);
	}
}

/* The encoding cache gives the ids plain encoding gives, on misses, on hits, across generation
 * drops; repeated segments and pieces are hits. */
static void test_cache(void)
{
	static const char *const texts[] = {
	    "<|im_start|>system\nYou are a helpful assistant that answers briefly.<|im_end|>\n"
	    "<|im_start|>user\nWhat is the capital of France, and why?<|im_end|>\n"
	    "<|im_start|>assistant\n",
	    "<|im_start|>system\nYou are a helpful assistant that answers briefly.<|im_end|>\n"
	    "<|im_start|>user\nAnd of Germany? 안녕하세요 世界 😀👍🏽 ü ß "
	    "ſ<|im_end|>\n"
	    "<|im_start|>assistant\n",
	    "def tokenize_everything(self, input_text):\n\treturn [ord(c) for c in input_text]\n",
	    "a",
	    "",
	    "\xff\xfe broken utf-8 \xc3",
	    "e\xcc\x81 NFC e\xcc\x81 again and again",
	};
	struct tok_cache *c = tok_cache_new(16 << 10); /* small: generations turn over */
	struct tok_cache_stats st;
	int same = 1;

	for (int round = 0; round < 40; round++)
		for (size_t i = 0; i < 2 * sizeof(texts) / sizeof(texts[0]); i++) {
			struct tok_ids a = {0}, b = {0};
			struct buf t = {0};

			/* odd i: the text with the round in front, so its segments are new and only
			 * its pieces can hit */
			if (i % 2)
				buf_printf(&t, "round %d: ", round);
			buf_puts(&t, texts[i / 2]);
			tokenizer_encode(qwen, t.data, t.len, &a);
			tokenizer_encode_cached(qwen, c, t.data, t.len, &b);
			same &= a.n == b.n && (!a.n || memcmp(a.v, b.v, a.n * 4) == 0);
			tok_ids_free(&a);
			tok_ids_free(&b);
			buf_free(&t);
		}
	tok_cache_stats(c, &st);
	CHECK(same, "tok_cache: the same ids as plain encoding, 40 rounds of 14 texts");
	CHECK(st.segment_hits > 0 && st.piece_hits > 0,
	      "tok_cache: repeated segments and pieces are hits (%llu, %llu)",
	      (unsigned long long)st.segment_hits, (unsigned long long)st.piece_hits);
	CHECK(st.drops > 0 && st.bytes <= 16 << 10,
	      "tok_cache: bounded (%llu bytes, %llu generation drops)",
	      (unsigned long long)st.bytes, (unsigned long long)st.drops);
	tok_cache_free(c);
}

/* --- part-at-a-time encoding (tok_stream) ----------------------------------------------------
 */

#define PROSE                                                                                      \
	"The quick brown fox jumps over the lazy dog. It's 12:45, and we've 3,141 reasons to go "  \
	"on; don't we?\n\n"

static const size_t stream_steps[] = {1, 2, 7, 16, 100, SIZE_MAX};

enum { SC_NONE, SC_NEW, SC_SMALL, SC_WARM, SC_N };
static const char *const sc_what[SC_N] = {"no cache", "a new cache",
					  "a 4 KB cache (generations turn over)",
					  "a cache warmed by the same text"};

/* Encodes text[0..n) through a stream asking each call for step more ids (SIZE_MAX: all at once),
 * through c, checking each call's contract: an unfinished stream holds min_tokens ids, every call
 * makes progress, and (pos_exact: text that needs no normalizing) the ids so far decode to
 * text[0..pos). Returns NULL when all holds and the ids are want, else what failed. */
static const char *stream_run(struct tok_cache *c, const char *text, size_t n, size_t step,
			      bool pos_exact, const struct tok_ids *want)
{
	struct tok_stream st = {0};
	struct tok_ids out = {0};
	struct buf dec = {0};
	const char *bad = NULL;

	tok_stream_init(&st, text, n);
	while (!st.done && !bad) {
		size_t min = step == SIZE_MAX ? SIZE_MAX : out.n + step, n0 = out.n, pos0 = st.pos;

		if (tokenizer_encode_more(qwen, c, &st, min, &out))
			bad = "tokenizer_encode_more failed";
		else if (!st.done && out.n < min)
			bad = "returned unfinished with fewer than min_tokens ids";
		else if (!st.done && (out.n == n0 || st.pos <= pos0))
			bad = "a call made no progress";
		else if (st.pos > n)
			bad = "pos past the end";
		else if (pos_exact) {
			dec.len = 0;
			if (tokenizer_decode(qwen, out.v, out.n, &dec) || dec.len != st.pos ||
			    (dec.len && memcmp(dec.data, text, dec.len)))
				bad = "the ids so far do not decode to text[0..pos)";
		}
	}
	if (!bad && st.pos != n)
		bad = "done with pos != len";
	if (!bad && !ids_equal(&out, want))
		bad = "ids differ from tokenizer_encode";
	tok_stream_free(&st);
	tok_ids_free(&out);
	buf_free(&dec);
	return bad;
}

/* One stream run in cache mode sc: its ids, and the cache it leaves (stats: hits, misses,
 * entries, bytes, drops) equal to tokenizer_encode_cached's on a cache prepared alike. */
static const char *stream_case(int sc, const char *text, size_t n, size_t step, bool pos_exact,
			       const struct tok_ids *want)
{
	size_t cap = sc == SC_SMALL ? 4 << 10 : 1 << 20;
	struct tok_cache *c = sc == SC_NONE ? NULL : tok_cache_new(cap);
	struct tok_cache *ref = sc == SC_NONE ? NULL : tok_cache_new(cap);
	struct tok_cache_stats a, b;
	struct tok_ids tmp = {0};
	const char *bad;

	if (sc == SC_WARM) {
		tokenizer_encode_cached(qwen, c, text, n, &tmp);
		tmp.n = 0;
		tokenizer_encode_cached(qwen, ref, text, n, &tmp);
		tmp.n = 0;
	}
	bad = stream_run(c, text, n, step, pos_exact, want);
	if (!bad && c) {
		tokenizer_encode_cached(qwen, ref, text, n, &tmp);
		tok_cache_stats(c, &a);
		tok_cache_stats(ref, &b);
		if (memcmp(&a, &b, sizeof(a)))
			bad = "the cache ends unlike tokenizer_encode_cached's";
		else if (sc == SC_WARM && n >= 64 && !a.segment_hits)
			bad = "no segment hit in a warmed cache";
	}
	tok_ids_free(&tmp);
	tok_cache_free(c);
	tok_cache_free(ref);
	return bad;
}

static void test_stream(void)
{
	struct buf prose = {0}, chat = {0}, nfc = {0}, cjk = {0}, emoji = {0}, ws = {0}, bad8 = {0},
		   code = {0}, piece = {0};
	const struct {
		struct buf *b;
		bool pos_exact;
		const char *what;
	} rows[] = {
	    {&prose, true, "ASCII prose (one segment)"},
	    {&chat, true, "a chat template (<|im_start|>, <|im_end|>, <think>)"},
	    {&nfc, false, "e + U+0301 to normalize, in a segment between plain ones"},
	    {&cjk, true, "CJK"},
	    {&emoji, true, "emoji (ZWJ sequences, flags, modifiers)"},
	    {&ws, true, "long whitespace runs"},
	    {&bad8, false, "invalid UTF-8"},
	    {&code, true, "code"},
	    {&piece, true, "a 701-byte piece (BPE on the heap)"},
	    {NULL, true, "empty text"},
	};

	for (int i = 0; i < 12; i++)
		buf_puts(&prose, PROSE);
	buf_puts(&chat, "<|im_start|>system\nYou are a helpful assistant that answers briefly."
			"<|im_end|>\n<|im_start|>user\n");
	for (int i = 0; i < 4; i++)
		buf_puts(&chat, PROSE);
	buf_puts(&chat, "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
	buf_puts(&chat, PROSE "<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n"
			      "<|im_start|>assistant\n");
	buf_puts(&nfc, "<|im_start|>user\n" PROSE "Cafe\xcc\x81 au lait, re\xcc\x81sume\xcc\x81 "
		       "and na\xc3\xafvete\xcc\x81. " PROSE "<|im_end|>\n" PROSE PROSE);
	for (int i = 0; i < 6; i++)
		buf_puts(&cjk,
			 "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xe3\x80"
			 "\x82\xe7\xbc\x93\xe5\xad\x98\xe5\x92\x8c\xe8\xb7\xaf\xe7\x94\xb1 "
			 "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf "
			 "\xec\x95\x88\xeb\x85\x95\xed\x95\x98\xec\x84\xb8\xec\x9a\x94 "
			 "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4\xeb\xa1\x9c\n");
	for (int i = 0; i < 6; i++)
		buf_puts(&emoji,
			 "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
			 "\xf0\x9f\x9a\x80\xf0\x9f\x9a\x80\xec\x9e\xa5 family: "
			 "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f"
			 "\x91\xa7 \xe2\x9d\xa4\xef\xb8\x8f \xf0\x9f\x87\xab\xf0\x9f\x87\xb7"
			 "\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa!\n");
	buf_puts(&ws, "a");
	for (int i = 0; i < 300; i++)
		buf_puts(&ws, " ");
	buf_puts(&ws, "b\n\n\n\n");
	for (int i = 0; i < 200; i++)
		buf_puts(&ws, "\t ");
	buf_puts(&ws, "c\r\n\r\n  d");
	for (int i = 0; i < 100; i++)
		buf_puts(&ws, " ");
	buf_puts(&bad8, "\xff\xfe broken \xc3 utf-8 " PROSE "\xed\xa0\x80 " PROSE);
	for (int i = 0; i < 8; i++)
		buf_puts(&code, "def tokenize_everything(self, input_text):\n\treturn [ord(c) "
				"for c in input_text]  # 42\n\n");
	buf_puts(&piece, "x");
	for (int i = 0; i < 700; i++)
		buf_puts(&piece, "a");
	buf_puts(&piece, PROSE);

	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const char *text = rows[r].b ? rows[r].b->data : "";
		size_t n = rows[r].b ? rows[r].b->len : 0;
		struct tok_ids want = {0};

		tokenizer_encode(qwen, text, n, &want);
		for (int sc = 0; sc < SC_N; sc++) {
			const char *bad = NULL;
			char why[128] = "";
			size_t k;

			for (k = 0; k < sizeof(stream_steps) / sizeof(stream_steps[0]) && !bad; k++)
				bad = stream_case(sc, text, n, stream_steps[k], rows[r].pos_exact,
						  &want);
			if (bad)
				snprintf(why, sizeof(why), ": step %zu: %s", stream_steps[k - 1],
					 bad);
			CHECK(!bad,
			      "stream == tokenizer_encode, min_tokens steps 1, 2, 7, 16, 100, all: "
			      "%s (%zu ids), %s%s",
			      rows[r].what, want.n, sc_what[sc], why);
		}
		tok_ids_free(&want);
	}
	buf_free(&prose);
	buf_free(&chat);
	buf_free(&nfc);
	buf_free(&cjk);
	buf_free(&emoji);
	buf_free(&ws);
	buf_free(&bad8);
	buf_free(&code);
	buf_free(&piece);
}

/* A stream stopped early is unfinished where it says, and freeing it half done (scratch for NFC
 * and long pieces held, a segment begun in the cache) leaks nothing (ASan build). */
static void test_stream_stop(void)
{
	struct tok_stream st = {0};
	struct tok_ids out = {0}, want = {0};
	struct tok_cache *c = tok_cache_new(1 << 20);
	struct buf text = {0}, dec = {0};
	size_t n0, at;
	int rc;

	for (int i = 0; i < 40; i++)
		buf_puts(&text, PROSE);
	tok_stream_init(&st, text.data, text.len);
	rc = tokenizer_encode_more(qwen, NULL, &st, 16, &out);
	CHECK(rc == 0 && !st.done && st.pos > 0 && st.pos < text.len && out.n >= 16 &&
		  out.n < 16 + 4,
	      "stopped at min_tokens=16 in a %zu-byte text: not done, pos %zu, %zu ids", text.len,
	      st.pos, out.n);
	CHECK(tokenizer_decode(qwen, out.v, out.n, &dec) == 0 && dec.len == st.pos &&
		  memcmp(dec.data, text.data, dec.len) == 0,
	      "the ids so far are those of text[0..pos)");
	n0 = out.n;
	at = st.pos;
	rc = tokenizer_encode_more(qwen, NULL, &st, out.n, &out);
	CHECK(rc == 0 && out.n == n0 && st.pos == at && !st.done,
	      "min_tokens <= out->n appends nothing");
	tok_stream_free(&st);
	tok_stream_free(&st);
	CHECK(!st.work.norm && !st.work.cps && !st.work.bpe,
	      "a half-done stream freed (twice: free leaves it empty; ASan checks the rest)");

	/* the same struct again, after free: a segment to normalize (e + U+0301 and 600 letters:
	 * NFC scratch and a heap BPE), an added token, then a 601-byte piece */
	buf_free(&text);
	buf_puts(&text, "e\xcc\x81");
	for (int i = 0; i < 600; i++)
		buf_puts(&text, "a");
	buf_puts(&text, "<|im_end|>x");
	for (int i = 0; i < 600; i++)
		buf_puts(&text, "b");
	buf_puts(&text, " " PROSE PROSE PROSE);
	out.n = 0;
	tok_stream_init(&st, text.data, text.len);
	rc = tokenizer_encode_more(qwen, c, &st, 1, &out);
	CHECK(rc == 0 && !st.done && st.pos == 3 + 600 + 10,
	      "a segment to normalize is encoded whole, with the added token after it (pos %zu)",
	      st.pos);
	rc = tokenizer_encode_more(qwen, c, &st, out.n + 1, &out);
	CHECK(rc == 0 && !st.done && st.pos == 3 + 600 + 10 + 601,
	      "then one 601-byte piece (pos %zu)", st.pos);
	CHECK(st.work.norm && st.work.bpe, "the stream holds NFC and BPE scratch half done");
	tok_stream_free(&st);
	CHECK(
	    !st.work.norm && !st.work.cps && !st.work.bpe,
	    "freed half done, holding NFC and BPE scratch and a begun cached segment (ASan checks "
	    "the leak)");

	tokenizer_encode(qwen, text.data, text.len, &want);
	out.n = 0;
	tok_stream_init(&st, text.data, text.len);
	rc = tokenizer_encode_more(qwen, c, &st, 1, &out);
	if (!rc)
		rc = tokenizer_encode_more(qwen, c, &st, SIZE_MAX, &out);
	CHECK(rc == 0 && st.done && st.pos == text.len && ids_equal(&out, &want),
	      "the same text again through the same cache, in two calls: tokenizer_encode's ids");
	tok_stream_free(&st);
	tok_ids_free(&out);
	tok_ids_free(&want);
	tok_cache_free(c);
	buf_free(&text);
	buf_free(&dec);
}

int main(void)
{
	char err[512];

	qwen = tokenizer_load(QWEN3, err, sizeof(err));
	if (!CHECK(qwen != NULL, "load %s (%s; run make deps)", QWEN3, qwen ? "ok" : err))
		return tap_done();
	test_roundtrip();
	test_cache();
	test_stream();
	test_stream_stop();
	test_added_tokens();
	test_nfc();
	test_invalid_utf8();
	test_pretokenizer_rules();
	test_whole_chars();
	test_long_runs();
	test_decode_errors();
	test_threads();
	test_synthetic();
	test_refusals();
	tokenizer_free(qwen);
	return tap_done();
}
