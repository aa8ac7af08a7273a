// SPDX-License-Identifier: Apache-2.0
/* daemon/tokenizers: the entries of a Service's kvsplice.io/model-tokenizers, and the ones
 * refused so that a Service's author cannot make the daemon read outside --tokenizer-root. */
#include <errno.h>
#include <string.h>

#include "daemon/tokenizers.h"
#include "tap.h"

static const struct {
	const char *in, *name, *dir; /* NULL name: refused */
	const char *what;
} cases[] = {
    {"Qwen/Qwen3-0.6B=qwen3", "Qwen/Qwen3-0.6B", "qwen3", "NAME=DIR"},
    {"  m=hub/models--a--b/snapshots/0123 ", "m", "hub/models--a--b/snapshots/0123",
     "a snapshot path, blanks around the entry trimmed"},
    {"m=a..b/c", "m", "a..b/c", "'..' inside a component is a name"},
    {"m=./x", "m", "./x", "'.' stays under the root"},
    {"m", NULL, NULL, "no '='"},
    {"=x", NULL, NULL, "an empty name"},
    {"m=", NULL, NULL, "an empty directory"},
    {"m=/etc", NULL, NULL, "an absolute directory"},
    {"m=..", NULL, NULL, "'..' alone"},
    {"m=a/../../etc", NULL, NULL, "'..' in the middle"},
    {"m=a/..", NULL, NULL, "'..' at the end"},
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char name[64], dir[64];
		const char *why = NULL;
		int rc = tokenizers_entry(cases[i].in, strlen(cases[i].in), name, dir, sizeof(name),
					  &why);

		if (cases[i].name)
			CHECK(rc == 0 && !strcmp(name, cases[i].name) && !strcmp(dir, cases[i].dir),
			      "%s: '%s' -> '%s' in '%s'", cases[i].what, cases[i].in, name, dir);
		else
			CHECK(rc == -EINVAL && why, "%s: '%s' refused (%s)", cases[i].what,
			      cases[i].in, why ? why : "?");
	}
	{
		char name[8], dir[8];
		const char *why = NULL;

		CHECK(tokenizers_entry("model=longer-than-8", 19, name, dir, sizeof(name), &why) ==
			  -EINVAL,
		      "an entry longer than the buffers is refused");
	}
	return tap_done();
}
