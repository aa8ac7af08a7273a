// SPDX-License-Identifier: Apache-2.0
// events: vLLM KV events over ZMQ, decoded with msgpack-c, applied to the index.
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>
#include <xxhash.h>
#include <zmq.h>

#include "clock.h"
#include "blockhash.h"
#include "discovery.h"
#include "events.h"
#include "log.h"

/* ==== decoder ============================================================================ */

struct events_decoder {
	msgpack_zone zone;
	uint64_t *hashes;
	size_t hcap;
	uint32_t *tokens;
	size_t tcap;
	const void **extra;
	size_t *extra_len;
	size_t *extra_off;
	size_t ecap;
	msgpack_sbuffer sbuf;
};

struct events_decoder *events_decoder_new(void)
{
	struct events_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	if (!msgpack_zone_init(&d->zone, 64 * 1024)) {
		free(d);
		return NULL;
	}
	msgpack_sbuffer_init(&d->sbuf);
	return d;
}

void events_decoder_free(struct events_decoder *d)
{
	if (!d)
		return;
	msgpack_zone_destroy(&d->zone);
	msgpack_sbuffer_destroy(&d->sbuf);
	free(d->hashes);
	free(d->tokens);
	free(d->extra);
	free(d->extra_len);
	free(d->extra_off);
	free(d);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 64;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/* What a msgpack lead byte is followed by: `fixed` bytes, then (hdr > 0) a big-endian length
 * of hdr bytes counting bytes (kind MP_BYTES) or elements (MP_ARRAY; MP_MAP counts pairs);
 * fixarray/fixmap (hdr 0) carry their count (elements or pairs) in `items`. Table-driven so the
 * scan of long token arrays (a mix of fixint, uint16 and uint32 leads) does not stall on
 * mispredicted branches. */
enum { MP_SCALAR, MP_BYTES, MP_ARRAY, MP_MAP, MP_BAD };
struct mp_lead {
	uint8_t kind, hdr, fixed, items;
};
static struct mp_lead mp_leads[256];

__attribute__((constructor)) static void mp_leads_init(void)
{
	for (int c = 0; c < 256; c++) {
		struct mp_lead *l = &mp_leads[c];
		*l = (struct mp_lead){MP_SCALAR, 0, 0, 0};
		if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
			continue;
		if ((c & 0xf0) == 0x80) {
			*l = (struct mp_lead){MP_MAP, 0, 0, (uint8_t)(c & 0x0f)};
			continue;
		}
		if ((c & 0xf0) == 0x90) {
			*l = (struct mp_lead){MP_ARRAY, 0, 0, (uint8_t)(c & 0x0f)};
			continue;
		}
		if ((c & 0xe0) == 0xa0) {
			l->fixed = (uint8_t)(c & 0x1f);
			continue;
		}
		switch (c) {
		case 0xcc:
		case 0xd0:
			l->fixed = 1;
			break;
		case 0xcd:
		case 0xd1:
		case 0xd4:
			l->fixed = 2;
			break;
		case 0xd5:
			l->fixed = 3;
			break;
		case 0xca:
		case 0xce:
		case 0xd2:
			l->fixed = 4;
			break;
		case 0xd6:
			l->fixed = 5;
			break;
		case 0xcb:
		case 0xcf:
		case 0xd3:
			l->fixed = 8;
			break;
		case 0xd7:
			l->fixed = 9;
			break;
		case 0xd8:
			l->fixed = 17;
			break;
		case 0xc4:
		case 0xd9:
			*l = (struct mp_lead){MP_BYTES, 1, 0, 0};
			break;
		case 0xc5:
		case 0xda:
			*l = (struct mp_lead){MP_BYTES, 2, 0, 0};
			break;
		case 0xc6:
		case 0xdb:
			*l = (struct mp_lead){MP_BYTES, 4, 0, 0};
			break;
		case 0xc7:
			*l = (struct mp_lead){MP_BYTES, 1, 1, 0};
			break; /* ext: + type byte */
		case 0xc8:
			*l = (struct mp_lead){MP_BYTES, 2, 1, 0};
			break;
		case 0xc9:
			*l = (struct mp_lead){MP_BYTES, 4, 1, 0};
			break;
		case 0xdc:
			*l = (struct mp_lead){MP_ARRAY, 2, 0, 0};
			break;
		case 0xdd:
			*l = (struct mp_lead){MP_ARRAY, 4, 0, 0};
			break;
		case 0xde:
			*l = (struct mp_lead){MP_MAP, 2, 0, 0};
			break;
		case 0xdf:
			*l = (struct mp_lead){MP_MAP, 4, 0, 0};
			break;
		default:
			l->kind = MP_BAD;
			break; /* 0xc1 is never used */
		}
	}
}

/* Reads the lead byte and header of the value at *pp (bounded by end) and moves *pp past them,
 * and past the payload of a string, binary or extension. For a container, *kids is the number of
 * values it holds (two per map entry) and true is returned in *container; a container whose
 * values cannot all fit in the bytes left (each takes at least one) is refused. 0 or -EBADMSG. */
static inline int mp_step(const uint8_t **pp, const uint8_t *end, uint64_t *kids, bool *container)
{
	const uint8_t *p = *pp;
	const struct mp_lead *l;
	uint64_t len, v = 0;

	*kids = 0;
	*container = false;
	if (p >= end)
		return -EBADMSG;
	l = &mp_leads[*p++];
	if (__builtin_expect(l->kind == MP_SCALAR, 1)) {
		if ((size_t)(end - p) < l->fixed)
			return -EBADMSG;
		*pp = p + l->fixed;
		return 0;
	}
	if (l->kind == MP_BAD || (size_t)(end - p) < l->hdr)
		return -EBADMSG;
	for (unsigned i = 0; i < l->hdr; i++)
		v = v << 8 | *p++;
	if (l->kind == MP_BYTES) {
		len = v + l->fixed;
		if (len > (uint64_t)(end - p))
			return -EBADMSG;
		*pp = p + len;
		return 0;
	}
	if (!l->hdr)
		v = l->items; /* fixarray / fixmap */
	len = l->kind == MP_MAP ? 2 * v : v;
	if (len > (uint64_t)(end - p))
		return -EBADMSG;
	*pp = p;
	*kids = len;
	*container = true;
	return 0;
}

/* Checks that p[0..n) is exactly one msgpack object whose every container count and byte length
 * fits in the bytes that remain, nested no deeper than msgpack-c's unpacker accepts. msgpack-c
 * allocates a container's elements as soon as it reads the header, so a 5-byte "array of 4 G
 * elements" would otherwise ask for ~100 GB; and it refuses a container opened while
 * MSGPACK_EMBED_STACK_SIZE non-empty ones are open: so does this, so that a payload passes
 * here exactly when msgpack_unpack() takes it (the cursor decoder relies on that). */
#define MP_MAX_OPEN 32 /* MSGPACK_EMBED_STACK_SIZE in msgpack-c 4.0 */
static int mp_prescan(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	uint64_t todo = 1, outer[MP_MAX_OPEN], kids;
	unsigned open = 0;
	bool container;

	for (;;) {
		while (!todo) {
			if (!open)
				return p == end ? 0 : -EBADMSG;
			todo = outer[--open];
		}
		todo--;
		if (mp_step(&p, end, &kids, &container))
			return -EBADMSG;
		if (!container)
			continue;
		if (open >= MP_MAX_OPEN)
			return -EBADMSG;
		if (!kids)
			continue;
		outer[open++] = todo;
		todo = kids;
	}
}

uint64_t events_hash_u64(const void *bytes, size_t len)
{
	const uint8_t *b = bytes;
	size_t from = len > 8 ? len - 8 : 0;
	uint64_t v = 0;

	for (size_t i = from; i < len; i++)
		v = v << 8 | b[i];
	return v;
}

static int obj_hash(const msgpack_object *o, uint64_t *out)
{
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		*out = o->via.u64;
		return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*out = (uint64_t)o->via.i64;
		return 0;
	case MSGPACK_OBJECT_BIN:
		if (!o->via.bin.size)
			return -EBADMSG;
		*out = events_hash_u64(o->via.bin.ptr, o->via.bin.size);
		return 0;
	case MSGPACK_OBJECT_STR: /* raw bytes packed without the bin type (old msgpack) */
		if (!o->via.str.size)
			return -EBADMSG;
		*out = events_hash_u64(o->via.str.ptr, o->via.str.size);
		return 0;
	default:
		return -EBADMSG;
	}
}

static bool obj_is_str(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);

	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       !memcmp(o->via.str.ptr, s, n);
}

static bool obj_nil(const msgpack_object *o)
{
	return !o || o->type == MSGPACK_OBJECT_NIL;
}

static int obj_int(const msgpack_object *o, int64_t *out)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*out = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*out = o->via.i64;
	else
		return -EBADMSG;
	return 0;
}

/* Field names in vLLM's declaration order (the array form's positions after the tag). */
static const char *const stored_fields[] = {
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
};
enum {
	F_HASHES,
	F_PARENT,
	F_TOKENS,
	F_BS,
	F_LORA_ID,
	F_MEDIUM,
	F_LORA_NAME,
	F_EXTRA,
	F_GROUP,
	F_KIND,
	F_NFIELDS = 11
};
static const char *const removed_fields[] = {"block_hashes", "medium", "group_idx"};
enum { R_HASHES, R_MEDIUM, R_GROUP };

/* Fills f[0..nf) with the event's fields (NULL when absent) from either encoding. */
static void event_fields(const msgpack_object *e, const char *const *names, size_t nf,
			 const msgpack_object **f)
{
	memset(f, 0, nf * sizeof(*f));
	if (e->type == MSGPACK_OBJECT_ARRAY) {
		for (size_t i = 0; i < nf && i + 1 < e->via.array.size; i++)
			f[i] = &e->via.array.ptr[i + 1];
		return;
	}
	for (uint32_t k = 0; k < e->via.map.size; k++) {
		const msgpack_object *key = &e->via.map.ptr[k].key;
		for (size_t i = 0; i < nf; i++)
			if (obj_is_str(key, names[i])) {
				f[i] = &e->via.map.ptr[k].val;
				break;
			}
	}
}

