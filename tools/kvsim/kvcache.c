// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/sha.h>

#include "kvcache.h"

#define NIL UINT32_MAX

struct kvc_blk {
	uint32_t ref_cnt;
	uint32_t prev, next;  /* free queue links (NIL at the ends) */
	uint32_t bucket_next; /* hash table chain */
	bool in_free, has_hash, has_parent;
	uint8_t hash[KVC_HASH_LEN];
	uint8_t parent[KVC_HASH_LEN];
};

struct kvcache {
	uint32_t num_blocks, block_size;
	struct kvc_blk *b;
	uint32_t *tokens; /* num_blocks * block_size: the tokens of each hashed block */
	uint32_t head, tail, nfree;
	uint32_t *buckets; /* hash table of cached blocks, by the hash's first 4 bytes */
	uint32_t nbuckets;
	uint32_t ncached;
	uint8_t root[KVC_HASH_LEN];
	struct kvc_events ev;
};

static uint32_t bucket_of(const struct kvcache *c, const uint8_t *h)
{
	uint32_t x;

	memcpy(&x, h, sizeof(x));
	return x & (c->nbuckets - 1);
}

static void fq_remove(struct kvcache *c, uint32_t id)
{
	struct kvc_blk *k = &c->b[id];

	if (k->prev != NIL)
		c->b[k->prev].next = k->next;
	else
		c->head = k->next;
	if (k->next != NIL)
		c->b[k->next].prev = k->prev;
	else
		c->tail = k->prev;
	k->prev = k->next = NIL;
	k->in_free = false;
	c->nfree--;
}

static void fq_push_tail(struct kvcache *c, uint32_t id)
{
	struct kvc_blk *k = &c->b[id];

	k->prev = c->tail;
	k->next = NIL;
	if (c->tail != NIL)
		c->b[c->tail].next = id;
	else
		c->head = id;
	c->tail = id;
	k->in_free = true;
	c->nfree++;
}

static void fq_push_head(struct kvcache *c, uint32_t id)
{
	struct kvc_blk *k = &c->b[id];

	k->next = c->head;
	k->prev = NIL;
	if (c->head != NIL)
		c->b[c->head].prev = id;
	else
		c->tail = id;
	c->head = id;
	k->in_free = true;
	c->nfree++;
}

struct kvcache *kvc_new(uint32_t num_blocks, uint32_t block_size, const void *seed, size_t seed_len)
{
	struct kvcache *c;
	uint8_t rnd[KVC_HASH_LEN];

	if (num_blocks < 2 || block_size == 0 || block_size > 4096 || num_blocks > (1u << 26))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->num_blocks = num_blocks;
	c->block_size = block_size;
	c->nbuckets = 16;
	while (c->nbuckets < num_blocks * 2)
		c->nbuckets <<= 1;
	c->b = calloc(num_blocks, sizeof(*c->b));
	c->tokens = calloc((size_t)num_blocks * block_size, sizeof(uint32_t));
	c->buckets = malloc(c->nbuckets * sizeof(uint32_t));
	if (!c->b || !c->tokens || !c->buckets) {
		kvc_free(c);
		return NULL;
	}
	memset(c->buckets, 0xff, c->nbuckets * sizeof(uint32_t));
	c->head = c->tail = NIL;
	/* Block 0 is vLLM's null block: popped from the queue at start-up and never freed. */
	for (uint32_t i = 1; i < num_blocks; i++) {
		c->b[i].bucket_next = NIL;
		fq_push_tail(c, i);
	}
	c->b[0].ref_cnt = 1;
	if (!seed) {
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			kvc_free(c);
			return NULL;
		}
		seed = rnd;
		seed_len = sizeof(rnd);
	}
	SHA256(seed, seed_len, c->root);
	return c;
}

void kvc_free(struct kvcache *c)
{
	if (!c)
		return;
	kvc_events_clear(&c->ev);
	free(c->ev.v);
	free(c->b);
	free(c->tokens);
	free(c->buckets);
	free(c);
}

uint32_t kvc_block_size(const struct kvcache *c)
{
	return c->block_size;
}

uint32_t kvc_usable_blocks(const struct kvcache *c)
{
	return c->num_blocks - 1;
}

