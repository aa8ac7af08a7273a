// SPDX-License-Identifier: Apache-2.0
/* json_same.h: are two cJSON trees the same, item for item, as json.h promises of json_parse_strict
 * against cJSON_ParseWithLength? Types (all flag bits), strings and keys byte for byte, numbers
 * bit for bit, valueint, order, and the links cJSON keeps (next, prev, the first item's prev at
 * the last). Used by tests/unit/test_json.c and tests/fuzz/fuzz_json.c. */
#ifndef KVS_TESTS_JSON_SAME_H
#define KVS_TESTS_JSON_SAME_H

#include <stdbool.h>
#include <string.h>

#include <cjson/cJSON.h>

static inline bool json_str_same(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static inline bool json_same(const cJSON *a, const cJSON *b, int depth)
{
	if (!a || !b)
		return a == b;
	if (depth > 2000 || a->type != b->type || a->valueint != b->valueint ||
	    memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) != 0 ||
	    !json_str_same(a->valuestring, b->valuestring) ||
	    !json_str_same(a->string, b->string) || !a->child != !b->child)
		return false;
	if (a->child) {
		const cJSON *x = a->child, *y = b->child, *xl = NULL, *yl = NULL;

		for (; x && y; xl = x, yl = y, x = x->next, y = y->next) {
			if ((x != a->child && x->prev != xl) || (y != b->child && y->prev != yl))
				return false;
			if (!json_same(x, y, depth + 1))
				return false;
		}
		if (x || y || (a->child->prev == xl) != (b->child->prev == yl))
			return false;
	}
	return true;
}

#endif