static int decode_hashes(struct events_decoder *d, const msgpack_object *o, struct events_event *ev)
{
	if (!o || o->type != MSGPACK_OBJECT_ARRAY)
		return -EBADMSG;
	if (grow((void **)&d->hashes, &d->hcap, o->via.array.size + 1, sizeof(*d->hashes)))
		return -ENOMEM;
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if (obj_hash(&o->via.array.ptr[i], &d->hashes[i]))
			return -EBADMSG;
	ev->hashes = d->hashes;
	ev->n_hashes = o->via.array.size;
	return 0;
}

static int decode_medium(const msgpack_object *o, unsigned *tier)
{
	if (obj_nil(o)) {
		*tier = INDEX_TIER_GPU;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_STR)
		return -EBADMSG;
	*tier = o->via.str.size == 3 && !strncasecmp(o->via.str.ptr, "GPU", 3) ? INDEX_TIER_GPU
									       : INDEX_TIER_CPU;
	return 0;
}

static int decode_group(const msgpack_object *o, struct events_event *ev)
{
	if (obj_nil(o))
		return 0;
	ev->has_group = true;
	return obj_int(o, &ev->group_idx);
}

/* extra_keys: one element per block, null or an array of keys. Keys equal to the LoRA name are
 * left out (the LoRA name is already the chain's root); what remains is re-packed as a msgpack
 * array and hashed into that block's own hash, so e.g. multimodal blocks never match text. */
static int decode_extra(struct events_decoder *d, const msgpack_object *o, struct events_event *ev)
{
	msgpack_packer pk;
	size_t n = ev->n_hashes;
	bool any = false;

	if (obj_nil(o))
		return 0;
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
		return -EBADMSG;
	if (grow((void **)&d->extra, &d->ecap, n + 1, sizeof(*d->extra)))
		return -ENOMEM;
	d->ecap = 0; /* the three arrays share one capacity: grow them in step */
	if (grow((void **)&d->extra_len, &d->ecap, n + 1, sizeof(*d->extra_len)))
		return -ENOMEM;
	d->ecap = 0;
	if (grow((void **)&d->extra_off, &d->ecap, n + 1, sizeof(*d->extra_off)))
		return -ENOMEM;
	msgpack_sbuffer_clear(&d->sbuf);
	msgpack_packer_init(&pk, &d->sbuf, msgpack_sbuffer_write);
	for (size_t i = 0; i < n; i++) {
		const msgpack_object *x = &o->via.array.ptr[i];
		uint32_t keep = 0;

		d->extra_off[i] = d->sbuf.size;
		d->extra_len[i] = 0;
		if (x->type == MSGPACK_OBJECT_NIL)
			continue;
		if (x->type != MSGPACK_OBJECT_ARRAY)
			return -EBADMSG;
		for (uint32_t k = 0; k < x->via.array.size; k++) {
			const msgpack_object *y = &x->via.array.ptr[k];
			if (!(ev->lora_name && y->type == MSGPACK_OBJECT_STR &&
			      y->via.str.size == ev->lora_len &&
			      !memcmp(y->via.str.ptr, ev->lora_name, ev->lora_len)))
				keep++;
		}
		if (!keep)
			continue;
		if (msgpack_pack_array(&pk, keep))
			return -ENOMEM;
		for (uint32_t k = 0; k < x->via.array.size; k++) {
			const msgpack_object *y = &x->via.array.ptr[k];
			if (ev->lora_name && y->type == MSGPACK_OBJECT_STR &&
			    y->via.str.size == ev->lora_len &&
			    !memcmp(y->via.str.ptr, ev->lora_name, ev->lora_len))
				continue;
			if (msgpack_pack_object(&pk, *y))
				return -ENOMEM;
		}
		d->extra_len[i] = d->sbuf.size - d->extra_off[i];
		any = true;
	}
	if (!any)
		return 0;
	for (size_t i = 0; i < n; i++)
		d->extra[i] = d->extra_len[i] ? d->sbuf.data + d->extra_off[i] : NULL;
	ev->extra = d->extra;
	ev->extra_len = d->extra_len;
	return 0;
}

static int decode_stored(struct events_decoder *d, const msgpack_object *e, struct events_event *ev)
{
	const msgpack_object *f[F_NFIELDS];
	const msgpack_object *t;
	int64_t bs;
	int rc;

	event_fields(e, stored_fields, F_NFIELDS, f);
	ev->type = EVENTS_BLOCK_STORED;
	if ((rc = decode_hashes(d, f[F_HASHES], ev)))
		return rc;
	if (!f[F_PARENT] || !f[F_TOKENS] || !f[F_BS])
		return -EBADMSG;
	if (!obj_nil(f[F_PARENT])) {
		if (obj_hash(f[F_PARENT], &ev->parent))
			return -EBADMSG;
		ev->has_parent = true;
	}
	if (obj_int(f[F_BS], &bs) || bs < 1 || bs > BLOCKHASH_MAX_BLOCK_SIZE)
		return -EBADMSG;
	ev->block_size = (uint32_t)bs;
	t = f[F_TOKENS];
	if (t->type != MSGPACK_OBJECT_ARRAY || t->via.array.size != ev->n_hashes * (uint64_t)bs)
		return -EBADMSG;
	if (grow((void **)&d->tokens, &d->tcap, t->via.array.size + 1, sizeof(*d->tokens)))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->via.array.size; i++) {
		const msgpack_object *x = &t->via.array.ptr[i];
		if (x->type != MSGPACK_OBJECT_POSITIVE_INTEGER || x->via.u64 > UINT32_MAX)
			return -EBADMSG;
		d->tokens[i] = (uint32_t)x->via.u64;
	}
	ev->tokens = d->tokens;
	ev->n_tokens = t->via.array.size;
	if (!obj_nil(f[F_LORA_ID])) {
		if (obj_int(f[F_LORA_ID], &ev->lora_id))
			return -EBADMSG;
		ev->has_lora_id = true;
	}
	if ((rc = decode_medium(f[F_MEDIUM], &ev->tier)))
		return rc;
	if (!obj_nil(f[F_LORA_NAME])) {
		if (f[F_LORA_NAME]->type != MSGPACK_OBJECT_STR)
			return -EBADMSG;
		ev->lora_name = f[F_LORA_NAME]->via.str.ptr;
		ev->lora_len = f[F_LORA_NAME]->via.str.size;
	}
	if ((rc = decode_group(f[F_GROUP], ev)))
		return rc;
	if (!obj_nil(f[F_KIND])) {
		if (f[F_KIND]->type != MSGPACK_OBJECT_STR)
			return -EBADMSG;
		ev->other_kind = !obj_is_str(f[F_KIND], "full_attention");
	}
	return decode_extra(d, f[F_EXTRA], ev);
}

static int decode_removed(struct events_decoder *d, const msgpack_object *e,
			  struct events_event *ev)
{
	const msgpack_object *f[3];
	int rc;

	event_fields(e, removed_fields, 3, f);
	ev->type = EVENTS_BLOCK_REMOVED;
	if ((rc = decode_hashes(d, f[R_HASHES], ev)))
		return rc;
	if ((rc = decode_medium(f[R_MEDIUM], &ev->tier)))
		return rc;
	return decode_group(f[R_GROUP], ev);
}

/* One event: 0 (ev filled), 1 (unknown type), -EBADMSG, -ENOMEM. */
static int decode_event(struct events_decoder *d, const msgpack_object *e, struct events_event *ev)
{
	const msgpack_object *tag = NULL;

	memset(ev, 0, sizeof(*ev));
	ev->tier = INDEX_TIER_GPU;
	if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size > 0) {
		tag = &e->via.array.ptr[0];
	} else if (e->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t k = 0; k < e->via.map.size; k++)
			if (obj_is_str(&e->via.map.ptr[k].key, "type"))
				tag = &e->via.map.ptr[k].val;
	}
	if (!tag || tag->type != MSGPACK_OBJECT_STR)
		return -EBADMSG;
	if (obj_is_str(tag, "BlockStored"))
		return decode_stored(d, e, ev);
	if (obj_is_str(tag, "BlockRemoved"))
		return decode_removed(d, e, ev);
	if (obj_is_str(tag, "AllBlocksCleared")) {
		ev->type = EVENTS_ALL_CLEARED;
		return 0;
	}
	return 1;
}

/* events_decode_msgpackc after the prescan: the whole batch unpacked by msgpack-c. */
static int decode_unpacked(struct events_decoder *d, const void *p, size_t n,
			   int (*fn)(void *arg, const struct events_event *ev), void *arg,
			   struct events_decode_counts *c, double *batch_ts)
{
	const msgpack_object *events = NULL, *ts = NULL;
	msgpack_object root;
	size_t off = 0;
	int delivered = 0, rc;

	msgpack_zone_clear(&d->zone);
	if (msgpack_unpack(p, n, &off, &d->zone, &root) != MSGPACK_UNPACK_SUCCESS)
		goto bad;
	if (root.type == MSGPACK_OBJECT_ARRAY && root.via.array.size >= 2) {
		ts = &root.via.array.ptr[0];
		events = &root.via.array.ptr[1];
	} else if (root.type == MSGPACK_OBJECT_MAP) {
		for (uint32_t k = 0; k < root.via.map.size; k++) {
			if (obj_is_str(&root.via.map.ptr[k].key, "events"))
				events = &root.via.map.ptr[k].val;
			else if (obj_is_str(&root.via.map.ptr[k].key, "ts"))
				ts = &root.via.map.ptr[k].val;
		}
	}
	if (!events || events->type != MSGPACK_OBJECT_ARRAY)
		goto bad;
	if (batch_ts) {
		*batch_ts = 0;
		if (ts && ts->type == MSGPACK_OBJECT_FLOAT64)
			*batch_ts = ts->via.f64;
		else if (ts && ts->type == MSGPACK_OBJECT_FLOAT32)
			*batch_ts = ts->via.f64;
		else if (ts && ts->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			*batch_ts = (double)ts->via.u64;
	}
	c->batches++;
	for (uint32_t i = 0; i < events->via.array.size; i++) {
		struct events_event ev;

		rc = decode_event(d, &events->via.array.ptr[i], &ev);
		if (rc == 1) {
			c->unknown_events++;
			continue;
		}
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			c->bad_events++;
			continue;
		}
		c->events++;
		delivered++;
		if (fn && (rc = fn(arg, &ev)))
			return rc;
	}
	return delivered;
bad:
	c->bad_batches++;
	return -EBADMSG;
}

