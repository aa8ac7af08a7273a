// SPDX-License-Identifier: Apache-2.0
/* limits: see limits.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/mix.h"
#include "proxy/limits.h"

void limits_account(struct conn *c)
{
	struct proxy *p = c->p;
	size_t now = c->in.cap + c->out.cap + c->fwd.cap + c->body.cap;

	if (c->ev.fd < 0 || now == c->acct) /* a closed conn no longer counts */
		return;
	p->buffered = p->buffered - c->acct + now;
	metrics_gauge_add(p->st.buffer_bytes, (int64_t)now - (int64_t)c->acct);
	c->acct = now;
}

bool limits_buffered_over(const struct proxy *p, uint64_t need)
{
	return p->o.max_buffered && (uint64_t)p->buffered + need > (uint64_t)p->o.max_buffered;
}

/* buf_reserve doubles, so a body of 17 MiB would hold 32 MiB: a body whose length is known gets
 * exactly its room instead (the buffer's fields are its documented contract). */
int limits_buf_exact(struct buf *b, size_t n)
{
	size_t need = b->len + n + 1;
	char *d;

	if (need <= b->cap)
		return 0;
	d = realloc(b->data, need);
	if (!d)
		return -ENOMEM;
	b->data = d;
	b->cap = need;
	b->data[b->len] = '\0';
	return 0;
}

void limits_trim(struct conn *c, size_t keep)
{
	struct buf *v[] = {&c->in, &c->out, &c->fwd, &c->body};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (!buf_unread(v[i]) && v[i]->cap > keep)
			buf_free(v[i]);
	limits_account(c);
}

/* --- connections per client address ------------------------------------------------------------
 */

static size_t ip_slot(const struct ip_table *t, uint32_t addr)
{
	return (size_t)mix64(addr) & (t->cap - 1);
}

uint32_t limits_ip_count(const struct ip_table *t, uint32_t addr)
{
	if (!t->cap)
		return 0;
	for (size_t i = ip_slot(t, addr);; i = (i + 1) & (t->cap - 1)) {
		if (t->v[i].addr == addr)
			return t->v[i].n;
		if (!t->v[i].addr)
			return 0;
	}
}

static int ip_table_grow(struct ip_table *t)
{
	struct ip_table n = {.cap = t->cap ? t->cap * 2 : 64};

	n.v = calloc(n.cap, sizeof(*n.v));
	if (!n.v)
		return -ENOMEM;
	for (size_t k = 0; k < t->cap; k++) {
		size_t i;

		if (!t->v[k].addr)
			continue;
		for (i = ip_slot(&n, t->v[k].addr); n.v[i].addr; i = (i + 1) & (n.cap - 1))
			;
		n.v[i] = t->v[k];
		n.used++;
	}
	free(t->v);
	*t = n;
	return 0;
}

int limits_ip_add(struct ip_table *t, uint32_t addr)
{
	size_t i;

	if ((t->used + 1) * 2 > t->cap && ip_table_grow(t) < 0)
		return -ENOMEM;
	for (i = ip_slot(t, addr); t->v[i].addr && t->v[i].addr != addr; i = (i + 1) & (t->cap - 1))
		;
	if (!t->v[i].addr) {
		t->v[i].addr = addr;
		t->used++;
	}
	t->v[i].n++;
	return 0;
}

void limits_ip_del(struct ip_table *t, uint32_t addr)
{
	size_t i, j, mask = t->cap - 1;

	if (!t->cap)
		return;
	for (i = ip_slot(t, addr); t->v[i].addr != addr; i = (i + 1) & mask)
		if (!t->v[i].addr)
			return;
	if (--t->v[i].n)
		return;
	/* backward-shift deletion: later entries of the probe run move into the hole */
	t->used--;
	for (j = (i + 1) & mask; t->v[j].addr; j = (j + 1) & mask) {
		size_t home = ip_slot(t, t->v[j].addr);

		/* t->v[j] may move to i only if its home is not in the cyclic range (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		t->v[i] = t->v[j];
		i = j;
	}
	t->v[i] = (struct ip_count){0};
}

void limits_ip_free(struct ip_table *t)
{
	free(t->v);
	*t = (struct ip_table){0};
}
