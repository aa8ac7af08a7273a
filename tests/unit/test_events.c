// SPDX-License-Identifier: Apache-2.0
// events: the decoder on payloads built with msgpack-c's packer (both encodings, every hash
// encoding, optional and unknown fields, malformed input), and the runtime against real ZMQ
// sockets on 127.0.0.1 (a PUB and a ROUTER played by this test): in-order ingest, a gap
// recovered by replay, a gap with a replay that cannot fill it, a restart, bad frames, the
// publisher's connection lost and back (a new process, or the same one); the size
// bounds: frames above events_cfg.max_payload from the publisher and from the replay endpoint, and
// the live queue bounded in bytes per worker and over all workers during replays.
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <msgpack.h>
#include <xxhash.h>
#include <zmq.h>

#include "kv/blockhash.h"
#include "discovery/discovery.h"
#include "kv/events.h"
#include "kv/index.h"
#include "events_trace.h"
#include "tap.h"

#define EQ(a, b, what)                                                                             \
	do {                                                                                       \
		long long eq_a_ = (long long)(a), eq_b_ = (long long)(b);                          \
		CHECK_EQ(eq_a_, eq_b_, what);                                                      \
	} while (0)

#define BS 16

enum henc { H_UINT, H_SINT, H_BYTES16, H_BYTES32 };

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* Engine hash value v encoded as henc (bytes: v in the last 8 bytes, big-endian). */
static void pk_hash(msgpack_packer *pk, uint64_t v, enum henc e)
{
	unsigned char b[32] = {0};
	size_t n = e == H_BYTES16 ? 16 : 32;

	switch (e) {
	case H_UINT:
		msgpack_pack_uint64(pk, v);
		return;
	case H_SINT:
		msgpack_pack_int64(pk, (int64_t)v);
		return;
	default:
		memset(b, 0xa5, n - 8);
		for (int i = 0; i < 8; i++)
			b[n - 8 + i] = (unsigned char)(v >> (56 - 8 * i));
		msgpack_pack_bin(pk, n);
		msgpack_pack_bin_body(pk, b, n);
	}
}

struct stored_spec {
	const uint64_t *h;
	size_t n;
	int has_parent;
	uint64_t parent;
	const uint32_t *tok;
	const char *medium;
	const char *lora;
	int extra_fields; /* map form: add group_idx, kind, an unknown key */
};

static void pk_stored(msgpack_packer *pk, const struct stored_spec *s, int map, enum henc e)
{
	if (map) {
		msgpack_pack_map(pk, s->extra_fields ? 12 : 8);
		pk_str(pk, "type");
		pk_str(pk, "BlockStored");
	} else {
		msgpack_pack_array(pk, s->extra_fields ? 12 : 8);
		pk_str(pk, "BlockStored");
	}
	if (map)
		pk_str(pk, "block_hashes");
	msgpack_pack_array(pk, s->n);
	for (size_t i = 0; i < s->n; i++)
		pk_hash(pk, s->h[i], e);
	if (map)
		pk_str(pk, "parent_block_hash");
	if (s->has_parent)
		pk_hash(pk, s->parent, e);
	else
		msgpack_pack_nil(pk);
	if (map)
		pk_str(pk, "token_ids");
	msgpack_pack_array(pk, s->n * BS);
	for (size_t i = 0; i < s->n * BS; i++)
		msgpack_pack_uint32(pk, s->tok[i]);
	if (map)
		pk_str(pk, "block_size");
	msgpack_pack_int(pk, BS);
	if (map)
		pk_str(pk, "lora_id");
	msgpack_pack_nil(pk);
	if (map)
		pk_str(pk, "medium");
	if (s->medium)
		pk_str(pk, s->medium);
	else
		msgpack_pack_nil(pk);
	if (map)
		pk_str(pk, "lora_name");
	if (s->lora)
		pk_str(pk, s->lora);
	else
		msgpack_pack_nil(pk);
	if (s->extra_fields) {
		/* extra_keys (one null per block), group_idx, kv_cache_spec_kind, then something
		 * unknown: a trailing element (array form) or an unknown key (map form) */
		if (map)
			pk_str(pk, "extra_keys");
		msgpack_pack_array(pk, s->n);
		for (size_t i = 0; i < s->n; i++)
			msgpack_pack_nil(pk);
		if (map)
			pk_str(pk, "group_idx");
		msgpack_pack_int(pk, 0);
		if (map)
			pk_str(pk, "kv_cache_spec_kind");
		pk_str(pk, "full_attention");
		if (map)
			pk_str(pk, "future_field");
		msgpack_pack_array(pk, 2);
		msgpack_pack_int(pk, 1);
		msgpack_pack_int(pk, 2);
	}
}

static void pk_removed(msgpack_packer *pk, const uint64_t *h, size_t n, int map, enum henc e)
{
	if (map) {
		msgpack_pack_map(pk, 3);
		pk_str(pk, "type");
		pk_str(pk, "BlockRemoved");
		pk_str(pk, "block_hashes");
	} else {
		msgpack_pack_array(pk, 3);
		pk_str(pk, "BlockRemoved");
	}
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		pk_hash(pk, h[i], e);
	if (map)
		pk_str(pk, "medium");
	pk_str(pk, "GPU");
}

/* batch header: array [ts, events(n), rank] or map {ts, events} */
static void pk_batch(msgpack_packer *pk, int map, size_t nev)
{
	if (map) {
		msgpack_pack_map(pk, 2);
		pk_str(pk, "ts");
		msgpack_pack_double(pk, 1.5);
		pk_str(pk, "events");
	} else {
		msgpack_pack_array(pk, 3);
		msgpack_pack_double(pk, 1.5);
	}
	msgpack_pack_array(pk, nev);
}
/* array-form batches carry the rank after the events: callers append it. */
static void pk_batch_end(msgpack_packer *pk, int map)
{
	if (!map)
		msgpack_pack_int(pk, 0);
}

struct got {
	int n;
	enum events_type type[8];
	uint64_t h0[8], parent[8];
	int has_parent[8];
	size_t nh[8], nt[8];
	uint32_t t0[8];
	unsigned tier[8];
	uint64_t root[8];
};

static int collect(void *arg, const struct events_event *e)
{
	struct got *g = arg;

	if (g->n >= 8)
		return 0;
	g->type[g->n] = e->type;
	g->h0[g->n] = e->n_hashes ? e->hashes[0] : 0;
	g->nh[g->n] = e->n_hashes;
	g->has_parent[g->n] = e->has_parent;
	g->parent[g->n] = e->parent;
	g->nt[g->n] = e->n_tokens;
	g->t0[g->n] = e->n_tokens ? e->tokens[0] : 0;
	g->tier[g->n] = e->tier;
	g->root[g->n] = events_event_root(e, 1337);
	g->n++;
	return 0;
}

static uint32_t toks[BS * 64];

