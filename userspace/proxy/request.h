/* SPDX-License-Identifier: Apache-2.0 */
/* request: reading a client's request (private; see proxy/types.h for where it sits): the
 * pass-through sniff, its head parsed and checked against the limits and rewritten to be
 * forwarded, its whole body read (decoded when chunked). Calls answer, conn and limits. */
#ifndef KVS_PROXY_REQUEST_H
#define KVS_PROXY_REQUEST_H

#include "proxy/types.h"

/* Parses what the client sent (c in C_HEAD or C_BODY). Returns STEP_WAIT (more bytes needed),
 * STEP_BODY (a head was accepted, its body is still to come), STEP_ROUTE (a request is complete
 * in c->fwd and c->body, or the connection is pass-through: CF_PASSTHROUGH set), or, when kvsplice
 * answered it, answer_error's STEP_NEXT / STEP_CLOSE, or STEP_GONE (closed). */
enum step request_read(struct conn *c);

#endif
