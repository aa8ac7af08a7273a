// SPDX-License-Identifier: Apache-2.0
/* http: strict HTTP/1.x head parsing (RFC 9110/9112) and chunked decoding. Strict on purpose: the
 * proxy sits in front of servers that may read framing differently, so every ambiguity that has
 * been used for request smuggling (CL+TE, repeated CL, obs-fold, bare LF or CR, whitespace before
 * the colon, NUL, chunk-size tricks) is refused here rather than passed on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/ascii.h"
#include "core/http.h"

/* Longest chunk-size line (size + extensions) or trailer line accepted, in bytes. */
#ifndef HTTP_CHUNK_LINE_MAX
#define HTTP_CHUNK_LINE_MAX 4096
#endif
/* Longest method accepted by the sniffer, in bytes. */
#ifndef HTTP_METHOD_MAX
#define HTTP_METHOD_MAX 32
#endif
/* Largest Content-Length accepted (2^53: beyond any real body, far from overflow). */
#define HTTP_CL_MAX (1ULL << 53)

/* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" /
 * "~" / DIGIT / ALPHA */
static bool is_tchar(unsigned char c)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";

	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr(extra, c) != NULL;
}

static bool is_vchar(unsigned char c)
{
	return c > 0x20 && c != 0x7f; /* visible ASCII or obs-text */
}

/* Field value octets: VCHAR, obs-text, SP, HTAB. */
static bool is_field_char(unsigned char c)
{
	return c == ' ' || c == '\t' || is_vchar(c);
}

static bool name_eq(const struct http_header *h, const char *name)
{
	size_t n = strlen(name);

	return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

/* Finds the end of the line starting at p (bounded by end). Returns the offset of the LF of a
 * CRLF, -1 when the line is incomplete, -2 when it holds a bare CR or LF. */
static long line_end(const char *p, const char *end)
{
	const char *lf = memchr(p, '\n', (size_t)(end - p));
	const char *cr;

	if (!lf) {
		/* a CR that is not the last byte and not followed by LF is a bare CR */
		cr = memchr(p, '\r', (size_t)(end - p));
		if (cr && cr + 1 < end)
			return -2;
		return -1;
	}
	if (lf == p || lf[-1] != '\r')
		return -2;
	cr = memchr(p, '\r', (size_t)(lf - p));
	if (cr != lf - 1)
		return -2;
	return lf - p;
}

static int parse_version(const char *p, size_t n, int *minor)
{
	if (n != 8 || memcmp(p, "HTTP/", 5) != 0 || p[6] != '.' || p[5] < '0' || p[5] > '9' ||
	    p[7] < '0' || p[7] > '9')
		return -400;
	if (p[5] != '1')
		return -505;
	/* HTTP/1.x with x > 1 is answered as 1.1 (RFC 9110 2.5). */
	*minor = p[7] == '0' ? 0 : 1;
	return 0;
}

/* Parses header lines from p up to the blank line. Returns the offset just past the blank line,
 * 0 when more bytes are needed, or -400 / -431 (too many headers). */
static long parse_headers(const char *start, const char *p, const char *end, struct http_msg *m,
			  int bad)
{
	while (p < end) {
		long le = line_end(p, end);
		const char *colon, *v, *ve;
		struct http_header *h;

		if (le == -1)
			return 0;
		if (le == -2)
			return bad;
		if (le == 1) /* blank line: end of the head */
			return p + 2 - start;
		if (*p == ' ' || *p == '\t') /* obs-fold */
			return bad;
		colon = p;
		while (colon < p + le - 1 && is_tchar((unsigned char)*colon))
			colon++;
		if (colon == p || *colon != ':')
			return bad;
		v = colon + 1;
		ve = p + le - 1; /* the CR */
		for (const char *q = v; q < ve; q++)
			if (!is_field_char((unsigned char)*q))
				return bad;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (m->nheaders == HTTP_MAX_HEADERS)
			return -431;
		h = &m->headers[m->nheaders++];
		h->name = p;
		h->name_len = (size_t)(colon - p);
		h->value = v;
		h->value_len = (size_t)(ve - v);
		p += le + 1;
	}
	return 0;
}

/* Content-Length: 1*DIGIT, nothing else (no sign, no list, no spaces). */
static int parse_cl(const struct http_header *h, uint64_t *out)
{
	uint64_t v = 0;

	if (h->value_len == 0 || h->value_len > 16)
		return -1;
	for (size_t i = 0; i < h->value_len; i++) {
		if (h->value[i] < '0' || h->value[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(h->value[i] - '0');
	}
	if (v > HTTP_CL_MAX)
		return -1;
	*out = v;
	return 0;
}

bool http_header_has_token(const struct http_header *h, const char *token)
{
	size_t tl = strlen(token);
	const char *p = h->value, *end = h->value + h->value_len;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p)), *e;

		if (!comma)
			comma = end;
		e = comma;
		while (p < e && (*p == ' ' || *p == '\t'))
			p++;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - p) == tl && strncasecmp(p, token, tl) == 0)
			return true;
		p = comma + 1;
	}
	return false;
}