int events_decode_msgpackc(struct events_decoder *d, const void *p, size_t n,
			   int (*fn)(void *arg, const struct events_event *ev), void *arg,
			   struct events_decode_counts *c, double *batch_ts)
{
	struct events_decode_counts dummy = {0};

	if (!c)
		c = &dummy;
	if (!n || n > EVENTS_MAX_PAYLOAD || mp_prescan(p, n))
		goto bad;
	return decode_unpacked(d, p, n, fn, arg, c, batch_ts);
bad:
	c->bad_batches++;
	return -EBADMSG;
}

/* ---- cursor decoder: the hot path ------------------------------------------------------
 * Reads the batch straight from the payload bytes, without building a msgpack_object per token
 * id. It runs after mp_prescan() (so the payload is known to be exactly one well-formed object
 * that msgpack-c would unpack) and still checks the bounds of every read against the end of the
 * value it reads. It follows the msgpack-c decoder above rule for rule (msgpack-c's type mapping
 * included: a signed int >= 0 is a positive integer) and hands an event to it whenever the event
 * carries non-null extra_keys (re-packed by msgpack-c), and the whole batch when it is a map.
 * events_decode_msgpackc() is kept public so tests and the fuzzer can compare the two. */

enum mpt { T_NIL, T_BOOL, T_POS, T_NEG, T_F32, T_F64, T_STR, T_BIN, T_EXT, T_ARRAY, T_MAP };

/* One value's header: scalars (and str/bin/ext bodies) are consumed whole; for arrays and maps
 * only the header, with the count in n (pairs for maps). */
struct mpv {
	enum mpt t;
	uint64_t u; /* T_POS value, T_NEG value as i64 bits, T_ARRAY/T_MAP count */
	double f;
	const uint8_t *s; /* T_STR/T_BIN/T_EXT bytes (ext: without the type byte) */
	uint32_t len;
};

struct cur {
	const uint8_t *p, *end;
};

static inline uint64_t rd_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Reads one header at c->p. 0 or -EBADMSG (truncated, or the unused lead 0xc1). */
static int cur_read(struct cur *c, struct mpv *v)
{
	const uint8_t *p = c->p;
	size_t left;
	unsigned b, w = 0;

	if (p >= c->end)
		return -EBADMSG;
	b = *p++;
	left = (size_t)(c->end - p);
	v->len = 0;
	v->s = NULL;
	if (b <= 0x7f) {
		v->t = T_POS;
		v->u = b;
	} else if (b >= 0xe0) {
		v->t = T_NEG;
		v->u = (uint64_t)(int64_t)(int8_t)b;
	} else if (b <= 0x8f) {
		v->t = T_MAP;
		v->u = b & 0x0f;
	} else if (b <= 0x9f) {
		v->t = T_ARRAY;
		v->u = b & 0x0f;
	} else if (b <= 0xbf) {
		v->t = T_STR;
		v->u = b & 0x1f;
		goto body;
	} else {
		switch (b) {
		case 0xc0:
			v->t = T_NIL;
			break;
		case 0xc2:
		case 0xc3:
			v->t = T_BOOL;
			v->u = b & 1;
			break;
		case 0xcc:
		case 0xcd:
		case 0xce:
		case 0xcf:
			w = 1u << (b - 0xcc);
			if (left < w)
				return -EBADMSG;
			v->t = T_POS;
			v->u = rd_be(p, w);
			p += w;
			break;
		case 0xd0:
		case 0xd1:
		case 0xd2:
		case 0xd3: {
			int64_t x;
			w = 1u << (b - 0xd0);
			if (left < w)
				return -EBADMSG;
			x = (int64_t)(rd_be(p, w) << (64 - 8 * w)) >> (64 - 8 * w);
			v->t = x >= 0 ? T_POS : T_NEG;
			v->u = (uint64_t)x;
			p += w;
			break;
		}
		case 0xca: {
			float f;
			uint32_t x;
			if (left < 4)
				return -EBADMSG;
			x = (uint32_t)rd_be(p, 4);
			memcpy(&f, &x, 4);
			v->t = T_F32;
			v->f = f;
			p += 4;
			break;
		}
		case 0xcb: {
			uint64_t x;
			if (left < 8)
				return -EBADMSG;
			x = rd_be(p, 8);
			memcpy(&v->f, &x, 8);
			v->t = T_F64;
			p += 8;
			break;
		}
		case 0xd9:
		case 0xda:
		case 0xdb:
		case 0xc4:
		case 0xc5:
		case 0xc6:
			w = b >= 0xd9 ? 1u << (b - 0xd9) : 1u << (b - 0xc4);
			if (left < w)
				return -EBADMSG;
			v->t = b >= 0xd9 ? T_STR : T_BIN;
			v->u = rd_be(p, w);
			p += w;
			left -= w;
			goto body;
		case 0xd4:
		case 0xd5:
		case 0xd6:
		case 0xd7:
		case 0xd8:
			v->t = T_EXT;
			v->u = 1u << (b - 0xd4);
			if (left < 1)
				return -EBADMSG;
			p++; /* type byte */
			left--;
			goto body;
		case 0xc7:
		case 0xc8:
		case 0xc9:
			w = 1u << (b - 0xc7);
			if (left < w + 1)
				return -EBADMSG;
			v->t = T_EXT;
			v->u = rd_be(p, w);
			p += w + 1;
			left -= w + 1;
			goto body;
		case 0xdc:
		case 0xdd:
		case 0xde:
		case 0xdf:
			w = b & 1 ? 4 : 2;
			if (left < w)
				return -EBADMSG;
			v->t = b <= 0xdd ? T_ARRAY : T_MAP;
			v->u = rd_be(p, w);
			p += w;
			break;
		default:
			return -EBADMSG;
		}
	}
	c->p = p;
	return 0;
body:
	if (v->u > left)
		return -EBADMSG;
	v->s = p;
	v->len = (uint32_t)v->u;
	c->p = p + v->u;
	return 0;
}

/* Skips one whole value (containers with everything inside), table-driven like mp_prescan.
 * 0 or -EBADMSG. */
static int cur_skip(struct cur *c)
{
	const uint8_t *p = c->p;
	uint64_t todo = 1, kids;
	bool container;

	while (todo) {
		todo--;
		if (mp_step(&p, c->end, &kids, &container))
			return -EBADMSG;
		todo += kids;
	}
	c->p = p;
	return 0;
}

/* Reads the value at p (bounded by end) as v. */
static int at(const uint8_t *p, const uint8_t *end, struct mpv *v)
{
	struct cur c = {p, end};

	return cur_read(&c, v);
}

static bool v_is_str(const struct mpv *v, const char *s, size_t n)
{
	return v->t == T_STR && v->len == n && !memcmp(v->s, s, n);
}

/* obj_hash, obj_int on a cursor value */
static int v_hash(const struct mpv *v, uint64_t *out)
{
	switch (v->t) {
	case T_POS:
	case T_NEG:
		*out = v->u;
		return 0;
	case T_BIN:
	case T_STR:
		if (!v->len)
			return -EBADMSG;
		*out = events_hash_u64(v->s, v->len);
		return 0;
	default:
		return -EBADMSG;
	}
}

static int v_int(const struct mpv *v, int64_t *out)
{
	if ((v->t == T_POS && v->u <= INT64_MAX) || v->t == T_NEG) {
		*out = (int64_t)v->u;
		return 0;
	}
	return -EBADMSG;
}

/* The value at f (NULL: absent) is nil or absent. Sets *v when present. */
static bool f_nil(const uint8_t *f, const uint8_t *end, struct mpv *v, int *err)
{
	if (!f)
		return true;
	if (at(f, end, v)) {
		*err = -EBADMSG;
		return true;
	}
	return v->t == T_NIL;
}

static int cur_hashes(struct events_decoder *d, const uint8_t *f, const uint8_t *end,
		      struct events_event *ev)
{
	struct cur c = {f, end};
	struct mpv v;

	if (!f || cur_read(&c, &v) || v.t != T_ARRAY)
		return -EBADMSG;
	if (v.u > (uint64_t)(end - c.p))
		return -EBADMSG;
	if (grow((void **)&d->hashes, &d->hcap, v.u + 1, sizeof(*d->hashes)))
		return -ENOMEM;
	for (uint64_t i = 0; i < v.u; i++) {
		struct mpv x;
		if (cur_read(&c, &x) || v_hash(&x, &d->hashes[i]))
			return -EBADMSG;
	}
	ev->hashes = d->hashes;
	ev->n_hashes = v.u;
	return 0;
}

/* token_ids: n positive integers <= UINT32_MAX (msgpack-c's POSITIVE_INTEGER: unsigned ints of
 * any width and signed ints >= 0). The hot loop of the decoder. */
