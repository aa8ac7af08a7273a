/* SPDX-License-Identifier: Apache-2.0 */
/* upstream: a request's way to an endpoint (private; see proxy/types.h for where it sits): the
 * router's choice, a pooled or new upstream connection, the request written, and the retry
 * decision when that connection fails before any response byte. Calls answer, conn and pool. */
#ifndef KVS_PROXY_UPSTREAM_H
#define KVS_PROXY_UPSTREAM_H

#include "proxy/types.h"

/* Chooses an endpoint not tried yet for c's request and takes a clean pooled connection to it
 * (STEP_SEND) or starts a new one (STEP_CONNECT; c->deadline is the connect timeout). None left:
 * 503 / 502 (answer_error's outcome), or a pass-through connection is closed (STEP_GONE). */
enum step upstream_route(struct conn *c);
/* Writes the request upstream. Returns STEP_SENT (all of it), STEP_WAIT (the socket is full), or
 * after a failed write upstream_failed's outcome. */
enum step upstream_send(struct conn *c);
/* c's upstream failed before any response byte: closed; retried (a new connection, another
 * endpoint) where that is safe (upstream_route's outcome), else answered 502 or closed. A failed
 * connect also puts the endpoint's worker down (router_connect_failed). */
enum step upstream_failed(struct conn *c, bool connect_failed);
/* The worker c's request is on stopped answering (router_ticket_hung). A request with no
 * response byte yet is sent elsewhere when it is retry-safe (upstream_route's outcome); a
 * response that started and has been silent for PROXY_HUNG_SILENCE_MS is cut (STEP_CLOSE: the
 * client sees an error, not a hang until --idle-timeout). STEP_WAIT: left as it is. */
enum step upstream_abandon(struct conn *c);

#endif
