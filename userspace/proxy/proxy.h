/* SPDX-License-Identifier: Apache-2.0 */
/* proxy: kvsplice's data path on one epoll loop. Accepts client connections (handed over by BPF
 * or made directly), finds the Service each one was for, reads every HTTP/1.1 request (head and
 * whole body, bounded), asks the router for an endpoint per request, forwards the request over a
 * pooled upstream connection (SO_MARK set, so BPF never intercepts it) and relays the response as
 * it arrives. Bytes that are not HTTP/1.x are relayed unchanged to one endpoint (pass-through).
 * Errors the proxy answers itself use the OpenAI JSON error shape. Memory and connections are
 * bounded (see the limits below): per-connection buffers, the bytes buffered by all connections
 * (beyond: 503 + Retry-After), connections overall and per client address. Not thread-safe:
 * everything runs on the thread of the loop given to proxy_new. How it works inside (its files,
 * the state machine, the drain, the bounds): docs/internals/proxy.md. */
#ifndef KVS_PROXY_H
#define KVS_PROXY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery/discovery.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "route/router.h"

#define PROXY_MAX_LISTEN 8
/* Listen backlog of the proxy's listeners (--listen-backlog). */
#ifndef PROXY_DEFAULT_BACKLOG
#define PROXY_DEFAULT_BACKLOG 4096
#endif

/* Default limits (0 turns a limit off), sized from a measurement on loopback (build -O2, python
 * upstream, 8000 keep-alive connections after one small request each, 8 bodies of 31 MiB held):
 *   - an idle keep-alive connection costs about 3.8 KiB of RSS (struct conn is 640 bytes; its
 *     buffers are released after PROXY_IDLE_TRIM_MS) plus about 1.9 KiB of kernel socket
 *     memory, and 1 descriptor (up to 4 while relaying: client, upstream, a splice pipe pair);
 *   - a held request body costs its size in RSS (0.83x measured: buffers are exact, pages are
 *     touched as bytes arrive), on top of a base RSS of about 87 MiB (tokenizer loaded).
 * So 16384 connections idle cost about 100 MiB and need 16-64 K descriptors; a quarter of them
 * per client address leaves room for the others; 512 MiB of bodies (16 of --max-body's 32 MiB,
 * or thousands of usual prompts) keeps the daemon under about 0.7 GiB. */
#ifndef PROXY_DEFAULT_MAX_CONNS
#define PROXY_DEFAULT_MAX_CONNS 16384 /* client connections at once */
#endif
#ifndef PROXY_DEFAULT_MAX_CONNS_PER_IP
#define PROXY_DEFAULT_MAX_CONNS_PER_IP 4096 /* client connections at once from one address */
#endif
#ifndef PROXY_DEFAULT_MAX_BUFFERED
#define PROXY_DEFAULT_MAX_BUFFERED ((size_t)512 << 20) /* bytes buffered over all connections */
#endif
/* After proxy_stop, the listeners still accept this long (connects BPF rewrote just before the
 * listener left the sockmap), ms. */
#ifndef PROXY_STOP_GRACE_MS
#define PROXY_STOP_GRACE_MS 500
#endif
/* While draining, a keep-alive connection waits this long for its client's next request, ms. */
#ifndef PROXY_DRAIN_IDLE_MS
#define PROXY_DRAIN_IDLE_MS 1000
#endif

struct bpfctl;

/* How response bodies and pass-through bytes are moved between the two sockets. */
enum proxy_relay {
	PROXY_RELAY_COPY,   /* read(2)/write(2) through a userspace buffer */
	PROXY_RELAY_SPLICE, /* splice(2) through a pipe for Content-Length / until-close bodies and
			       pass-through; chunked bodies are framed by reading them (copy) */
};