static int cur_tokens(struct events_decoder *d, struct cur *c, uint64_t n)
{
	const uint8_t *p = c->p, *end = c->end;
	uint32_t *t;

	if (grow((void **)&d->tokens, &d->tcap, n + 1, sizeof(*d->tokens)))
		return -ENOMEM;
	t = d->tokens;
	for (uint64_t i = 0; i < n; i++) {
		unsigned b;
		uint64_t x;

		if (p >= end)
			return -EBADMSG;
		b = *p++;
		if (__builtin_expect(b - 0xccu < 3 && end - p >= 4, 1)) {
			/* uint8/16/32 (token ids are mostly 16 or 17 bits): one load, no branch on
			 * the width, which varies from token to token */
			unsigned w = 1u << (b - 0xcc);
			uint32_t raw;
			memcpy(&raw, p, 4);
			t[i] = __builtin_bswap32(raw) >> (32 - 8 * w);
			p += w;
			continue;
		}
		if (b <= 0x7f) {
			t[i] = b;
			continue;
		}
		switch (b) {
		case 0xcc:
			if (end - p < 1)
				return -EBADMSG;
			t[i] = p[0];
			p += 1;
			continue;
		case 0xcd:
			if (end - p < 2)
				return -EBADMSG;
			t[i] = (uint32_t)p[0] << 8 | p[1];
			p += 2;
			continue;
		case 0xce:
			if (end - p < 4)
				return -EBADMSG;
			t[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
			       p[3];
			p += 4;
			continue;
		case 0xcf:
			if (end - p < 8)
				return -EBADMSG;
			x = rd_be(p, 8);
			p += 8;
			break;
		case 0xd0:
		case 0xd1:
		case 0xd2:
		case 0xd3: {
			unsigned w = 1u << (b - 0xd0);
			int64_t s;
			if ((size_t)(end - p) < w)
				return -EBADMSG;
			s = (int64_t)(rd_be(p, w) << (64 - 8 * w)) >> (64 - 8 * w);
			if (s < 0)
				return -EBADMSG;
			x = (uint64_t)s;
			p += w;
			break;
		}
		default:
			return -EBADMSG;
		}
		if (x > UINT32_MAX)
			return -EBADMSG;
		t[i] = (uint32_t)x;
	}
	c->p = p;
	return 0;
}

#define FALLBACK 2

/* decode_stored on field positions f (NULL: absent), the token ids already in d->tokens (tok_n
 * of them; -1 when token_ids is not an array of valid ids). FALLBACK when extra_keys hold
 * anything but nulls. */
static int cur_stored(struct events_decoder *d, const uint8_t *const *f, int64_t tok_n,
		      const uint8_t *end, struct events_event *ev)
{
	struct mpv v;
	int64_t bs;
	int rc, err = 0;

	ev->type = EVENTS_BLOCK_STORED;
	if ((rc = cur_hashes(d, f[F_HASHES], end, ev)))
		return rc;
	if (!f[F_PARENT] || !f[F_TOKENS] || !f[F_BS])
		return -EBADMSG;
	if (at(f[F_PARENT], end, &v))
		return -EBADMSG;
	if (v.t != T_NIL) {
		if (v_hash(&v, &ev->parent))
			return -EBADMSG;
		ev->has_parent = true;
	}
	if (at(f[F_BS], end, &v) || v_int(&v, &bs) || bs < 1 || bs > BLOCKHASH_MAX_BLOCK_SIZE)
		return -EBADMSG;
	ev->block_size = (uint32_t)bs;
	/* token_ids were decoded while the event's fields were located (cur_event) */
	if (tok_n < 0 || (uint64_t)tok_n != ev->n_hashes * (uint64_t)bs)
		return -EBADMSG;
	ev->tokens = d->tokens;
	ev->n_tokens = (size_t)tok_n;
	if (!f_nil(f[F_LORA_ID], end, &v, &err)) {
		if (v_int(&v, &ev->lora_id))
			return -EBADMSG;
		ev->has_lora_id = true;
	}
	if (!f_nil(f[F_MEDIUM], end, &v, &err)) {
		if (v.t != T_STR)
			return -EBADMSG;
		ev->tier = v.len == 3 && !strncasecmp((const char *)v.s, "GPU", 3) ? INDEX_TIER_GPU
										   : INDEX_TIER_CPU;
	}
	if (!f_nil(f[F_LORA_NAME], end, &v, &err)) {
		if (v.t != T_STR)
			return -EBADMSG;
		ev->lora_name = (const char *)v.s;
		ev->lora_len = v.len;
	}
	if (!f_nil(f[F_GROUP], end, &v, &err)) {
		ev->has_group = true;
		if (v_int(&v, &ev->group_idx))
			return -EBADMSG;
	}
	if (!f_nil(f[F_KIND], end, &v, &err)) {
		if (v.t != T_STR)
			return -EBADMSG;
		ev->other_kind = !v_is_str(&v, "full_attention", 14);
	}
	/* extra_keys: one null per block (what vLLM sends for text) decodes to no extra keys;
	 * anything else is re-packed by decode_extra */
	if (!f_nil(f[F_EXTRA], end, &v, &err)) {
		struct cur c = {f[F_EXTRA], end};
		if (cur_read(&c, &v) || v.t != T_ARRAY || v.u != ev->n_hashes)
			return -EBADMSG;
		for (uint64_t i = 0; i < v.u; i++)
			if (c.p >= end || *c.p++ != 0xc0)
				return FALLBACK;
	}
	return err;
}

/* decode_removed on positions hashes, medium, group. */
static int cur_removed(struct events_decoder *d, const uint8_t *fh, const uint8_t *fm,
		       const uint8_t *fg, const uint8_t *end, struct events_event *ev)
{
	struct mpv v;
	int rc, err = 0;

	ev->type = EVENTS_BLOCK_REMOVED;
	if ((rc = cur_hashes(d, fh, end, ev)))
		return rc;
	if (!f_nil(fm, end, &v, &err)) {
		if (v.t != T_STR)
			return -EBADMSG;
		ev->tier = v.len == 3 && !strncasecmp((const char *)v.s, "GPU", 3) ? INDEX_TIER_GPU
										   : INDEX_TIER_CPU;
	}
	if (!f_nil(fg, end, &v, &err)) {
		ev->has_group = true;
		if (v_int(&v, &ev->group_idx))
			return -EBADMSG;
	}
	return err;
}

/* Decodes the token_ids value at c->p into d->tokens and moves past it: returns the count, -1
 * when it is not an array of valid ids (then skipped), -ENOMEM, or -EBADMSG (malformed). */
static int64_t cur_token_field(struct events_decoder *d, struct cur *c)
{
	const uint8_t *start = c->p;
	struct mpv v;
	int rc;

	if (cur_read(c, &v))
		return -EBADMSG;
	if (v.t == T_ARRAY && v.u <= (uint64_t)(c->end - c->p)) {
		rc = cur_tokens(d, c, v.u);
		if (!rc)
			return (int64_t)v.u;
		if (rc == -ENOMEM)
			return rc;
	}
	c->p = start;
	return cur_skip(c) ? -EBADMSG : -1;
}

/* decode_event on the event at c->p (bounded by c->end): 0, 1 (unknown type), -EBADMSG, -ENOMEM,
 * or FALLBACK (decode it with msgpack-c). *evend is set to the end of the event once its fields
 * are located (NULL before). token_ids are decoded on the way (one pass over them). */
static int cur_event(struct events_decoder *d, struct cur *c, struct events_event *ev,
		     const uint8_t **evend)
{
	const uint8_t *f[F_NFIELDS] = {0}, *tag = NULL;
	int64_t tok_n = -1;
	struct mpv v, t;
	bool map;

	*evend = NULL;
	memset(ev, 0, sizeof(*ev));
	ev->tier = INDEX_TIER_GPU;
	if (cur_read(c, &v))
		return -EBADMSG;
	if (v.t != T_ARRAY && v.t != T_MAP) {
		if (v.t == T_STR || v.t == T_BIN || v.t == T_EXT || v.t <= T_F64)
			*evend = c->p; /* a scalar: consumed whole */
		return -EBADMSG;
	}
	map = v.t == T_MAP;
	for (uint64_t i = 0; i < v.u; i++) {
		int which = -1;

		if (map) {
			struct mpv k;
			const uint8_t *kp = c->p;
			if (cur_read(c, &k))
				return -EBADMSG;
			if (k.t == T_STR) {
				if (v_is_str(&k, "type", 4))
					which = F_NFIELDS;
				for (int j = 0; which < 0 && j < F_NFIELDS; j++)
					if (v_is_str(&k, stored_fields[j],
						     strlen(stored_fields[j])))
						which = j;
			} else {
				c->p = kp;
				if (cur_skip(c))
					return -EBADMSG;
			}
		} else {
			which = i == 0 ? F_NFIELDS : i - 1 < F_NFIELDS ? (int)(i - 1) : -1;
		}
		if (which == F_NFIELDS)
			tag = c->p;
		else if (which >= 0)
			f[which] = c->p;
		if (which == F_TOKENS) {
			/* array form: the third field of BlockStored only (BlockRemoved has none)
			 */
			tok_n = cur_token_field(d, c);
			if (tok_n == -ENOMEM || tok_n == -EBADMSG)
				return (int)tok_n;
		} else if (cur_skip(c)) {
			return -EBADMSG;
		}
	}
	*evend = c->p;
	if (!tag || at(tag, c->p, &t) || t.t != T_STR)
		return -EBADMSG;
	if (v_is_str(&t, "BlockStored", 11))
		return cur_stored(d, f, tok_n, c->p, ev);
	if (v_is_str(&t, "BlockRemoved", 12)) {
		if (map)
			return cur_removed(d, f[F_HASHES], f[F_MEDIUM], f[F_GROUP], c->p, ev);
		return cur_removed(d, f[R_HASHES], f[R_MEDIUM], f[R_GROUP], c->p, ev);
	}
	if (v_is_str(&t, "AllBlocksCleared", 16)) {
		ev->type = EVENTS_ALL_CLEARED;
		return 0;
	}
	return 1;
}

int events_decode(struct events_decoder *d, const void *payload, size_t n,
		  int (*fn)(void *arg, const struct events_event *ev), void *arg,
		  struct events_decode_counts *c, double *batch_ts)
{
	struct events_decode_counts dummy = {0};
	const uint8_t *p = payload;
	struct cur cu = {p, p + n}, ts_at;
	struct mpv root, v;
	int delivered = 0, rc;

	if (!c)
		c = &dummy;
	if (!n || n > EVENTS_MAX_PAYLOAD || mp_prescan(p, n))
		goto bad;
	if (cur_read(&cu, &root))
		goto bad;
	if (root.t == T_MAP)
		return decode_unpacked(d, p, n, fn, arg, c, batch_ts);
	if (root.t != T_ARRAY || root.u < 2)
		goto bad;
	ts_at = cu;
	if (cur_skip(&cu) || cur_read(&cu, &v) || v.t != T_ARRAY)
		goto bad;
	if (batch_ts) {
		struct mpv t;
		*batch_ts = 0;
		if (!cur_read(&ts_at, &t)) {
			if (t.t == T_F64 || t.t == T_F32)
				*batch_ts = t.f;
			else if (t.t == T_POS)
				*batch_ts = (double)t.u;
		}
	}
	c->batches++;
	for (uint64_t i = 0; i < v.u; i++) {
		const uint8_t *ep = cu.p, *evend;
		struct events_event ev;

		rc = cur_event(d, &cu, &ev, &evend);
		cu.p = ep;
		if (!evend && cur_skip(&cu)) /* malformed inside: cannot happen after mp_prescan */
			break;
		if (evend)
			cu.p = evend;
		if (rc == FALLBACK) {
			msgpack_object o;
			size_t off = 0;
			msgpack_zone_clear(&d->zone);
			if (msgpack_unpack((const char *)ep, (size_t)(cu.p - ep), &off, &d->zone,
					   &o) != MSGPACK_UNPACK_SUCCESS)
				rc = -EBADMSG;
			else
				rc = decode_event(d, &o, &ev);
		}
		if (rc == 1) {
			c->unknown_events++;
			continue;
		}
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			c->bad_events++;
			continue;
		}
		c->events++;
		delivered++;
		if (fn && (rc = fn(arg, &ev)))
			return rc;
	}
	return delivered;
bad:
	c->bad_batches++;
	return -EBADMSG;
}

