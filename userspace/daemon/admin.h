/* SPDX-License-Identifier: Apache-2.0 */
/* admin: the daemon's small HTTP server on a local address (127.0.0.1:PORT): GET /healthz (200
 * while the loop runs), /readyz (200 when ready and not draining, else 503), /metrics (the
 * registry in Prometheus text format), and paths other modules register (e.g. /debug/route).
 * One request per connection, answered then closed. Runs on the proxy's loop; never blocks.
 * Bounded (struct admin_opts): a few dozen connections at once (a new one closes the oldest, so a
 * flood of idle connections does not lock the liveness probe out), a request head of a few KiB
 * (larger: 431), each connection for 10 s at most; out of descriptors, the oldest connection
 * makes room, else accepts pause for a moment (no spin). */
#ifndef KVS_ADMIN_H
#define KVS_ADMIN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/loop.h"
#include "core/metrics.h"

/* Admin connections open at once; a new one beyond closes the oldest (probes and scrapers need a
 * handful; a flood must not lock the liveness probe out). */
#ifndef ADMIN_DEFAULT_MAX_CONNS
#define ADMIN_DEFAULT_MAX_CONNS 32
#endif
/* Largest admin request head, bytes (larger: 431). */
#ifndef ADMIN_DEFAULT_MAX_HEAD
#define ADMIN_DEFAULT_MAX_HEAD 8192
#endif
/* An admin connection is closed after this long, ms. */
#ifndef ADMIN_DEFAULT_TIMEOUT_MS
#define ADMIN_DEFAULT_TIMEOUT_MS 10000
#endif
/* Listen backlog of the admin listener (probes and scrapers, a handful at once). */
#ifndef ADMIN_BACKLOG
#define ADMIN_BACKLOG 64
#endif

struct admin;

/* The bounds: admin_opts_default gives the ADMIN_DEFAULT_* ones; 0 is off where a bound can be. */
struct admin_opts {
	int max_conns;	 /* connections open at once (0: no bound) */
	size_t max_head; /* request head, bytes (never 0) */
	int timeout_ms;	 /* per connection, ms (0: none) */
};

/* Fills o with the defaults. */
void admin_opts_default(struct admin_opts *o);

/* A handler appends the response body to body and returns the HTTP status; query is the text
 * after '?' (or ""). It may set *content_type to a static string (default text/plain). */
typedef int (*admin_handler_fn)(struct buf *body, const char *query, const char **content_type,
				void *arg);

/* Listens on addr (port 0 picks one), or takes listen_fd (>= 0: a socket already listening there,
 * from the previous process: handover.h), bounded by o (NULL: the defaults). A bind refused with
 * EADDRINUSE is retried for up to 2 s. Returns 0 and *out, -EINVAL for a negative bound in o, or
 * another negative errno (logged). */
int admin_new(struct loop *l, const struct sockaddr_in *addr, int listen_fd,
	      const struct admin_opts *o, struct metrics *m, struct admin **out);
/* The listening socket (for a handover), -1 once released. */
int admin_listen_fd(const struct admin *a);
/* Stops listening (a successor serves the socket now: this process's copy is closed); the
 * connections open are still answered. */
void admin_release_listener(struct admin *a);
void admin_free(struct admin *a);
/* The bound address. */
void admin_addr(const struct admin *a, struct sockaddr_in *out);
/* /readyz answers 200 only when ready is true. */
void admin_set_ready(struct admin *a, bool ready);
/* While not ready, /readyz says why (copied; NULL or "": just "not ready"). */
void admin_set_not_ready_reason(struct admin *a, const char *why);
/* fn(arg) runs before /metrics and every registered handler answer (NULL: none): the daemon
 * brings counts it books lazily up to date there, so a read after a response sees it. */
void admin_before_read(struct admin *a, void (*fn)(void *arg), void *arg);
/* Registers path (exact match, e.g. "/debug/route"). Returns 0, -EEXIST or -ENOMEM. */
int admin_handle(struct admin *a, const char *path, admin_handler_fn fn, void *arg);
/* The series admin_metrics writes (daemon/catalog.c lists them for docs/reference/metrics.md). */
extern const struct metrics_family admin_families[];
extern const size_t admin_nfamilies;
/* Appends the bounds in force as Prometheus text (admin_families: kvsplice_admin_limit_*, for a
 * metrics collector). Returns 0 or -ENOMEM. */
int admin_metrics(const struct admin *a, struct buf *out);
/* Frees closed connections and times out slow ones: call after every loop_run. */
void admin_tick(struct admin *a);

#endif
