/* SPDX-License-Identifier: Apache-2.0 */
/* proxy_int.h: the proxy's private types and the functions its files share (not part of the
 * contract: proxy.h is). One job per file:
 *   proxy.c          the driver: options, listeners, accept, a connection's life and epoll
 *                    interest, the state machine's step function, housekeeping, drain
 *   proxy_request.c  reading and parsing a request, choosing an endpoint, sending the request,
 *                    retrying a failed upstream
 *   proxy_pool.c     upstream connections: connect, the idle pool, the check before reuse
 *   proxy_relay.c    writing to the client, response framing, the relay (copy or splice), tunnels
 *   proxy_answer.c   the answers kvsplice gives itself (errors, shedding, refused connections)
 *   proxy_limits.c   bounds: bytes buffered, connections per client address, buffer release
 * Everything runs on the loop's thread. */
#ifndef KVS_PROXY_TYPES_H
#define KVS_PROXY_TYPES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
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

enum cstate { C_HEAD, C_BODY, C_CONNECT, C_SEND, C_RESP, C_TUNNEL, C_CLOSING };

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

/* Both directions of a tunnel (pass-through, or after a 101). */
struct conn_tunnel {
	bool cli_eof, up_eof;	/* read EOF from that side */
	bool cli_shut, up_shut; /* shutdown(SHUT_WR) sent to that side */
};

struct conn {
	struct loop_ev ev;
	struct proxy *p;
	struct conn *next, *prev; /* live list, zombie list or free list */
	enum cstate state;
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

	bool passthrough;	     /* not HTTP/1.x: bytes relayed as they are, to one endpoint */
	bool sniffed;		     /* the first request line was seen to be HTTP/1.x */
	struct router_ticket ticket; /* the router's accounting of the current request */
	char ep_name[DISCOVERY_NAME_MAX]; /* of the last endpoint tried */
	struct upstream *up;
	struct conn_req rq;  /* the current request: reset as a whole when it is done */
	struct conn_resp rs; /* its response: likewise */
	struct conn_tunnel tn;

	/* splice */
	int pipe[2];
	size_t pipe_bytes;

	bool close_after; /* close once the current response is out */
	bool linger;	  /* after an error: half-close, drain the client, then close */
	bool rdhup_seen;  /* the client half-closed (or went away): it is not read any more */
	bool cli_done;	  /* read its EOF: all it sent is in c->in (served, then closed) */
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

/* --- proxy.c: the driver --- */
void conn_close(struct conn *c);
/* Makes every step possible now, then sets the epoll interest. */
void conn_progress(struct conn *c);
/* Sets the epoll interest from the state (and closes a connection that is finished). */
void conn_update(struct conn *c);
/* Bytes moved for c: its relay is not silent (pushes the idle deadline). */
void conn_touch(struct conn *c);
/* The current request of c ended with status (0: no response): the router's accounting. */
void route_end(struct conn *c, int status);
/* Events of an upstream socket (its owner's state machine, or the pool's). */
void upstream_cb(struct loop_ev *ev, uint32_t events);

/* --- proxy_request.c --- */
/* Parses what the client sent. Returns 1 when a request is complete and routed, 0 when more bytes
 * are needed, -1 when the connection was closed or answered by kvsplice. */
int request_read(struct conn *c);
/* Chooses an endpoint not tried yet and starts (or reuses) an upstream connection; answers 503 /
 * 502 when none is left. */
void request_route(struct conn *c);
/* Writes the request upstream. Returns 1 all sent, 0 blocked, -1 handled (failure). */
int request_send(struct conn *c);
/* The upstream failed before any response byte: retries where that is safe, else answers. A
 * failed connect also puts the endpoint's worker down (router_connect_failed). */
void upstream_failed(struct conn *c, bool connect_failed);
/* The worker c's request is on stopped answering (router_ticket_hung). A request with no response
 * byte yet is sent elsewhere when it is retry-safe (else it waits on, as before); a response that
 * started and has been silent for PROXY_HUNG_SILENCE_MS is cut (the client sees an error, not a
 * hang until --idle-timeout). */
void request_abandon(struct conn *c);
/* Forgets the request (its buffers emptied, capacity above PROXY_KEEP_BUF released). */
void request_reset(struct conn *c);

/* --- proxy_pool.c --- */
/* Starts a non-blocking connect. Returns the upstream, or NULL with errno set. */
struct upstream *up_connect(struct proxy *p, const struct sockaddr_in *a);
/* An idle pooled connection to a that is still clean (no EOF, no stray bytes), or NULL; the
 * unclean ones met on the way are closed. */
struct upstream *up_take_idle(struct proxy *p, const struct sockaddr_in *a);
/* Back to the idle pool, or closed (pool full, draining). */
void up_release(struct upstream *u);
void up_close(struct upstream *u);
/* Closes pooled connections idle past their deadline (all of them when now is UINT64_MAX). */
void pool_expire(struct proxy *p, uint64_t now);
/* Frees closed upstreams (after a loop batch), and with all, the free list too. */
void pool_reap(struct proxy *p, bool all);

/* --- proxy_relay.c --- */
/* Writes what can be written to the client. Returns 0, or -1 when the connection was closed. */
int client_flush(struct conn *c);
/* Moves response bytes upstream → client. Returns 0, or -1 when the conn was handed over. */
int response_pump(struct conn *c);
/* Moves bytes both ways in a tunnel. Returns 0, or -1 when the connection was closed. */
int tunnel_pump(struct conn *c);
static inline size_t out_sendable(const struct conn *c)
{
	return buf_unread(&c->out) - c->out_hold;
}

/* --- proxy_answer.c --- */
/* Queues an error answer in the OpenAI shape (counted by status). close: the connection closes
 * once it is written (lingering); else the next request may follow. */
void conn_error(struct conn *c, int status, const char *message, bool close);
/* Sheds the current request: 503 with Retry-After, counted under *counter. */
void conn_shed(struct conn *c, uint64_t *counter, const char *message, bool close);
/* Answers a connection over a connection limit with 503 + Retry-After and closes it, without
 * making it a struct conn. */
void answer_refused(struct proxy *p, int fd, const char *message);

/* --- proxy_limits.c --- */
/* Recounts c's buffers into p->buffered. */
void conn_account(struct conn *c);
/* Would a new request needing need more bytes pass --max-buffered? */
bool limits_buffered_over(const struct proxy *p, uint64_t need);
/* Gives b exactly n bytes of room (no doubling): for a body whose length is known. Returns 0 or
 * -ENOMEM. */
int limits_buf_exact(struct buf *b, size_t n);
/* Releases the capacity of c's empty buffers above keep bytes. */
void limits_trim(struct conn *c, size_t keep);
/* Connections from addr (network order): count, add one (0 or -ENOMEM), remove one. */
uint32_t ip_count_get(const struct ip_table *t, uint32_t addr);
int ip_count_add(struct ip_table *t, uint32_t addr);
void ip_count_del(struct ip_table *t, uint32_t addr);
void ip_table_free(struct ip_table *t);

#endif