uint32_t kvc_num_free(const struct kvcache *c)
{
	return c->nfree;
}

double kvc_usage(const struct kvcache *c)
{
	return 1.0 - (double)c->nfree / (double)(c->num_blocks - 1);
}

const uint8_t *kvc_root_hash(const struct kvcache *c)
{
	return c->root;
}

uint32_t kvc_num_cached(const struct kvcache *c)
{
	return c->ncached;
}

uint64_t kvc_hash_u64(const uint8_t *hash)
{
	uint64_t v = 0;

	for (int i = KVC_HASH_LEN - 8; i < KVC_HASH_LEN; i++)
		v = v << 8 | hash[i];
	return v;
}

int kvc_seq_hash(struct kvcache *c, struct kvc_seq *seq, const uint32_t *tokens, size_t ntokens)
{
	size_t full = ntokens / c->block_size;
	uint8_t buf[KVC_HASH_LEN * 3 + 4 * 4096];

	if (full > seq->hcap) {
		size_t cap = seq->hcap ? seq->hcap : 16;
		void *p;

		while (cap < full)
			cap *= 2;
		p = realloc(seq->hashes, cap * KVC_HASH_LEN);
		if (!p)
			return -ENOMEM;
		seq->hashes = p;
		seq->hcap = cap;
	}
	for (size_t i = seq->nhashes; i < full; i++) {
		size_t n = 0;

		memcpy(buf, i ? seq->hashes[i - 1] : c->root, KVC_HASH_LEN);
		n += KVC_HASH_LEN;
		for (uint32_t j = 0; j < c->block_size; j++) {
			uint32_t t = tokens[i * c->block_size + j];

			buf[n++] = t & 0xff;
			buf[n++] = (t >> 8) & 0xff;
			buf[n++] = (t >> 16) & 0xff;
			buf[n++] = t >> 24;
		}
		if (seq->has_lora) {
			memcpy(buf + n, seq->lora, KVC_HASH_LEN);
			n += KVC_HASH_LEN;
		}
		if (i == 0 && seq->has_salt) {
			memcpy(buf + n, seq->salt, KVC_HASH_LEN);
			n += KVC_HASH_LEN;
		}
		SHA256(buf, n, seq->hashes[i]);
	}
	if (full > seq->nhashes)
		seq->nhashes = full;
	return 0;
}

static uint32_t cache_get(const struct kvcache *c, const uint8_t *h)
{
	for (uint32_t id = c->buckets[bucket_of(c, h)]; id != NIL; id = c->b[id].bucket_next)
		if (memcmp(c->b[id].hash, h, KVC_HASH_LEN) == 0)
			return id;
	return NIL;
}

size_t kvc_lookup(const struct kvcache *c, const struct kvc_seq *seq, size_t ntokens, uint32_t *out,
		  size_t max)
{
	size_t limit = ntokens ? (ntokens - 1) / c->block_size : 0, n = 0;

	if (limit > seq->nhashes)
		limit = seq->nhashes;
	while (n < limit && n < max) {
		uint32_t id = cache_get(c, seq->hashes[n]);

		if (id == NIL)
			break;
		out[n++] = id;
	}
	return n;
}

static struct kvc_event *ev_new(struct kvcache *c, enum kvc_event_type type)
{
	if (c->ev.n == c->ev.cap) {
		size_t cap = c->ev.cap ? c->ev.cap * 2 : 16;
		void *p = realloc(c->ev.v, cap * sizeof(*c->ev.v));

		if (!p)
			return NULL;
		c->ev.v = p;
		c->ev.cap = cap;
	}
	memset(&c->ev.v[c->ev.n], 0, sizeof(c->ev.v[0]));
	c->ev.v[c->ev.n].type = type;
	return &c->ev.v[c->ev.n++];
}

/* Drops block id's hash from the table (vLLM's _maybe_evict_cached_block) and queues
 * BlockRemoved for it. */