uint64_t events_event_root(const struct events_event *ev, uint64_t seed)
{
	if (ev->lora_name && ev->lora_len)
		return blockhash_root(seed, ev->lora_name, ev->lora_len);
	if (ev->has_lora_id)
		return blockhash_root_lora_id(seed, ev->lora_id);
	return 0;
}

int events_apply_event(struct index *idx, uint32_t w, const struct events_event *ev)
{
	struct index_stored s;

	if (ev->other_kind)
		return 0;
	switch (ev->type) {
	case EVENTS_BLOCK_STORED:
		s = (struct index_stored){
		    .engine = ev->hashes,
		    .n = ev->n_hashes,
		    .has_parent = ev->has_parent,
		    .parent = ev->parent,
		    .tokens = ev->tokens,
		    .n_tokens = ev->n_tokens,
		    .block_size = ev->block_size,
		    .root = events_event_root(ev, index_seed(idx)),
		    .extra = ev->extra,
		    .extra_len = ev->extra_len,
		    .tier = ev->tier,
		};
		return index_block_stored(idx, w, &s);
	case EVENTS_BLOCK_REMOVED:
		return index_block_removed(idx, w, ev->tier, ev->hashes, ev->n_hashes);
	case EVENTS_ALL_CLEARED:
		return index_worker_clear(idx, w);
	}
	return -EINVAL;
}

/* ==== runtime ============================================================================ */

/* Replayed batches remembered per worker (payload hashes, 8 bytes each) to recognise their live
 * copies arriving after the replay. */
#ifndef EVENTS_REPLAY_RECALL
#define EVENTS_REPLAY_RECALL 1024
#endif

/* A live batch kept while the worker's replay runs. */
struct pend {
	uint64_t seq;
	size_t len;
	unsigned char *data;
};

struct evw {
	bool used;
	char *name, *pub, *replay, *topic;
	void *sub, *dealer;
	bool have_seq;	   /* next_seq is meaningful */
	uint64_t next_seq; /* the seq expected next */
	bool replaying;
	bool initial;	      /* the running replay is an initial sync (from 0) */
	bool got_replay;      /* the running replay delivered at least one batch */
	bool skip_initial;    /* after a failed replay: take the stream as it comes */
	uint64_t replay_from; /* first seq asked */
	int64_t deadline_ms;
	struct pend *pend;
	size_t pend_head, pend_n, pend_cap;
	/* The last replayed batches' payload hashes, seqs [recall_end - recall_n, recall_end), ring
	 * indexed by seq (allocated on first use). The replay (DEALER) and the live stream (SUB)
	 * are two connections with no order between them: a batch the worker published just
	 * before answering can reach the SUB after the replay delivered it. Its seq is then below
	 * next_seq, which would read as a restart (blocks dropped, synced again). Its bytes are
	 * those of the replayed batch; a restarted worker's batch at that seq differs (at least
	 * its timestamp). Forgotten once the live stream reaches next_seq (SUB is ordered). */
	uint64_t *recall;
	uint64_t recall_end;
	size_t recall_n;
	struct events_worker_stats st;
};

struct events {
	struct index *idx;
	int replay_timeout_ms;
	size_t max_pending;
	int rcvhwm;
	bool initial_replay;
	void *zctx;
	int epfd, tfd;
	struct events_decoder *dec;
	struct evw *w;
	uint32_t nw;
	uint32_t rr; /* first worker events_poll looks at */
	/* current apply target (for the decode callback) */
	struct evw *cur;
	uint32_t cur_id;
};

static int64_t now_ms(void)
{
	return (int64_t)clock_ms();
}

static uint64_t be64(const unsigned char *b)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

struct events *events_create(const struct events_cfg *cfg)
{
	struct events *ev = calloc(1, sizeof(*ev));
	struct epoll_event ee = {.events = EPOLLIN};

	if (!ev || !cfg || !cfg->index) {
		free(ev);
		errno = EINVAL;
		return NULL;
	}
	ev->idx = cfg->index;
	ev->replay_timeout_ms =
	    cfg->replay_timeout_ms > 0 ? cfg->replay_timeout_ms : EVENTS_DEFAULT_REPLAY_TIMEOUT_MS;
	ev->max_pending = cfg->max_pending ? cfg->max_pending : EVENTS_DEFAULT_MAX_PENDING;
	ev->rcvhwm = cfg->rcvhwm > 0 ? cfg->rcvhwm : EVENTS_DEFAULT_RCVHWM;
	ev->initial_replay = !cfg->no_initial_replay;
	ev->epfd = ev->tfd = -1;
	ev->nw = index_max_workers(cfg->index);
	ev->w = calloc(ev->nw, sizeof(*ev->w));
	ev->dec = events_decoder_new();
	ev->zctx = zmq_ctx_new();
	if (!ev->w || !ev->dec || !ev->zctx)
		goto cleanup;
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ev->epfd < 0 || ev->tfd < 0)
		goto cleanup;
	ee.data.u64 = UINT64_MAX;
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, ev->tfd, &ee))
		goto cleanup;
	return ev;
cleanup:
	events_free(ev);
	if (!errno)
		errno = ENOMEM;
	return NULL;
}

static void pend_clear(struct evw *w)
{
	for (size_t i = 0; i < w->pend_n; i++)
		free(w->pend[(w->pend_head + i) % w->pend_cap].data);
	w->pend_head = w->pend_n = 0;
}

static void close_sock(struct events *ev, void **s)
{
	int fd = -1;
	size_t fl = sizeof(fd);
	struct epoll_event dummy = {0};

	if (!*s)
		return;
	if (!zmq_getsockopt(*s, ZMQ_FD, &fd, &fl) && fd >= 0)
		epoll_ctl(ev->epfd, EPOLL_CTL_DEL, fd, &dummy);
	zmq_close(*s);
	*s = NULL;
}

static void worker_release(struct events *ev, struct evw *w)
{
	close_sock(ev, &w->sub);
	close_sock(ev, &w->dealer);
	pend_clear(w);
	free(w->pend);
	free(w->recall);
	free(w->name);
	free(w->pub);
	free(w->replay);
	free(w->topic);
	memset(w, 0, sizeof(*w));
}

void events_free(struct events *ev)
{
	if (!ev)
		return;
	for (uint32_t i = 0; ev->w && i < ev->nw; i++)
		if (ev->w[i].used)
			worker_release(ev, &ev->w[i]);
	if (ev->zctx)
		zmq_ctx_term(ev->zctx);
	if (ev->epfd >= 0)
		close(ev->epfd);
	if (ev->tfd >= 0)
		close(ev->tfd);
	events_decoder_free(ev->dec);
	free(ev->w);
	free(ev);
}

