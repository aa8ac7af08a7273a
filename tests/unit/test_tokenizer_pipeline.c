// SPDX-License-Identifier: Apache-2.0
/* Each pipeline piece of userspace/prompt/tokenizer against the reference: the cases of
 * tests/unit/data/tokenizer_pipeline.json (written by tests/js/gen_pipeline_cases.mjs from Hugging
 * Face tokenizers 0.22) patch one small character-level tokenizer.json each (a normalizer, a Split
 * behavior, byte_fallback, unk, lstrip, a template...) and give a text and the reference's ids.
 * Also: a directory's tokenizer_config.json add_bos_token/add_eos_token override the template, and
 * the stream API stops inside a general pre-tokenizer's pieces and goes on to the same ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "prompt/tokenizer.h"
#include "tap.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)n + 1)) && fread(p, 1, (size_t)n, f) == (size_t)n)
		p[n] = '\0';
	else
		free(p), p = NULL;
	fclose(f);
	return p;
}

static int write_str(const char *path, const char *s)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(s, 1, strlen(s), f) == strlen(s);

	if (f)
		fclose(f);
	return ok ? 0 : -1;
}

/* base with patch applied (top-level keys; "model.X" inside the model), written to path. */
static int write_patched(const cJSON *base, const cJSON *patch, const char *path)
{
	cJSON *j = cJSON_Duplicate(base, 1), *it;
	char *s;
	int rc;

	cJSON_ArrayForEach(it, patch)
	{
		cJSON *parent = j;
		const char *key = it->string;
		if (!strncmp(key, "model.", 6)) {
			parent = cJSON_GetObjectItem(j, "model");
			key += 6;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
		cJSON_AddItemToObject(parent, key, cJSON_Duplicate(it, 1));
	}
	s = cJSON_PrintUnformatted(j);
	rc = s ? write_str(path, s) : -1;
	free(s);
	cJSON_Delete(j);
	return rc;
}

static int ids_match(const struct tok_ids *got, const cJSON *want)
{
	size_t i = 0;
	const cJSON *it;

	if ((size_t)cJSON_GetArraySize(want) != got->n)
		return 0;
	cJSON_ArrayForEach(it, want) if ((uint32_t)it->valueint != got->v[i++]) return 0;
	return 1;
}

static void test_cases(const cJSON *root, const char *dir)
{
	const cJSON *base = cJSON_GetObjectItem(root, "base"), *c;
	char path[512], err[512];

	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases"))
	{
		const char *desc = cJSON_GetObjectItem(c, "desc")->valuestring;
		const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
		bool sp = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_special_tokens"));
		struct tok_ids ids = {0}, more = {0};
		struct tokenizer *t;
		struct tok_stream st;
		int rc = 0;

		if (write_patched(base, cJSON_GetObjectItem(c, "patch"), path)) {
			CHECK(0, "%s: write the tokenizer", desc);
			continue;
		}
		t = tokenizer_load(path, err, sizeof(err));
		CHECK(t != NULL, "%s: loads (%s)", desc, t ? "ok" : err);
		if (!t)
			continue;
		tokenizer_encode_special(t, NULL, text, strlen(text), sp, &ids);
		CHECK(ids_match(&ids, cJSON_GetObjectItem(c, "ids")),
		      "%s: %zu ids as the reference's", desc, ids.n);
		/* a token at a time: the same ids */
		tok_stream_init_special(&st, text, strlen(text), sp);
		for (size_t k = 1; !st.done && !rc && k < 10000; k++)
			rc = tokenizer_encode_more(t, NULL, &st, k, &more);
		if (!rc)
			rc = tokenizer_encode_more(t, NULL, &st, SIZE_MAX, &more);
		CHECK(!rc && ids_match(&more, cJSON_GetObjectItem(c, "ids")),
		      "%s: streamed a token at a time, the same ids", desc);
		tok_stream_free(&st);
		tok_ids_free(&ids);
		tok_ids_free(&more);
		tokenizer_free(t);
	}
}

/* tokenizer_config.json beside tokenizer.json in a directory: add_bos_token/add_eos_token decide,
 * as transformers rebuilds the post-processor; set to neither, the file's template stays. */
static void test_config(const cJSON *root, const char *dir)
{
	const cJSON *base = cJSON_GetObjectItem(root, "base");
	cJSON *patch = cJSON_Parse(
	    "{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{"
	    "\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
	    "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}}");
	static const struct {
		const char *config;
		uint32_t want[4];
		size_t n;
		const char *what;
	} cases[] = {
	    {NULL, {1, 274}, 2, "no tokenizer_config.json: the file's template (<s> $A)"},
	    {"{\"bos_token\":\"<s>\"}", {1, 274}, 2, "config without add_*: the file's template"},
	    {"{\"add_bos_token\":false,\"bos_token\":\"<s>\"}", {274}, 1, "add_bos_token false"},
	    {"{\"add_bos_token\":true,\"add_eos_token\":true,\"bos_token\":{\"content\":\"<s>\"},"
	     "\"eos_token\":\"</s>\"}",
	     {1, 274, 2},
	     3,
	     "add_bos_token and add_eos_token (tokens as objects or strings)"},
	    {"{\"add_eos_token\":true,\"eos_token\":\"</s>\"}",
	     {274, 2},
	     2,
	     "add_eos_token alone: no BOS"},
	};
	char path[512], cfg[512], err[512];

	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	snprintf(cfg, sizeof(cfg), "%s/tokenizer_config.json", dir);
	CHECK(write_patched(base, patch, path) == 0, "write the tokenizer");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tok_ids ids = {0};
		struct tokenizer *t;
		int same;

		unlink(cfg);
		if (cases[i].config && write_str(cfg, cases[i].config))
			CHECK(0, "write the config");
		t = tokenizer_load(dir, err, sizeof(err));
		CHECK(t != NULL, "%s: loads (%s)", cases[i].what, t ? "ok" : err);
		if (!t)
			continue;
		tokenizer_encode_special(t, NULL, "ab", 2, true, &ids);
		same = ids.n == cases[i].n && !memcmp(ids.v, cases[i].want, ids.n * sizeof(*ids.v));
		CHECK(same, "%s: %zu ids", cases[i].what, ids.n);
		CHECK(tokenizer_bos_id(t) == (cases[i].want[0] == 1 ? 1 : -1),
		      "%s: tokenizer_bos_id", cases[i].what);
		tok_ids_free(&ids);
		tokenizer_free(t);
	}
	CHECK(write_str(cfg, "{\"add_bos_token\":true,\"bos_token\":\"<nope>\"}") == 0,
	      "write a config naming no token");
	CHECK(!tokenizer_load(dir, err, sizeof(err)) && strstr(err, "bos_token"),
	      "a bos_token that names no token is refused (%s)", err);
	CHECK(write_str(cfg, "{\"add_bos_token\":") == 0, "write a broken config");
	CHECK(!tokenizer_load(dir, err, sizeof(err)) && strstr(err, "tokenizer_config.json"),
	      "a broken tokenizer_config.json is refused (%s)", err);
	unlink(cfg);
	unlink(path);
	cJSON_Delete(patch);
}

