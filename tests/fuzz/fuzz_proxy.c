// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for the proxy's connection state machine (issue 12): a real proxy (proxy.h,
 * round-robin or kv router, no BPF) on 127.0.0.1 with one client connection and a fake upstream
 * (a listening socket this harness accepts from), both fed bytes from the input, the loop driven
 * until quiescent after every step. No seam in userspace/: only the public API and real sockets.
 *
 * Input: byte 0 picks the setup (relay copy or splice, small or default limits, a second endpoint
 * that refuses connections, kv or round-robin, how the client ends); then steps, each one op byte
 * (low 4 bits: what; high 4 bits: which canned message or upstream connection) with, for the raw
 * writes, a length byte and that many bytes:
 *   client writes raw bytes or a canned request, shuts down its write side, stops or resumes
 *   reading; an upstream connection writes raw bytes or a canned response, closes, resets;
 *   upstream reading stops or resumes. The canned messages get the fuzzer to the deep states
 *   (bodies, chunked framing, 100-continue, Upgrade/101, HEAD, pipelining) quickly.
 * At the end the client closes (FIN or RST) and every upstream connection closes.
 *
 * Checked, beyond ASan/UBSan/LSan:
 *   - no spin: after each step the loop goes quiet (no event dispatched, no byte moved) within
 *     MAX_ROUNDS rounds, and once everything is closed, nothing wakes it;
 *   - the connection ends: kvsplice_connections_active and kvsplice_buffer_bytes are back to 0
 *     (its buffers uncounted) once both peers have closed, without waiting for a timeout (every
 *     timeout is far longer than a run);
 *   - no descriptor leak: after proxy_free the process has the descriptors it had before. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "discovery.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "proxy.h"
#include "router.h"

#define MAX_UP 8	/* upstream connections the harness keeps (more are closed at once) */
#define MAX_ROUNDS 2000 /* loop rounds before "quiet" must be reached: beyond, a spin */
#define SINK 65536

#define check(c, ...) check_at(c, __LINE__, __VA_ARGS__)
static void check_at(int cond, int line, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_proxy: invariant at line %d broken: %s\n", line, what);
		abort();
	}
}

/* Canned client requests (op & 0xf0 picks one). */
static const char *const requests[] = {
    "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n",
    ("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 41\r\n\r\n"
     "{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":1}"),
    ("POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
     "5\r\n{\"mes\r\n1c\r\nsages\":[{\"role\":\"user\",\"cont\r\n0\r\n\r\n"),
    "POST /v1/completions HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.0\r\n\r\n",
    "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\nxx",
    ("\x16\x03\x01\x02\x05"
     "hello"), /* not HTTP: pass-through */
    "DELETE /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    "{\"prompt\":\"more body\"}",
    "\r\n",
    "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234",
};

/* Canned upstream responses. */
static const char *const responses[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
     "1e\r\ndata: {\"usage\":{\"prompt_tok\r\n0\r\n\r\n"),
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "HTTP/1.1 100 Continue\r\n\r\n",
    "HTTP/1.1 204 No Content\r\n\r\n",
    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok",
    "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.0 200 OK\r\n\r\nold",
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokSTRAY",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 5\r\n",
    "garbage\r\n\r\n",
    "HTTP/1.1 200 OK\r\n",
    "Content-Length: 3\r\n\r\nabc",
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":1}"
    "}}",
    "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial",
};

_Static_assert(sizeof(requests) / sizeof(requests[0]) == 16, "op >> 4 picks one of 16");
_Static_assert(sizeof(responses) / sizeof(responses[0]) == 16, "op >> 4 picks one of 16");

struct harness {
	struct loop *loop;
	struct metrics *m;
	struct router *r;
	struct proxy *p;
	int lfd;    /* the fake upstream's listening socket */
	int dead;   /* the refusing endpoint's bound socket (-1: none) */
	int client; /* -1 once closed */
	int up[MAX_UP];
	int nup;
	bool read_client, read_up;
};

static char sink[SINK];