static void decoder_tests(void)
{
	struct events_decoder *d;
	static const char *const hn[] = {"uint", "sint", "bytes16", "bytes32"};
	uint64_t h[3] = {0xfedcba9876543210ULL, 7, 0x8000000000000001ULL};

	events_decoder_new(&d);
	for (int map = 0; map < 2; map++)
		for (int e = 0; e < 4; e++) {
			msgpack_sbuffer sb;
			msgpack_packer pk;
			struct got g = {0};
			struct events_decode_counts c = {0};
			struct stored_spec s = {.h = h,
						.n = 2,
						.has_parent = 1,
						.parent = h[2],
						.tok = toks,
						.medium = "CPU",
						.lora = "ad",
						.extra_fields = e & 1};
			double ts = 0;
			int rc;

			msgpack_sbuffer_init(&sb);
			msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
			pk_batch(&pk, map, 4);
			pk_stored(&pk, &s, map, (enum henc)e);
			pk_removed(&pk, h + 1, 2, map, (enum henc)e);
			/* AllBlocksCleared, then an event type from the future */
			if (map) {
				msgpack_pack_map(&pk, 1);
				pk_str(&pk, "type");
				pk_str(&pk, "AllBlocksCleared");
				msgpack_pack_map(&pk, 2);
				pk_str(&pk, "type");
				pk_str(&pk, "BlockMoved");
				pk_str(&pk, "x");
				msgpack_pack_int(&pk, 1);
			} else {
				msgpack_pack_array(&pk, 1);
				pk_str(&pk, "AllBlocksCleared");
				msgpack_pack_array(&pk, 2);
				pk_str(&pk, "BlockMoved");
				msgpack_pack_int(&pk, 1);
			}
			pk_batch_end(&pk, map);
			rc = events_decode(d, sb.data, sb.size, collect, &g, &c, &ts);
			CHECK(rc == 3 && c.unknown_events == 1 && c.bad_events == 0 && ts == 1.5,
			      "%s form, %s hashes: 3 events + 1 unknown (rc %d)",
			      map ? "map" : "array", hn[e], rc);
			CHECK(g.type[0] == EVENTS_BLOCK_STORED && g.nh[0] == 2 && g.h0[0] == h[0] &&
				  g.has_parent[0] && g.parent[0] == h[2] && g.nt[0] == 2 * BS &&
				  g.t0[0] == toks[0] && g.tier[0] == INDEX_TIER_CPU &&
				  g.root[0] == blockhash_root(1337, "ad", 2),
			      "%s/%s: BlockStored fields (hash %s as u64)", map ? "map" : "array",
			      hn[e], e == H_SINT ? "signed" : "value");
			CHECK(g.type[1] == EVENTS_BLOCK_REMOVED && g.nh[1] == 2 && g.h0[1] == 7 &&
				  g.tier[1] == INDEX_TIER_GPU,
			      "%s/%s: BlockRemoved", map ? "map" : "array", hn[e]);
			CHECK(g.type[2] == EVENTS_ALL_CLEARED, "%s/%s: AllBlocksCleared",
			      map ? "map" : "array", hn[e]);
			msgpack_sbuffer_destroy(&sb);
		}

	/* malformed: counted, never delivered, never crashing */
	{
		static const struct {
			const char *what;
			const char *bytes;
			size_t n;
		} bad[] = {
		    {"empty payload", "", 0},
		    {"not msgpack (0xc1)", "\xc1", 1},
		    {"truncated array", "\x93\xcb", 2},
		    {"array32 claiming 4G elements", "\xdd\xff\xff\xff\xff", 5},
		    {"map32 claiming 4G pairs", "\xdf\xff\xff\xff\xff", 5},
		    {"str32 longer than payload",
		     "\xdb\x00\x10\x00\x00"
		     "ab",
		     7},
		    {"batch is an int", "\x05", 1},
		    {"events not an array", "\x93\xcb\0\0\0\0\0\0\0\0\x05\x00", 12},
		    {"trailing bytes", "\x92\x00\x90\x00", 4},
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct events_decode_counts c = {0};
			int rc = events_decode(d, bad[i].bytes, bad[i].n, collect, &(struct got){0},
					       &c, NULL);
			CHECK(rc == -EBADMSG && c.bad_batches == 1, "bad batch refused: %s",
			      bad[i].what);
		}
	}
	/* bad events inside a good batch are skipped one by one */
	{
		msgpack_sbuffer sb;
		msgpack_packer pk;
		struct got g = {0};
		struct events_decode_counts c = {0};
		struct stored_spec s = {.h = h, .n = 1, .tok = toks};

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		pk_batch(&pk, 0, 6);
		msgpack_pack_int(&pk, 3);   /* event that is an int */
		msgpack_pack_array(&pk, 0); /* empty array */
		/* BlockStored with too few tokens */
		msgpack_pack_array(&pk, 5);
		pk_str(&pk, "BlockStored");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_uint64(&pk, 1);
		msgpack_pack_nil(&pk);
		msgpack_pack_array(&pk, 3);
		for (int i = 0; i < 3; i++)
			msgpack_pack_int(&pk, i);
		msgpack_pack_int(&pk, BS);
		/* BlockStored with a negative token id */
		msgpack_pack_array(&pk, 5);
		pk_str(&pk, "BlockStored");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_uint64(&pk, 1);
		msgpack_pack_nil(&pk);
		msgpack_pack_array(&pk, BS);
		for (int i = 0; i < BS; i++)
			msgpack_pack_int(&pk, -i);
		msgpack_pack_int(&pk, BS);
		/* hash as a float */
		msgpack_pack_array(&pk, 2);
		pk_str(&pk, "BlockRemoved");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_double(&pk, 1.0);
		/* and one good event, minimal trailing fields (array of 5: no medium, no lora) */
		msgpack_pack_array(&pk, 5);
		pk_str(&pk, "BlockStored");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_uint64(&pk, 42);
		msgpack_pack_nil(&pk);
		msgpack_pack_array(&pk, BS);
		for (int i = 0; i < BS; i++)
			msgpack_pack_uint32(&pk, toks[i]);
		msgpack_pack_int(&pk, BS);
		pk_batch_end(&pk, 0);
		int rc = events_decode(d, sb.data, sb.size, collect, &g, &c, NULL);
		CHECK(rc == 1 && c.bad_events == 5 && g.n == 1 && g.h0[0] == 42 &&
			  g.tier[0] == INDEX_TIER_GPU && g.root[0] == 0,
		      "5 bad events skipped, the good one delivered (rc %d, bad %llu)", rc,
		      (unsigned long long)c.bad_events);
		(void)s;
		msgpack_sbuffer_destroy(&sb);
	}
	CHECK(events_hash_u64("\x01\x02", 2) == 0x0102 &&
		  events_hash_u64("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10) ==
		      0xffffffffffffff01ULL,
	      "raw hash bytes: last 8 big-endian");
	events_decoder_free(d);
}

/* ---- the cursor decoder (events_decode) against msgpack-c's (events_decode_msgpackc) ---- */

/* Decodes p[0..n) both ways; true when return value, counters, timestamp and every delivered
 * event are the same. */
static bool same_both_ways(struct events_decoder *d, const void *p, size_t n)
{
	struct trace a = {0}, b = {0};
	struct events_decode_counts ca = {0}, cb = {0};
	double ta = -1, tb = -1;
	int ra = events_decode(d, p, n, trace_event, &a, &ca, &ta);
	int rb = events_decode_msgpackc(d, p, n, trace_event, &b, &cb, &tb);

	return ra == rb && a.n == b.n && a.digest == b.digest && !memcmp(&ca, &cb, sizeof(ca)) &&
	       (ra < 0 || !memcmp(&ta, &tb, sizeof(ta))); /* bitwise: NaN too */
}

/* Batch variant v (0..): both encodings, every hash encoding, token ids in every integer width
 * msgpack allows (signed ones included), LoRA, extra keys (nulls and real ones), odd fields. */
static void pk_variant(msgpack_sbuffer *sb, int v)
{
	msgpack_packer pk;
	int map = v & 1, e = (v >> 1) & 3, shape = v >> 3;
	uint64_t h[3] = {0xfedcba9876543210ULL, 7, 0x8000000000000001ULL};
	struct stored_spec s = {.h = h,
				.n = 2,
				.has_parent = shape & 1,
				.parent = h[2],
				.tok = toks,
				.medium = shape & 2 ? "cpu" : NULL,
				.lora = shape & 4 ? "ad" : NULL,
				.extra_fields = shape & 1};

	msgpack_sbuffer_clear(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	pk_batch(&pk, map, 5);
	pk_stored(&pk, &s, map, (enum henc)e);
	pk_removed(&pk, h + 1, 2, map, (enum henc)e);
	/* a BlockStored with hand-picked encodings: tokens as fixint, uint8..64, int8..64 >= 0;
	 * group_idx, kind, lora_id, and extra keys that are not all null */
	if (map) {
		msgpack_pack_map(&pk, 11);
		pk_str(&pk, "type");
		pk_str(&pk, "BlockStored");
		pk_str(&pk, "block_hashes");
	} else {
		msgpack_pack_array(&pk, 13);
		pk_str(&pk, "BlockStored");
	}
	msgpack_pack_array(&pk, 1);
	pk_hash(&pk, 99, (enum henc)e);
	if (map)
		pk_str(&pk, "parent_block_hash");
	msgpack_pack_nil(&pk);
	if (map)
		pk_str(&pk, "token_ids");
	msgpack_pack_array(&pk, BS);
	for (int i = 0; i < BS; i++) {
		uint32_t t = toks[i] % (i < 2 ? 100 : i < 6 ? 250 : i < 10 ? 60000 : 151643);
		switch (i % 8) {
		case 0:
			msgpack_pack_fix_uint64(&pk, t);
			break;
		case 1:
			msgpack_pack_fix_int8(&pk, (int8_t)(t & 0x7f));
			break;
		case 2:
			msgpack_pack_fix_int16(&pk, (int16_t)(t & 0x7fff));
			break;
		case 3:
			msgpack_pack_fix_int32(&pk, (int32_t)t);
			break;
		case 4:
			msgpack_pack_fix_int64(&pk, t);
			break;
		case 5:
			msgpack_pack_fix_uint8(&pk, (uint8_t)t);
			break;
		case 6:
			msgpack_pack_fix_uint16(&pk, (uint16_t)t);
			break;
		default:
			msgpack_pack_uint32(&pk, t);
		}
	}
	if (map)
		pk_str(&pk, "block_size");
	msgpack_pack_fix_int8(&pk, BS);
	if (map)
		pk_str(&pk, "lora_id");
	if (shape & 2)
		msgpack_pack_int(&pk, -3);
	else
		msgpack_pack_uint8(&pk, 5);
	if (map)
		pk_str(&pk, "medium");
	pk_str(&pk, "GPU");
	if (map)
		pk_str(&pk, "lora_name");
	msgpack_pack_nil(&pk);
	if (map)
		pk_str(&pk, "extra_keys");
	msgpack_pack_array(&pk, 1);
	if (shape & 4) {
		msgpack_pack_array(&pk, 2);
		pk_str(&pk, "salt");
		msgpack_pack_int(&pk, 12);
	} else {
		msgpack_pack_nil(&pk);
	}
	if (map)
		pk_str(&pk, "group_idx");
	msgpack_pack_int(&pk, shape & 1);
	if (map)
		pk_str(&pk, "kv_cache_spec_kind");
	pk_str(&pk, shape & 1 ? "sliding_window" : "full_attention");
	if (!map) {
		msgpack_pack_int(&pk, 4096); /* sliding window */
		pk_str(&pk, "trailing");     /* unknown trailing element */
	}
	/* AllBlocksCleared and an unknown event */
	msgpack_pack_array(&pk, 1);
	pk_str(&pk, "AllBlocksCleared");
	msgpack_pack_array(&pk, 2);
	pk_str(&pk, "BlockMoved");
	msgpack_pack_int(&pk, 1);
	pk_batch_end(&pk, map);
}

static void differential_tests(void)
{
	struct events_decoder *d;
	events_decoder_new(&d);
	msgpack_sbuffer sb;
	static const uint8_t subst[] = {0x00, 0x7f, 0x80, 0x90, 0x9f, 0xa0, 0xc0, 0xc1,
					0xc4, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0,
					0xd3, 0xd9, 0xdc, 0xdd, 0xde, 0xe0, 0xff};
	size_t ok_full = 0, variants = 64, cut_bad = 0, cuts = 0, mut_bad = 0, muts = 0;
	size_t first_bad_v = 0, first_bad_at = 0;
	int delivered_fast = 0;

	msgpack_sbuffer_init(&sb);
	for (size_t v = 0; v < variants; v++) {
		struct trace t = {0};
		struct events_decode_counts c = {0};
		unsigned char *m;

		pk_variant(&sb, (int)v);
		ok_full += same_both_ways(d, sb.data, sb.size);
		if (events_decode(d, sb.data, sb.size, trace_event, &t, &c, NULL) == 4 &&
		    c.unknown_events == 1)
			delivered_fast++;
		/* every truncation */
		for (size_t n = 0; n < sb.size; n++, cuts++)
			if (!same_both_ways(d, sb.data, n) && !cut_bad++) {
				first_bad_v = v;
				first_bad_at = n;
			}
		/* every byte replaced by each lead byte of interest, and bit-flipped */
		m = malloc(sb.size);
		for (size_t i = 0; i < sb.size; i++)
			for (size_t k = 0; k <= sizeof(subst); k++, muts++) {
				memcpy(m, sb.data, sb.size);
				m[i] = k < sizeof(subst) ? subst[k] : m[i] ^ 0x01;
				if (!same_both_ways(d, m, sb.size) && !mut_bad++) {
					first_bad_v = v;
					first_bad_at = i;
				}
			}
		free(m);
	}
	CHECK(ok_full == variants && delivered_fast == (int)variants,
	      "%zu batch variants (array/map x 4 hash encodings x fields): cursor == msgpack-c, "
	      "4 events + 1 unknown each (%zu same, %d complete)",
	      variants, ok_full, delivered_fast);
	CHECK(cut_bad == 0,
	      "every truncation of every variant (%zu): same result both ways "
	      "(first difference if any: variant %zu, cut at %zu)",
	      cuts, first_bad_v, first_bad_at);
	CHECK(mut_bad == 0,
	      "every byte of every variant replaced (%zu): same result both ways "
	      "(first difference if any: variant %zu, byte %zu)",
	      muts, first_bad_v, first_bad_at);
	/* nesting: msgpack-c refuses a container opened inside 32 non-empty ones; so must the
	 * cursor decoder (it relies on the prescan for it) */
	for (int depth = 30; depth <= 34; depth++) {
		unsigned char p[64];
		size_t n = 0;
		p[n++] = 0x92; /* [ts, events] */
		p[n++] = 0x00;
		p[n++] = 0x91; /* events: [event] */
		for (int i = 0; i < depth - 2; i++)
			p[n++] = 0x91;
		p[n++] = 0x90;
		CHECK(same_both_ways(d, p, n), "nesting %d deep: same result both ways", depth + 1);
	}
	msgpack_sbuffer_destroy(&sb);
	events_decoder_free(d);
}

/* ---- runtime against real sockets ---- */

struct peer {
	void *ctx, *pub, *router;
	char pub_ep[64], rep_ep[64];
	/* what was published, for the replay */
	unsigned char *buf[64];
	size_t len[64];
};

/* A publisher of type pub_type (ZMQ_PUB, or ZMQ_XPUB passing on every subscription) and a
 * replay ROUTER, both bound on 127.0.0.1. */
/* Binds s to a free loopback port below the kernel's ephemeral range (32768-60999 by default).
 * Tests close these endpoints and bind them again while events' sockets keep reconnecting to
 * them; were the port an ephemeral one, a reconnect could pick it as its own source port and
 * connect to itself (TCP simultaneous open), holding the port so the rebind fails. */
static void bind_low(void *s)
{
	static unsigned next;
	char ep[64];

	if (!next)
		next = 20000 + (unsigned)(getpid() % 997) * 10;
	for (int i = 0; i < 1000; i++) {
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%u", next);
		next = next + 1 < 32000 ? next + 1 : 20000;
		if (zmq_bind(s, ep) == 0)
			return;
	}
	zmq_bind(s, "tcp://127.0.0.1:*");
}

static void peer_open_as(struct peer *p, int pub_type)
{
	size_t l;
	int zero = 0, one = 1;

	p->ctx = zmq_ctx_new();
	p->pub = zmq_socket(p->ctx, pub_type);
	p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
	if (pub_type == ZMQ_XPUB)
		zmq_setsockopt(p->pub, ZMQ_XPUB_VERBOSE, &one, sizeof(one));
	zmq_setsockopt(p->pub, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(p->router, ZMQ_LINGER, &zero, sizeof(zero));
	bind_low(p->pub);
	bind_low(p->router);
	l = sizeof(p->pub_ep);
	zmq_getsockopt(p->pub, ZMQ_LAST_ENDPOINT, p->pub_ep, &l);
	l = sizeof(p->rep_ep);
	zmq_getsockopt(p->router, ZMQ_LAST_ENDPOINT, p->rep_ep, &l);
}

static void peer_open(struct peer *p)
{
	peer_open_as(p, ZMQ_PUB);
}

static void peer_close(struct peer *p)
{
	zmq_close(p->pub);
	zmq_close(p->router);
	zmq_ctx_term(p->ctx);
	for (int i = 0; i < 64; i++)
		free(p->buf[i]);
}

static void be(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* Batch seq: BlockStored of block seq (chained to seq-1) of toks, engine hash 100 + seq. */
static void make_batch(struct peer *p, uint64_t seq)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	uint64_t h = 100 + seq;
	struct stored_spec s = {.h = &h,
				.n = 1,
				.has_parent = seq > 0,
				.parent = 99 + seq,
				.tok = toks + seq * BS,
				.medium = "GPU"};

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pk_batch(&pk, (int)(seq & 1), 1);
	pk_stored(&pk, &s, (int)(seq & 1), H_UINT);
	pk_batch_end(&pk, (int)(seq & 1));
	free(p->buf[seq]);
	p->buf[seq] = (unsigned char *)sb.data; /* take the buffer */
	p->len[seq] = sb.size;
}

static void publish(struct peer *p, uint64_t seq)
{
	unsigned char b[8];

	be(b, seq);
	zmq_send(p->pub, "kv", 2, ZMQ_SNDMORE);
	zmq_send(p->pub, b, 8, ZMQ_SNDMORE);
	zmq_send(p->pub, p->buf[seq], p->len[seq], 0);
}

/* Publishes batch `from`'s payload under seq: another process's batch at that seq. */
static void publish_as(struct peer *p, uint64_t seq, uint64_t from)
{
	unsigned char b[8];

	be(b, seq);
	zmq_send(p->pub, "kv", 2, ZMQ_SNDMORE);
	zmq_send(p->pub, b, 8, ZMQ_SNDMORE);
	zmq_send(p->pub, p->buf[from], p->len[from], 0);
}

/* Answers one replay request with batches [start, upto), then the terminator. */
static int serve_replay(struct peer *p, uint64_t upto, int timeout_ms)
{
	zmq_pollitem_t it = {.socket = p->router, .events = ZMQ_POLLIN};
	unsigned char id[256], req[8], b[8];
	int idn, n;

	if (zmq_poll(&it, 1, timeout_ms) <= 0)
		return -1;
	idn = zmq_recv(p->router, id, sizeof(id), 0);
	zmq_recv(p->router, req, 8, 0); /* empty delimiter */
	n = zmq_recv(p->router, req, 8, 0);
	if (idn <= 0 || n != 8)
		return -1;
	uint64_t start = 0;
	for (int i = 0; i < 8; i++)
		start = start << 8 | req[i];
	for (uint64_t s = start; s < upto; s++) {
		be(b, s);
		zmq_send(p->router, id, (size_t)idn, ZMQ_SNDMORE);
		zmq_send(p->router, "", 0, ZMQ_SNDMORE);
		zmq_send(p->router, b, 8, ZMQ_SNDMORE);
		zmq_send(p->router, p->buf[s], p->len[s], 0);
	}
	be(b, UINT64_MAX);
	zmq_send(p->router, id, (size_t)idn, ZMQ_SNDMORE);
	zmq_send(p->router, "", 0, ZMQ_SNDMORE);
	zmq_send(p->router, b, 8, ZMQ_SNDMORE);
	zmq_send(p->router, "", 0, 0);
	return (int)start;
}

/* Runs the events loop for ms milliseconds. */
static void pump(struct events *ev, int ms)
{
	struct timespec t0, t;
	struct pollfd pfd = {.fd = events_fd(ev), .events = POLLIN};

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (el >= ms)
			break;
		poll(&pfd, 1, (int)(ms - el) < 20 ? (int)(ms - el) : 20);
		while (events_poll(ev, 0) == 1)
			;
	}
}

static uint32_t depth_of(struct index *idx, uint32_t w, size_t upto)
{
	uint64_t chain[64];
	uint32_t d[4];

	blockhash_chain(index_seed(idx), BS, 0, toks, upto * BS, chain, 64);
	index_query(idx, chain, upto, d, NULL, 4);
	return d[w];
}

static void runtime_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 1000;
	ecfg.no_initial_replay = true;
	struct events *ev;
	struct events_worker_stats st;
	struct peer p = {0};
	int start;

	events_new(&ecfg, &ev);
	peer_open(&p);
	for (uint64_t s = 0; s < 40; s++)
		make_batch(&p, s);
	EQ(events_worker_add(ev, 1, "w1", p.pub_ep, p.rep_ep, "kv"), 0, "worker added");
	EQ(events_worker_add(ev, 1, "w1b", p.pub_ep, NULL, NULL), -EEXIST, "id in use refused");
	EQ(events_worker_add(ev, 9, "w9", p.pub_ep, NULL, NULL), -ERANGE, "id out of range");
	EQ(events_worker_add(ev, 2, "bad", "nonsense://x", NULL, NULL), -EINVAL,
	   "bad endpoint refused");
	pump(ev, 300); /* let the SUB connect (slow joiner) */
	for (uint64_t s = 0; s < 5; s++)
		publish(&p, s);
	pump(ev, 200);
	EQ(depth_of(idx, 1, 40), 5, "5 in-order batches: depth 5");

	/* gap: 5 and 6 lost, 7 published; the replay serves 5..7 */
	publish(&p, 7);
	pump(ev, 250);
	events_worker_stats(ev, 1, &st);
	CHECK(st.gaps == 1 && st.replaying, "gap seen, replay running");
	start = serve_replay(&p, 8, 1000);
	EQ(start, 5, "replay asked from seq 5");
	publish(&p, 8);
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replays_ok == 1 && !st.replaying && st.next_seq == 9,
	      "replay ok, next seq 9 (got %llu)", (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 1, 40), 9, "after replay: depth 9 (5, 6 from replay; 7, 8 queued)");

	/* gap the replay cannot fill (its buffer starts later): blocks dropped, not trusted */
	publish(&p, 12);
	pump(ev, 250);
	zmq_pollitem_t it = {.socket = p.router, .events = ZMQ_POLLIN};
	zmq_poll(&it, 1, 1000);
	{
		unsigned char id[256], b[8];
		int idn = zmq_recv(p.router, id, sizeof(id), 0);
		zmq_recv(p.router, b, 8, 0);
		zmq_recv(p.router, b, 8, 0);
		be(b, 11); /* buffer starts at 11: 9, 10 are gone */
		zmq_send(p.router, id, (size_t)idn, ZMQ_SNDMORE);
		zmq_send(p.router, "", 0, ZMQ_SNDMORE);
		zmq_send(p.router, b, 8, ZMQ_SNDMORE);
		zmq_send(p.router, p.buf[11], p.len[11], 0);
	}
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replays_failed == 1 && st.drops == 1, "unfillable gap: replay failed, dropped");
	EQ(depth_of(idx, 1, 40), 0, "worker's blocks dropped");
	publish(&p, 13);
	pump(ev, 100);
	events_worker_stats(ev, 1, &st);
	EQ(st.next_seq, 14, "ingest goes on from the live stream");

	/* no answer at all: timeout */
	publish(&p, 20);
	pump(ev, 1300);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replays_failed == 2 && !st.replaying, "replay timeout counted as failed");
	(void)serve_replay(&p, 0, 10); /* discard the request */

	/* restart: seq back to 0 clears the worker, then ingest from 0 */
	publish(&p, 21);
	pump(ev, 100);
	for (uint64_t s = 0; s < 3; s++)
		publish(&p, s);
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.restarts == 1 && st.next_seq == 3, "restart seen, next seq 3");
	EQ(depth_of(idx, 1, 40), 3, "after restart: only the new blocks (depth 3)");

	/* bad frames and payloads: counted, skipped */
	zmq_send(p.pub, "kv", 2, ZMQ_SNDMORE);
	zmq_send(p.pub, "\0\0\0", 3, ZMQ_SNDMORE);
	zmq_send(p.pub, "x", 1, 0);
	{
		unsigned char b[8];
		be(b, 3);
		zmq_send(p.pub, "kv", 2, ZMQ_SNDMORE);
		zmq_send(p.pub, b, 8, ZMQ_SNDMORE);
		zmq_send(p.pub, "\xc1\xc1", 2, 0);
	}
	zmq_send(p.pub, "kv-only-topic", 13, 0);
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.bad_frames == 2 && st.bad_batches == 1,
	      "bad frames (%llu) and batch (%llu) counted", (unsigned long long)st.bad_frames,
	      (unsigned long long)st.bad_batches);
	publish(&p, 4); /* seq 3 was the bad payload: 4 is next in sequence */
	pump(ev, 100);
	events_worker_stats(ev, 1, &st);
	CHECK(st.gaps == 3 && st.next_seq == 5, "stream goes on after bad input");

	{
		struct buf m = {0};
		CHECK(!events_metrics(ev, &m) &&
			  strstr(m.data, "kvsplice_kv_seq_gaps_total{worker=\"w1\"} 3") &&
			  strstr(m.data, "kvsplice_index_blocks{worker=\"w1\",tier=\"gpu\"}"),
		      "metrics text per worker");
		buf_reset(&m);
		CHECK(!events_debug_json(ev, &m) && strstr(m.data, "\"name\":\"w1\"") &&
			  strstr(m.data, "\"index\":{"),
		      "debug JSON");
		buf_free(&m);
	}
	EQ(events_worker_find(ev, "w1"), 1, "find by name");
	EQ(events_worker_remove(ev, 1), 0, "worker removed");
	uint64_t g = 1, c = 1;
	index_worker_blocks(idx, 1, &g, &c);
	CHECK(g == 0 && c == 0, "removed worker's blocks gone");
	EQ(events_worker_remove(ev, 1), -ENOENT, "remove twice: ENOENT");

	/* sync with discovery's view: add, keep, replace on a changed endpoint, remove */
	{
		struct events_spec sp[2] = {{"svc/a", p.pub_ep, p.rep_ep},
					    {"svc/b", p.pub_ep, NULL}};
		EQ(events_sync(ev, sp, 2, "kv"), 0, "sync adds 2 workers");
		int ida = events_worker_find(ev, "svc/a"), idb = events_worker_find(ev, "svc/b");
		CHECK(ida >= 0 && idb >= 0 && ida != idb, "both subscribed (ids %d, %d)", ida, idb);
		EQ(events_sync(ev, sp, 2, "kv"), 0, "same set again: nothing to do");
		CHECK(events_worker_find(ev, "svc/a") == ida, "unchanged worker keeps its id");
		sp[1].pub = "tcp://127.0.0.1:1";
		events_sync(ev, sp, 2, "kv");
		CHECK(events_worker_find(ev, "svc/b") >= 0, "changed endpoint: re-subscribed");
		EQ(events_sync(ev, sp, 1, "kv"), 0, "sync to 1 worker");
		CHECK(events_worker_find(ev, "svc/b") == -ENOENT &&
			  events_worker_find(ev, "svc/a") == ida,
		      "the unlisted worker is removed, the other kept");
		struct events_spec bad = {"svc/bad", "nonsense://", NULL};
		EQ(events_sync(ev, &bad, 1, "kv"), 1,
		   "an endpoint ZMQ refuses is counted as failed");
		CHECK(events_worker_find(ev, "svc/a") == -ENOENT, "and the old set is gone");
	}
	events_free(ev);
	index_free(idx);
	peer_close(&p);
}

