/* SPDX-License-Identifier: Apache-2.0 */
/* types: the proxy's private types, tunables and the hot helpers every proxy file shares (not
 * part of the contract: proxy.h is). The files of the proxy, each one's functions named after it,
 * and the way calls go (down only: tests/style/test_proxy_calls.sh fails on a call circle):
 *
 *   proxy.c     the driver: options, listeners, accept, epoll interest, housekeeping, drain,
 *               and the state machine: the only file that changes a connection's state
 *     request.c   reading and checking a request (head, whole body)
 *     upstream.c  choosing an endpoint, sending the request, retrying a failed upstream
 *     relay.c     bytes towards the client: the response framed as it streams, tunnels
 *       answer.c    the answers kvsplice gives itself (errors, shedding, refused connections)
 *         conn.c      one connection's bookkeeping: close, the request's end, conn_show
 *           pool.c      upstream connections: connect, the idle pool, the check before reuse
 *           limits.c    bounds: bytes buffered, connections per client address, buffer release
 *             types.h     these types
 *
 * The steps (request, upstream, relay, answer) say what happened with an enum step; the driver
 * moves the state. How a connection goes through its states: docs/internals/proxy.md.
 * Everything runs on the loop's thread. */
#ifndef KVS_PROXY_TYPES_H
#define KVS_PROXY_TYPES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/clock.h"
#include "discovery/discovery.h"
#include "core/http.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "prompt/openai.h"
#include "proxy/proxy.h"
#include "route/router.h"

/* Room made before a read(2) of the upstream, bytes (the buffer then holds 64 KiB: below glibc's
 * mmap threshold, so a new buffer is not an mmap per connection). */
#ifndef PROXY_READ_CHUNK
#define PROXY_READ_CHUNK (32 << 10)
#endif
/* Room made before a read(2) of the client, bytes. */
#ifndef PROXY_CLIENT_CHUNK
#define PROXY_CLIENT_CHUNK (16 << 10)
#endif
/* Stop reading a source while this many bytes wait for the other side, bytes. Also the most
 * answers kvsplice queues for a client that does not read them. */
#ifndef PROXY_HIGH_WATER
#define PROXY_HIGH_WATER (256 << 10)
#endif
/* A buffer keeps at most this much capacity once its request is over, bytes (larger ones are
 * freed: a 32 MiB body does not stay with its connection). Covers the usual relay buffers. */
#ifndef PROXY_KEEP_BUF
#define PROXY_KEEP_BUF (64 << 10)
#endif
/* A connection idle this long (keep-alive, nothing pending) gives all its buffers back, ms. */
#ifndef PROXY_IDLE_TRIM_MS
#define PROXY_IDLE_TRIM_MS 1000
#endif
/* Closed connections kept for reuse (their buffers are freed), at most. */
#ifndef PROXY_FREE_MAX
#define PROXY_FREE_MAX 256
#endif
/* Bytes moved per wake-up of one connection before yielding to the others. */
#ifndef PROXY_BURST
#define PROXY_BURST (4 << 20)
#endif
/* Smallest rest of a Content-Length body worth a splice (below it a read/write pair is cheaper
 * than the three splice calls), bytes. */
#ifndef PROXY_SPLICE_MIN
#define PROXY_SPLICE_MIN (64 << 10)
#endif
/* After an error answer, how long the client's unread bytes are drained before closing (so the
 * close does not turn into a reset that destroys the answer in flight), ms. */
#ifndef PROXY_LINGER_MS
#define PROXY_LINGER_MS 2000
#endif
/* Accepts pause this long when the process is out of file descriptors, ms. */
#ifndef PROXY_ACCEPT_PAUSE_MS
#define PROXY_ACCEPT_PAUSE_MS 100
#endif
/* Pipe size for splice relays, bytes. */
#ifndef PROXY_PIPE_SIZE
#define PROXY_PIPE_SIZE (1 << 20)
#endif
/* A started response from a worker that stopped answering (its scrapes failed) is cut once it has
 * been silent this long, ms. */
#ifndef PROXY_HUNG_SILENCE_MS
#define PROXY_HUNG_SILENCE_MS 1000
#endif
/* Retry-After of the answers that shed load, seconds. */
#ifndef PROXY_RETRY_AFTER_S
#define PROXY_RETRY_AFTER_S 1
#endif

/* A client connection's state; only the driver (proxy.c) changes it. */
enum cstate { C_HEAD, C_BODY, C_CONNECT, C_SEND, C_RESP, C_TUNNEL, C_CLOSING };