static int evict_hash(struct kvcache *c, uint32_t id)
{
	struct kvc_blk *k = &c->b[id];
	uint32_t *pp = &c->buckets[bucket_of(c, k->hash)];
	struct kvc_event *e;

	if (!k->has_hash)
		return 0;
	while (*pp != id)
		pp = &c->b[*pp].bucket_next;
	*pp = k->bucket_next;
	k->bucket_next = NIL;
	k->has_hash = false;
	c->ncached--;
	e = ev_new(c, KVC_EV_REMOVED);
	if (!e)
		return -ENOMEM;
	e->hashes = malloc(KVC_HASH_LEN);
	if (!e->hashes) {
		c->ev.n--;
		return -ENOMEM;
	}
	memcpy(e->hashes[0], k->hash, KVC_HASH_LEN);
	e->nhashes = 1;
	return 0;
}

static int seq_push_block(struct kvc_seq *seq, uint32_t id)
{
	if (seq->nblocks == seq->bcap) {
		size_t cap = seq->bcap ? seq->bcap * 2 : 16;
		void *p = realloc(seq->blocks, cap * sizeof(uint32_t));

		if (!p)
			return -ENOMEM;
		seq->blocks = p;
		seq->bcap = cap;
	}
	seq->blocks[seq->nblocks++] = id;
	return 0;
}

/* vLLM's cache_full_blocks(): registers seq's blocks [num_cached_blocks, full) and queues one
 * BlockStored for them. */
static int cache_full_blocks(struct kvcache *c, struct kvc_seq *seq, const uint32_t *tokens,
			     size_t full)
{
	size_t first = seq->num_cached_blocks, n;
	struct kvc_event *e;

	if (full > seq->nblocks)
		full = seq->nblocks;
	if (full > seq->nhashes)
		full = seq->nhashes;
	if (full <= first)
		return 0;
	n = full - first;
	e = ev_new(c, KVC_EV_STORED);
	if (!e)
		return -ENOMEM;
	e->hashes = malloc(n * KVC_HASH_LEN);
	e->tokens = malloc(n * c->block_size * sizeof(uint32_t));
	e->lora_name = seq->lora_name ? strdup(seq->lora_name) : NULL;
	e->lora_id = seq->lora_name ? seq->lora_id : 0;
	e->salt = first == 0 && seq->cache_salt ? strdup(seq->cache_salt) : NULL;
	if (!e->hashes || !e->tokens || (seq->lora_name && !e->lora_name) ||
	    (first == 0 && seq->cache_salt && !e->salt)) {
		free(e->hashes);
		free(e->tokens);
		free(e->lora_name);
		free(e->salt);
		c->ev.n--;
		return -ENOMEM;
	}
	e->nhashes = n;
	if (first > 0) {
		e->has_parent = true;
		memcpy(e->parent, seq->hashes[first - 1], KVC_HASH_LEN);
	}
	memcpy(e->tokens, tokens + first * c->block_size, n * c->block_size * sizeof(uint32_t));
	for (size_t i = first; i < full; i++) {
		uint32_t id = seq->blocks[i], bk;
		struct kvc_blk *k = &c->b[id];

		memcpy(e->hashes[i - first], seq->hashes[i], KVC_HASH_LEN);
		if (k->has_hash)
			continue; /* already registered (a looked-up block) */
		memcpy(k->hash, seq->hashes[i], KVC_HASH_LEN);
		k->has_hash = true;
		k->has_parent = i > 0;
		if (i > 0)
			memcpy(k->parent, seq->hashes[i - 1], KVC_HASH_LEN);
		memcpy(c->tokens + (size_t)id * c->block_size, tokens + i * c->block_size,
		       c->block_size * sizeof(uint32_t));
		bk = bucket_of(c, k->hash);
		k->bucket_next = c->buckets[bk];
		c->buckets[bk] = id;
		c->ncached++;
	}
	seq->num_cached_blocks = full;
	return 0;
}