static int listen_local(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	check(fd >= 0, "socket");
	check(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind");
	check(listen(fd, 64) == 0, "listen");
	check(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname");
	*port = ntohs(a.sin_port);
	return fd;
}

/* A loopback port nobody listens on: bound, never listened, kept open until the run ends so that
 * no other socket (the proxy's listener above all) gets it; connects to it are refused. */
static int refused_port(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	check(fd >= 0, "socket");
	check(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind");
	check(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname");
	*port = ntohs(a.sin_port);
	return fd;
}

static void close_rst(int fd)
{
	struct linger l = {.l_onoff = 1, .l_linger = 0};

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void up_drop(struct harness *h, int i, bool rst)
{
	if (rst)
		close_rst(h->up[i]);
	else
		close(h->up[i]);
	h->up[i] = h->up[--h->nup];
}

/* The harness's side of a round: accepts upstream connections, reads what the proxy sent (when
 * reading is on). Returns true when a byte or a connection moved. */
static bool harness_pump(struct harness *h, bool closing)
{
	bool moved = false;
	int fd;
	ssize_t n;

	while ((fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		moved = true;
		if (closing || h->nup == MAX_UP)
			close(fd);
		else
			h->up[h->nup++] = fd;
	}
	if (h->client >= 0 && h->read_client)
		while ((n = recv(h->client, sink, sizeof(sink), 0)) > 0)
			moved = true;
	if (h->read_up || closing)
		for (int i = 0; i < h->nup; i++)
			while ((n = recv(h->up[i], sink, sizeof(sink), 0)) > 0)
				moved = true;
	return moved;
}

/* The value of the series name in the exposition text (-1: absent). */
static int64_t metric(const struct buf *b, const char *name)
{
	size_t nl = strlen(name);

	for (const char *s = b->data; s && s < b->data + b->len;) {
		const char *e = memchr(s, '\n', (size_t)(b->data + b->len - s));

		if (!e)
			break;
		if ((size_t)(e - s) > nl && memcmp(s, name, nl) == 0 && s[nl] == ' ')
			return strtoll(s + nl + 1, NULL, 10);
		s = e + 1;
	}
	return -1;
}

/* Runs the loop (and the harness's side) until neither moves; the proxy must get there in
 * MAX_ROUNDS rounds. */
static void settle(struct harness *h, bool closing)
{
	for (int i = 0; i < MAX_ROUNDS; i++) {
		int n = loop_run(h->loop, 0);
		bool moved;

		check(n >= 0, "loop_run");
		proxy_tick(h->p);
		moved = harness_pump(h, closing);
		if (n == 0 && !moved)
			return;
	}
	check(0, "the loop never went quiet (a spin)");
}

static void send_some(int fd, const void *p, size_t n)
{
	if (fd >= 0)
		(void)send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	check(d != NULL, "opendir /proc/self/fd");
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct harness h = {.client = -1, .dead = -1, .read_client = true, .read_up = true};
	struct proxy_opts o;
	struct router_cfg rc = {0};
	struct services *svcs = NULL;
	struct sockaddr_in pa;
	struct buf text = {0};
	char json[512], err[128];
	uint16_t uport, dport = 0;
	uint8_t cfg;
	size_t i = 1;
	int fds0 = count_fds();

	if (size < 1)
		return 0;
	cfg = data[0];

	check(loop_new(&h.loop) == 0, "loop_new");
	check(metrics_new(&h.m) == 0, "metrics_new");
	rc.policy = cfg & 0x08 ? "kv" : "round-robin";
	rc.metrics = NULL; /* the proxy's series only: a short exposition to read back */
	rc.scrape_interval_ms = -1;
	rc.seed = 1;
	check(router_new(&rc, &h.r) == 0, "router_new");

	h.lfd = listen_local(&uport);
	if (cfg & 0x04) /* a second endpoint refusing connections: connect failures, retries */
		h.dead = refused_port(&dport);
	if (h.dead >= 0)
		snprintf(json, sizeof(json),
			 "{\"services\":[{\"name\":\"s\",\"cluster_ip\":\"10.96.0.1\",\"port\":80,"
			 "\"endpoints\":[{\"name\":\"dead\",\"ip\":\"127.0.0.1\",\"port\":%u},"
			 "{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%u}]}]}",
			 dport, uport);
	else
		snprintf(json, sizeof(json),
			 "{\"services\":[{\"name\":\"s\",\"cluster_ip\":\"10.96.0.1\",\"port\":80,"
			 "\"endpoints\":[{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%u}]}]}",
			 uport);
	check(discovery_parse(json, strlen(json), &svcs, err, sizeof(err)) == 0, err);
	router_set_services(h.r, svcs);

	proxy_opts_default(&o);
	o.nlisten = 1;
	o.listen[0].sin_family = AF_INET;
	o.listen[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	o.relay = cfg & 0x01 ? PROXY_RELAY_SPLICE : PROXY_RELAY_COPY;
	if (cfg & 0x02) { /* small limits: 431, 413, shedding */
		o.max_head = 200;
		o.max_body = 64;
		o.max_buffered = 4096;
	}
	o.pool_max = cfg & 0x40 ? 0 : 4;
	check(proxy_new(&o, h.loop, h.m, h.r, &h.p) == 0, "proxy_new");
	proxy_set_services(h.p, svcs);
	services_put(svcs);
	check(proxy_listen_addr(h.p, 0, &pa) == 0, "proxy_listen_addr");

	h.client = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	check(h.client >= 0, "socket");
	check(connect(h.client, (struct sockaddr *)&pa, sizeof(pa)) == 0 || errno == EINPROGRESS,
	      "connect");
	settle(&h, false);

	while (i < size) {
		uint8_t op = data[i++], sel = op >> 4;
		const uint8_t *raw = NULL;
		size_t n = 0;

		if ((op & 0x0f) == 0 || (op & 0x0f) == 2) { /* raw writes carry their bytes */
			n = i < size ? data[i++] : 0;
			if (n > size - i)
				n = size - i;
			raw = data + i;
			i += n;
		}
		switch (op & 0x0f) {
		case 0:
			send_some(h.client, raw, n);
			break;
		case 1:
			send_some(h.client, requests[sel], strlen(requests[sel]));
			break;
		case 2:
			if (h.nup)
				send_some(h.up[sel % h.nup], raw, n);
			break;
		case 3:
			if (h.nup)
				send_some(h.up[sel % h.nup], responses[sel],
					  strlen(responses[sel]));
			break;
		case 4:
			if (h.client >= 0)
				shutdown(h.client, SHUT_WR);
			break;
		case 5:
			h.read_client = !h.read_client;
			break;
		case 6:
			h.read_up = !h.read_up;
			break;
		case 7:
			if (h.nup)
				up_drop(&h, sel % h.nup, false);
			break;
		case 8:
			if (h.nup)
				up_drop(&h, sel % h.nup, true);
			break;
		case 9:
			if (h.nup)
				shutdown(h.up[sel % h.nup], SHUT_WR);
			break;
		default: /* a client write of a few bytes of a canned request: split heads */
			send_some(h.client, requests[sel], 1 + (op & 0x07) % strlen(requests[sel]));
			break;
		}
		settle(&h, false);
	}

	/* the end: both peers go away; the proxy must notice and end the connection by itself */
	h.read_client = h.read_up = true;
	settle(&h, false);
	if (cfg & 0x10)
		close_rst(h.client);
	else
		close(h.client);
	h.client = -1;
	while (h.nup)
		up_drop(&h, 0, cfg & 0x20);
	settle(&h, true);
	check(metrics_render(h.m, &text) == 0, "metrics_render");
	check(metric(&text, "kvsplice_connections_active") == 0,
	      "the client connection did not end");
	check(metric(&text, "kvsplice_buffer_bytes") == 0, "buffered bytes still counted");
	buf_free(&text);
	for (int k = 0; k < 3; k++)
		check(loop_run(h.loop, 0) == 0, "the loop wakes up with nothing to do (a spin)");

	proxy_free(h.p);
	router_free(h.r);
	metrics_free(h.m);
	loop_free(h.loop);
	close(h.lfd);
	if (h.dead >= 0)
		close(h.dead);
	check(count_fds() == fds0, "a descriptor leaked");
	return 0;
}