/* What a step (request, upstream, relay, answer) did, told to the driver, which moves the state
 * accordingly (proxy.c, drive()). */
enum step {
	STEP_WAIT,    /* nothing more to do now: the state stays, events are awaited */
	STEP_GONE,    /* the connection was closed */
	STEP_BODY,    /* a request head was accepted: its body is read next (C_BODY) */
	STEP_ROUTE,   /* a request is complete, or the bytes are pass-through: to an endpoint */
	STEP_CONNECT, /* a new upstream connection is being made (C_CONNECT) */
	STEP_SEND,    /* a pooled upstream connection is taken: the request is sent (C_SEND) */
	STEP_SENT,    /* the request is all written upstream */
	STEP_UPSTREAM_LOST, /* the upstream failed before any response byte (upstream_failed) */
	STEP_TUNNEL,	    /* bytes go both ways as they are now (C_TUNNEL, after a 101) */
	STEP_NEXT,  /* the exchange is over: the connection waits for its next request (C_HEAD) */
	STEP_CLOSE, /* what is queued for the client goes out, then it closes (C_CLOSING) */
};

struct upstream {
	struct loop_ev ev;
	struct proxy *p;
	struct conn *c; /* owner, NULL while idle in the pool */
	struct sockaddr_in addr;
	int ep_index;
	bool connecting, reused;
	uint64_t idle_deadline;
	struct upstream *next, *prev; /* idle pool list, or the free list */
};

/* The request a connection is on, from its first byte to its response's end. */
struct conn_req {
	char method[16];
	bool keep_alive;	/* the client allows another request after it */
	bool upgrade;		/* Upgrade: a tunnel once (and only if) the upstream answers 101 */
	bool expect_sent;	/* "100 Continue" answered for it */
	enum http_body framing; /* how its body is delimited */
	uint64_t body_left;	/* Content-Length bytes still to read */
	uint64_t body_raw;	/* raw chunked bytes read */
	struct http_chunked chunk;
	size_t target_off, target_len; /* its target in the forwarded head */
	uint64_t tried;		       /* endpoints tried: bit (index % 64) */
	int attempts;
	bool fresh_retry; /* a reused connection failed: retried once on a new one */
	/* may be sent again after it may have reached a worker that then failed before any
	 * response byte: an idempotent method, or an OpenAI completion (it changes nothing there
	 * but the cache, and the client saw nothing of the first attempt) */
	bool retry_safe;
	bool lost_retry; /* sent again once already after its connection died mid-request */
};

/* The response to the current request, as it is relayed. */
struct conn_resp {
	bool usage_on;	      /* its usage is read as it streams past */
	bool close_announced; /* its head (rewritten while draining) told the client we close */
	struct openai_usage usage;
	bool head_done, started, keep_alive;
	bool extra; /* bytes after its end: the upstream connection is not reused */
	enum http_body framing;
	uint64_t left; /* Content-Length bytes still to relay */
	struct http_chunked chunk;
	int status;
};

/* What is known of a connection and of each of its sides: bits of conn.flags (conn_show names
 * them). Set once, cleared only when the connection is made anew. */
enum conn_flag {
	CF_PASSTHROUGH = 1u << 0, /* not HTTP/1.x: bytes relayed as they are, to one endpoint */
	CF_SNIFFED = 1u << 1,	  /* the first request line was seen to be HTTP/1.x */
	CF_CLOSE_AFTER = 1u << 2, /* close once the current response is out */
	CF_LINGER = 1u << 3,	  /* after an error: half-close, drain the client, then close */
	/* the client side */
	CF_CLI_RDHUP = 1u << 4, /* it half-closed (or went away): it is not read any more */
	CF_CLI_DONE = 1u << 5,	/* read its EOF: all it sent is in c->in (served, then closed) */
	CF_CLI_EOF = 1u << 6,	/* tunnel: read its EOF */
	CF_CLI_SHUT = 1u << 7,	/* shutdown(SHUT_WR) sent to it (tunnel, lingering close) */
	/* the upstream side */
	CF_UP_EOF = 1u << 8,  /* tunnel: read its EOF */
	CF_UP_SHUT = 1u << 9, /* tunnel: shutdown(SHUT_WR) sent to it */
};
#define CONN_FLAG_NAMES                                                                            \
	{                                                                                          \
		"passthrough", "sniffed", "close_after", "linger", "cli_rdhup", "cli_done",        \
		    "cli_eof", "cli_shut", "up_eof", "up_shut"                                     \
	}

