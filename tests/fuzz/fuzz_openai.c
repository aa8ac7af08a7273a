// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for userspace/openai: arbitrary request bodies for both endpoints, on the real
 * Qwen3 tokenizer (models/qwen3/tokenizer.json, loaded once). The first byte picks the endpoint.
 * Checked: no crash or sanitizer report, a known status, a reason for every refusal, token ids
 * inside the vocabulary and a non-empty prompt on success. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"
#include "tokenizer.h"

static struct tokenizer *tok;

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

	if (size < 1)
		return 0;
	ep = data[0] & 1 ? OPENAI_CHAT : OPENAI_COMPLETIONS;
	rc = openai_parse(tok, ep, (const char *)data + 1, size - 1, &r, &why);
	if (rc != OPENAI_OK && rc != OPENAI_UNSUPPORTED && rc != OPENAI_INVALID && rc != -12)
		abort();
	if ((rc == OPENAI_UNSUPPORTED || rc == OPENAI_INVALID) && !why)
		abort();
	if (rc == OPENAI_OK) {
		if (r.prompt.n == 0 && ep == OPENAI_COMPLETIONS)
			abort();
		for (size_t i = 0; i < r.prompt.n; i++)
			if (r.prompt.v[i] >= tokenizer_vocab_size(tok))
				abort();
	}
	openai_req_free(&r);
	return 0;
}
