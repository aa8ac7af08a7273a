// SPDX-License-Identifier: Apache-2.0
/* json.h: cJSON_ParseWithLength, faster on the JSON that clients send.
 *
 * cJSON reads a string byte by byte twice (once for its end, once to copy it) and every number
 * through strtod; on an 11 KB chat body that is ~15 µs, the largest part of a routing decision
 * whose prompt the encoding cache already holds (5 µs with this reader), and 300 µs for a prompt
 * of 3,000 token ids (90). json_parse first tries a strict reader (RFC 8259 JSON, with the limits
 * below) that reads a string in one pass, 16 bytes at a time (SSE2), and integers of up to 15
 * digits without strtod; on anything outside what it reads it gives up and cJSON parses the text,
 * so the result is always cJSON's.
 *
 * The contract, checked by tests/fuzz/fuzz_json.c on arbitrary bytes: where json_parse_strict
 * returns a tree, cJSON_ParseWithLength returns the same tree (types, strings byte for byte,
 * numbers bit for bit, valueint, keys, order, the prev links cJSON keeps); where it declines,
 * json_parse is cJSON_ParseWithLength. The tree is made of cJSON's own items (cJSON_malloc), so
 * cJSON_Delete frees it.
 *
 * Declined (left to cJSON, which accepts some of it and refuses the rest): a byte order mark,
 * white space other than space, tab, LF and CR; anything after the value but white space; a
 * control byte (< 0x20) inside a string; \u0000, a lone or reversed surrogate, \u with fewer than
 * four hex digits; a number longer than JSON_NUM_MAX characters; nesting deeper than
 * JSON_DEPTH_MAX; every syntax error. Safe from any thread: its only state is a scratch buffer of
 * each thread's own (up to 256 KiB, freed with the thread). */
#ifndef KVS_JSON_H
#define KVS_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define JSON_DEPTH_MAX 256 /* arrays and objects inside each other (cJSON: 1,000) */
#define JSON_NUM_MAX 48	   /* characters of a number (cJSON copies at most 63 to strtod) */

/* The tree of s[0..n), as cJSON_ParseWithLength(s, n) gives it; NULL where it gives NULL. */
cJSON *json_parse(const char *s, size_t n);

/* json_parse, and in *strict whether the strict reader read s (false: cJSON did, or nothing
 * could). What the strict reader takes holds no \u0000 (it declines one). */
cJSON *json_parse_reader(const char *s, size_t n, bool *strict);

/* The strict reader alone: 1 and *out set (free with cJSON_Delete), 0 declined (*out NULL:
 * outside what it reads, see above), -ENOMEM. */
int json_parse_strict(const char *s, size_t n, cJSON **out);

/* The value of key in object obj as Python's json.loads keeps it (vLLM's frontend reads request
 * bodies so): the last of repeated keys, where cJSON_GetObjectItem gives the first. NULL when obj
 * is not an object or has no such key. */
const cJSON *json_get(const cJSON *obj, const char *key);

#endif
