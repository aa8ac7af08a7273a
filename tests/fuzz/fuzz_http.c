// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for the http module: request and response heads, the sniffer and the chunked
 * decoder on arbitrary bytes, with invariants checked (a parsed head lies inside the input, a
 * prefix of a complete head never parses as complete, the chunked decoder gives the same result
 * whole and byte-split, a forwarded head parses back with the same framing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/http.h"

#define check(c) check_at(c, __LINE__)
static void check_at(int cond, int line)
{
	if (!cond) {
		fprintf(stderr, "fuzz_http: invariant at line %d broken\n", line);
		abort();
	}
}

static void fuzz_request(const char *p, size_t n)
{
	struct http_msg m, f;
	struct buf b = {0};
	int rc = http_parse_request(p, n, 4096, &m);

	if (rc <= 0) {
		check(rc == 0 || rc == -400 || rc == -431 || rc == -501 || rc == -505);
		return;
	}
	check((size_t)rc <= n && (size_t)rc <= 4096 && m.head_len == (size_t)rc);
	for (size_t i = 0; i < m.nheaders; i++)
		check(m.headers[i].name >= p &&
		      m.headers[i].value + m.headers[i].value_len <= p + rc);
	/* the head minus its last byte is incomplete */
	check(http_parse_request(p, (size_t)rc - 1, 4096, &f) <= 0);
	/* forwarding keeps the framing */
	check(http_write_request_head(&b, &m, m.body != HTTP_BODY_NONE, 5, false, "10.1.2.3") == 0);
	rc = http_parse_request(b.data, b.len, 1 << 20, &f);
	if (rc == -431 && m.nheaders >= HTTP_MAX_HEADERS - 1) /* + Content-Length, Connection */
		goto cleanup;
	check(rc == (int)b.len);
	check(f.body == (m.body != HTTP_BODY_NONE ? HTTP_BODY_LENGTH : HTTP_BODY_NONE));
cleanup:
	buf_free(&b);
}

static void fuzz_chunked(const char *p, size_t n)
{
	struct http_chunked a = {0}, c = {0};
	struct buf oa = {0}, oc = {0};
	bool da = false, dc = false;
	ssize_t ua = http_chunked_feed(&a, p, n, &oa, &da), uc = 0;
	int err = 0;

	for (size_t i = 0; i < n && !dc; i++) {
		ssize_t u = http_chunked_feed(&c, p + i, 1, &oc, &dc);

		if (u < 0) {
			err = 1;
			break;
		}
		uc += u;
	}
	check((ua < 0) == err);
	if (ua >= 0) {
		check(ua == uc && da == dc && oa.len == oc.len && a.total == oa.len);
		check(oa.len == 0 || memcmp(oa.data, oc.data, oa.len) == 0);
	}
	buf_free(&oa);
	buf_free(&oc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct http_msg m;
	int rc;

	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0:
		fuzz_request(p + 1, size - 1);
		break;
	case 1:
		rc = http_parse_response(p + 1, size - 1, 4096, (size & 1) ? "HEAD" : "GET", &m);
		check(rc == 0 || rc == -502 || (rc > 0 && (size_t)rc <= size - 1));
		break;
	case 2:
		fuzz_chunked(p + 1, size - 1);
		break;
	default:
		rc = http_sniff_request(p + 1, size - 1);
		check(rc == 0 || rc == 1);
		/* what parses as a request always sniffs as HTTP */
		if (http_parse_request(p + 1, size - 1, 4096, &m) > 0)
			check(rc == 1);
		break;
	}
	return 0;
}
