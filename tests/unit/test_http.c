// SPDX-License-Identifier: Apache-2.0
/* http module: golden tables {input, expected, description} for request and response heads,
 * chunked bodies, the sniffer, errors and the forwarded head; every complete input is also fed
 * split at every byte. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "core/http.h"
#include "tap.h"

#define MAXH 8192
#define WHOLE 1000000 /* expected rc: the whole input is the head */

struct req_case {
	const char *in;
	int rc; /* WHOLE, 0 (need more), or a negative status */
	enum http_body body;
	uint64_t cl;
	int keep_alive;
	int expect;
	int upgrade;
	const char *desc;
};

#define H11 " HTTP/1.1\r\nHost: x\r\n"
static const struct req_case req_cases[] = {
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0, "simple GET"},
    {"GET / HTTP/1.0\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 0, 0, 0, "HTTP/1.0 defaults to close"},
    {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "HTTP/1.0 keep-alive"},
    {"GET /" H11 "Connection: close\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 0, 0, 0,
     "Connection: close"},
    {"GET /" H11 "Connection: foo, CLOSE\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 0, 0, 0,
     "close token in a list, any case"},
    {"POST /v1/chat/completions" H11 "Content-Length: 12\r\n\r\n", WHOLE, HTTP_BODY_LENGTH, 12, 1,
     0, 0, "POST with Content-Length"},
    {"POST /" H11 "Content-Length: 0\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "Content-Length 0 is no body"},
    {"POST /" H11 "Transfer-Encoding: chunked\r\n\r\n", WHOLE, HTTP_BODY_CHUNKED, 0, 1, 0, 0,
     "chunked"},
    {"POST /" H11 "Transfer-Encoding: Chunked\r\n\r\n", WHOLE, HTTP_BODY_CHUNKED, 0, 1, 0, 0,
     "chunked is case-insensitive"},
    {"POST /" H11 "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", WHOLE, HTTP_BODY_LENGTH, 5,
     1, 1, 0, "Expect: 100-continue"},
    {"GET /ws" H11 "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1,
     0, 1, "upgrade"},
    {"GET /" H11 "Upgrade: h2c\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "Upgrade without Connection: upgrade is ignored"},
    {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "one leading empty line ignored"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Sp:   v  \r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0,
     0, "empty value and OWS trimmed"},
    {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "HTTP/1.2 answered as 1.1"},
    {"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "non-ASCII in the target"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", WHOLE, HTTP_BODY_NONE, 0, 1, 0, 0,
     "obs-text in a value"},
    /* incomplete */
    {"", 0, 0, 0, 0, 0, 0, "empty input needs more"},
    {"GET / HTTP/1.1\r\nHost: a\r\n", 0, 0, 0, 0, 0, 0, "no blank line yet"},
    {"GET / HTTP/1.1\r\nHost: a\r\n\r", 0, 0, 0, 0, 0, 0, "last LF missing"},
    /* malformed */
    {"GET / HTTP/1.1\nHost: a\n\n", -400, 0, 0, 0, 0, 0, "bare LF line ends"},
    {"GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", -400, 0, 0, 0, 0, 0, "bare CR"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", -400, 0, 0, 0, 0, 0, "NUL in a value"},
    {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "two spaces after the method"},
    {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "space after the version"},
    {"GET /\r\n\r\n", -400, 0, 0, 0, 0, 0, "HTTP/0.9 request line"},
    {"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "non-token method"},
    {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", -505, 0, 0, 0, 0, 0, "HTTP/2.0 request line"},
    {"GET / HTTP/0.9\r\nHost: a\r\n\r\n", -505, 0, 0, 0, 0, 0, "HTTP/0.9 version"},
    {"GET / HTTP/1.x\r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "bad minor version"},
    {"GET / http/1.1\r\nHost: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "lower-case protocol name"},
    {"GET / HTTP/1.1\r\n\r\n", -400, 0, 0, 0, 0, 0, "HTTP/1.1 without Host"},
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -400, 0, 0, 0, 0, 0, "two Host headers"},
    {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", -400, 0, 0, 0, 0, 0, "space before the colon"},
    {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", -400, 0, 0, 0, 0, 0, "obs-fold"},
    {"GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", -400, 0, 0, 0, 0, 0, "empty header name"},
    {"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", -400, 0, 0, 0, 0, 0, "no colon"},
    {"GET / HTTP/1.1\r\nHo\x01st: a\r\n\r\n", -400, 0, 0, 0, 0, 0, "control byte in a name"},
    {"GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", -400, 0, 0, 0, 0, 0, "DEL in a value"},
    {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", -400, 0, 0, 0, 0, 0,
     "TLS bytes are malformed as a request"},
    /* smuggling */
    {"POST /" H11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "CL.TE"},
    {"POST /" H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "TE.CL"},
    {"POST /" H11 "Content-Length: 5\r\nContent-Length: 5\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "repeated identical Content-Length"},
    {"POST /" H11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "conflicting Content-Length"},
    {"POST /" H11 "Content-Length: 5, 5\r\n\r\n", -400, 0, 0, 0, 0, 0, "Content-Length list"},
    {"POST /" H11 "Content-Length: +5\r\n\r\n", -400, 0, 0, 0, 0, 0, "signed Content-Length"},
    {"POST /" H11 "Content-Length: 0x5\r\n\r\n", -400, 0, 0, 0, 0, 0, "hex Content-Length"},
    {"POST /" H11 "Content-Length: \r\n\r\n", -400, 0, 0, 0, 0, 0, "empty Content-Length"},
    {"POST /" H11 "Content-Length: 99999999999999999999\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "Content-Length overflow"},
    {"POST /" H11 "Content-Length: 1 2\r\n\r\n", -400, 0, 0, 0, 0, 0, "space inside CL"},
    {"POST /" H11 "Transfer-Encoding: chunked, chunked\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "chunked twice"},
    {"POST /" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -400, 0, 0, 0,
     0, 0, "chunked in two headers"},
    {"POST /" H11 "Transfer-Encoding: chunked, identity\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "chunked not final"},
    {"POST /" H11 "Transfer-Encoding: identity\r\n\r\n", -400, 0, 0, 0, 0, 0, "TE without chunked"},
    {"POST /" H11 "Transfer-Encoding: xchunked\r\n\r\n", -400, 0, 0, 0, 0, 0, "xchunked"},
    {"POST /" H11 "Transfer-Encoding: chunked\x0b\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "vertical tab after chunked"},
    {"POST /" H11 "Transfer-Encoding: ,chunked\r\n\r\n", -400, 0, 0, 0, 0, 0, "empty TE element"},
    {"POST /" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", -501, 0, 0, 0, 0, 0,
     "gzip transfer coding unsupported"},
    {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "chunked in HTTP/1.0"},
    {"POST /" H11 "Transfer-Encoding : chunked\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "space before the TE colon"},
    {"POST /" H11 "Transfer-Encoding: chunked\r\n Content-Length: 3\r\n\r\n", -400, 0, 0, 0, 0, 0,
     "folded line hiding a CL"},
};

static void test_request_table(void)
{
	for (size_t i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];
		/* inputs with embedded NUL: take the length from the literal where it matters */
		size_t n = strlen(c->in);
		struct http_msg m;
		int want, rc;

		if (strstr(c->desc, "NUL"))
			n = strlen(c->in) + 1 + strlen(c->in + strlen(c->in) + 1) + 0;
		want = c->rc == WHOLE ? (int)n : c->rc;
		rc = http_parse_request(c->in, n, MAXH, &m);
		CHECK_EQ(rc, want, c->desc);
		if (rc > 0 && c->rc == WHOLE) {
			CHECK(m.body == c->body && m.content_length == c->cl &&
				  m.keep_alive == !!c->keep_alive &&
				  m.expect_continue == !!c->expect && m.upgrade == !!c->upgrade,
			      "%s: body %d cl %llu keep-alive %d expect %d upgrade %d", c->desc,
			      m.body, (unsigned long long)m.content_length, m.keep_alive,
			      m.expect_continue, m.upgrade);
		}
		/* split at every byte: a prefix is incomplete (0) or already the same error */
		if (c->rc != 0) {
			int bad = 0;

			for (size_t k = 0; k < n; k++) {
				int r = http_parse_request(c->in, k, MAXH, &m);

				if (!(r == 0 || (r < 0 && r == want)))
					bad++;
			}
			CHECK_EQ(bad, 0, "every prefix of the input needs more or fails the same");
		}
	}
}

static void test_request_fields(void)
{
	const char *in =
	    "POST /v1/completions?x=1 HTTP/1.1\r\nHost: node:8000\r\n"
	    "Content-Type: application/json\r\nX-Trim:  a b \t\r\nContent-Length: 7\r\n"
	    "\r\n{\"a\":1}";
	struct http_msg m;
	const struct http_header *h;
	int rc = http_parse_request(in, strlen(in), MAXH, &m);

	CHECK_EQ(rc, (int)(strlen(in) - 7), "head length excludes the body");
	CHECK(m.method_len == 4 && memcmp(m.method, "POST", 4) == 0, "method");
	CHECK(m.target_len == 19 && memcmp(m.target, "/v1/completions?x=1", 19) == 0, "target");
	CHECK_EQ(m.nheaders, 4, "header count");
	h = http_find_header(&m, "x-trim");
	CHECK(h && h->value_len == 3 && memcmp(h->value, "a b", 3) == 0,
	      "value whitespace trimmed at both ends, kept inside");
	h = http_find_header(&m, "CONTENT-TYPE");
	CHECK(h && h->value_len == 16, "find_header is case-insensitive");
	CHECK(http_find_header(&m, "content") == NULL, "find_header matches whole names only");
}

static void test_limits(void)
{
	struct buf b = {0};
	struct http_msg m;
	int rc;

	buf_puts(&b, "GET / HTTP/1.1\r\nHost: a\r\n");
	while (b.len < 9000)
		buf_puts(&b, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
	rc = http_parse_request(b.data, b.len, 8192, &m);
	CHECK_EQ(rc, -431, "head longer than max_head without its end: 431");
	buf_puts(&b, "\r\n");
	rc = http_parse_request(b.data, b.len, 8192, &m);
	CHECK_EQ(rc, -431, "complete head longer than max_head: 431");
	rc = http_parse_request(b.data, b.len, 65536, &m);
	CHECK_EQ(rc, -431, "more than HTTP_MAX_HEADERS headers: 431");
	buf_reset(&b);
	buf_puts(&b, "GET / HTTP/1.1\r\nHost: a\r\n");
	for (int i = 0; i < HTTP_MAX_HEADERS - 1; i++)
		buf_printf(&b, "X-%d: v\r\n", i);
	buf_puts(&b, "\r\n");
	rc = http_parse_request(b.data, b.len, 65536, &m);
	CHECK_EQ(rc, (int)b.len, "exactly HTTP_MAX_HEADERS headers parse");
	buf_reset(&b);
	buf_puts(&b, "GET /");
	while (b.len < 9000)
		buf_puts(&b, "aaaaaaaaaa");
	rc = http_parse_request(b.data, b.len, 8192, &m);
	CHECK_EQ(rc, -431, "request line longer than max_head: 431");
	buf_free(&b);
}

static void test_pipelined(void)
{
	const char *in = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
			 "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
			 "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
			 "3;ext=1\r\nxyz\r\n0\r\nTrailer: t\r\n\r\n"
			 "GET /d HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *targets[] = {"/a", "/b", "/c", "/d"};
	size_t off = 0, len = strlen(in);
	int n = 0;

	while (off < len && n < 4) {
		struct http_msg m;
		int rc = http_parse_request(in + off, len - off, MAXH, &m);

		if (!CHECK(rc > 0, "pipelined request %d parses", n))
			return;
		CHECK(m.target_len == 2 && memcmp(m.target, targets[n], 2) == 0,
		      "pipelined request %d target", n);
		off += (size_t)rc;
		if (m.body == HTTP_BODY_LENGTH) {
			off += m.content_length;
		} else if (m.body == HTTP_BODY_CHUNKED) {
			struct http_chunked ch = {0};
			struct buf out = {0};
			bool done;
			ssize_t used = http_chunked_feed(&ch, in + off, len - off, &out, &done);

			CHECK(done && used == 31 && strcmp(out.data, "xyz") == 0,
			      "chunked body stops at its end, not at the end of the buffer");
			off += (size_t)(used > 0 ? used : 0);
			buf_free(&out);
		}
		n++;
	}
	CHECK_EQ(n, 4, "four pipelined requests");
	CHECK_EQ(off, len, "all bytes accounted for");
}

struct resp_case {
	const char *in;
	const char *method;
	int rc;
	int status;
	enum http_body body;
	uint64_t cl;
	int keep_alive;
	const char *desc;
};

static const struct resp_case resp_cases[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_LENGTH, 5, 1,
     "200 with length"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "POST", WHOLE, 200, HTTP_BODY_CHUNKED,
     0, 1, "chunked (SSE)"},
    {"HTTP/1.1 200 OK\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_EOF, 0, 0, "no framing: until close"},
    {"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_LENGTH, 1, 0,
     "HTTP/1.0 response closes"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", "GET", WHOLE, 200,
     HTTP_BODY_LENGTH, 5, 0, "Connection: close"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", WHOLE, 200, HTTP_BODY_NONE, 0, 1,
     "HEAD response has no body"},
    {"HTTP/1.1 204 No Content\r\n\r\n", "GET", WHOLE, 204, HTTP_BODY_NONE, 0, 1, "204"},
    {"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", "GET", WHOLE, 304, HTTP_BODY_NONE, 0,
     1, "304 ignores its length"},
    {"HTTP/1.1 100 Continue\r\n\r\n", "POST", WHOLE, 100, HTTP_BODY_NONE, 0, 1, "100 Continue"},
    {"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_NONE, 0, 1,
     "no reason phrase, no space"},
    {"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_NONE, 0, 1,
     "empty reason phrase"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", "GET", WHOLE, 200,
     HTTP_BODY_LENGTH, 3, 1, "identical repeated CL tolerated in a response"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", WHOLE,
     200, HTTP_BODY_CHUNKED, 0, 0, "TE wins over CL, then close"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET", WHOLE, 200, HTTP_BODY_EOF, 0, 0,
     "TE not chunked: until close"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "GET", -502, 0, 0, 0, 0,
     "conflicting CL"},
    {"HTTP/1.1 2x0 OK\r\n\r\n", "GET", -502, 0, 0, 0, 0, "bad status code"},
    {"HTTP/1.1 099 Low\r\n\r\n", "GET", -502, 0, 0, 0, 0, "status below 100"},
    {"HTTP/1.1 200 OK\nContent-Length: 0\n\n", "GET", -502, 0, 0, 0, 0, "bare LF"},
    {"ICY 200 OK\r\n\r\n", "GET", -502, 0, 0, 0, 0, "not HTTP"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n", "GET", 0, 0, 0, 0, 0, "incomplete"},
};

static void test_response_table(void)
{
	for (size_t i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
		const struct resp_case *c = &resp_cases[i];
		size_t n = strlen(c->in);
		int want = c->rc == WHOLE ? (int)n : c->rc, bad = 0;
		struct http_msg m;
		int rc = http_parse_response(c->in, n, MAXH, c->method, &m);

		CHECK_EQ(rc, want, c->desc);
		if (rc > 0)
			CHECK(m.status == c->status && m.body == c->body &&
				  m.content_length == c->cl && m.keep_alive == !!c->keep_alive,
			      "%s: status %d body %d cl %llu keep-alive %d", c->desc, m.status,
			      m.body, (unsigned long long)m.content_length, m.keep_alive);
		for (size_t k = 0; k < n; k++) {
			int r = http_parse_response(c->in, k, MAXH, c->method, &m);

			if (!(r == 0 || r == want))
				bad++;
		}
		CHECK_EQ(bad, 0, "every prefix of the response needs more or fails the same");
	}
}

struct chunk_case {
	const char *in;
	int used; /* bytes of the message, or -1 */
	const char *out;
	int done;
	const char *desc;
};

static const struct chunk_case chunk_cases[] = {
    {"5\r\nhello\r\n0\r\n\r\n", 15, "hello", 1, "one chunk"},
    {"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT", 26, "hello world", 1,
     "two chunks, stops at the message end"},
    {"A\r\n0123456789\r\n0\r\n\r\n", 20, "0123456789", 1, "upper-case hex"},
    {"a\r\n0123456789\r\n0\r\n\r\n", 20, "0123456789", 1, "lower-case hex"},
    {"000005\r\nhello\r\n0\r\n\r\n", 20, "hello", 1, "leading zeros"},
    {"5;name=value\r\nhello\r\n0\r\n\r\n", 26, "hello", 1, "chunk extension"},
    {"5 ; a=\"q;x\"\r\nhello\r\n0;last\r\n\r\n", 30, "hello", 1, "BWS and quoted extension"},
    {"5\r\nhello\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n", 35, "hello", 1, "trailers"},
    {"0\r\n\r\n", 5, "", 1, "empty body"},
    {"5\r\nhel", 6, "hel", 0, "partial data"},
    {"5\r\nhello\r\n", 10, "hello", 0, "waiting for the next size"},
    {"5\r\nhello\r\n0\r\n", 13, "hello", 0, "waiting for the trailers' end"},
    {"5\nhello\r\n0\r\n\r\n", -1, "", 0, "bare LF after size"},
    {"5\r\nhello\n0\r\n\r\n", -1, "", 0, "bare LF after data"},
    {"5\r\nhelloX\r\n0\r\n\r\n", -1, "", 0, "data longer than its size"},
    {"5\r\nhello\r\n0\r\n\n", -1, "", 0, "bare LF at the end"},
    {"-5\r\nhello\r\n", -1, "", 0, "negative size"},
    {"0x5\r\nhello\r\n", -1, "", 0, "0x prefix"},
    {"\r\nhello\r\n", -1, "", 0, "missing size"},
    {" 5\r\nhello\r\n", -1, "", 0, "space before size"},
    {"5 5\r\nhello\r\n", -1, "", 0, "space inside the size"},
    {"5\t5\r\nhello\r\n", -1, "", 0, "tab inside the size"},
    {"5 \r\nhello\r\n0\r\n\r\n", 16, "hello", 1, "whitespace after the size (BWS)"},
    {"5\x00\r\nhello\r\n", -1, "", 0, "NUL after size"},
    {"fffffffffffffffff\r\n", -1, "", 0, "size overflow"},
    {"5;a\x01\r\nhello\r\n", -1, "", 0, "control byte in extension"},
    {"5\r\nhello\r\n0\r\n folded\r\n\r\n", -1, "", 0, "folded trailer"},
    {"5\r\nhello\r\n0\r\nX\rY\r\n\r\n", -1, "", 0, "bare CR in a trailer"},
};

static void test_chunked_table(void)
{
	for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
		const struct chunk_case *c = &chunk_cases[i];
		size_t n = strlen(c->in);
		struct http_chunked ch = {0};
		struct buf out = {0};
		bool done = false;
		ssize_t used;

		if (strstr(c->desc, "NUL"))
			n = 7;
		used = http_chunked_feed(&ch, c->in, n, &out, &done);
		CHECK_EQ(used, c->used, c->desc);
		if (used >= 0)
			CHECK(done == !!c->done && strcmp(out.data ? out.data : "", c->out) == 0 &&
				  ch.total == strlen(c->out),
			      "%s: decoded and done", c->desc);
		buf_free(&out);

		/* byte at a time: same result */
		memset(&ch, 0, sizeof(ch));
		ssize_t total = 0;
		int err = 0;
		done = false;
		for (size_t k = 0; k < n && !done; k++) {
			ssize_t u = http_chunked_feed(&ch, c->in + k, 1, &out, &done);

			if (u < 0) {
				err = 1;
				break;
			}
			total += u;
		}
		if (c->used < 0)
			CHECK(err, "%s: byte at a time also fails", c->desc);
		else
			CHECK(!err && total == c->used && done == !!c->done &&
				  strcmp(out.data ? out.data : "", c->out) == 0,
			      "%s: byte at a time gives the same", c->desc);
		buf_free(&out);
	}
}

static void test_chunked_split_everywhere(void)
{
	const char *in =
	    "4;a=b\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\n";
	size_t n = strlen(in);
	int bad = 0;

	for (size_t k = 0; k <= n; k++) {
		struct http_chunked ch = {0};
		struct buf out = {0};
		bool done = false;
		ssize_t a = http_chunked_feed(&ch, in, k, &out, &done);
		ssize_t b = done ? 0 : http_chunked_feed(&ch, in + k, n - k, &out, &done);

		if (a < 0 || b < 0 || (size_t)(a + b) != n || !done ||
		    strcmp(out.data, "wikipedia in\r\n\r\nchunks.") != 0)
			bad++;
		buf_free(&out);
	}
	CHECK_EQ(bad, 0, "chunked body split at every byte decodes the same");
}

static void test_chunked_line_limit(void)
{
	struct buf b = {0};
	struct http_chunked ch = {0};
	bool done;

	buf_puts(&b, "5;");
	while (b.len < 5000)
		buf_puts(&b, "x=yyyyyyy;");
	ssize_t used = http_chunked_feed(&ch, b.data, b.len, NULL, &done);

	CHECK_EQ(used, -1, "endless chunk extension refused");
	buf_free(&b);
}

struct sniff_case {
	const char *in;
	size_t len;
	int want;
	const char *desc;
};

static const struct sniff_case sniff_cases[] = {
    {"", 0, 1, "nothing yet: maybe"},
    {"G", 1, 1, "one letter: maybe"},
    {"GET / HTTP/1.1\r\n", 16, 1, "GET request line"},
    {"POST /v1/chat/completions HTTP/1.1\r\nHost", 40, 1, "POST"},
    {"OPTIONS * HTTP/1.1\r\n", 20, 1, "OPTIONS *"},
    {"GET / HTTP/1.0\r\n", 16, 1, "HTTP/1.0"},
    {"GET / HTTP/1.1 junk", 19, 1, "HTTP/1.1 then junk: HTTP (parser answers 400)"},
    {"\r\nGET / HTTP/1.1\r\n", 18, 1, "leading CRLF"},
    {"GET /very/long/target", 21, 1, "target incomplete: maybe"},
    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24, 0, "HTTP/2 preface"},
    {"PRI * HT", 8, 0, "HTTP/2 preface prefix"},
    {"PRI", 3, 1, "three letters of PRI: maybe"},
    {"\x16\x03\x01\x02\x00", 5, 0, "TLS ClientHello"},
    {"\x00\x01\x02", 3, 0, "binary"},
    {"SSH-2.0-OpenSSH_9.2\r\n", 21, 0, "SSH banner"},
    {"hello world\r\n", 13, 0, "plain text line"},
    {"GET / HTTP/2.0\r\n", 16, 0, "HTTP/2.0 request line"},
    {"GET / FTP/1.1\r\n", 15, 0, "other protocol name"},
    {"GET /\r\n", 7, 0, "HTTP/0.9"},
    {" GET / HTTP/1.1", 15, 0, "leading space"},
    {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA / HTTP/1.1", 51, 0, "method too long"},
};

static void test_sniff_table(void)
{
	for (size_t i = 0; i < sizeof(sniff_cases) / sizeof(sniff_cases[0]); i++)
		CHECK_EQ(http_sniff_request(sniff_cases[i].in, sniff_cases[i].len),
			 sniff_cases[i].want, sniff_cases[i].desc);
}

static void test_write_error(void)
{
	struct buf b = {0};
	struct http_msg m;
	cJSON *j, *e;
	int rc;

	rc = http_write_error(&b, 413, "invalid_request_error", "body \"too\" large", true);
	CHECK_EQ(rc, 0, "write_error");
	rc = http_parse_response(b.data, b.len, MAXH, "POST", &m);
	CHECK(rc > 0 && m.status == 413 && !m.keep_alive && m.body == HTTP_BODY_LENGTH &&
		  m.content_length == b.len - (size_t)rc,
	      "error response parses back: 413, close, exact length");
	j = cJSON_Parse(b.data + (rc > 0 ? rc : 0));
	e = cJSON_GetObjectItem(j, "error");
	CHECK(
	    e && cJSON_IsString(cJSON_GetObjectItem(e, "message")) &&
		strcmp(cJSON_GetObjectItem(e, "message")->valuestring, "body \"too\" large") == 0 &&
		strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error") == 0 &&
		cJSON_IsNull(cJSON_GetObjectItem(e, "param")) &&
		cJSON_GetObjectItem(e, "code")->valueint == 413,
	    "OpenAI error shape");
	cJSON_Delete(j);
	buf_reset(&b);
	http_write_error(&b, 503, "service_unavailable", "no endpoint", false);
	rc = http_parse_response(b.data, b.len, MAXH, "GET", &m);
	CHECK(rc > 0 && m.keep_alive && strstr(b.data, "503 Service Unavailable"),
	      "keep-alive error with the standard reason");
	CHECK(!strstr(b.data, "Retry-After"), "no Retry-After unless asked");
	buf_reset(&b);
	http_write_error_retry(&b, 503, "server_error", "over the limit", true, 2);
	rc = http_parse_response(b.data, b.len, MAXH, "GET", &m);
	CHECK(rc > 0 && !m.keep_alive && http_find_header(&m, "retry-after") &&
		  strncmp(http_find_header(&m, "retry-after")->value, "2", 1) == 0 &&
		  m.content_length == b.len - (size_t)rc,
	      "shed answer: Retry-After, close, exact length");
	buf_free(&b);
	CHECK_STREQ(http_reason(431), "Request Header Fields Too Large", "reason 431");
	CHECK_STREQ(http_reason(799), "Unknown", "unknown reason");
}

static void test_forward_head(void)
{
	const char *in = "POST /v1/x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\n"
			 "X-Hop: 1\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n"
			 "Expect: 100-continue\r\nTransfer_Encoding: chunked\r\nX-Keep: yes\r\n"
			 "TE: trailers\r\n\r\n";
	struct http_msg m, f;
	struct buf b = {0};
	int rc = http_parse_request(in, strlen(in), MAXH, &m);

	CHECK(rc > 0, "parse the request to forward");
	rc = http_write_request_head(&b, &m, true, 42, false, NULL);
	CHECK_EQ(rc, 0, "write forwarded head");
	rc = http_parse_request(b.data, b.len, MAXH, &f);
	CHECK(rc == (int)b.len && f.body == HTTP_BODY_LENGTH && f.content_length == 42,
	      "forwarded head parses with Content-Length 42");
	CHECK(http_find_header(&f, "x-keep") && http_find_header(&f, "host"),
	      "end-to-end headers kept");
	CHECK(!http_find_header(&f, "connection") && !http_find_header(&f, "x-hop") &&
		  !http_find_header(&f, "keep-alive") && !http_find_header(&f, "te") &&
		  !http_find_header(&f, "expect") && !http_find_header(&f, "transfer-encoding") &&
		  !http_find_header(&f, "transfer_encoding"),
	      "hop-by-hop, Connection-named and underscore framing headers dropped");
	buf_reset(&b);
	in = "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
	http_parse_request(in, strlen(in), MAXH, &m);
	http_write_request_head(&b, &m, false, 0, true, NULL);
	rc = http_parse_request(b.data, b.len, MAXH, &f);
	CHECK(rc > 0 && f.upgrade && f.body == HTTP_BODY_NONE, "upgrade request forwarded");
	buf_free(&b);
}

/* X-Forwarded-For: the client's address appended to what earlier proxies listed, one header */
static void test_forwarded_for(void)
{
	static const struct {
		const char *headers, *want; /* want NULL: no X-Forwarded-For forwarded */
		const char *client;
	} t[] = {
	    {"", "10.0.0.9", "10.0.0.9"},
	    {"X-Forwarded-For: 1.2.3.4\r\n", "1.2.3.4, 10.0.0.9", "10.0.0.9"},
	    {"x-forwarded-for: 1.2.3.4, 5.6.7.8\r\nX-Forwarded-For: 9.9.9.9\r\n",
	     "1.2.3.4, 5.6.7.8, 9.9.9.9, 10.0.0.9", "10.0.0.9"},
	    {"X-Forwarded-For:\r\n", "10.0.0.9", "10.0.0.9"},
	    {"", NULL, NULL},
	    {"X-Forwarded-For: 1.2.3.4\r\n", "1.2.3.4", NULL},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char in[256];
		struct http_msg m, f;
		struct buf b = {0};
		const struct http_header *h;
		size_t nxff = 0;

		snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: h\r\n%sX-Keep: 1\r\n\r\n",
			 t[i].headers);
		CHECK(http_parse_request(in, strlen(in), MAXH, &m) > 0, "xff %zu: parse", i);
		CHECK(http_write_request_head(&b, &m, false, 0, false, t[i].client) == 0,
		      "xff %zu: write", i);
		CHECK(http_parse_request(b.data, b.len, MAXH, &f) == (int)b.len, "xff %zu: reparse",
		      i);
		for (size_t j = 0; j < f.nheaders; j++)
			nxff += f.headers[j].name_len == 15 &&
				strncasecmp(f.headers[j].name, "x-forwarded-for", 15) == 0;
		h = http_find_header(&f, "x-forwarded-for");
		if (!t[i].want)
			CHECK(!h, "xff %zu: none forwarded", i);
		else
			CHECK(h && nxff == 1 && h->value_len == strlen(t[i].want) &&
				  memcmp(h->value, t[i].want, h->value_len) == 0,
			      "xff %zu: \"%s\" (got \"%.*s\", %zu headers)", i, t[i].want,
			      h ? (int)h->value_len : 0, h ? h->value : "", nxff);
		CHECK(http_find_header(&f, "x-keep") != NULL, "xff %zu: other headers kept", i);
		buf_free(&b);
	}
}

int main(void)
{
	test_request_table();
	test_request_fields();
	test_limits();
	test_pipelined();
	test_response_table();
	test_chunked_table();
	test_forwarded_for();
	test_chunked_split_everywhere();
	test_chunked_line_limit();
	test_sniff_table();
	test_write_error();
	test_forward_head();
	return tap_done();
}