/* Opens a socket of type, registered in the epoll set with tag (worker id, bit 32 = dealer). */
static void *open_sock(struct events *ev, int type, const char *ep, uint64_t tag)
{
	void *s = zmq_socket(ev->zctx, type);
	int zero = 0, fd;
	size_t fl = sizeof(fd);
	struct epoll_event ee = {.events = EPOLLIN, .data.u64 = tag};

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	if (type == ZMQ_SUB)
		zmq_setsockopt(s, ZMQ_RCVHWM, &ev->rcvhwm, sizeof(ev->rcvhwm));
	/* The join sync sends its request right after connecting, often before the worker's
	 * replay endpoint listens (pod starting) or before the TCP handshake is done. With
	 * ZMQ_IMMEDIATE 0 (libzmq's default, set here because the sync relies on it) the request
	 * waits in the pipe and goes out once a connection is made, retried every
	 * ZMQ_RECONNECT_IVL; with 1, zmq_send would fail with EAGAIN and the sync never start.
	 * The replay deadline bounds the wait for an endpoint that never comes up. */
	if (type == ZMQ_DEALER)
		zmq_setsockopt(s, ZMQ_IMMEDIATE, &zero, sizeof(zero));
	if (zmq_connect(s, ep) || zmq_getsockopt(s, ZMQ_FD, &fd, &fl) ||
	    epoll_ctl(ev->epfd, EPOLL_CTL_ADD, fd, &ee)) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

static void join_sync(struct events *ev, uint32_t id);

int events_worker_add(struct events *ev, uint32_t id, const char *name, const char *pub,
		      const char *replay, const char *topic)
{
	struct evw *w;
	const char *t = topic ? topic : "";

	if (id >= ev->nw)
		return -ERANGE;
	w = &ev->w[id];
	if (w->used)
		return -EEXIST;
	if (!pub || !name)
		return -EINVAL;
	w->used = true;
	w->name = strdup(name);
	w->pub = strdup(pub);
	w->replay = replay && *replay ? strdup(replay) : NULL;
	w->topic = strdup(t);
	if (!w->name || !w->pub || !w->topic || (replay && *replay && !w->replay)) {
		worker_release(ev, w);
		return -ENOMEM;
	}
	w->sub = open_sock(ev, ZMQ_SUB, pub, id);
	if (!w->sub || zmq_setsockopt(w->sub, ZMQ_SUBSCRIBE, t, strlen(t))) {
		log_warn("events", "worker %s: cannot subscribe to %s: %s", name, pub,
			 zmq_strerror(zmq_errno()));
		worker_release(ev, w);
		return -EINVAL;
	}
	log_info("events", "worker %s (id %u): subscribed to %s, replay %s", name, id, pub,
		 w->replay ? w->replay : "none");
	join_sync(ev, id);
	return 0;
}

/* Drops worker w's blocks (restart, lost events, failed replay). */
static void worker_drop(struct events *ev, uint32_t id)
{
	index_write_lock(ev->idx);
	index_worker_clear(ev->idx, id);
	index_write_unlock(ev->idx);
	ev->w[id].st.drops++;
}

int events_worker_remove(struct events *ev, uint32_t id)
{
	if (id >= ev->nw || !ev->w[id].used)
		return -ENOENT;
	log_info("events", "worker %s (id %u): removed", ev->w[id].name, id);
	worker_release(ev, &ev->w[id]);
	index_write_lock(ev->idx);
	index_worker_clear(ev->idx, id);
	index_write_unlock(ev->idx);
	return 0;
}

int events_worker_find(const struct events *ev, const char *name)
{
	for (uint32_t i = 0; i < ev->nw; i++)
		if (ev->w[i].used && !strcmp(ev->w[i].name, name))
			return (int)i;
	return -ENOENT;
}

static bool streq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int events_sync(struct events *ev, const struct events_spec *specs, size_t n, const char *topic)
{
	int failed = 0;

	for (uint32_t id = 0; id < ev->nw; id++) {
		struct evw *w = &ev->w[id];
		bool keep = false;
		if (!w->used)
			continue;
		for (size_t i = 0; i < n && !keep; i++)
			keep = !strcmp(specs[i].name, w->name) && !strcmp(specs[i].pub, w->pub) &&
			       streq(specs[i].replay && *specs[i].replay ? specs[i].replay : NULL,
				     w->replay) &&
			       !strcmp(topic ? topic : "", w->topic);
		if (!keep)
			events_worker_remove(ev, id);
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t id;
		int rc = -ENOSPC;
		if (events_worker_find(ev, specs[i].name) >= 0)
			continue;
		for (id = 0; id < ev->nw; id++)
			if (!ev->w[id].used) {
				rc = events_worker_add(ev, id, specs[i].name, specs[i].pub,
						       specs[i].replay, topic);
				break;
			}
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			log_warn("events", "worker %s: not subscribed: %s", specs[i].name,
				 strerror(-rc));
			failed++;
		}
	}
	return failed;
}

/* The strings behind one events_spec of events_sync_services. "service/endpoint" is sized for two
 * whole name fields (at most DISCOVERY_NAME_MAX bytes read from each), the slash and the NUL, so
 * no name is ever cut. */
struct spec_text {
	char name[2 * DISCOVERY_NAME_MAX + 2];
	char pub[sizeof("tcp://255.255.255.255:65535")];
	char replay[sizeof("tcp://255.255.255.255:65535")];
};

int events_sync_services(struct events *ev, const struct services *s, const char *topic)
{
	struct events_spec *sp = NULL;
	struct spec_text *tx = NULL;
	size_t n = 0, max = 0;
	int rc;

	for (size_t i = 0; i < s->n; i++)
		max += s->v[i].nendpoints;
	/* + 1: calloc(0) may return NULL, which must not read as out of memory */
	sp = calloc(max + 1, sizeof(*sp));
	tx = calloc(max + 1, sizeof(*tx));
	if (!sp || !tx) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct service *sv = &s->v[i];
		for (size_t k = 0; k < sv->nendpoints; k++) {
			const struct endpoint *e = &sv->endpoints[k];
			char ip[INET_ADDRSTRLEN];
			if (!e->events_port)
				continue;
			inet_ntop(AF_INET, &e->addr.sin_addr, ip, sizeof(ip));
			/* %.*s: a name filling its whole field would have no NUL */
			snprintf(tx[n].name, sizeof(tx[n].name), "%.*s/%.*s", DISCOVERY_NAME_MAX,
				 sv->name, DISCOVERY_NAME_MAX, e->name);
			snprintf(tx[n].pub, sizeof(tx[n].pub), "tcp://%s:%u", ip, e->events_port);
			snprintf(tx[n].replay, sizeof(tx[n].replay), "tcp://%s:%u", ip,
				 e->replay_port);
			sp[n] = (struct events_spec){tx[n].name, tx[n].pub,
						     e->replay_port ? tx[n].replay : NULL};
			n++;
		}
	}
	rc = events_sync(ev, sp, n, topic);
cleanup:
	free(sp);
	free(tx);
	return rc;
}

int events_fd(const struct events *ev)
{
	return ev->epfd;
}

static int apply_cb(void *arg, const struct events_event *e)
{
	struct events *ev = arg;
	struct evw *w = ev->cur;

	if (e->other_kind) {
		w->st.other_group_events++;
		return 0;
	}
	switch (e->type) {
	case EVENTS_BLOCK_STORED:
		w->st.stored++;
		break;
	case EVENTS_BLOCK_REMOVED:
		w->st.removed++;
		break;
	case EVENTS_ALL_CLEARED:
		w->st.cleared++;
		break;
	}
	return events_apply_event(ev->idx, ev->cur_id, e) == -ENOMEM ? -ENOMEM : 0;
}

/* Decodes and applies one batch for worker id. */
static void apply_batch(struct events *ev, uint32_t id, const void *p, size_t n)
{
	struct evw *w = &ev->w[id];
	struct events_decode_counts c = {0};
	int rc;

	ev->cur = w;
	ev->cur_id = id;
	index_write_lock(ev->idx);
	rc = events_decode(ev->dec, p, n, apply_cb, ev, &c, NULL);
	index_write_unlock(ev->idx);
	if (rc == -ENOMEM)
		log_warn("events", "worker %s: out of memory applying a batch", w->name);
	w->st.batches += c.batches;
	w->st.bad_batches += c.bad_batches;
	w->st.events += c.events;
	w->st.bad_events += c.bad_events;
	w->st.unknown_events += c.unknown_events;
	w->skip_initial = false;
}

static void arm_timer(struct events *ev)
{
	int64_t first = INT64_MAX, now = now_ms();
	struct itimerspec its = {0};

	for (uint32_t i = 0; i < ev->nw; i++)
		if (ev->w[i].used && ev->w[i].replaying && ev->w[i].deadline_ms < first)
			first = ev->w[i].deadline_ms;
	if (first != INT64_MAX) {
		int64_t d = first > now ? first - now : 1;
		its.it_value.tv_sec = d / 1000;
		its.it_value.tv_nsec = (d % 1000) * 1000000;
	}
	timerfd_settime(ev->tfd, 0, &its, NULL);
}

