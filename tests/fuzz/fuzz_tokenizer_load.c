// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for tokenizer_load: the input is a tokenizer.json (seed: a small byte-level
 * BPE, tests/fuzz/corpus/fuzz_tokenizer_load/mini.json), loaded from a memfd. Checked: no crash,
 * no sanitizer report; a refusal comes with a message; a tokenizer that loads encodes the input
 * itself and decodes the ids again without error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/buf.h"
#include "prompt/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64], err[512];
	struct tokenizer *t;
	struct tok_ids ids = {0};
	struct buf out = {0};
	int fd = memfd_create("fuzz-tokenizer-json", 0);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err[0] = '\0';
	t = tokenizer_load(path, err, sizeof(err));
	close(fd);
	if (!t) {
		if (!err[0])
			abort(); /* a refusal must say why */
		return 0;
	}
	if (tokenizer_encode(t, (const char *)data, size > 4096 ? 4096 : size, &ids))
		abort();
	if (tokenizer_decode(t, ids.v, ids.n, &out))
		abort();
	tok_ids_free(&ids);
	buf_free(&out);
	tokenizer_free(t);
	return 0;
}