const struct http_header *http_find_header(const struct http_msg *m, const char *name)
{
	for (size_t i = 0; i < m->nheaders; i++)
		if (name_eq(&m->headers[i], name))
			return &m->headers[i];
	return NULL;
}

static bool any_header_has_token(const struct http_msg *m, const char *name, const char *token)
{
	for (size_t i = 0; i < m->nheaders; i++)
		if (name_eq(&m->headers[i], name) && http_header_has_token(&m->headers[i], token))
			return true;
	return false;
}

/* Walks the Transfer-Encoding headers in order. Returns 0 when there are none, 1 when chunked is
 * the final coding and the only one, 2 when chunked is final after other codings, 3 when chunked
 * is not final, -1 when a list element is empty or chunked appears twice. */
static int te_kind(const struct http_msg *m)
{
	int seen = 0, chunked = 0, others = 0;
	bool last_chunked = false;

	for (size_t i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];
		const char *p, *end;

		if (!name_eq(h, "transfer-encoding"))
			continue;
		p = h->value;
		end = h->value + h->value_len;
		for (;;) {
			const char *comma = memchr(p, ',', (size_t)(end - p)), *e;

			if (!comma)
				comma = end;
			e = comma;
			while (p < e && (*p == ' ' || *p == '\t'))
				p++;
			while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (e == p)
				return -1;
			seen++;
			if (e - p == 7 && strncasecmp(p, "chunked", 7) == 0) {
				if (chunked++)
					return -1;
				last_chunked = true;
			} else {
				others++;
				last_chunked = false;
			}
			if (comma == end)
				break;
			p = comma + 1;
		}
	}
	if (!seen)
		return 0;
	if (!last_chunked)
		return 3;
	return others ? 2 : 1;
}

/* Content-Length headers: 0 when none, 1 with *v set, -1 when repeated (request) or
 * conflicting (response, where identical repeats are tolerated), or not a number. */
static int cl_kind(const struct http_msg *m, bool allow_same, uint64_t *v)
{
	int n = 0;

	for (size_t i = 0; i < m->nheaders; i++) {
		uint64_t x;

		if (!name_eq(&m->headers[i], "content-length"))
			continue;
		if (parse_cl(&m->headers[i], &x))
			return -1;
		if (n && (!allow_same || x != *v))
			return -1;
		*v = x;
		n = 1;
	}
	return n;
}

static void msg_reset(struct http_msg *m)
{
	memset(m, 0, offsetof(struct http_msg, headers));
	m->nheaders = 0;
	m->body = HTTP_BODY_NONE;
	m->content_length = 0;
	m->keep_alive = false;
	m->expect_continue = false;
	m->upgrade = false;
}

static void set_connection_flags(struct http_msg *m)
{
	if (m->minor_version >= 1)
		m->keep_alive = !any_header_has_token(m, "connection", "close");
	else
		m->keep_alive = any_header_has_token(m, "connection", "keep-alive") &&
				!any_header_has_token(m, "connection", "close");
	m->upgrade =
	    http_find_header(m, "upgrade") && any_header_has_token(m, "connection", "upgrade");
}

