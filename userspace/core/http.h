/* SPDX-License-Identifier: Apache-2.0 */
/* http: strict, incremental HTTP/1.x message parsing and framing shared by the proxy, kvsim and
 * kvbench. Parsing never copies: a parsed head points into the caller's buffer, which must stay
 * unchanged while the http_msg is used. Nothing here does I/O. */
#ifndef KVS_HTTP_H
#define KVS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/buf.h"

#define HTTP_MAX_HEADERS 64

struct http_header {
	const char *name;
	size_t name_len;
	const char *value; /* leading and trailing whitespace removed */
	size_t value_len;
};

enum http_body {
	HTTP_BODY_NONE,	   /* no body (e.g. GET, 204, 304, HEAD response) */
	HTTP_BODY_LENGTH,  /* Content-Length bytes */
	HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked */
	HTTP_BODY_EOF,	   /* response delimited by connection close */
};

struct http_msg {
	const char *method; /* request */
	size_t method_len;
	const char *target;
	size_t target_len;
	int status; /* response */
	const char *reason;
	size_t reason_len;
	int minor_version; /* HTTP/1.<minor>: 0 or 1 */
	size_t head_len;   /* bytes of the head including the blank line */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t nheaders;
	enum http_body body;
	uint64_t content_length; /* when body == HTTP_BODY_LENGTH */
	bool keep_alive;	 /* after this message (version default, Connection header) */
	bool expect_continue;	 /* request sent "Expect: 100-continue" */
	bool upgrade;		 /* Connection: upgrade / Upgrade header present */
};

/* Parses a request head from buf[0..len). Returns the head length (> 0) when complete, 0 when more
 * bytes are needed, or a negative HTTP status to answer with: -400 malformed (including bytes that
 * are not HTTP/1.x), -431 head longer than max_head, -501 unsupported Transfer-Encoding, -505
 * unsupported version. Conflicting or repeated Content-Length, Content-Length with chunked, and
 * obsolete line folding are -400 (request smuggling). */
int http_parse_request(const char *buf, size_t len, size_t max_head, struct http_msg *m);

/* Parses a response head the same way. req_method is the request's method ("HEAD" responses
 * have no body). Returns head length, 0, or -502 when the response is malformed. 1xx responses
 * parse with body NONE; the caller skips them and parses again. */
int http_parse_response(const char *buf, size_t len, size_t max_head, const char *req_method,
			struct http_msg *m);

/* Could these first bytes of a connection start an HTTP/1.x request? Returns 1 yes / maybe (too
 * few bytes to tell), 0 no (TLS ClientHello, HTTP/2 preface, anything else). */
int http_sniff_request(const char *buf, size_t len);

/* The header called name (case-insensitive), or NULL. */
const struct http_header *http_find_header(const struct http_msg *m, const char *name);

/* Does a header's comma-separated value contain token (case-insensitive)? */
bool http_header_has_token(const struct http_header *h, const char *token);

/* Incremental chunked transfer-coding decoder: feed it the body bytes as they arrive. */
struct http_chunked {
	int state;
	uint64_t remaining; /* data bytes left in the current chunk */
	uint64_t total;	    /* data bytes decoded so far */
	size_t line_len;    /* bytes of the current size/trailer line (bounded) */
};

/* Feeds p[0..n). Returns the number of bytes that belong to this message (< n only when the
 * message ended before n), or -1 when the coding is malformed. Decoded data is appended to out
 * when out is not NULL. *done becomes true after the last chunk and the trailers. */
ssize_t http_chunked_feed(struct http_chunked *c, const char *p, size_t n, struct buf *out,
			  bool *done);

/* Appends a complete response with an OpenAI-style JSON error body:
 * {"error":{"message":...,"type":...,"param":null,"code":status}} and "Connection: close"
 * when close is true. */
int http_write_error(struct buf *out, int status, const char *type, const char *message,
		     bool close);
/* The same with "Retry-After: retry_after_s" when retry_after_s > 0 (load shed). Both return 0,
 * or -ENOMEM with out as it was (nothing half-written). */
int http_write_error_retry(struct buf *out, int status, const char *type, const char *message,
			   bool close, int retry_after_s);

/* Appends the head of request m as the proxy forwards it upstream: the request line, every
 * end-to-end header (hop-by-hop and framing headers dropped: Connection and the headers it names,
 * Keep-Alive, Proxy-Connection, TE, Transfer-Encoding, Content-Length, Expect, Upgrade, Trailer),
 * then "Content-Length: body_len" when has_body, "Connection: upgrade" + the Upgrade header when
 * upgrade, "Connection: keep-alive" for an HTTP/1.0 request, and the blank line. With
 * forwarded_for (the client's address as text), m's X-Forwarded-For headers are replaced by one
 * that lists their values and then forwarded_for ("X-Forwarded-For: 10.0.0.1, 10.0.0.2");
 * NULL leaves them as they are. Returns 0 or -ENOMEM. */
int http_write_request_head(struct buf *out, const struct http_msg *m, bool has_body,
			    uint64_t body_len, bool upgrade, const char *forwarded_for);

/* Appends the head of response m as it was, but with its Connection and Keep-Alive headers
 * replaced by "Connection: close" (the proxy closes the client's connection after it). The
 * status line keeps m's version, status and reason. Returns 0 or -ENOMEM. */
int http_write_response_head_close(struct buf *out, const struct http_msg *m);

/* The standard reason phrase for a status ("Bad Request"), or "Unknown". */
const char *http_reason(int status);

#endif
