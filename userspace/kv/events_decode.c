// SPDX-License-Identifier: Apache-2.0
// events_decode: KV-event batch payloads (msgpack) into events (see events_decode.h): the
// prescan, msgpack-c's reference decoder, the cursor decoder (the hot path), and applying a
// decoded event to the index.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <msgpack.h>

#include "kv/blockhash.h"
#include "kv/events_decode.h"
#include "kv/index.h"

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
	size_t max_payload; /* larger payloads are refused whole */
};

int events_decoder_new(struct events_decoder **out)
{
	struct events_decoder *d = calloc(1, sizeof(*d));

	*out = NULL;
	if (!d)
		return -ENOMEM;
	if (!msgpack_zone_init(&d->zone, 64 * 1024)) {
		free(d);
		return -ENOMEM;
	}
	msgpack_sbuffer_init(&d->sbuf);
	d->max_payload = EVENTS_DEFAULT_MAX_PAYLOAD;
	*out = d;
	return 0;
}

void events_decoder_set_max_payload(struct events_decoder *d, size_t max)
{
	d->max_payload = max ? max : SIZE_MAX; /* 0: no bound */
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
	if (!n || n > d->max_payload || mp_prescan(p, n))
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
	if (!n || n > d->max_payload || mp_prescan(p, n))
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

int events_extra_strings(const char *const *keys, const size_t *lens, size_t n, struct buf *out)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc |= msgpack_pack_array(&pk, n);
	for (size_t i = 0; i < n; i++) {
		msgpack_object o = {.type = MSGPACK_OBJECT_STR,
				    .via.str = {.size = (uint32_t)lens[i], .ptr = keys[i]}};

		/* as decode_extra: each key packed from its decoded object */
		rc |= msgpack_pack_object(&pk, o);
	}
	if (!rc)
		rc = buf_append(out, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc ? -ENOMEM : 0;
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