struct proxy_opts {
	struct sockaddr_in listen[PROXY_MAX_LISTEN];
	int nlisten;
	int backlog;
	size_t max_head;	  /* bytes; longer request heads get 431 */
	size_t max_body;	  /* bytes; larger request bodies get 413 */
	int header_timeout_ms;	  /* to receive a whole request (head + body) once it started */
	int idle_timeout_ms;	  /* keep-alive wait for the next request; silence in a relay */
	int connect_timeout_ms;	  /* per upstream connect attempt */
	int drain_timeout_ms;	  /* after proxy_stop, then everything is closed */
	int pool_idle_timeout_ms; /* idle upstream connections are closed after this */
	int pool_max;		  /* idle upstream connections kept per endpoint */
	uint32_t mark;		  /* SO_MARK of upstream sockets (0: none) */
	enum proxy_relay relay;
	int max_conns;	      /* client connections at once; more: 503 and closed (0: off) */
	int max_conns_per_ip; /* the same per client address (0: off) */
	size_t max_buffered;  /* bytes of all connections' buffers; a request that would pass it:
				 503 + Retry-After (0: off) */
	bool forwarded_for; /* requests go on with X-Forwarded-For ending in the client's address */
	int listen_fd[PROXY_MAX_LISTEN]; /* a socket already listening on listen[i] (taken over from
					    the previous process, handover.h), or -1: bind one */
};

/* Fills o with the defaults (no listener, listen_fd all -1). */
void proxy_opts_default(struct proxy_opts *o);
/* Parses "copy" / "splice"; returns the enum or -1. */
int proxy_relay_parse(const char *s);
const char *proxy_relay_name(enum proxy_relay r);

struct proxy;

/* The series proxy_new registers (daemon/catalog.c lists them for docs/reference/metrics.md). */
extern const struct metrics_family proxy_families[];
extern const size_t proxy_nfamilies;

/* Listens on every o->listen address: takes o->listen_fd[i] when set, else binds (port 0 picks
 * one: see proxy_listen_addr; EADDRINUSE is retried for up to 2 s, a stopping process may still
 * be letting go of it). Registers the proxy's metrics in m. The
 * router and metrics must outlive the proxy. Returns 0 and *out, or a negative errno (message
 * logged). */
int proxy_new(const struct proxy_opts *o, struct loop *loop, struct metrics *m, struct router *r,
	      struct proxy **out);
void proxy_free(struct proxy *p);

/* The i-th listening socket (for bpfctl_set_listener, handover) and its bound address; -1 /
 * -EINVAL once it is closed, or for a bad index. */
int proxy_listen_fd(const struct proxy *p, int i);
int proxy_listen_addr(const struct proxy *p, int i, struct sockaddr_in *out);

/* Serves fd, a connected stream socket (made non-blocking here), as a client connection from
 * peer, as if accepted on listener 0: the same limits (over one it is answered 503 and closed),
 * the Service found the same way (the only one, without BPF or listeners). fd is the proxy's
 * from the call on. Returns 0, or a negative errno (fd closed). For tests: a socketpair end. */
int proxy_adopt(struct proxy *p, int fd, const struct sockaddr_in *peer);

/* Original destinations come from b (NULL: no BPF; the Service is chosen by the listener's port,
 * or is the only Service). b must outlive the proxy or be reset to NULL first. */
void proxy_set_bpf(struct proxy *p, struct bpfctl *b);

/* Installs a Services snapshot (takes a reference; connections keep the snapshot they use). */
void proxy_set_services(struct proxy *p, struct services *s);

/* Housekeeping (timeouts, pool expiry, drain progress): call after every loop_run, at least every
 * 100 ms. */
void proxy_tick(struct proxy *p);

/* Whether the listeners accept (on by default). Off, connects wait in their backlog: listeners
 * taken over from a running kvsplice are not served before the Services are known (that process
 * still accepts them meanwhile). */
void proxy_accept(struct proxy *p, bool on);

/* Starts draining: the listener leaves BPF's sockmap (interception falls open at once, if it is
 * still this process's), the listeners keep accepting for PROXY_STOP_GRACE_MS (nothing in their
 * backlog is reset), then close; requests in flight finish, their responses saying
 * "Connection: close"; a keep-alive connection whose response already announced keep-alive is
 * served one more request if it comes within PROXY_DRAIN_IDLE_MS, else closed. */
void proxy_stop(struct proxy *p);
/* A successor serves the listeners now (handover): this process's copies are closed at once
 * (they stay in the sockmap: the successor holds them) and it drains as after proxy_stop. */
void proxy_handed_over(struct proxy *p);
/* True once draining, the listeners closed and every connection gone (or the drain timeout
 * passed). */
bool proxy_done(const struct proxy *p);
bool proxy_draining(const struct proxy *p);

#endif