/* A second gap met while the batches queued during a replay are applied: the batch that shows it
 * waits for the second replay ahead of the later queued batches, so both gaps are filled. */
static void second_gap_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 1000;
	ecfg.no_initial_replay = true;
	struct events *ev;
	struct events_worker_stats st;
	zmq_pollitem_t it;
	struct peer p = {0};

	events_new(&ecfg, &ev);
	peer_open(&p);
	for (uint64_t s = 0; s < 40; s++)
		make_batch(&p, s);
	EQ(events_worker_add(ev, 1, "w1", p.pub_ep, p.rep_ep, "kv"), 0, "2nd gap: worker added");
	pump(ev, 300);
	for (uint64_t s = 0; s < 3; s++)
		publish(&p, s);
	pump(ev, 150);
	publish(&p, 4); /* 3 lost: a replay from 3 */
	pump(ev, 150);
	publish(&p, 5);
	publish(&p, 7); /* 6 lost too, while the first replay runs */
	publish(&p, 8);
	pump(ev, 150);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replaying && st.pending == 4,
	      "2nd gap: 4, 5, 7, 8 queued during the replay (%llu)",
	      (unsigned long long)st.pending);
	EQ(serve_replay(&p, 4, 1000), 3, "2nd gap: first replay from 3, answers 3");
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replaying && st.gaps == 2,
	      "2nd gap: 7 after 5 seen while draining, a replay again");
	EQ(serve_replay(&p, 7, 1000), 6, "2nd gap: second replay from 6, answers 6");
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replays_ok == 2 && st.replays_failed == 0 && !st.replaying && st.next_seq == 9 &&
		  st.pending == 0,
	      "2nd gap: both replays ok, 7 and 8 applied in order (next %llu, failed %llu)",
	      (unsigned long long)st.next_seq, (unsigned long long)st.replays_failed);
	EQ(depth_of(idx, 1, 40), 9, "2nd gap: depth 9, nothing dropped");
	it = (zmq_pollitem_t){.socket = p.router, .events = ZMQ_POLLIN};
	CHECK(zmq_poll(&it, 1, 200) == 0, "2nd gap: no third replay asked");
	events_free(ev);
	index_free(idx);
	peer_close(&p);
}