int kvc_allocate(struct kvcache *c, struct kvc_seq *seq, const uint32_t *computed, size_t ncomputed,
		 size_t num_computed, size_t num_new, const uint32_t *tokens, size_t ntokens)
{
	size_t bs = c->block_size;
	size_t total = num_computed + ncomputed * bs + num_new;
	size_t required = (total + bs - 1) / bs, have = seq->nblocks + ncomputed, need,
	       evictable = 0;
	int err;

	need = required > have ? required - have : 0;
	/* Looked-up blocks sitting in the free queue must leave it: they count against the free
	 * blocks too (vLLM's num_evictable_computed_blocks). */
	for (size_t i = 0; i < ncomputed; i++)
		if (c->b[computed[i]].ref_cnt == 0)
			evictable++;
	if (need + evictable > c->nfree)
		return -ENOSPC;
	for (size_t i = 0; i < ncomputed; i++) {
		struct kvc_blk *k = &c->b[computed[i]];

		if (k->ref_cnt == 0)
			fq_remove(c, computed[i]);
		k->ref_cnt++;
		if ((err = seq_push_block(seq, computed[i])))
			return err;
	}
	if (ncomputed)
		seq->num_cached_blocks = seq->nblocks;
	for (size_t i = 0; i < need; i++) {
		uint32_t id = c->head;

		fq_remove(c, id);
		if ((err = evict_hash(c, id)))
			return err;
		c->b[id].ref_cnt = 1;
		if ((err = seq_push_block(seq, id)))
			return err;
	}
	if (total > ntokens)
		total = ntokens;
	return cache_full_blocks(c, seq, tokens, total / bs);
}

void kvc_release(struct kvcache *c, struct kvc_seq *seq)
{
	for (size_t i = seq->nblocks; i-- > 0;) {
		uint32_t id = seq->blocks[i];
		struct kvc_blk *k = &c->b[id];

		if (--k->ref_cnt > 0)
			continue;
		if (k->has_hash)
			fq_push_tail(c, id);
		else
			fq_push_head(c, id);
	}
	seq->nblocks = 0;
	seq->num_cached_blocks = 0;
}

void kvc_seq_free(struct kvc_seq *seq)
{
	free(seq->blocks);
	free(seq->hashes);
	memset(seq, 0, sizeof(*seq));
}

int kvc_reset(struct kvcache *c)
{
	if (c->nfree != c->num_blocks - 1)
		return -EBUSY;
	for (uint32_t i = 1; i < c->num_blocks; i++) {
		c->b[i].has_hash = false;
		c->b[i].bucket_next = NIL;
	}
	memset(c->buckets, 0xff, c->nbuckets * sizeof(uint32_t));
	c->ncached = 0;
	return ev_new(c, KVC_EV_CLEARED) ? 0 : -ENOMEM;
}

int kvc_take_events(struct kvcache *c, struct kvc_events *out)
{
	for (size_t i = 0; i < c->ev.n; i++) {
		if (out->n == out->cap) {
			size_t cap = out->cap ? out->cap * 2 : 16;
			void *p = realloc(out->v, cap * sizeof(*out->v));

			if (!p)
				return -ENOMEM;
			out->v = p;
			out->cap = cap;
		}
		out->v[out->n++] = c->ev.v[i];
	}
	c->ev.n = 0;
	return 0;
}

void kvc_events_clear(struct kvc_events *ev)
{
	for (size_t i = 0; i < ev->n; i++) {
		free(ev->v[i].hashes);
		free(ev->v[i].tokens);
		free(ev->v[i].lora_name);
		free(ev->v[i].salt);
	}
	ev->n = 0;
}

int kvc_block_info(const struct kvcache *c, uint32_t id, struct kvc_block_info *info)
{
	const struct kvc_blk *k;

	if (id == 0 || id >= c->num_blocks)
		return -EINVAL;
	k = &c->b[id];
	memset(info, 0, sizeof(*info));
	info->id = id;
	info->ref_cnt = k->ref_cnt;
	info->has_hash = k->has_hash;
	info->hash = k->hash;
	info->has_parent = k->has_parent;
	info->parent = k->parent;
	info->tokens = c->tokens + (size_t)id * c->block_size;
	info->free_pos = -1;
	if (k->in_free) {
		int64_t pos = 0;

		for (uint32_t x = c->head; x != id; x = c->b[x].next)
			pos++;
		info->free_pos = pos;
	}
	return 0;
}

uint32_t kvc_free_at(const struct kvcache *c, uint32_t pos)
{
	uint32_t x = c->head;

	while (x != NIL && pos--)
		x = c->b[x].next;
	return x == NIL ? 0 : x;
}
