/* SPDX-License-Identifier: Apache-2.0 */
/* relay: bytes towards the client (private; see proxy/types.h for where it sits): the response
 * is framed as it streams past (so the upstream connection can be pooled at its end and the usage
 * read), moved by read/write or splice(2), and tunnels (pass-through, or after a 101) move bytes
 * both ways. Calls answer, conn and pool. */
#ifndef KVS_PROXY_RELAY_H
#define KVS_PROXY_RELAY_H

#include "proxy/types.h"

/* Writes what can be written to the client (pipe bytes first, then c->out). STEP_WAIT, or
 * STEP_GONE when the client failed (c was closed). */
enum step relay_flush(struct conn *c);
/* Moves response bytes upstream → client, at most PROXY_BURST. Returns STEP_WAIT (wait for
 * either side), STEP_NEXT / STEP_CLOSE (the response ended: keep-alive or not; or it was broken
 * and answered or cut), STEP_TUNNEL (a 101), STEP_UPSTREAM_LOST (the upstream failed before any
 * response byte: it is still c->up), or STEP_GONE. */
enum step relay_response(struct conn *c);
/* Moves bytes both ways in a tunnel, half-closing each side after the other's EOF. STEP_WAIT, or
 * STEP_GONE once both sides are done (or one failed): c was closed. */
enum step relay_tunnel(struct conn *c);

#endif