static bool debug_has(const struct events *ev, const char *what)
{
	struct buf m = {0};
	bool has = !events_debug_json(ev, &m) && m.data && strstr(m.data, what);

	buf_free(&m);
	return has;
}

/* Joining: the sync from seq 0 starts at once, before any live batch; live batches arriving
 * meanwhile are queued; an empty replay buffer means "take the stream". */
static void initial_replay_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 1000;
	struct events *ev;
	struct events_worker_stats st;
	struct peer p = {0};
	zmq_pollitem_t it;

	events_new(&ecfg, &ev);
	peer_open(&p);
	for (uint64_t s = 0; s < 12; s++)
		make_batch(&p, s);
	events_worker_add(ev, 0, "idle", p.pub_ep, p.rep_ep, "kv");
	events_worker_stats(ev, 0, &st);
	CHECK(st.replaying, "joining: the initial sync starts at once");
	EQ(st.state, EVENTS_ST_SYNCING, "joining: state syncing, nothing fed yet");
	CHECK(debug_has(ev, "\"state\":\"syncing\""), "debug JSON: the worker is syncing");
	CHECK(debug_has(ev, "\"seq_state\":\"syncing\",\"pub_lost\":false"),
	      "debug JSON: seq_state syncing, publisher not lost");
	EQ(serve_replay(&p, 8, 1000), 0, "idle worker: replay asked from seq 0, nothing published");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.replays_ok == 1 && st.next_seq == 8 && !st.replaying && st.batches == 8,
	      "initial sync applied 0..7 (next seq %llu)", (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 0, 12), 8, "depth 8 with no live batch seen");
	EQ(st.state, EVENTS_ST_LIVE, "initial sync done: state live");
	CHECK(debug_has(ev, "\"state\":\"live\""), "debug JSON: then live");
	CHECK(debug_has(ev, "\"seq_state\":\"live\""), "debug JSON: seq_state live");
	/* the live copies of 6 and 7 reach the SUB after the replay delivered them */
	publish(&p, 6);
	publish(&p, 7);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	CHECK(st.restarts == 0 && st.drops == 0 && st.next_seq == 8 && st.batches == 8,
	      "late live copies of replayed batches: skipped, not a restart");
	publish(&p, 8);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	EQ(st.next_seq, 9, "the live stream continues where the sync ended");
	events_worker_remove(ev, 0);

	/* a live batch arriving during the sync is queued, then skipped (the replay had it) */
	events_worker_add(ev, 0, "late", p.pub_ep, p.rep_ep, "kv");
	pump(ev, 300);
	publish(&p, 5);
	pump(ev, 100);
	events_worker_stats(ev, 0, &st);
	CHECK(st.replaying && st.pending == 1, "batch 5 queued during the sync");
	EQ(serve_replay(&p, 8, 1000), 0, "late: replay asked from seq 0");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.replays_ok == 1 && st.next_seq == 8 && !st.replaying && st.pending == 0,
	      "initial replay applied 0..7, queued 5 skipped (next seq %llu)",
	      (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 0, 12), 8, "depth 8 after the initial sync");
	/* right after the sync, seq 7 with other bytes: a restarted worker, not a late copy */
	publish_as(&p, 7, 11);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	CHECK(st.restarts == 1 && st.replaying, "seq 7 with other bytes: restart, synced again");
	EQ(serve_replay(&p, 0, 1000), 0, "restart: replay asked from 0 (new buffer empty)");
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	CHECK(st.next_seq == 8 && !st.replaying, "the new process's batch 7 taken");
	EQ(depth_of(idx, 0, 12), 0, "the old process's blocks dropped");
	/* another subscriber joins when the worker's replay buffer is empty */
	events_worker_remove(ev, 0);
	events_worker_add(ev, 1, "late3", p.pub_ep, p.rep_ep, "kv");
	pump(ev, 300);
	publish(&p, 9);
	pump(ev, 250);
	EQ(serve_replay(&p, 0, 1000), 0, "late3: replay asked from 0, buffer empty");
	pump(ev, 100);
	publish(&p, 10);
	pump(ev, 100);
	it = (zmq_pollitem_t){.socket = p.router, .events = ZMQ_POLLIN};
	CHECK(zmq_poll(&it, 1, 200) == 0, "no further replay request (no loop)");
	events_worker_stats(ev, 1, &st);
	CHECK(st.next_seq == 11 && st.replays_ok == 1 && st.batches == 2,
	      "empty buffer: the live stream taken from seq 9 (next %llu, batches %llu)",
	      (unsigned long long)st.next_seq, (unsigned long long)st.batches);
	/* fallback: a restart whose first batches this subscriber missed (seq back to 2) */
	publish(&p, 2);
	pump(ev, 150);
	EQ(serve_replay(&p, 4, 1000), 0, "restart seen at seq 2: replay asked from 0");
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.restarts == 1 && st.next_seq == 4 && st.replays_ok == 2,
	      "restart: resynced from the new buffer (next %llu)", (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 1, 12), 4, "depth 4: the new process's blocks only");
	events_free(ev);
	index_free(idx);
	peer_close(&p);
}