static int pend_push(struct events *ev, struct evw *w, uint64_t seq, const void *p, size_t n)
{
	struct pend *pe;

	if (w->pend_n >= ev->max_pending)
		return -ENOBUFS;
	if (w->pend_n == w->pend_cap) {
		size_t ncap = w->pend_cap ? w->pend_cap * 2 : 16;
		struct pend *np = malloc(ncap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		for (size_t i = 0; i < w->pend_n; i++)
			np[i] = w->pend[(w->pend_head + i) % w->pend_cap];
		free(w->pend);
		w->pend = np;
		w->pend_cap = ncap;
		w->pend_head = 0;
	}
	pe = &w->pend[(w->pend_head + w->pend_n) % w->pend_cap];
	pe->data = malloc(n ? n : 1);
	if (!pe->data)
		return -ENOMEM;
	memcpy(pe->data, p, n);
	pe->len = n;
	pe->seq = seq;
	w->pend_n++;
	return 0;
}

static void handle_seq(struct events *ev, uint32_t id, uint64_t seq, const void *p, size_t n);

/* Remembers replayed batch seq (applied in seq order) for recalled(). Without memory it only
 * forgets: a late live copy is then taken for a restart, which costs a resync, not correctness. */
static void recall_add(struct evw *w, uint64_t seq, const void *p, size_t n)
{
	if (!w->recall) {
		w->recall = malloc(EVENTS_REPLAY_RECALL * sizeof(*w->recall));
		if (!w->recall)
			return;
	}
	if (w->recall_n && seq != w->recall_end)
		w->recall_n = 0;
	w->recall[seq % EVENTS_REPLAY_RECALL] = XXH3_64bits(p, n);
	w->recall_end = seq + 1;
	if (w->recall_n < EVENTS_REPLAY_RECALL)
		w->recall_n++;
}

/* Whether live batch seq with payload p[0..n) is one the last replay already delivered. */
static bool recalled(const struct evw *w, uint64_t seq, const void *p, size_t n)
{
	return w->recall_n && seq < w->recall_end && seq >= w->recall_end - w->recall_n &&
	       w->recall[seq % EVENTS_REPLAY_RECALL] == XXH3_64bits(p, n);
}

static int start_replay(struct events *ev, uint32_t id, uint64_t from, bool initial)
{
	struct evw *w = &ev->w[id];
	unsigned char req[8];

	if (!w->dealer)
		w->dealer = open_sock(ev, ZMQ_DEALER, w->replay, (1ULL << 32) | id);
	if (!w->dealer)
		return -EIO;
	for (int i = 0; i < 8; i++)
		req[i] = (unsigned char)(from >> (56 - 8 * i));
	if (zmq_send(w->dealer, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(w->dealer, req, 8, ZMQ_DONTWAIT) < 0) {
		close_sock(ev, &w->dealer);
		return -EIO;
	}
	w->replaying = true;
	w->initial = initial;
	w->got_replay = false;
	w->recall_n = 0; /* a gap or a restart: the live stream is past the last replay */
	w->replay_from = from;
	w->deadline_ms = now_ms() + ev->replay_timeout_ms;
	if (!initial) {
		index_write_lock(ev->idx);
		index_worker_set_stale(ev->idx, id, true);
		index_write_unlock(ev->idx);
	}
	arm_timer(ev);
	log_info("events", "worker %s: replay from seq %llu%s", w->name, (unsigned long long)from,
		 initial ? " (initial sync)" : "");
	return 0;
}

/* The sync on joining (events_worker_add, events_worker_resync), for a worker holding no blocks
 * and no sequence state: replay from 0 at once. Waiting for the first live batch instead would
 * leave an idle worker (or one just restarted with a warm buffer) unknown to the router until it
 * next publishes, which may be never if no request is sent its way. When the request cannot even
 * be queued, handle_seq's rule for a first batch with seq > 0 asks again. */
static void join_sync(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	if (!w->replay || !ev->initial_replay)
		return;
	if (start_replay(ev, id, 0, true))
		log_warn("events", "worker %s: initial sync from %s not started: %s", w->name,
			 w->replay, zmq_strerror(zmq_errno()));
}

int events_worker_resync(struct events *ev, uint32_t id)
{
	struct evw *w;

	if (id >= ev->nw || !ev->w[id].used)
		return -ENOENT;
	w = &ev->w[id];
	log_info("events", "worker %s (id %u): resync: blocks dropped, sync from seq 0", w->name,
		 id);
	/* replay answers carry no request id: only a new DEALER keeps the answers to a replay
	 * asked before (from the old process, or from another start seq) out of the new sync */
	close_sock(ev, &w->dealer);
	pend_clear(w); /* queued for a replay that is abandoned; the new sync covers them */
	w->replaying = w->initial = w->got_replay = w->skip_initial = false;
	w->have_seq = false;
	w->next_seq = w->replay_from = 0;
	w->recall_n = 0;
	worker_drop(ev, id); /* also lifts a stale mark left by an abandoned gap replay */
	arm_timer(ev);
	join_sync(ev, id);
	return 0;
}

/* Applies the queued live batches in order, until drained or a new replay starts. */
static void drain_pending(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	while (w->pend_n && !w->replaying) {
		struct pend pe = w->pend[w->pend_head];
		w->pend_head = (w->pend_head + 1) % w->pend_cap;
		w->pend_n--;
		/* already delivered by the replay: skip (a real restart shows a seq below the
		 * replay's start, and goes through handle_seq's restart rule) */
		if (w->have_seq && pe.seq < w->next_seq && pe.seq >= w->replay_from)
			;
		else
			handle_seq(ev, id, pe.seq, pe.data, pe.len);
		free(pe.data);
	}
}

static void replay_done(struct events *ev, uint32_t id, bool ok, const char *why)
{
	struct evw *w = &ev->w[id];

	w->replaying = false;
	if (ok) {
		w->st.replays_ok++;
		index_write_lock(ev->idx);
		index_worker_set_stale(ev->idx, id, false);
		index_write_unlock(ev->idx);
		log_info("events", "worker %s: replay done, next seq %llu", w->name,
			 (unsigned long long)w->next_seq);
	} else {
		w->st.replays_failed++;
		close_sock(ev, &w->dealer); /* late answers to this request must not be read */
		if (w->initial && !w->got_replay) {
			/* an initial sync that applied nothing has nothing to drop (typically a
			 * worker whose replay endpoint does not listen yet, or never will) */
			log_warn("events", "worker %s: initial sync failed (%s): live stream taken",
				 w->name, why);
		} else {
			log_warn("events", "worker %s: replay failed (%s): its blocks are dropped",
				 w->name, why);
			worker_drop(ev, id);
		}
		w->have_seq = false;
		w->skip_initial = true;
		w->recall_n = 0;
	}
	arm_timer(ev);
	drain_pending(ev, id);
}

/* Sequence rules for one live batch (see events.h). */
static void handle_seq(struct events *ev, uint32_t id, uint64_t seq, const void *p, size_t n)
{
	struct evw *w = &ev->w[id];

	if (w->replaying) {
		if (pend_push(ev, w, seq, p, n)) {
			pend_clear(w);
			replay_done(ev, id, false, "live queue full");
			/* the batch that did not fit is the newest: start again from it */
			handle_seq(ev, id, seq, p, n);
		}
		return;
	}
	if (w->have_seq && seq < w->next_seq && recalled(w, seq, p, n))
		return; /* the live copy of a replayed batch, late */
	if (w->have_seq && seq >= w->next_seq)
		w->recall_n = 0; /* SUB is ordered: no late copy can follow this batch */
	if (w->have_seq && seq < w->next_seq) {
		w->st.restarts++;
		log_info("events",
			 "worker %s: seq went back from %llu to %llu: restart, blocks "
			 "dropped",
			 w->name, (unsigned long long)w->next_seq, (unsigned long long)seq);
		worker_drop(ev, id);
		w->have_seq = false;
	}
	if (!w->have_seq) {
		if (seq > 0 && w->replay && ev->initial_replay && !w->skip_initial &&
		    !start_replay(ev, id, 0, true)) {
			pend_push(ev, w, seq, p, n);
			return;
		}
		w->have_seq = true;
		w->next_seq = seq;
	} else if (seq > w->next_seq) {
		w->st.gaps++;
		log_warn("events", "worker %s: seq gap, expected %llu got %llu", w->name,
			 (unsigned long long)w->next_seq, (unsigned long long)seq);
		if (w->replay && !start_replay(ev, id, w->next_seq, false)) {
			pend_push(ev, w, seq, p, n);
			return;
		}
		/* nothing can fill the gap: the blocks held may be wrong, so none is kept */
		worker_drop(ev, id);
		w->next_seq = seq;
	}
	apply_batch(ev, id, p, n);
	w->next_seq = seq + 1;
}

/* One replay answer [(empty)][seq][payload] for worker id. */
static void handle_replay_msg(struct events *ev, uint32_t id, zmq_msg_t *parts, int np)
{
	struct evw *w = &ev->w[id];
	uint64_t seq;
	int k = 0;

	if (np >= 1 && zmq_msg_size(&parts[0]) == 0)
		k = 1; /* a delimiter frame, if the ROUTER sends one */
	if (np - k < 1 || zmq_msg_size(&parts[k]) != 8) {
		w->st.bad_frames++;
		return;
	}
	seq = be64(zmq_msg_data(&parts[k]));
	if (!w->replaying) /* an answer after we gave up */
		return;
	if (seq == UINT64_MAX) {
		if (!w->initial && w->pend_n && w->pend[w->pend_head].seq > w->next_seq) {
			/* the answer stops short of the queued batches (e.g. a restarted worker's
			 * new buffer behind a batch of the old process): taking it as a success
			 * would ask the same replay again for ever */
			replay_done(ev, id, false, "replay ended before the gap was filled");
			return;
		}
		if (w->initial && !w->got_replay) {
			/* nothing buffered there: take the live stream as it comes (without
			 * skip_initial the queued batch would ask for the same replay again) */
			w->have_seq = false;
			w->skip_initial = true;
		}
		replay_done(ev, id, true, NULL);
		return;
	}
	if (np - k < 2) {
		w->st.bad_frames++;
		return;
	}
	if (w->initial && !w->got_replay) {
		/* joining a running worker: whatever the buffer still holds is the best start */
		w->have_seq = true;
		w->next_seq = seq;
	}
	w->got_replay = true;
	if (seq < w->next_seq)
		return;
	if (seq > w->next_seq) {
		replay_done(ev, id, false, "replay buffer no longer holds the gap");
		return;
	}
	apply_batch(ev, id, zmq_msg_data(&parts[k + 1]), zmq_msg_size(&parts[k + 1]));
	w->next_seq = seq + 1;
	recall_add(w, seq, zmq_msg_data(&parts[k + 1]), zmq_msg_size(&parts[k + 1]));
}

/* Receives one whole multipart message (at most 4 parts kept, the rest discarded). Returns the
 * number of parts, 0 when nothing was ready. */
static int recv_parts(void *s, zmq_msg_t *parts, int max, int *total)
{
	int np = 0, more;
	size_t ml = sizeof(more);

	*total = 0;
	for (;;) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return np;
		}
		(*total)++;
		if (np < max)
			parts[np++] = m;
		else
			zmq_msg_close(&m);
		more = 0;
		zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
		if (!more)
			return np;
	}
}

static bool readable(void *s)
{
	int e = 0;
	size_t l = sizeof(e);

	return s && !zmq_getsockopt(s, ZMQ_EVENTS, &e, &l) && (e & ZMQ_POLLIN);
}