int http_parse_request(const char *buf, size_t len, size_t max_head, struct http_msg *m)
{
	const char *p = buf, *end, *sp1, *sp2;
	long le, hl;
	int rc, te, cl, hosts = 0;

	msg_reset(m);
	end = buf + (len < max_head ? len : max_head);
	/* RFC 9112 2.2: ignore at least one empty line before the request line. */
	for (int i = 0; i < 2 && end - p >= 2 && p[0] == '\r' && p[1] == '\n'; i++)
		p += 2;
	le = line_end(p, end);
	if (le == -2)
		return -400;
	if (le == -1) {
		/* An incomplete request line: refuse early what already cannot be a request. */
		for (const char *q = p; q < end && *q != ' ' && *q != '\r'; q++)
			if (!is_tchar((unsigned char)*q) || q - p >= HTTP_METHOD_MAX)
				return -400;
		return len >= max_head ? -431 : 0;
	}
	/* request-line = method SP request-target SP HTTP-version CRLF */
	sp1 = memchr(p, ' ', (size_t)le);
	if (!sp1 || sp1 == p || sp1 - p > HTTP_METHOD_MAX)
		return -400;
	for (const char *q = p; q < sp1; q++)
		if (!is_tchar((unsigned char)*q))
			return -400;
	sp2 = memchr(sp1 + 1, ' ', (size_t)(p + le - 1 - (sp1 + 1)));
	if (!sp2 || sp2 == sp1 + 1)
		return -400;
	for (const char *q = sp1 + 1; q < sp2; q++)
		if (!is_vchar((unsigned char)*q) || (unsigned char)*q >= 0x80)
			return -400;
	rc = parse_version(sp2 + 1, (size_t)(p + le - 1 - (sp2 + 1)), &m->minor_version);
	if (rc)
		return rc;
	m->method = p;
	m->method_len = (size_t)(sp1 - p);
	m->target = sp1 + 1;
	m->target_len = (size_t)(sp2 - sp1 - 1);
	hl = parse_headers(buf, p + le + 1, end, m, -400);
	if (hl < 0)
		return (int)hl;
	if (hl == 0)
		return len >= max_head ? -431 : 0;
	m->head_len = (size_t)hl;

	for (size_t i = 0; i < m->nheaders; i++)
		if (name_eq(&m->headers[i], "host"))
			hosts++;
	if (hosts > 1 || (m->minor_version == 1 && hosts == 0))
		return -400;
	te = te_kind(m);
	cl = cl_kind(m, false, &m->content_length);
	if (te < 0 || cl < 0 || (te && cl))
		return -400;
	if (te && m->minor_version == 0)
		return -400; /* RFC 9112 6.1: faulty framing */
	if (te == 3)
		return -400; /* chunked not final: length cannot be determined */
	if (te == 2)
		return -501;
	if (te == 1) {
		m->body = HTTP_BODY_CHUNKED;
	} else if (cl == 1) {
		m->body = m->content_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
	}
	set_connection_flags(m);
	m->expect_continue = any_header_has_token(m, "expect", "100-continue");
	return (int)hl;
}

int http_parse_response(const char *buf, size_t len, size_t max_head, const char *req_method,
			struct http_msg *m)
{
	const char *p = buf, *end;
	long le, hl;
	int te, cl, st;

	msg_reset(m);
	end = buf + (len < max_head ? len : max_head);
	le = line_end(p, end);
	if (le == -2)
		return -502;
	if (le == -1) {
		if (len >= max_head)
			return -502;
		/* refuse early what cannot be a status line */
		for (size_t i = 0; i < len && i < 5; i++)
			if (p[i] != "HTTP/"[i])
				return -502;
		return 0;
	}
	/* status-line = HTTP-version SP 3DIGIT SP [reason] CRLF (a missing SP after the code is
	 * tolerated) */
	if (le < 13 || parse_version(p, 8, &m->minor_version) || p[8] != ' ')
		return -502;
	for (int i = 9; i < 12; i++)
		if (p[i] < '0' || p[i] > '9')
			return -502;
	st = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (st < 100)
		return -502;
	if (le > 13 && p[12] != ' ')
		return -502;
	m->status = st;
	m->reason = le > 13 ? p + 13 : p + 12;
	m->reason_len = le > 13 ? (size_t)(le - 14) : 0;
	for (size_t i = 0; i < m->reason_len; i++)
		if (!is_field_char((unsigned char)m->reason[i]))
			return -502;
	hl = parse_headers(buf, p + le + 1, end, m, -502);
	if (hl < 0)
		return -502;
	if (hl == 0)
		return len >= max_head ? -502 : 0;
	m->head_len = (size_t)hl;