/* An endpoint of a socket just closed: nothing listens there (for a while at least). */
static void dead_endpoint(char *ep, size_t len)
{
	void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);

	bind_low(s); /* an ephemeral port could be taken by a reconnect to itself */
	zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
	zmq_close(s);
	zmq_ctx_term(ctx);
}

/* The join sync against a replay endpoint that listens late or never; resync; a gap replay that
 * stops short of the queued batches. */
static void join_sync_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 1500;
	struct events *ev;
	struct events_worker_stats st;
	struct peer p = {0}, q = {0};
	char never[64];
	zmq_pollitem_t it;
	int rc = -1;

	events_new(&ecfg, &ev);
	peer_open(&p);
	peer_open(&q);
	for (uint64_t s = 0; s < 12; s++) {
		make_batch(&p, s);
		make_batch(&q, s);
	}
	/* the replay endpoint starts listening 400 ms after the join */
	EQ(zmq_unbind(p.router, p.rep_ep), 0, "replay endpoint closed before the join");
	events_worker_add(ev, 0, "slow", p.pub_ep, p.rep_ep, "kv");
	pump(ev, 400);
	for (int i = 0; i < 100 && rc; i++) { /* the old listener closes asynchronously */
		rc = zmq_bind(p.router, p.rep_ep);
		if (rc)
			pump(ev, 10);
	}
	EQ(rc, 0, "replay endpoint listening again");
	events_worker_stats(ev, 0, &st);
	CHECK(st.replaying, "still syncing while the endpoint does not listen");
	EQ(serve_replay(&p, 6, 1000), 0,
	   "the request queued at the join reaches the late listener");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.replays_ok == 1 && st.next_seq == 6 && !st.replaying,
	      "late listener: sync done (next %llu)", (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 0, 12), 6, "late listener: depth 6 with no live batch");

	/* a replay endpoint that never listens: the deadline passes, the live stream is taken */
	dead_endpoint(never, sizeof(never));
	events_worker_add(ev, 1, "never", p.pub_ep, never, "kv");
	pump(ev, 400);
	publish(&p, 6);
	pump(ev, 200);
	events_worker_stats(ev, 1, &st);
	CHECK(st.replaying && st.pending == 1, "never: batch 6 queued while the sync waits");
	pump(ev, 1100);
	events_worker_stats(ev, 1, &st);
	/* (its block is an orphan, parent unknown: applied, but not kept by the index) */
	CHECK(!st.replaying && st.replays_failed == 1 && st.drops == 0 && st.next_seq == 7 &&
		  st.batches == 1,
	      "never: after the deadline, nothing dropped, queued batch applied (next %llu)",
	      (unsigned long long)st.next_seq);
	events_worker_stats(ev, 0, &st);
	EQ(st.next_seq, 7, "slow: batch 6 applied live");
	events_worker_remove(ev, 1);

	/* resync: the worker restarted and publishes nothing; its new buffer holds 0..2 */
	EQ(events_worker_resync(ev, 3), -ENOENT, "resync of an unknown id: ENOENT");
	EQ(events_worker_resync(ev, 0), 0, "resync");
	events_worker_stats(ev, 0, &st);
	CHECK(st.replaying && !st.have_seq && st.pending == 0, "resync: syncing from scratch");
	EQ(st.state, EVENTS_ST_SYNCING, "resync: state syncing");
	EQ(depth_of(idx, 0, 12), 0, "resync: the old blocks dropped at once");
	EQ(serve_replay(&p, 3, 1000), 0, "resync: replay asked from seq 0");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.replays_ok == 2 && st.next_seq == 3 && !st.replaying,
	      "resync: the new buffer loaded (next %llu)", (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 0, 12), 3, "resync: depth 3");

	/* a gap replay whose answer stops before the queued batch: failed, not asked again */
	publish(&p, 5);
	pump(ev, 150);
	EQ(serve_replay(&p, 4, 1000), 3, "gap: replay asked from seq 3, answered up to 3 only");
	pump(ev, 200);
	it = (zmq_pollitem_t){.socket = p.router, .events = ZMQ_POLLIN};
	CHECK(zmq_poll(&it, 1, 200) == 0, "short answer: no further replay request (no loop)");
	events_worker_stats(ev, 0, &st);
	CHECK(st.replays_failed == 1 && st.next_seq == 6 && !st.replaying,
	      "short answer: replay failed, live stream taken (next %llu)",
	      (unsigned long long)st.next_seq);

	/* resync without a replay endpoint: the next live batch is a first batch */
	events_worker_add(ev, 2, "norep", q.pub_ep, NULL, "kv");
	pump(ev, 300);
	for (uint64_t s = 0; s < 3; s++)
		publish(&q, s);
	pump(ev, 150);
	EQ(depth_of(idx, 2, 12), 3, "norep: depth 3");
	EQ(events_worker_resync(ev, 2), 0, "norep: resync");
	events_worker_stats(ev, 2, &st);
	CHECK(!st.replaying && !st.have_seq, "norep: no sync to run, waiting for a batch");
	EQ(st.state, EVENTS_ST_WAITING, "norep: state waiting");
	EQ(depth_of(idx, 2, 12), 0, "norep: blocks dropped");
	publish(&q, 7);
	pump(ev, 150);
	events_worker_stats(ev, 2, &st);
	CHECK(st.next_seq == 8 && st.restarts == 0 && st.batches == 4,
	      "norep: batch 7 taken as a first batch (next %llu)", (unsigned long long)st.next_seq);
	events_free(ev);
	index_free(idx);
	peer_close(&p);
	peer_close(&q);
}

