/* SPDX-License-Identifier: Apache-2.0 */
/* conn: one client connection's bookkeeping (private; see proxy/types.h for where it sits):
 * closing it, ending its request (the router's accounting, its buffers), and
 * conn_show, which renders it for logs. Calls pool and limits only; never changes c->state. */
#ifndef KVS_PROXY_CONN_H
#define KVS_PROXY_CONN_H

#include "proxy/types.h"

/* Closes c (idempotent): its request ends (conn_route_end), its upstream and pipes close, it
 * leaves the live list for the zombie list (freed by the driver after the loop batch) and no
 * longer counts in the gauges and limits. c->ev.fd is -1 after. */
void conn_close(struct conn *c);
/* The current request of c ended with status (0: no response): the router's accounting. */
void conn_route_end(struct conn *c, int status);
/* Forgets the request and its response (buffers emptied, capacity above PROXY_KEEP_BUF
 * released); the connection's own fields stay. */
void conn_forget_request(struct conn *c);
/* Closes c's splice pipe, if any. */
void conn_pipe_close(struct conn *c);
/* Writes one line describing c into out (n bytes, NUL-terminated, cut to fit): client address,
 * state, its flags by name, the request count, the endpoint, bytes waiting each way. Returns out.
 */
const char *conn_show(const struct conn *c, char *out, size_t n);
/* Room conn_show needs for a whole line. */
#define CONN_SHOW_MAX 256

#endif