	set_connection_flags(m);
	te = te_kind(m);
	cl = cl_kind(m, true, &m->content_length);
	if (te < 0 || cl < 0)
		return -502;
	if ((req_method && strcmp(req_method, "HEAD") == 0) || st < 200 || st == 204 || st == 304) {
		m->body = HTTP_BODY_NONE;
		m->content_length = 0;
	} else if (req_method && strcmp(req_method, "CONNECT") == 0 && st < 300) {
		m->body = HTTP_BODY_EOF; /* a tunnel */
		m->keep_alive = false;
	} else if (te == 1 || te == 2) {
		m->body = HTTP_BODY_CHUNKED;
		if (cl)
			m->keep_alive = false; /* RFC 9112 6.3: TE overrides CL, then close */
		m->content_length = 0;
	} else if (te == 3) {
		m->body = HTTP_BODY_EOF;
		m->keep_alive = false;
	} else if (cl == 1) {
		m->body = m->content_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
	} else {
		m->body = HTTP_BODY_EOF;
		m->keep_alive = false;
	}
	return (int)hl;
}

int http_sniff_request(const char *buf, size_t len)
{
	static const char h2[] = "PRI * HTTP/2.0\r\n";
	size_t i = 0, n;

	/* The HTTP/2 connection preface is a syntactically valid request line: catch it first. */
	n = len < sizeof(h2) - 1 ? len : sizeof(h2) - 1;
	if (n >= 4 && memcmp(buf, h2, n) == 0)
		return 0;
	/* Empty lines before the request line (RFC 9112 2.2). */
	while (i + 1 < len && i < 4 && buf[i] == '\r' && buf[i + 1] == '\n')
		i += 2;
	/* method */
	for (n = 0; i < len && buf[i] != ' '; i++, n++)
		if (!is_tchar((unsigned char)buf[i]) || n >= HTTP_METHOD_MAX)
			return 0;
	if (i == len)
		return 1;
	if (n == 0)
		return 0;
	/* request-target */
	for (i++, n = 0; i < len && buf[i] != ' '; i++, n++)
		if (!is_vchar((unsigned char)buf[i]))
			return 0;
	if (i == len)
		return 1;
	if (n == 0)
		return 0;
	/* "HTTP/1." then a digit */
	for (i++, n = 0; i < len && n < 8; i++, n++) {
		if (n == 7) {
			if (buf[i] < '0' || buf[i] > '9')
				return 0;
		} else if (buf[i] != "HTTP/1."[n]) {
			return 0;
		}
	}
	return 1;
}

/* Chunked decoder states. */
enum {
	CH_SIZE0, /* first hex digit of a chunk size */
	CH_SIZE,  /* more hex digits, or the end of the size */
	CH_BWS,	  /* whitespace after the size: more of it, ';' or CR */
	CH_EXT,	  /* chunk extensions up to CR */
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER0, /* start of a trailer line or of the final CRLF */
	CH_TRAILER,  /* inside a trailer line */
	CH_TRAILER_LF,
	CH_END_LF,
	CH_DONE,
};