/* Handles up to *budget messages of worker id's sockets. */
static void drain_worker(struct events *ev, uint32_t id, int *budget)
{
	struct evw *w = &ev->w[id];
	zmq_msg_t parts[4];
	int np, total;

	while (*budget > 0 && w->used && readable(w->dealer)) {
		np = recv_parts(w->dealer, parts, 4, &total);
		if (!total)
			break;
		(*budget)--;
		handle_replay_msg(ev, id, parts, np);
		for (int i = 0; i < np; i++)
			zmq_msg_close(&parts[i]);
	}
	while (*budget > 0 && w->used && readable(w->sub)) {
		np = recv_parts(w->sub, parts, 4, &total);
		if (!total)
			break;
		(*budget)--;
		if (total != 3 || zmq_msg_size(&parts[1]) != 8) {
			w->st.bad_frames++;
		} else {
			uint64_t seq = be64(zmq_msg_data(&parts[1]));
			w->st.last_seq_seen = seq;
			handle_seq(ev, id, seq, zmq_msg_data(&parts[2]), zmq_msg_size(&parts[2]));
		}
		for (int i = 0; i < np; i++)
			zmq_msg_close(&parts[i]);
	}
}

int events_poll(struct events *ev, int budget)
{
	int64_t now = now_ms();
	uint64_t exp;
	bool more = false;

	if (budget <= 0)
		budget = EVENTS_DEFAULT_BUDGET;
	/* No epoll_wait on the inner set: it is level-triggered, and a ZMQ_FD stops being
	 * readable once ZMQ_EVENTS has been read for its socket, which draining does below. */
	if (read(ev->tfd, &exp, sizeof(exp)) < 0) {
		/* EAGAIN: the timer did not fire */
	}
	/* start where the last call stopped, so one flooding worker cannot starve the others */
	for (uint32_t k = 0; k < ev->nw; k++) {
		uint32_t i = (ev->rr + k) % ev->nw;
		struct evw *w = &ev->w[i];
		if (!w->used)
			continue;
		drain_worker(ev, i, &budget); /* answers already here count, even if late */
		if (w->used && w->replaying && now >= w->deadline_ms)
			replay_done(ev, i, false, "timeout");
		if (w->used && (readable(w->sub) || readable(w->dealer)))
			more = true;
		if (budget <= 0) {
			ev->rr = (i + 1) % ev->nw;
			more = true;
			break;
		}
	}
	return more;
}

int events_timeout_ms(const struct events *ev)
{
	int64_t first = INT64_MAX, now = now_ms();

	for (uint32_t i = 0; i < ev->nw; i++)
		if (ev->w[i].used && ev->w[i].replaying && ev->w[i].deadline_ms < first)
			first = ev->w[i].deadline_ms;
	if (first == INT64_MAX)
		return -1;
	return first > now ? (int)(first - now) : 0;
}

int events_worker_stats(const struct events *ev, uint32_t id, struct events_worker_stats *st)
{
	const struct evw *w;

	if (id >= ev->nw || !ev->w[id].used)
		return -ENOENT;
	w = &ev->w[id];
	*st = w->st;
	st->next_seq = w->next_seq;
	st->have_seq = w->have_seq;
	st->replaying = w->replaying;
	st->pending = w->pend_n;
	return 0;
}

/* Names by worker id, for the index's labels. Caller frees the array (not the names). */
static const char **name_table(const struct events *ev)
{
	const char **names = calloc(ev->nw, sizeof(*names));

	for (uint32_t i = 0; names && i < ev->nw; i++)
		names[i] = ev->w[i].used ? ev->w[i].name : NULL;
	return names;
}

static int put_name(struct buf *out, const char *s)
{
	int rc = 0;

	for (; *s && !rc; s++) {
		if (*s == '"' || *s == '\\')
			rc = buf_printf(out, "\\%c", *s);
		else if (*s == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_append(out, s, 1);
	}
	return rc;
}

int events_metrics(const struct events *ev, struct buf *out)
{
	static const struct {
		const char *name, *help, *type;
		size_t off;
		const char *label;
	} m[] = {
#define F(x) offsetof(struct events_worker_stats, x)
	    {"kvsplice_kv_batches_total", "Event batches applied.", "counter", F(batches), NULL},
	    {"kvsplice_kv_events_total", "Events decoded, by type.", "counter", F(stored),
	     "type=\"BlockStored\""},
	    {"kvsplice_kv_events_total", NULL, NULL, F(removed), "type=\"BlockRemoved\""},
	    {"kvsplice_kv_events_total", NULL, NULL, F(cleared), "type=\"AllBlocksCleared\""},
	    {"kvsplice_kv_events_total", NULL, NULL, F(other_group_events),
	     "type=\"other_kv_group\""},
	    {"kvsplice_kv_seq_gaps_total", "Sequence gaps (batches lost by PUB/SUB).", "counter",
	     F(gaps), NULL},
	    {"kvsplice_kv_replays_total", "Replays from the worker's replay endpoint.", "counter",
	     F(replays_ok), "result=\"ok\""},
	    {"kvsplice_kv_replays_total", NULL, NULL, F(replays_failed), "result=\"failed\""},
	    {"kvsplice_kv_restarts_total", "Worker restarts seen (sequence went back).", "counter",
	     F(restarts), NULL},
	    {"kvsplice_kv_worker_drops_total",
	     "Times a worker's blocks were dropped as untrustworthy.", "counter", F(drops), NULL},
	    {"kvsplice_kv_decode_errors_total", "Input that did not decode, by what.", "counter",
	     F(bad_frames), "what=\"frames\""},
	    {"kvsplice_kv_decode_errors_total", NULL, NULL, F(bad_batches), "what=\"batch\""},
	    {"kvsplice_kv_decode_errors_total", NULL, NULL, F(bad_events), "what=\"event\""},
	    {"kvsplice_kv_unknown_events_total", "Events of unknown type (skipped).", "counter",
	     F(unknown_events), NULL},
	    {"kvsplice_kv_last_seq", "Last sequence number received.", "gauge", F(last_seq_seen),
	     NULL},
#undef F
	};
	const char **names;
	int rc = 0;

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		if (m[k].help)
			rc |= buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help,
					 m[k].name, m[k].type);
		for (uint32_t i = 0; i < ev->nw; i++) {
			const struct evw *w = &ev->w[i];
			if (!w->used)
				continue;
			rc |= buf_printf(out, "%s{worker=\"", m[k].name);
			rc |= put_name(out, w->name);
			rc |= buf_printf(out, "\"%s%s} %llu\n", m[k].label ? "," : "",
					 m[k].label ? m[k].label : "",
					 (unsigned long long)*(
					     const uint64_t *)((const char *)&w->st + m[k].off));
		}
	}
	rc |= buf_puts(out,
		       "# HELP kvsplice_kv_replaying 1 while a worker's replay (or initial sync) "
		       "runs.\n"
		       "# TYPE kvsplice_kv_replaying gauge\n");
	for (uint32_t i = 0; i < ev->nw; i++) {
		if (!ev->w[i].used)
			continue;
		rc |= buf_puts(out, "kvsplice_kv_replaying{worker=\"");
		rc |= put_name(out, ev->w[i].name);
		rc |= buf_printf(out, "\"} %d\n", ev->w[i].replaying);
	}
	names = name_table(ev);
	if (!names)
		return -ENOMEM;
	rc |= index_metrics(ev->idx, names, ev->nw, out);
	free(names);
	return rc ? -ENOMEM : 0;
}

int events_debug_json(const struct events *ev, struct buf *out)
{
	const char **names;
	int rc = 0, first = 1;

	rc |= buf_puts(out, "{\"workers\":[");
	for (uint32_t i = 0; i < ev->nw; i++) {
		const struct evw *w = &ev->w[i];
		uint64_t gpu = 0, cpu = 0;
		if (!w->used)
			continue;
		index_worker_blocks(ev->idx, i, &gpu, &cpu);
		rc |= buf_printf(out, "%s{\"id\":%u,\"name\":", first ? "" : ",", i);
		rc |= buf_json_str(out, w->name, strlen(w->name));
		rc |= buf_puts(out, ",\"pub\":");
		rc |= buf_json_str(out, w->pub, strlen(w->pub));
		rc |= buf_puts(out, ",\"replay\":");
		rc |= w->replay ? buf_json_str(out, w->replay, strlen(w->replay))
				: buf_puts(out, "null");
		rc |= buf_printf(
		    out,
		    ",\"state\":\"%s\",\"next_seq\":%llu,\"pending\":%zu,\"blocks_gpu\":%llu,"
		    "\"blocks_cpu\":%llu,\"stale\":%s,\"batches\":%llu,\"events\":%llu,"
		    "\"gaps\":%llu,\"replays_ok\":%llu,\"replays_failed\":%llu,\"restarts\":%llu,"
		    "\"drops\":%llu,\"bad_frames\":%llu,\"bad_batches\":%llu,\"bad_events\":%llu,"
		    "\"unknown_events\":%llu}",
		    w->replaying && w->initial ? "syncing"
		    : w->replaying	       ? "replaying"
		    : w->have_seq	       ? "live"
					       : "waiting",
		    (unsigned long long)w->next_seq, w->pend_n, (unsigned long long)gpu,
		    (unsigned long long)cpu, index_worker_stale(ev->idx, i) ? "true" : "false",
		    (unsigned long long)w->st.batches, (unsigned long long)w->st.events,
		    (unsigned long long)w->st.gaps, (unsigned long long)w->st.replays_ok,
		    (unsigned long long)w->st.replays_failed, (unsigned long long)w->st.restarts,
		    (unsigned long long)w->st.drops, (unsigned long long)w->st.bad_frames,
		    (unsigned long long)w->st.bad_batches, (unsigned long long)w->st.bad_events,
		    (unsigned long long)w->st.unknown_events);
		first = 0;
	}
	rc |= buf_puts(out, "],\"index\":");
	names = name_table(ev);
	if (!names)
		return -ENOMEM;
	rc |= index_debug_json(ev->idx, names, ev->nw, out);
	free(names);
	rc |= buf_puts(out, "}");
	return rc ? -ENOMEM : 0;
}
