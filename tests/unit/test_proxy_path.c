// SPDX-License-Identifier: Apache-2.0
/* The proxy's data path without namespaces: a real struct proxy (proxy.h) on its own loop, the
 * client one end of a socketpair() handed to it with proxy_adopt(), the upstream a listener on
 * 127.0.0.1 this test accepts from, everything driven on this thread. Checked by behaviour: a
 * request and its response relayed byte for byte, a second request on the same upstream
 * connection (keep-alive reuse), a malformed request answered 400 and closed, a head over
 * --max-head 431, a body over --max-body 413; the counters and gauges are read as an operator
 * reads them, from the rendered /metrics text. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "discovery/discovery.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"
#include "route/policy.h"
#include "route/router.h"
#include "tap.h"

#define WAIT_MS 3000 /* the most any exchange below may take */

struct world {
	struct loop *loop;
	struct metrics *m;
	struct router *r;
	struct proxy *p;
	struct services *svcs;
	int lfd;    /* the upstream's listener */
	int ups[4]; /* upstream connections accepted, in order */
	int nups;
	int client;		    /* the test's end of the socketpair */
	struct buf got_up, got_cli; /* bytes read from the newest upstream connection, the client */
	bool cli_eof;
};

static int listen_local(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("upstream listener");
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* A proxy with no listener in front of the test's upstream, and one client connection adopted;
 * max_head / max_body of 0 keep the defaults. */
static void world_new(struct world *w, size_t max_head, size_t max_body)
{
	struct router_cfg rc;
	router_cfg_default(&rc);
	rc.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
	rc.policy = "round-robin";
	rc.scrape_interval_ms = 0;
	rc.seed = 1;
	struct sockaddr_in peer = {.sin_family = AF_INET,
				   .sin_port = htons(40000),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct proxy_opts o;
	char json[256], err[128];
	uint16_t port;
	int sv[2];

	memset(w, 0, sizeof(*w));
	w->lfd = listen_local(&port);
	snprintf(json, sizeof(json),
		 "{\"services\":[{\"name\":\"s\",\"cluster_ip\":\"10.96.0.1\",\"port\":80,"
		 "\"endpoints\":[{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%u}]}]}",
		 port);
	if (discovery_parse(json, strlen(json), &w->svcs, err, sizeof(err)) < 0 ||
	    loop_new(&w->loop) < 0 || metrics_new(&w->m) < 0 || router_new(&rc, &w->r) < 0) {
		fprintf(stderr, "set-up failed: %s\n", err);
		exit(1);
	}
	router_set_services(w->r, w->svcs);
	proxy_opts_default(&o);
	o.forwarded_for = false; /* the request goes on exactly as the client wrote it */
	if (max_head)
		o.max_head = max_head;
	if (max_body)
		o.max_body = max_body;
	if (proxy_new(&o, w->loop, w->m, w->r, &w->p) < 0) {
		fprintf(stderr, "proxy_new failed\n");
		exit(1);
	}
	proxy_set_services(w->p, w->svcs);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
	w->client = sv[1];
	fcntl(w->client, F_SETFL, O_NONBLOCK);
	CHECK_EQ(proxy_adopt(w->p, sv[0], &peer), 0, "proxy_adopt takes a socketpair end");
}

static void world_free(struct world *w)
{
	proxy_free(w->p);
	router_free(w->r);
	services_put(w->svcs);
	metrics_free(w->m);
	loop_free(w->loop);
	for (int i = 0; i < w->nups; i++)
		close(w->ups[i]);
	if (w->client >= 0)
		close(w->client);
	close(w->lfd);
	buf_free(&w->got_up);
	buf_free(&w->got_cli);
}

/* Reads what is there from fd into b (non-blocking). Returns true on EOF. */
static bool drain(int fd, struct buf *b)
{
	char chunk[4096];
	ssize_t n;

	while ((n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT)) > 0)
		buf_append(b, chunk, (size_t)n);
	return n == 0;
}

/* One round: the proxy's loop, then the test's side (accept, read both peers). */
static void round_once(struct world *w)
{
	int fd;

	loop_run(w->loop, 5);
	proxy_tick(w->p);
	while ((fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if (w->nups == (int)(sizeof(w->ups) / sizeof(w->ups[0]))) {
			close(fd);
			continue;
		}
		w->ups[w->nups++] = fd;
	}
	if (w->nups)
		drain(w->ups[w->nups - 1], &w->got_up);
	if (w->client >= 0 && !w->cli_eof)
		w->cli_eof = drain(w->client, &w->got_cli);
}

/* Runs rounds until *len reaches want bytes (or the client's EOF with eof), at most WAIT_MS. */
static void run_until(struct world *w, const size_t *len, size_t want, bool eof)
{
	uint64_t end = clock_ms() + WAIT_MS;

	while (clock_ms() < end) {
		round_once(w);
		if (*len >= want && (!eof || w->cli_eof))
			break;
	}
	for (int i = 0; i < 3; i++) /* and whatever follows at once */
		round_once(w);
}

static void send_all(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EAGAIN)
			continue;
		if (k <= 0)
			break;
		s += k;
		n -= (size_t)k;
	}
}

