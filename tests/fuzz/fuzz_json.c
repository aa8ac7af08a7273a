// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target, differential: json.h's strict reader against cJSON on arbitrary bytes. Where
 * json_parse_strict gives a tree, cJSON_ParseWithLength must give the same tree (json_same.h:
 * types, strings, numbers bit for bit, keys, order, links); where it declines, nothing is asked
 * of it but to free what it made (LSan). json_parse must equal cJSON either way.
 * Most fuzzed inputs are not JSON, so each tree cJSON reads is also printed back
 * (cJSON_PrintUnformatted: strict JSON) and read again: that text the strict reader must take,
 * unless nested deeper than JSON_DEPTH_MAX, and give cJSON's tree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "json_same.h"

static int depth_of(const cJSON *j)
{
	int d = 0;

	for (const cJSON *c = j->child; c; c = c->next) {
		int k = depth_of(c);

		if (k > d)
			d = k;
	}
	return j->child || cJSON_IsArray(j) || cJSON_IsObject(j) ? d + 1 : 0;
}

static void same_as_cjson(const char *s, size_t n, bool must_take)
{
	cJSON *ref = cJSON_ParseWithLength(s, n), *fast = NULL, *any;
	int rc = json_parse_strict(s, n, &fast);

	if (rc < 0 || (rc == 0) != (fast == NULL) || (must_take && rc != 1))
		abort();
	if (fast && !json_same(fast, ref, 0))
		abort(); /* accepted, but not cJSON's tree */
	any = json_parse(s, n);
	if (!json_same(any, ref, 0))
		abort();
	if (ref && !must_take) {
		char *txt = cJSON_PrintUnformatted(ref);

		if (txt)
			same_as_cjson(txt, strlen(txt), depth_of(ref) <= JSON_DEPTH_MAX);
		cJSON_free(txt);
	}
	cJSON_Delete(any);
	cJSON_Delete(fast);
	cJSON_Delete(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	same_as_cjson((const char *)data, size, false);
	return 0;
}