struct conn {
	struct loop_ev ev;
	struct proxy *p;
	struct conn *next, *prev; /* live list, zombie list or free list */
	enum cstate state;
	uint32_t flags; /* enum conn_flag bits */
	struct sockaddr_in peer;
	int lidx;			   /* listener index */
	char svc_name[DISCOVERY_NAME_MAX]; /* the Service of this connection ("" = none) */
	uint64_t deadline;		   /* ms, monotonic */
	uint64_t t_req;			   /* ns, first byte of the current request */
	uint64_t t_idle;		   /* ms, since when it waits for a request (0: busy) */
	uint64_t t_moved;		   /* ms, when bytes last moved for it (conn_touch) */
	int requests;			   /* on this connection */
	size_t acct;			   /* buffer bytes counted in p->buffered */

	struct buf in;	 /* from the client, not yet consumed */
	struct buf out;	 /* to the client */
	size_t out_hold; /* tail bytes of out not yet releasable (response head being parsed) */
	struct buf fwd;	 /* request head as forwarded */
	struct buf body; /* request body (decoded) */
	size_t fwd_sent; /* bytes of fwd then body written upstream */
	size_t head_scan;

	struct router_ticket ticket;	  /* the router's accounting of the current request */
	char ep_name[DISCOVERY_NAME_MAX]; /* of the last endpoint tried */
	struct upstream *up;
	struct conn_req rq;  /* the current request: reset as a whole when it is done */
	struct conn_resp rs; /* its response: likewise */

	/* splice */
	int pipe[2];
	size_t pipe_bytes;
};

struct stats {
	uint64_t *accepted, *requests, *passthrough, *resp[6], *err_bad, *err_431, *err_413,
	    *err_405, *err_501, *err_503, *err_502, *err_504, *err_408, *idle_timeouts,
	    *client_aborts, *up_connects, *up_connect_fail, *up_reused, *up_retries, *up_reset,
	    *up_bad_resp, *up_stale, *bytes_up, *bytes_down, *upgrades, *refused_conns,
	    *refused_unknown, *refused_per_ip, *shed_buffered, *up_abandoned_retried,
	    *up_abandoned_cut;
	int64_t *active, *idle_pool, *draining, *buffer_bytes;
	struct metrics_hist *duration;
};

/* Connections per client address: open addressing, linear probing, deletion by backward shift. */
struct ip_count {
	uint32_t addr; /* network order; 0: empty slot */
	uint32_t n;
};
struct ip_table {
	struct ip_count *v;
	size_t cap, used; /* cap: a power of two, or 0 */
};

struct listener {
	struct loop_ev ev;
	struct proxy *p;
	int idx;
	struct sockaddr_in addr;
};

struct proxy {
	struct proxy_opts o;
	struct loop *loop;
	struct router *router;
	struct bpfctl *bpf;
	struct services *svcs;
	struct listener l[PROXY_MAX_LISTEN];
	int nl;
	struct conn *live, *zombies, *free_conns;
	struct upstream *idle, *free_ups, *zombie_ups;
	/* the driver's handler of upstream socket events (pool.c gives it to each new one) */
	void (*upstream_cb)(struct loop_ev *ev, uint32_t events);
	int nlive, nfree;
	bool draining;
	uint64_t drain_start, drain_deadline;
	uint64_t
	    listen_until; /* ms; draining: the listeners close then (0: closed or not draining) */
	bool accept_off;  /* proxy_accept(false): the listeners are not accepting */
	uint64_t accept_resume; /* ms; accepts paused until then (0: not paused) */
	size_t buffered;	/* bytes of every live connection's buffers (sum of acct) */
	struct ip_table ips;
	struct stats st;
	struct buf scratch; /* de-chunked response bytes read for their usage */
};

/* --- hot helpers, inline in every file ----------------------------------------------------- */

static inline bool conn_has(const struct conn *c, uint32_t f)
{
	return (c->flags & f) != 0;
}

static inline void conn_set(struct conn *c, uint32_t f)
{
	c->flags |= f;
}

/* Doubly linked lists of conns (live, zombies, free) by head pointer. */
static inline void conn_list_unlink(struct conn **head, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static inline void conn_list_push(struct conn **head, struct conn *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

/* Bytes of c->out the client may be sent now (the held tail is a response head being parsed). */
static inline size_t conn_out_sendable(const struct conn *c)
{
	return buf_unread(&c->out) - c->out_hold;
}

/* Bytes moved for c: its relay is not silent (pushes the idle deadline). */
static inline void conn_touch(struct conn *c)
{
	c->t_moved = clock_ms();
	c->deadline = c->t_moved + (uint64_t)c->p->o.idle_timeout_ms;
}

#endif
