/* SPDX-License-Identifier: Apache-2.0 */
/* answer: the answers kvsplice gives itself instead of an endpoint's (private; see
 * proxy/types.h for where it sits), all in the OpenAI error shape: request errors, no endpoint,
 * load shed (503 + Retry-After), and connections refused over a connection limit. Calls conn and
 * pool. */
#ifndef KVS_PROXY_ANSWER_H
#define KVS_PROXY_ANSWER_H

#include "proxy/types.h"

/* Queues an error answer (counted by status) for c's current request, whose upstream, if any, is
 * closed. close (always while draining): the connection closes once it is written, lingering
 * (STEP_CLOSE); else the request is forgotten and the next one may follow (STEP_NEXT). STEP_GONE:
 * out of memory, c was closed. */
enum step answer_error(struct conn *c, int status, const char *message, bool close);
/* Sheds the current request: 503 with Retry-After, counted under *counter; returns as
 * answer_error. */
enum step answer_shed(struct conn *c, uint64_t *counter, const char *message, bool close);
/* Answers a connection over a connection limit with 503 + Retry-After and closes fd, without
 * making it a struct conn. */
void answer_refused(struct proxy *p, int fd, const char *message);

#endif