ssize_t http_chunked_feed(struct http_chunked *c, const char *p, size_t n, struct buf *out,
			  bool *done)
{
	size_t i = 0;

	*done = c->state == CH_DONE;
	while (i < n && c->state != CH_DONE) {
		unsigned char ch = (unsigned char)p[i];
		int hv;

		if (c->state == CH_DATA) {
			size_t take = n - i < c->remaining ? n - i : (size_t)c->remaining;

			if (out && buf_append(out, p + i, take))
				return -1;
			c->remaining -= take;
			c->total += take;
			i += take;
			if (!c->remaining)
				c->state = CH_DATA_CR;
			continue;
		}
		i++;
		if (c->state != CH_DATA_CR && c->state != CH_DATA_LF &&
		    ++c->line_len > HTTP_CHUNK_LINE_MAX)
			return -1;
		switch (c->state) {
		case CH_SIZE0:
			if ((hv = hex_digit(ch)) < 0)
				return -1;
			c->remaining = (uint64_t)hv;
			c->state = CH_SIZE;
			break;
		case CH_SIZE:
			if ((hv = hex_digit(ch)) >= 0) {
				if (c->remaining >> 52) /* would pass 2^56: refuse */
					return -1;
				c->remaining = c->remaining * 16 + (uint64_t)hv;
			} else if (ch == ';') {
				c->state = CH_EXT;
			} else if (ch == ' ' || ch == '\t') {
				c->state = CH_BWS;
			} else if (ch == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				return -1;
			}
			break;
		case CH_BWS:
			/* BWS before ";" only: "5 5" must not read as 5 (or 0x55) */
			if (ch == ';')
				c->state = CH_EXT;
			else if (ch == '\r')
				c->state = CH_SIZE_LF;
			else if (ch != ' ' && ch != '\t')
				return -1;
			break;
		case CH_EXT:
			/* chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): any visible
			 * text, no control bytes, up to CRLF. */
			if (ch == '\r')
				c->state = CH_SIZE_LF;
			else if (!is_field_char(ch))
				return -1;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return -1;
			c->line_len = 0;
			c->state = c->remaining ? CH_DATA : CH_TRAILER0;
			break;
		case CH_DATA_CR:
			if (ch != '\r')
				return -1;
			c->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				return -1;
			c->line_len = 0;
			c->state = CH_SIZE0;
			break;
		case CH_TRAILER0:
			if (ch == '\r')
				c->state = CH_END_LF;
			else if (ch == ' ' || ch == '\t' || !is_tchar(ch))
				return -1; /* obs-fold or not a field name */
			else
				c->state = CH_TRAILER;
			break;
		case CH_TRAILER:
			if (ch == '\r')
				c->state = CH_TRAILER_LF;
			else if (!is_field_char(ch))
				return -1;
			break;
		case CH_TRAILER_LF:
			if (ch != '\n')
				return -1;
			c->line_len = 0;
			c->state = CH_TRAILER0;
			break;
		case CH_END_LF:
			if (ch != '\n')
				return -1;
			c->state = CH_DONE;
			break;
		}
	}
	*done = c->state == CH_DONE;
	return (ssize_t)i;
}

const char *http_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 101:
		return "Switching Protocols";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 411:
		return "Length Required";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 415:
		return "Unsupported Media Type";
	case 417:
		return "Expectation Failed";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

int http_write_error_retry(struct buf *out, int status, const char *type, const char *message,
			   bool close, int retry_after_s)
{
	struct buf body = {0};
	size_t len0 = out->len;
	char ra[48] = "";
	int rc = -ENOMEM;

	if (retry_after_s > 0)
		snprintf(ra, sizeof(ra), "Retry-After: %d\r\n", retry_after_s);
	if (buf_puts(&body, "{\"error\":{\"message\":") ||
	    buf_json_str(&body, message, strlen(message)) || buf_puts(&body, ",\"type\":") ||
	    buf_json_str(&body, type, strlen(type)) ||
	    buf_printf(&body, ",\"param\":null,\"code\":%d}}\n", status))
		goto cleanup;
	if (buf_printf(out,
		       "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		       "%s%s\r\n",
		       status, http_reason(status), body.len, ra,
		       close ? "Connection: close\r\n" : "") ||
	    buf_append(out, body.data, body.len))
		goto cleanup;
	rc = 0;
cleanup:
	if (rc < 0 && out->data) { /* nothing half-written */
		out->len = len0;
		out->data[len0] = '\0';
	}
	buf_free(&body);
	return rc;
}

int http_write_error(struct buf *out, int status, const char *type, const char *message, bool close)
{
	return http_write_error_retry(out, status, type, message, close, 0);
}

