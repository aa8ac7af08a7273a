/* SPDX-License-Identifier: Apache-2.0 */
/* pool: upstream connections (private; see proxy/types.h for where it sits): non-blocking
 * connects with SO_MARK, the per-endpoint idle pool, and the check that a pooled connection is
 * still clean before reuse. Calls nothing else of the proxy; an upstream's socket events go to
 * the driver's p->upstream_cb. */
#ifndef KVS_PROXY_POOL_H
#define KVS_PROXY_POOL_H

#include "proxy/types.h"

/* Starts a non-blocking connect to a. Returns the upstream (not owned by a conn yet, not in
 * epoll), or NULL with errno set. */
struct upstream *pool_connect(struct proxy *p, const struct sockaddr_in *a);
/* An idle pooled connection to a that is still clean (no EOF, no stray bytes), taken out of the
 * pool, or NULL; the unclean ones met on the way are closed. */
struct upstream *pool_take_idle(struct proxy *p, const struct sockaddr_in *a);
/* Back to the idle pool (its owner is forgotten), or closed (pool full, draining). */
void pool_release(struct upstream *u);
/* Closes u (out of the pool if it idled there); its memory lives until pool_reap. */
void pool_close(struct upstream *u);
/* Closes pooled connections idle past their deadline (all of them when now is UINT64_MAX). */
void pool_expire(struct proxy *p, uint64_t now);
/* Frees closed upstreams (after a loop batch), and with all, the free list too. */
void pool_reap(struct proxy *p, bool all);

#endif