/* The value of one series (name with its labels, as rendered) in the /metrics text, or -1. */
static long long metric(struct world *w, const char *series)
{
	struct buf text = {0};
	size_t nl = strlen(series);
	long long v = -1;

	if (metrics_render(w->m, &text) < 0)
		return -2;
	for (const char *s = text.data; s && *s;) {
		const char *e = strchr(s, '\n');

		if (strncmp(s, series, nl) == 0 && s[nl] == ' ') {
			v = strtoll(s + nl + 1, NULL, 10);
			break;
		}
		if (!e)
			break;
		s = e + 1;
	}
	buf_free(&text);
	return v;
}

static bool starts_with(const struct buf *b, const char *prefix)
{
	return b->len >= strlen(prefix) && memcmp(b->data, prefix, strlen(prefix)) == 0;
}

static void test_relay_and_reuse(void)
{
	static const char req1[] =
	    "POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
	static const char resp1[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	static const char req2[] = "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
	static const char resp2[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsecond";
	struct world w;

	world_new(&w, 0, 0);
	CHECK_EQ(metric(&w, "kvsplice_connections_active"), 1, "one client connection open");

	send_all(w.client, req1);
	run_until(&w, &w.got_up.len, strlen(req1), false);
	CHECK_EQ(w.nups, 1, "the request opened one upstream connection");
	CHECK(w.got_up.len == strlen(req1) && memcmp(w.got_up.data, req1, strlen(req1)) == 0,
	      "the request reached the upstream byte for byte (%zu bytes)", w.got_up.len);
	if (w.nups < 1)
		goto out;
	send_all(w.ups[0], resp1);
	run_until(&w, &w.got_cli.len, strlen(resp1), false);
	CHECK(w.got_cli.len == strlen(resp1) && memcmp(w.got_cli.data, resp1, strlen(resp1)) == 0,
	      "the response reached the client byte for byte (%zu bytes)", w.got_cli.len);
	CHECK(!w.cli_eof, "the client connection stays open (keep-alive)");

	/* the second request goes over the pooled upstream connection */
	buf_reset(&w.got_up);
	buf_reset(&w.got_cli);
	send_all(w.client, req2);
	run_until(&w, &w.got_up.len, strlen(req2), false);
	CHECK_EQ(w.nups, 1, "the second request opened no new upstream connection");
	CHECK(w.got_up.len == strlen(req2) && memcmp(w.got_up.data, req2, strlen(req2)) == 0,
	      "the second request came over the first upstream connection");
	/* "second" is one byte more than its Content-Length: the stray byte is dropped */
	send_all(w.ups[0], resp2);
	run_until(&w, &w.got_cli.len, strlen(resp2) - 1, false);
	CHECK(w.got_cli.len == strlen(resp2) - 1 &&
		  memcmp(w.got_cli.data, resp2, strlen(resp2) - 1) == 0,
	      "the second response reached the client, up to its Content-Length");
	CHECK_EQ(metric(&w, "kvsplice_upstream_connects_total"), 1, "one upstream connect");
	CHECK_EQ(metric(&w, "kvsplice_upstream_reused_total"), 1, "one request on a pooled one");
	CHECK_EQ(metric(&w, "kvsplice_requests_total"), 2, "two requests counted");
	CHECK_EQ(metric(&w, "kvsplice_responses_total{class=\"2xx\"}"), 2,
		 "two 2xx responses counted");
	CHECK_EQ(metric(&w, "kvsplice_upstream_idle_connections"), 0,
		 "an upstream connection with stray bytes is not pooled");
	CHECK(metric(&w, "kvsplice_buffer_bytes") > 0, "the open connection's buffers are counted");

	/* the client goes away: the connection ends and nothing stays counted */
	close(w.client);
	w.client = -1;
	for (int i = 0; i < 10; i++)
		round_once(&w);
	CHECK_EQ(metric(&w, "kvsplice_connections_active"), 0, "the client's close ends it");
	CHECK_EQ(metric(&w, "kvsplice_buffer_bytes"), 0, "no buffer counted after the close");
out:
	world_free(&w);
}

/* The proxy answers a request itself: status line prefix, the reason counted, then the close. */
static void test_answer(const char *what, size_t max_head, size_t max_body, const char *req,
			const char *status, const char *series)
{
	struct world w;
	char l[5][128];

	snprintf(l[0], sizeof(l[0]), "%s: no upstream connection for it", what);
	snprintf(l[1], sizeof(l[1]), "%s: counted in /metrics as %s", what, series);
	snprintf(l[2], sizeof(l[2]), "%s: one 4xx response in /metrics", what);
	snprintf(l[3], sizeof(l[3]), "%s: no connection left open (/metrics)", what);
	snprintf(l[4], sizeof(l[4]), "%s: no buffer left counted (/metrics)", what);
	world_new(&w, max_head, max_body);
	send_all(w.client, req);
	run_until(&w, &w.got_cli.len, 1, true);
	CHECK(starts_with(&w.got_cli, status), "%s: answered \"%s\"", what, status);
	CHECK(strstr(w.got_cli.data ? w.got_cli.data : "", "\"error\"") != NULL,
	      "%s: the answer is an OpenAI error body", what);
	CHECK(w.cli_eof, "%s: then the connection is closed", what);
	CHECK_EQ(w.nups, 0, l[0]);
	CHECK_EQ(metric(&w, series), 1, l[1]);
	CHECK_EQ(metric(&w, "kvsplice_responses_total{class=\"4xx\"}"), 1, l[2]);
	close(w.client);
	w.client = -1;
	for (int i = 0; i < 10; i++)
		round_once(&w);
	CHECK_EQ(metric(&w, "kvsplice_connections_active"), 0, l[3]);
	CHECK_EQ(metric(&w, "kvsplice_buffer_bytes"), 0, l[4]);
	world_free(&w);
}

/* conn_show, the line the proxy's logs print for a connection: its state and flags by name. */
static void test_show(void)
{
	static const char want[] = "conn 127.0.0.1:40000 TUNNEL flags=passthrough|cli_eof|up_shut ";
	static struct conn c;
	char line[CONN_SHOW_MAX];

	c.peer.sin_family = AF_INET;
	c.peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c.peer.sin_port = htons(40000);
	c.state = C_TUNNEL;
	c.flags = CF_PASSTHROUGH | CF_CLI_EOF | CF_UP_SHUT;
	c.requests = 2;
	snprintf(c.ep_name, sizeof(c.ep_name), "up");
	conn_show(&c, line, sizeof(line));
	CHECK(strncmp(line, want, strlen(want)) == 0,
	      "conn_show names the state and each flag set: %s", line);
	CHECK(strstr(line, " requests=2 ") && strstr(line, " endpoint=up ") &&
		  strstr(line, " upstream=none"),
	      "conn_show gives the request count, the endpoint, the upstream");
	c.flags = 0;
	c.state = C_HEAD;
	conn_show(&c, line, sizeof(line));
	CHECK(strstr(line, " HEAD flags=- ") != NULL, "no flag: \"-\" (%s)", line);
	conn_show(&c, line, 12);
	CHECK_EQ(strlen(line), 11, "a short buffer gets a cut, terminated line");
}

int main(void)
{
	static char big_head[1024];

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR);
	discovery_set_routes(&policy_routes);

	test_show();
	test_relay_and_reuse();
	test_answer("malformed request", 0, 0, "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
		    "HTTP/1.1 400 ", "kvsplice_errors_total{reason=\"bad_request\"}");
	snprintf(big_head, sizeof(big_head), "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: %0600d\r\n\r\n",
		 0);
	test_answer("head over --max-head", 256, 0, big_head, "HTTP/1.1 431 ",
		    "kvsplice_errors_total{reason=\"head_too_large\"}");
	test_answer("body over --max-body", 0, 16,
		    "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123",
		    "HTTP/1.1 413 ", "kvsplice_errors_total{reason=\"body_too_large\"}");
	test_answer("chunked body over --max-body", 0, 16,
		    "POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "20\r\n0123456789abcdef0123456789abcdef\r\n0\r\n\r\n",
		    "HTTP/1.1 413 ", "kvsplice_errors_total{reason=\"body_too_large\"}");
	return tap_done();
}