/* Decoding a character-level vocabulary: <0xXX> tokens are their bytes, "▁" a space when the
 * decoder replaces it. */
static void test_decode(const cJSON *root, const char *dir)
{
	cJSON *patch = cJSON_Parse("{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":"
				   "\"Replace\",\"pattern\":{\"String\":\"\u2581\"},\"content\":\" "
				   "\"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}}");
	const char *text = "ab\xe2\x96\x81"
			   "c \xc3\xa9\xe2\x82\xac<X>";
	char path[512], err[512];
	struct tok_ids ids = {0};
	struct buf out = {0};
	struct tokenizer *t;

	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	CHECK(write_patched(cJSON_GetObjectItem(root, "base"), patch, path) == 0, "write");
	t = tokenizer_load(path, err, sizeof(err));
	CHECK(t != NULL, "decode: loads (%s)", t ? "ok" : err);
	if (t) {
		tokenizer_encode(t, text, strlen(text), &ids);
		CHECK(!tokenizer_decode(t, ids.v, ids.n, &out) && out.len == strlen(text) - 2 &&
			  !memcmp(out.data, "ab c \xc3\xa9\xe2\x82\xac<X>", out.len),
		      "decode: bytes of <0xXX> tokens, \"\u2581\" as a space");
	}
	unlink(path);
	tok_ids_free(&ids);
	buf_free(&out);
	tokenizer_free(t);
	cJSON_Delete(patch);
}

int main(void)
{
	char *text = slurp("tests/unit/data/tokenizer_pipeline.json");
	cJSON *root = text ? cJSON_Parse(text) : NULL;
	char dir[] = "/tmp/kvs-test-tokpipe-XXXXXX";

	CHECK(root != NULL, "read tests/unit/data/tokenizer_pipeline.json");
	CHECK(mkdtemp(dir) != NULL, "temp directory");
	if (root) {
		test_cases(root, dir);
		test_config(root, dir);
		test_decode(root, dir);
	}
	rmdir(dir);
	cJSON_Delete(root);
	free(text);
	return tap_done();
}