static int ep_port(const char *ep)
{
	const char *c = strrchr(ep, ':');

	return c ? atoi(c + 1) : 0;
}

/* A Services snapshot → subscriptions: names, endpoints, and a removed endpoint. */
static void sync_services_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 8;
	struct index *idx;
	index_new(&icfg, &idx);
	/* no replay request: these sockets are the test's own, but nothing answers them */
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.no_initial_replay = true;
	struct events *ev;
	struct peer p = {0}, q = {0};
	struct services *s = NULL;
	char json[2048], err[256], lsvc[DISCOVERY_NAME_MAX], lep[DISCOVERY_NAME_MAX],
	    lname[2 * DISCOVERY_NAME_MAX + 8], want[256], w2[160];
	int id1 = -1, id2 = -1, idl = -1, n;

	events_new(&ecfg, &ev);
	peer_open(&p);
	peer_open(&q);
	memset(lsvc, 's', sizeof(lsvc) - 1);
	lsvc[sizeof(lsvc) - 1] = 0;
	memset(lep, 'e', sizeof(lep) - 1);
	lep[sizeof(lep) - 1] = 0;
	snprintf(lname, sizeof(lname), "%s/%s", lsvc, lep);
	for (int round = 0; round < 2; round++) {
		w2[0] = 0;
		if (!round) /* round 1 leaves w2 out */
			snprintf(w2, sizeof(w2),
				 ",{\"name\":\"w2\",\"ip\":\"127.0.0.1\",\"port\":8002,"
				 "\"events_port\":%d}",
				 ep_port(q.pub_ep));
		n = snprintf(
		    json, sizeof(json),
		    "{\"services\":[{\"name\":\"qwen\",\"cluster_ip\":\"10.96.0.50\",\"port\":8000,"
		    "\"endpoints\":[{\"name\":\"w1\",\"ip\":\"127.0.0.1\",\"port\":8001,"
		    "\"events_port\":%d,\"replay_port\":%d}%s,"
		    "{\"name\":\"w3\",\"ip\":\"127.0.0.1\",\"port\":8003}]},"
		    "{\"name\":\"%s\",\"cluster_ip\":\"10.96.0.51\",\"port\":8000,"
		    "\"endpoints\":[{\"name\":\"%s\",\"ip\":\"127.0.0.1\",\"port\":8004,"
		    "\"events_port\":%d}]}]}",
		    ep_port(p.pub_ep), ep_port(p.rep_ep), w2, lsvc, lep, ep_port(q.pub_ep));
		CHECK(n > 0 && (size_t)n < sizeof(json), "services JSON %d built", round);
		EQ(discovery_parse(json, strlen(json), &s, err, sizeof(err)), 0, "snapshot parsed");
		if (!s) {
			printf("# %s\n", err);
			break;
		}
		if (!round) {
			EQ(events_sync_services(ev, s, "kv"), 0, "sync: 3 workers added");
			id1 = events_worker_find(ev, "qwen/w1");
			id2 = events_worker_find(ev, "qwen/w2");
			idl = events_worker_find(ev, lname);
			CHECK(id1 >= 0 && id2 >= 0 && idl >= 0,
			      "named service/endpoint (ids %d, %d, %d)", id1, id2, idl);
			CHECK(strlen(lname) == 2 * (DISCOVERY_NAME_MAX - 1) + 1,
			      "longest names kept whole (%zu bytes)", strlen(lname));
			EQ(events_worker_find(ev, "qwen/w3"), -ENOENT,
			   "no events_port: not subscribed");
			snprintf(want, sizeof(want),
				 "\"name\":\"qwen/w1\",\"pub\":\"%s\",\"replay\":\"%s\"", p.pub_ep,
				 p.rep_ep);
			CHECK(debug_has(ev, want), "w1: pub and replay endpoints");
			snprintf(want, sizeof(want),
				 "\"name\":\"qwen/w2\",\"pub\":\"%s\",\"replay\":null", q.pub_ep);
			CHECK(debug_has(ev, want), "w2: no replay_port, replay null");
			EQ(events_sync_services(ev, s, "kv"), 0, "same snapshot again");
			CHECK(events_worker_find(ev, "qwen/w1") == id1 &&
				  events_worker_find(ev, "qwen/w2") == id2 &&
				  events_worker_find(ev, lname) == idl,
			      "same snapshot: same ids");
		} else {
			EQ(events_sync_services(ev, s, "kv"), 0, "sync without w2");
			CHECK(events_worker_find(ev, "qwen/w2") == -ENOENT &&
				  events_worker_find(ev, "qwen/w1") == id1 &&
				  events_worker_find(ev, lname) == idl,
			      "w2 removed, the others kept with their ids");
			EQ(events_worker_resync(ev, (uint32_t)id2), -ENOENT, "w2's id is free");
		}
		services_put(s);
		s = NULL;
	}
	events_free(ev);
	index_free(idx);
	peer_close(&p);
	peer_close(&q);
}

/* Publishes under seq a valid batch of exactly len bytes (>= 17) holding no event:
 * [ts, [], rank, bin(len - 17)] (a trailing element, ignored by the decoder). */
static void publish_pad(struct peer *p, uint64_t seq, size_t len)
{
	unsigned char b[8], *m = calloc(1, len);
	uint32_t body = (uint32_t)(len - 17);

	m[0] = 0x94;
	m[1] = 0xcb; /* f64 ts, 0.0 */
	m[10] = 0x90;
	m[11] = 0x00;
	m[12] = 0xc6;
	be(b, body);
	memcpy(m + 13, b + 4, 4);
	be(b, seq);
	zmq_send(p->pub, "kv", 2, ZMQ_SNDMORE);
	zmq_send(p->pub, b, 8, ZMQ_SNDMORE);
	zmq_send(p->pub, m, len, 0);
	free(m);
}

