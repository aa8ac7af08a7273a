// SPDX-License-Identifier: Apache-2.0
/* libFuzzer target for the proxy's connection state machine: a real proxy (proxy.h,
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
 *   - the connection ends: kvsplice_connections_active and kvsplice_buffer_bytes, read from the
 *     rendered /metrics as an operator reads them, are back to 0 (its buffers uncounted) once
 *     both peers have closed, without waiting for a timeout (every timeout is far longer than a
 *     run);
 *   - no descriptor leak: after proxy_free the process has the descriptors it had before.
 *
 * Every input starts from the same state. Each one gets a new loop, metrics registry, router and
 * proxy (their state is what is tested: the router's round-robin position, the workers it marks
 * down, its approximate view would otherwise carry from one input to the next), freed at its end.
 * Made once, on the first input, are only what holds no state of a connection: the parsed
 * Services, the fake upstream's listener, the refusing endpoint's bound port, and the proxy's
 * listener, which each proxy takes as an inherited one (o.listen_fd, as after a handover) through
 * a dup it closes itself. After every input both listeners are drained (a connection still queued
 * is reset, as closing the listener did when each input had its own), so the next input finds the
 * same empty sockets; a crash found late in a run reproduces from its input alone (the first input
 * of a new process goes through the same steps). Where it may (root), the process runs in a
 * network namespace of its own, so neither its ports nor its TIME_WAIT sockets are shared.
 * What an input costs, and where the rest goes: docs/journal/fuzzing.md, "fuzz_proxy: what an
 * input costs". */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/buf.h"
#include "discovery/discovery.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "proxy/proxy.h"
#include "route/policy.h"
#include "route/router.h"

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

/* Made on the first input, the same for every input after (see the top). */
static struct world {
	bool ready;
	int lfd;		  /* the fake upstream's listening socket */
	int dead;		  /* the refusing endpoint's bound socket */
	int plfd;		  /* the proxy's listening socket (each proxy closes a dup) */
	struct sockaddr_in pa;	  /* its address: the client's destination */
	struct services *svcs[2]; /* [0] the upstream alone, [1] the refusing endpoint first */
	int fddir;		  /* /proc/self/fd, read to count descriptors */
} w = {.lfd = -1, .dead = -1, .plfd = -1, .fddir = -1};

struct harness;

/* A socket of the harness's side, watched on the input's loop beside the proxy's own: a round is
 * one epoll_wait when nothing moves, not an accept and a recv per socket besides. */
struct hsock {
	struct loop_ev ev;
	struct harness *h;
	bool eof; /* read to its end (or failed): no longer watched */
};

/* One input's objects, all new. */
struct harness {
	struct loop *loop;
	struct metrics *m;
	struct router *r;
	struct proxy *p;
	int client;	/* -1 once closed */
	int up[MAX_UP]; /* upstream connections, in the order the ops pick them */
	int nup;
	bool read_client, read_up, closing;
	struct hsock acc, cli, ups[MAX_UP]; /* w.lfd, the client, upstream slots (ev.fd -1: free) */
};

static char sink[SINK];

/* The /metrics text of an input's registry, rendered into the same buffer every time. */
static struct buf text;

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

