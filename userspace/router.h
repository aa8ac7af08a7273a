/* SPDX-License-Identifier: Apache-2.0 */
/* router: picks the endpoint of a Service for one request (or one pass-through connection). The
 * plumbing (proxy) calls router_pick for every request on a connection, so a policy sees each
 * request; this policy is "round-robin", a later one reads the request body (the OpenAI
 * JSON) and the KV index. Not thread-safe: one router per loop thread. */
#ifndef KVS_ROUTER_H
#define KVS_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery.h"

struct router;

/* What the proxy knows about the request when it must choose. Pointers are valid for the call. */
struct router_request {
	const char *method; /* NULL for a pass-through connection */
	size_t method_len;
	const char *target;
	size_t target_len;
	const char *head; /* the request head as forwarded (parse it with http_parse_request) */
	size_t head_len;
	const char *body; /* the whole (decoded) request body */
	size_t body_len;
	uint64_t tried; /* endpoints already tried for this request: bit (index % 64) */
};

/* Creates a router with the named policy ("round-robin"). Returns 0 and *out, -EINVAL for an
 * unknown policy, or -ENOMEM. */
int router_new(const char *policy, struct router **out);
void router_free(struct router *r);

/* The policy's name. */
const char *router_policy(const struct router *r);

/* Picks an endpoint of svc for req, skipping the tried ones. Returns its index in
 * svc->endpoints, or -ENOENT when the Service has no endpoint left to try. */
int router_pick(struct router *r, const struct service *svc, const struct router_request *req);

#endif