/* Pumps ev until the XPUB of p passes on a subscription (the SUB is connected and subscribed). */
static bool wait_subscribed(struct events *ev, struct peer *p, int ms)
{
	for (int t = 0; t < ms; t += 20) {
		zmq_pollitem_t it = {.socket = p->pub, .events = ZMQ_POLLIN};
		unsigned char b[64];
		if (zmq_poll(&it, 1, 0) > 0) {
			int n = zmq_recv(p->pub, b, sizeof(b), 0);
			if (n > 0 && b[0] == 1)
				return true;
			continue;
		}
		pump(ev, 20);
	}
	return false;
}

static bool metrics_has(const struct events *ev, const char *what)
{
	struct buf m = {0};
	bool has = !events_metrics(ev, &m) && m.data && strstr(m.data, what);

	buf_free(&m);
	return has;
}

/* Frames above max_payload (here 1 MiB, set as kvsplice --kv-event-max-bytes sets it): libzmq
 * (ZMQ_MAXMSGSIZE) closes the connection without reading them and does not reconnect; events
 * must notice, count it, reconnect, and go on. */
static void oversized_tests(void)
{
	enum { MAXP = 1 << 20 };
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 5000;
	ecfg.max_payload = MAXP;
	ecfg.no_initial_replay = true;
	struct events *ev;
	struct events_worker_stats st;
	struct peer p = {0};
	struct timespec t0, t1;
	long ms;

	events_new(&ecfg, &ev);
	peer_open_as(&p, ZMQ_XPUB);
	for (uint64_t s = 0; s < 6; s++)
		make_batch(&p, s);
	free(p.buf[3]);
	p.buf[3] = calloc(1, (size_t)MAXP + 1); /* one byte above the bound */
	p.len[3] = (size_t)MAXP + 1;
	EQ(events_worker_add(ev, 0, "big", p.pub_ep, p.rep_ep, "kv"), 0, "worker added");
	CHECK(wait_subscribed(ev, &p, 3000), "subscribed");
	for (uint64_t s = 0; s < 3; s++)
		publish(&p, s);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	EQ(st.next_seq, 3, "batches 0..2 applied");

	/* the publisher sends a frame one byte above the bound */
	publish(&p, 3);
	for (ms = 0; ms < 3000; ms += 20) {
		pump(ev, 20);
		events_worker_stats(ev, 0, &st);
		if (st.oversized || st.bad_batches || st.next_seq != 3)
			break;
	}
	pump(ev, 100); /* anything else it might do */
	events_worker_stats(ev, 0, &st);
	CHECK(st.oversized == 1 && st.bad_batches == 0 && st.next_seq == 3,
	      "publisher frame above max_payload: not received, counted as oversized "
	      "(oversized %llu, bad batches %llu, next seq %llu)",
	      (unsigned long long)st.oversized, (unsigned long long)st.bad_batches,
	      (unsigned long long)st.next_seq);
	CHECK(wait_subscribed(ev, &p, 3000),
	      "the SUB reconnected by itself (libzmq does not after such a frame)");
	CHECK(metrics_has(ev, "kvsplice_kv_dropped_total{worker=\"big\",what=\"oversized\"} 1"),
	      "metrics: kvsplice_kv_dropped_total what=oversized");

	/* the stream goes on: 4 shows the gap, the replay answer holds the big frame again */
	publish(&p, 4);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	CHECK(st.gaps == 1 && st.replaying && st.pending == 1,
	      "batch 4 after the reconnect: gap seen, replay running");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EQ(serve_replay(&p, 5, 1000), 3, "replay asked from seq 3, answered with the big frame");
	for (ms = 0; ms < 3000; ms += 20) {
		pump(ev, 20);
		events_worker_stats(ev, 0, &st);
		if (!st.replaying)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(!st.replaying && st.oversized == 2 && st.replays_failed == 1 && st.drops == 1,
	      "replay frame above the bound: counted, the replay failed, the blocks dropped "
	      "(oversized %llu, failed %llu, drops %llu)",
	      (unsigned long long)st.oversized, (unsigned long long)st.replays_failed,
	      (unsigned long long)st.drops);
	CHECK(ms < 2000, "the refused replay fails in %ld ms, not at its 5000 ms deadline", ms);
	EQ(st.next_seq, 5, "the live stream taken: queued batch 4 applied");
	publish(&p, 5);
	pump(ev, 150);
	events_worker_stats(ev, 0, &st);
	EQ(st.next_seq, 6, "batch 5 applied");

	/* exactly max_payload bytes is accepted (the bound is inclusive) */
	publish_pad(&p, 6, MAXP);
	pump(ev, 1000);
	events_worker_stats(ev, 0, &st);
	CHECK(st.next_seq == 7 && st.oversized == 2 && st.bad_batches == 0,
	      "a batch of exactly max_payload bytes is applied (next seq %llu)",
	      (unsigned long long)st.next_seq);
	events_free(ev);
	index_free(idx);
	peer_close(&p);
}

/* The live queue kept during a replay, bounded in payload bytes per worker and over all of
 * them: the batch that does not fit gives the replay up (the existing "queue full" path),
 * counted; the counters never pass the bounds. */
static void queue_bytes_tests(void)
{
	enum { KB = 1024, BATCH = 16 * KB };
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 5000;
	ecfg.max_pending_bytes = 64 * KB;
	ecfg.max_pending_total_bytes = 96 * KB;
	struct events *ev;
	struct events_worker_stats a, b;
	struct peer p = {0}, q = {0};
	size_t worst = 0, worst_total = 0;

	events_new(&ecfg, &ev);
	peer_open(&p);
	peer_open(&q);
#define BOTH()                                                                                     \
	do {                                                                                       \
		events_worker_stats(ev, 0, &a);                                                    \
		events_worker_stats(ev, 1, &b);                                                    \
		if (a.pending_bytes > worst)                                                       \
			worst = a.pending_bytes;                                                   \
		if (b.pending_bytes > worst)                                                       \
			worst = b.pending_bytes;                                                   \
		if (a.pending_bytes + b.pending_bytes > worst_total)                               \
			worst_total = a.pending_bytes + b.pending_bytes;                           \
	} while (0)
	/* both join; their replay endpoints never answer: the initial syncs keep running */
	events_worker_add(ev, 0, "a", p.pub_ep, p.rep_ep, "kv");
	events_worker_add(ev, 1, "b", q.pub_ep, q.rep_ep, "kv");
	pump(ev, 300);
	for (uint64_t s = 10; s < 13; s++) {
		publish_pad(&p, s, BATCH);
		publish_pad(&q, s, BATCH);
	}
	pump(ev, 200);
	BOTH();
	CHECK(a.replaying && b.replaying && a.pending == 3 && b.pending == 3 &&
		  a.pending_bytes == 3 * BATCH && b.pending_bytes == 3 * BATCH,
	      "3 batches of 16 KiB queued per worker during the syncs (%zu, %zu bytes)",
	      a.pending_bytes, b.pending_bytes);
	CHECK(metrics_has(ev, "kvsplice_kv_queued_bytes{worker=\"a\"} 49152"),
	      "metrics: kvsplice_kv_queued_bytes");

	/* b's 4th: within its own 64 KiB, but all workers' would reach 112 KiB > 96 KiB */
	publish_pad(&q, 13, BATCH);
	pump(ev, 200);
	BOTH();
	CHECK(!b.replaying && b.overflow_total == 1 && b.overflow_bytes == 0 &&
		  b.dropped_queued == 3 && b.pending_bytes == 0 && b.replays_failed == 1 &&
		  b.drops == 0 && b.next_seq == 14,
	      "total bound: b's sync given up, its 3 queued batches dropped and counted, live "
	      "stream taken from 13 (next seq %llu)",
	      (unsigned long long)b.next_seq);
	CHECK(a.replaying && a.pending_bytes == 3 * BATCH && a.overflow_total == 0,
	      "a's queue untouched");

	/* a's queue up to its own bound (64 KiB: fits), then one more */
	publish_pad(&p, 13, BATCH);
	pump(ev, 200);
	BOTH();
	CHECK(a.replaying && a.pending_bytes == 4 * BATCH, "a: 64 KiB queued, exactly its bound");
	publish_pad(&p, 14, BATCH);
	pump(ev, 200);
	BOTH();
	CHECK(!a.replaying && a.overflow_bytes == 1 && a.dropped_queued == 4 &&
		  a.pending_bytes == 0 && a.drops == 0 && a.next_seq == 15,
	      "worker bound: a's sync given up, 4 batches dropped, live from 14 (next seq %llu)",
	      (unsigned long long)a.next_seq);

	/* a gap replay overflowing: the worker's blocks are dropped (never trusted) */
	(void)serve_replay(&p, 0, 10); /* the old request, if it is still there */
	publish_pad(&p, 17, BATCH);    /* 15, 16 lost */
	pump(ev, 200);
	BOTH();
	CHECK(a.gaps == 1 && a.replaying && a.pending_bytes == BATCH, "a: gap, replay running");
	for (uint64_t s = 18; s < 22; s++)
		publish_pad(&p, s, BATCH);
	pump(ev, 300);
	BOTH();
	CHECK(!a.replaying && a.overflow_bytes == 2 && a.drops == 1 && a.dropped_queued == 8 &&
		  a.next_seq == 22 && a.replays_failed == 2,
	      "gap replay overflowing: given up, a's blocks dropped, live from 21 (next seq %llu)",
	      (unsigned long long)a.next_seq);
	CHECK(worst <= 64 * KB && worst_total <= 96 * KB,
	      "queued bytes never above the bounds (worst %zu per worker, %zu over all)", worst,
	      worst_total);
	CHECK(metrics_has(ev,
			  "kvsplice_kv_queue_overflows_total{worker=\"a\",bound=\"worker_bytes\"} "
			  "2") &&
		  metrics_has(
		      ev, "kvsplice_kv_queue_overflows_total{worker=\"b\",bound=\"total_bytes\"}"
			  " 1") &&
		  metrics_has(ev, "kvsplice_kv_dropped_total{worker=\"b\",what=\"queued\"} 3"),
	      "metrics: overflows by bound, dropped queued batches");
	CHECK(debug_has(ev, "\"pending_bytes\":0,\"oversized\":0,\"queue_overflows\":2"),
	      "debug JSON: pending_bytes and queue_overflows");
#undef BOTH
	events_free(ev);
	index_free(idx);
	peer_close(&p);
	peer_close(&q);
}

/* Closes p's publisher and opens a new one on the same address (a worker process replaced). */
static void pub_replace(struct peer *p, bool reopen)
{
	int zero = 0, one = 1;

	zmq_close(p->pub);
	p->pub = NULL;
	if (!reopen)
		return;
	p->pub = zmq_socket(p->ctx, ZMQ_XPUB);
	zmq_setsockopt(p->pub, ZMQ_XPUB_VERBOSE, &one, sizeof(one));
	zmq_setsockopt(p->pub, ZMQ_LINGER, &zero, sizeof(zero));
	/* the old socket is closed by libzmq's I/O thread: its port may not be free at once */
	for (int i = 0; i < 100 && zmq_bind(p->pub, p->pub_ep); i++) {
		struct timespec ts = {0, 10 * 1000000L};

		nanosleep(&ts, NULL);
	}
}

/* serve_replay while ev runs: the request is sent from ev's loop. */
static int serve_replay_pumping(struct events *ev, struct peer *p, uint64_t upto, int ms)
{
	for (int t = 0; t < ms; t += 20) {
		int start = serve_replay(p, upto, 0);

		if (start >= 0)
			return start;
		pump(ev, 20);
	}
	return -1;
}

/* The connection to the publisher lost (its process died): the worker's blocks dropped at once,
 * not when a new process shows a lower sequence; once a publisher is back, a sync from 0; a new
 * process (its sequence below where the old one stood) counted as a restart, the same process
 * coming back (its sequence past that) not. */
static void publisher_loss_tests(void)
{
	struct index_cfg icfg;
	index_cfg_default(&icfg);
	icfg.max_workers = 4;
	struct index *idx;
	index_new(&icfg, &idx);
	struct events_cfg ecfg;
	events_cfg_default(&ecfg);
	ecfg.index = idx;
	ecfg.replay_timeout_ms = 2000;
	struct events *ev;
	struct events_worker_stats st;
	struct peer p = {0};

	events_new(&ecfg, &ev);
	peer_open_as(&p, ZMQ_XPUB);
	for (uint64_t s = 0; s < 10; s++)
		make_batch(&p, s);
	EQ(events_worker_add(ev, 0, "w", p.pub_ep, p.rep_ep, "kv"), 0, "worker added");
	EQ(serve_replay(&p, 0, 2000), 0, "initial sync from 0 (an empty buffer)");
	CHECK(wait_subscribed(ev, &p, 3000), "subscribed");
	pump(ev, 100);
	events_worker_stats(ev, 0, &st);
	EQ(st.state, EVENTS_ST_TAKING, "an empty buffer: the live stream taken as it comes");
	CHECK(debug_has(ev, "\"state\":\"waiting\",\"seq_state\":\"taking\""),
	      "debug JSON: waiting, seq_state taking");
	for (uint64_t s = 0; s < 5; s++)
		publish(&p, s);
	pump(ev, 200);
	EQ(depth_of(idx, 0, 40), 5, "5 batches applied");

	pub_replace(&p, false); /* the worker process dies */
	pump(ev, 300);
	events_worker_stats(ev, 0, &st);
	CHECK(
	    st.disconnects == 1 && st.drops == 1 && !st.have_seq,
	    "publisher gone: counted, blocks dropped, sequence forgotten (disconnects %llu, drops "
	    "%llu)",
	    (unsigned long long)st.disconnects, (unsigned long long)st.drops);
	EQ(depth_of(idx, 0, 40), 0, "its blocks left the index at once");
	CHECK(st.flags == (EVENTS_F_PUB_LOST | EVENTS_F_CHECK_RESTART),
	      "publisher gone: flagged lost, its position kept for the restart check");
	CHECK(debug_has(ev, "\"pub_lost\":true,\"restart_check\":true"),
	      "/debug/index shows both flags");
	CHECK(debug_has(ev, "\"disconnects\":1"), "/debug/index shows the disconnect");

	pub_replace(&p, true); /* a new process on the same address, its buffer 0..1 */
	EQ(serve_replay_pumping(ev, &p, 2, 3000), 0, "publisher back: synced from seq 0");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.restarts == 1 && st.next_seq == 2 && !st.replaying,
	      "its sequence stands below where it was: a restart (restarts %llu, next %llu)",
	      (unsigned long long)st.restarts, (unsigned long long)st.next_seq);
	EQ(depth_of(idx, 0, 40), 2, "the new process's blocks from its buffer");
	CHECK(st.flags == 0 && st.state == EVENTS_ST_LIVE,
	      "back and synced: no flag left, state live");
	CHECK(wait_subscribed(ev, &p, 3000), "subscribed again");
	publish(&p, 2);
	publish(&p, 3);
	pump(ev, 200);
	EQ(depth_of(idx, 0, 40), 4, "its live batches applied");

	pub_replace(&p, true); /* the same process: the connection cut and made again */
	EQ(serve_replay_pumping(ev, &p, 6, 3000), 0, "cut and back: synced from seq 0 again");
	pump(ev, 200);
	events_worker_stats(ev, 0, &st);
	CHECK(st.disconnects == 2 && st.restarts == 1 && st.next_seq == 6,
	      "its sequence went on (next %llu): not a restart (restarts %llu)",
	      (unsigned long long)st.next_seq, (unsigned long long)st.restarts);
	EQ(depth_of(idx, 0, 40), 6, "all it holds, from its buffer");
	events_free(ev);
	index_free(idx);
	peer_close(&p);
}

