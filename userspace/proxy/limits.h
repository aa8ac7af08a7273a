/* SPDX-License-Identifier: Apache-2.0 */
/* limits: the proxy's bounds (private; see proxy/types.h for where it sits): the bytes buffered
 * by all connections (--max-buffered), buffer capacity released once a request is over, and
 * connections counted per client address (--max-conns-per-ip). Calls nothing else of the proxy. */
#ifndef KVS_PROXY_LIMITS_H
#define KVS_PROXY_LIMITS_H

#include "proxy/types.h"

/* Recounts c's buffer capacity into p->buffered (and kvsplice_buffer_bytes); a closed c no longer
 * counts. */
void limits_account(struct conn *c);
/* Would a new request needing need more bytes pass --max-buffered? */
bool limits_buffered_over(const struct proxy *p, uint64_t need);
/* Gives b exactly n bytes of room (no doubling): for a body whose length is known. Returns 0 or
 * -ENOMEM. */
int limits_buf_exact(struct buf *b, size_t n);
/* Releases the capacity of c's empty buffers above keep bytes, then recounts c. */
void limits_trim(struct conn *c, size_t keep);
/* Connections from addr (network order): count, add one (0 or -ENOMEM), remove one; free frees
 * the table. */
uint32_t limits_ip_count(const struct ip_table *t, uint32_t addr);
int limits_ip_add(struct ip_table *t, uint32_t addr);
void limits_ip_del(struct ip_table *t, uint32_t addr);
void limits_ip_free(struct ip_table *t);

#endif
