// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/prompt/openai: arbitrary request bodies for both endpoints, on the
 * real Qwen3 tokenizer (models/qwen3/tokenizer.json, loaded once). The first byte picks the
 * endpoint. Checked: no crash or sanitizer report, a known status, a reason for every refusal,
 * token ids inside the vocabulary, a non-empty prompt and nprompts >= 1 on success. The whole input
 * is also a response body for the usage scanner: fed whole, in two pieces (the first byte says
 * where, as a fraction of the input) and a byte at a time, it must read the same figures, each -1
 * or in [0, 10^18). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt/openai.h"
#include "prompt/tokenizer.h"

static struct tokenizer *tok;

/* The usage scanner over data[0..size), fed in pieces of at most step bytes after a first piece of
 * split bytes. */
static void usage_scan(const uint8_t *data, size_t size, size_t split, size_t step,
		       struct openai_usage *u)
{
	memset(u, 0, sizeof(*u));
	openai_usage_init(u);
	openai_usage_feed(u, (const char *)data, split);
	for (size_t i = split; i < size; i += step)
		openai_usage_feed(u, (const char *)data + i, size - i < step ? size - i : step);
}

static void check_usage(const uint8_t *data, size_t size)
{
	struct openai_usage whole, two, bytes;

	usage_scan(data, size, size, 1, &whole);
	usage_scan(data, size, size ? (size_t)data[0] * size / 255 : 0, size ? size : 1, &two);
	usage_scan(data, size, 0, 1, &bytes);
	if (whole.prompt_tokens != two.prompt_tokens || whole.cached_tokens != two.cached_tokens ||
	    whole.prompt_tokens != bytes.prompt_tokens ||
	    whole.cached_tokens != bytes.cached_tokens)
		abort();
	if (whole.prompt_tokens < -1 || whole.prompt_tokens >= 1000000000000000000LL ||
	    whole.cached_tokens < -1 || whole.cached_tokens >= 1000000000000000000LL)
		abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	tok = tokenizer_load("models/qwen3/tokenizer.json", err, sizeof(err));
	if (!tok) {
		fprintf(stderr, "fuzz_openai: %s (run from the repository root)\n", err);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct openai_req r = {0};
	const char *why = NULL;
	enum openai_endpoint ep;
	int rc;

	check_usage(data, size);
	if (size < 1)
		return 0;
	ep = data[0] & 1 ? OPENAI_CHAT : OPENAI_COMPLETIONS;
	rc = openai_parse(tok, ep, (const char *)data + 1, size - 1, &r, &why);
	if (rc != OPENAI_OK && rc != OPENAI_UNSUPPORTED && rc != OPENAI_INVALID && rc != -12)
		abort();
	if ((rc == OPENAI_UNSUPPORTED || rc == OPENAI_INVALID) && !why)
		abort();
	if (rc == OPENAI_OK) {
		if ((r.prompt.n == 0 && ep == OPENAI_COMPLETIONS) || r.nprompts < 1)
			abort();
		for (size_t i = 0; i < r.prompt.n; i++)
			if (r.prompt.v[i] >= tokenizer_vocab_size(tok))
				abort();
	}
	openai_req_free(&r);
	return 0;
}