/* Hop-by-hop and framing headers the proxy regenerates. Names are compared with '_' equal to '-'
 * so that a server which folds underscores cannot be handed a second framing header. */
static bool is_hop_header(const struct http_header *h, const struct http_msg *m)
{
	static const char *const hop[] = {
	    "connection",     "keep-alive", "proxy-connection", "te",	   "transfer-encoding",
	    "content-length", "expect",	    "upgrade",		"trailer", "proxy-authenticate"};
	char name[32];

	if (h->name_len >= sizeof(name))
		return false;
	for (size_t i = 0; i < h->name_len; i++)
		name[i] = h->name[i] == '_' ? '-' : h->name[i];
	name[h->name_len] = '\0';
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (strcasecmp(name, hop[i]) == 0)
			return true;
	/* headers named by Connection are hop-by-hop too (but never Host, which HTTP/1.1 needs) */
	if (strcasecmp(name, "host") == 0)
		return false;
	for (size_t i = 0; i < m->nheaders; i++)
		if (name_eq(&m->headers[i], "connection") &&
		    http_header_has_token(&m->headers[i], name))
			return true;
	return false;
}

int http_write_response_head_close(struct buf *out, const struct http_msg *m)
{
	if (buf_printf(out, "HTTP/1.%d %d ", m->minor_version, m->status) ||
	    buf_append(out, m->reason, m->reason_len) || buf_append(out, "\r\n", 2))
		return -ENOMEM;
	for (size_t i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		if (name_eq(h, "connection") || name_eq(h, "keep-alive"))
			continue;
		if (buf_append(out, h->name, h->name_len) || buf_append(out, ": ", 2) ||
		    buf_append(out, h->value, h->value_len) || buf_append(out, "\r\n", 2))
			return -ENOMEM;
	}
	return buf_puts(out, "Connection: close\r\n\r\n");
}

/* "X-Forwarded-For: " + the values of m's X-Forwarded-For headers, in order and comma-joined (a
 * list split over several header lines is one list, RFC 9110 5.3) + ", " + client. */
static int write_forwarded_for(struct buf *out, const struct http_msg *m, const char *client)
{
	if (buf_puts(out, "X-Forwarded-For: "))
		return -ENOMEM;
	for (size_t i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		if (!name_eq(h, "x-forwarded-for") || !h->value_len)
			continue;
		if (buf_append(out, h->value, h->value_len) || buf_append(out, ", ", 2))
			return -ENOMEM;
	}
	if (buf_puts(out, client) || buf_append(out, "\r\n", 2))
		return -ENOMEM;
	return 0;
}

int http_write_request_head(struct buf *out, const struct http_msg *m, bool has_body,
			    uint64_t body_len, bool upgrade, const char *forwarded_for)
{
	if (buf_append(out, m->method, m->method_len) || buf_append(out, " ", 1) ||
	    buf_append(out, m->target, m->target_len) ||
	    buf_printf(out, " HTTP/1.%d\r\n", m->minor_version))
		return -ENOMEM;
	for (size_t i = 0; i < m->nheaders; i++) {
		const struct http_header *h = &m->headers[i];

		if (is_hop_header(h, m))
			continue;
		if (forwarded_for && name_eq(h, "x-forwarded-for"))
			continue;
		if (buf_append(out, h->name, h->name_len) || buf_append(out, ": ", 2) ||
		    buf_append(out, h->value, h->value_len) || buf_append(out, "\r\n", 2))
			return -ENOMEM;
	}
	if (forwarded_for && write_forwarded_for(out, m, forwarded_for))
		return -ENOMEM;
	if (has_body && buf_printf(out, "Content-Length: %llu\r\n", (unsigned long long)body_len))
		return -ENOMEM;
	if (upgrade) {
		const struct http_header *u = http_find_header(m, "upgrade");

		if (u && (buf_puts(out, "Connection: upgrade\r\nUpgrade: ") ||
			  buf_append(out, u->value, u->value_len) || buf_append(out, "\r\n", 2)))
			return -ENOMEM;
	} else if (m->minor_version == 0 && buf_puts(out, "Connection: keep-alive\r\n")) {
		return -ENOMEM;
	}
	return buf_append(out, "\r\n", 2);
}