static void close_rst(int fd)
{
	struct linger l = {.l_onoff = 1, .l_linger = 0};

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/* --- made once -------------------------------------------------------------------------------- */

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

/* A loopback port nobody listens on: bound, never listened, kept open for the whole run so that
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

static struct services *services_of(const char *json)
{
	struct services *s = NULL;
	char err[128];

	check(discovery_parse(json, strlen(json), &s, err, sizeof(err)) == 0, err);
	return s;
}

/* The proxy's listener, bound and set up by a proxy of its own (the path that binds), kept
 * through a dup when that proxy is freed. That proxy is given svcs and takes its last reference
 * away with it, as every input's proxy did when each input parsed its own. */
static int proxy_listener(struct sockaddr_in *a, struct services *svcs)
{
	struct router_cfg rc;
	router_cfg_default(&rc);
	rc.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
	rc.policy = "round-robin";
	rc.scrape_interval_ms = 0;
	struct proxy_opts o;
	struct loop *l;
	struct metrics *m;
	struct router *r;
	struct proxy *p;
	int fd;

	proxy_opts_default(&o);
	o.nlisten = 1;
	o.listen[0].sin_family = AF_INET;
	o.listen[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	check(loop_new(&l) == 0, "loop_new");
	check(metrics_new(&m) == 0, "metrics_new");
	check(router_new(&rc, &r) == 0, "router_new");
	router_set_services(r, svcs);
	check(proxy_new(&o, l, m, r, &p) == 0, "proxy_new");
	proxy_set_services(p, svcs);
	services_put(svcs);
	check(proxy_listen_addr(p, 0, a) == 0, "proxy_listen_addr");
	fd = fcntl(proxy_listen_fd(p, 0), F_DUPFD_CLOEXEC, 0);
	check(fd >= 0, "dup of the listener");
	proxy_free(p);
	router_free(r);
	metrics_free(m);
	loop_free(l);
	return fd;
}

/* Loopback for this process alone, when it may have one: every input closes two or more TCP
 * connections, each leaving a TIME_WAIT socket for a minute; thousands of inputs a second in the
 * machine's namespace would hold its ephemeral ports from other programs. Without the privilege
 * the shared loopback is used. */
static void own_loopback(void)
{
	struct ifreq ifr = {0};
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	check(fd >= 0, "socket");
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	check(ioctl(fd, SIOCGIFFLAGS, &ifr) == 0, "SIOCGIFFLAGS lo");
	ifr.ifr_flags |= IFF_UP;
	check(ioctl(fd, SIOCSIFFLAGS, &ifr) == 0, "SIOCSIFFLAGS lo");
	close(fd);
}

static void world_init(void)
{
	char json[512];
	uint16_t uport, dport;

	own_loopback();
	w.lfd = listen_local(&uport);
	w.dead = refused_port(&dport);
	snprintf(json, sizeof(json),
		 "{\"services\":[{\"name\":\"s\",\"cluster_ip\":\"10.96.0.1\",\"port\":80,"
		 "\"endpoints\":[{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%u}]}]}",
		 uport);
	w.plfd = proxy_listener(&w.pa, services_of(json));
	w.svcs[0] = services_of(json);
	snprintf(json, sizeof(json),
		 "{\"services\":[{\"name\":\"s\",\"cluster_ip\":\"10.96.0.1\",\"port\":80,"
		 "\"endpoints\":[{\"name\":\"dead\",\"ip\":\"127.0.0.1\",\"port\":%u},"
		 "{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%u}]}]}",
		 dport, uport);
	w.svcs[1] = services_of(json);
	w.fddir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(w.fddir >= 0, "open /proc/self/fd");
	w.ready = true;
}

/* Open descriptors of the process (w.fddir's own included), by getdents64 on the kept directory
 * (opendir and readdir per input cost more than the count). */
static int count_fds(void)
{
	char d[4096];
	long n;
	int c = 0;

	check(lseek(w.fddir, 0, SEEK_SET) == 0, "lseek /proc/self/fd");
	while ((n = syscall(SYS_getdents64, w.fddir, d, sizeof(d))) > 0)
		for (long off = 0; off < n;) {
			const struct dirent64 *e = (const void *)(d + off);

			c += e->d_name[0] != '.';
			off += e->d_reclen;
		}
	check(n == 0, "getdents64 /proc/self/fd");
	return c;
}

/* Resets every connection still queued on a listener: the next input finds none. */
static void drain_listener(int lfd)
{
	int fd;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close_rst(fd);
	check(errno == EAGAIN || errno == EWOULDBLOCK, "accept4");
}

/* --- the harness's side of an input ----------------------------------------------------------- */

/* Watches s for reading (on) or takes it out of the loop: a socket with nothing to wait for would
 * still report HUP and ERR (as the proxy's own would, docs/internals/proxy.md "CPU"). */
static void hsock_watch(struct hsock *s, bool on)
{
	if (s->ev.fd < 0)
		return;
	if (on && !s->eof)
		check(loop_set(s->h->loop, &s->ev, EPOLLIN) == 0, "loop_set");
	else
		loop_del(s->h->loop, &s->ev);
}

/* Reads what the proxy sent, all of it. */
static void hsock_cb(struct loop_ev *ev, uint32_t events)
{
	struct hsock *s = container_of(ev, struct hsock, ev);
	ssize_t n;

	while ((n = recv(ev->fd, sink, sizeof(sink), 0)) > 0)
		;
	if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
		s->eof = true;
		hsock_watch(s, false);
	}
}

/* The fake upstream accepts the proxy's connections (while closing, and beyond MAX_UP, it closes
 * them at once). */
static void accept_cb(struct loop_ev *ev, uint32_t events)
{
	struct harness *h = container_of(ev, struct hsock, ev)->h;
	int fd;

	while ((fd = accept4(ev->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct hsock *s = h->ups;

		if (h->closing || h->nup == MAX_UP) {
			close(fd);
			continue;
		}
		while (s->ev.fd >= 0)
			s++;
		*s = (struct hsock){.ev = {.fd = fd, .cb = hsock_cb}, .h = h};
		h->up[h->nup++] = fd;
		hsock_watch(s, h->read_up || h->closing);
	}
}

static void up_drop(struct harness *h, int i, bool rst)
{
	struct hsock *s = h->ups;

	while (s->ev.fd != h->up[i])
		s++;
	loop_forget(&s->ev); /* closing its only descriptor takes it out of epoll */
	s->ev.fd = -1;
	if (rst)
		close_rst(h->up[i]);
	else
		close(h->up[i]);
	h->up[i] = h->up[--h->nup];
}

static void read_client_set(struct harness *h, bool on)
{
	h->read_client = on;
	hsock_watch(&h->cli, on);
}

static void read_up_set(struct harness *h, bool on)
{
	h->read_up = on;
	for (int i = 0; i < MAX_UP; i++)
		hsock_watch(&h->ups[i], on || h->closing);
}

/* Runs the loop, the proxy's sockets and the harness's, until nothing moves; the proxy must get
 * there in MAX_ROUNDS rounds. */
static void settle(struct harness *h, bool closing)
{
	h->closing = closing;
	for (int i = 0; i < MAX_ROUNDS; i++) {
		int n = loop_run(h->loop, 0);

		check(n >= 0, "loop_run");
		proxy_tick(h->p);
		if (n == 0)
			return;
	}
	check(0, "the loop never went quiet (a spin)");
}

static void send_some(int fd, const void *p, size_t n)
{
	if (fd >= 0)
		(void)send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR);
	discovery_set_routes(&policy_routes);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct harness h = {.client = -1, .read_client = true, .read_up = true};
	struct proxy_opts o;
	struct router_cfg rc;
	router_cfg_default(&rc);
	rc.tokcache_bytes = 0; /* no encoding cache: every prompt tokenized anew */
	struct services *svcs;
	bool first = !w.ready;
	uint8_t cfg;
	size_t i = 1;
	int fds0;

	if (size < 1)
		return 0;
	if (first)
		world_init();
	fds0 = count_fds();
	cfg = data[0];
	svcs =
	    w.svcs[cfg & 0x04 ? 1 : 0]; /* a second endpoint refusing: connect failures, retries */

	check(loop_new(&h.loop) == 0, "loop_new");
	check(metrics_new(&h.m) == 0, "metrics_new");
	rc.policy = cfg & 0x08 ? "kv" : "round-robin";
	rc.metrics = NULL; /* the proxy's series only */
	rc.scrape_interval_ms = 0;
	rc.seed = 1;
	check(router_new(&rc, &h.r) == 0, "router_new");
	router_set_services(h.r, svcs);

	proxy_opts_default(&o);
	o.nlisten = 1;
	o.listen[0] = w.pa;
	o.listen_fd[0] = fcntl(w.plfd, F_DUPFD_CLOEXEC, 0);
	check(o.listen_fd[0] >= 0, "dup of the listener");
	o.relay = cfg & 0x01 ? PROXY_RELAY_SPLICE : PROXY_RELAY_COPY;
	if (cfg & 0x02) { /* small limits: 431, 413, shedding */
		o.max_head = 200;
		o.max_body = 64;
		o.max_buffered = 4096;
	}
	o.pool_max = cfg & 0x40 ? 0 : 4;
	check(proxy_new(&o, h.loop, h.m, h.r, &h.p) == 0, "proxy_new");
	proxy_set_services(h.p, svcs);

	h.acc = (struct hsock){.ev = {.fd = w.lfd, .cb = accept_cb}, .h = &h};
	for (int k = 0; k < MAX_UP; k++)
		h.ups[k] = (struct hsock){.ev = {.fd = -1, .cb = hsock_cb}, .h = &h};
	hsock_watch(&h.acc, true);
	h.client = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	check(h.client >= 0, "socket");
	check(connect(h.client, (struct sockaddr *)&w.pa, sizeof(w.pa)) == 0 ||
		  errno == EINPROGRESS,
	      "connect");
	h.cli = (struct hsock){.ev = {.fd = h.client, .cb = hsock_cb}, .h = &h};
	hsock_watch(&h.cli, true);
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
			read_client_set(&h, !h.read_client);
			break;
		case 6:
			read_up_set(&h, !h.read_up);
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
	read_client_set(&h, true);
	read_up_set(&h, true);
	settle(&h, false);
	loop_forget(&h.cli.ev);
	h.cli.ev.fd = -1;
	if (cfg & 0x10)
		close_rst(h.client);
	else
		close(h.client);
	h.client = -1;
	while (h.nup)
		up_drop(&h, 0, cfg & 0x20);
	settle(&h, true);
	buf_reset(&text);
	check(metrics_render(h.m, &text) == 0, "metrics_render");
	check(metric(&text, "kvsplice_connections_active") == 0,
	      "the client connection did not end");
	check(metric(&text, "kvsplice_buffer_bytes") == 0, "buffered bytes still counted");
	hsock_watch(&h.acc, false); /* the proxy's sockets alone now */
	for (int k = 0; k < 3; k++)
		check(loop_run(h.loop, 0) == 0, "the loop wakes up with nothing to do (a spin)");

	proxy_free(h.p);
	router_free(h.r);
	metrics_free(h.m);
	loop_free(h.loop);
	/* a connect the proxy made and closed unaccepted, a client never accepted */
	drain_listener(w.lfd);
	drain_listener(w.plfd);
	check(count_fds() == fds0, "a descriptor leaked");
	return 0;
}