/* events_cfg: the defaults are EVENTS_DEFAULT_*; a 0 bound is none (the largest the /metrics
 * limit can say), a negative timeout or high-water mark is refused. */
static void cfg_tests(void)
{
	struct index *idx;
	struct events_cfg c;
	struct events *ev;
	struct buf m = {0};

	index_new(NULL, &idx);
	events_cfg_default(&c);
	CHECK(c.replay_timeout_ms == EVENTS_DEFAULT_REPLAY_TIMEOUT_MS &&
		  c.max_pending_bytes == EVENTS_DEFAULT_MAX_PENDING_BYTES &&
		  c.rcvhwm == EVENTS_DEFAULT_RCVHWM && !c.index,
	      "events_cfg_default: the EVENTS_DEFAULT_* values");
	c.index = idx;
	c.max_pending_bytes = 0;
	c.replay_timeout_ms = 0;
	CHECK(events_new(&c, &ev) == 0 && !events_metrics(ev, &m) &&
		  strstr(m.data,
			 "kvsplice_kv_queue_limit_bytes{scope=\"worker\"} 18446744073709551615") &&
		  strstr(m.data, "kvsplice_kv_replay_limit_timeout_seconds 0\n"),
	      "0 is off: no queue bound, no replay timeout");
	events_free(ev);
	buf_free(&m);
	c.replay_timeout_ms = -1;
	CHECK_EQ(events_new(&c, &ev), -EINVAL, "a negative replay timeout is refused");
	index_free(idx);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(toks) / sizeof(toks[0]); i++)
		toks[i] = (uint32_t)(i * 7919 + 3) % 151000;
	decoder_tests();
	differential_tests();
	runtime_tests();
	second_gap_tests();
	initial_replay_tests();
	join_sync_tests();
	sync_services_tests();
	oversized_tests();
	queue_bytes_tests();
	publisher_loss_tests();
	cfg_tests();
	return tap_done();
}
