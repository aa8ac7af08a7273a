// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>
#include <zmq.h>

#include "kvevents.h"

struct ring_ent {
	uint64_t seq;
	char *buf;
	size_t len;
};

struct kvev {
	struct kvev_opts o;
	char *topic;
	void *ctx, *pub, *router;
	uint64_t seq;
	struct ring_ent *ring;
	size_t head, n;	    /* ring of the last buffer_steps batches */
	uint64_t drop_next; /* batches still to lose on purpose (kvev_drop_next) */
	bool replay_mute;   /* replay requests read and left unanswered (kvev_replay_mute) */
};

static void pack_cstr(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_hash(msgpack_packer *pk, const struct kvev_opts *o, const uint8_t *h)
{
	if (o->int_hashes)
		msgpack_pack_uint64(pk, kvc_hash_u64(h));
	else
		msgpack_pack_bin_with_body(pk, h, KVC_HASH_LEN);
}

static void pack_hashes(msgpack_packer *pk, const struct kvev_opts *o, const struct kvc_event *e)
{
	msgpack_pack_array(pk, e->nhashes);
	for (size_t i = 0; i < e->nhashes; i++)
		pack_hash(pk, o, e->hashes[i]);
}

static void pack_event(msgpack_packer *pk, const struct kvev_opts *o, const struct kvc_event *e)
{
	bool map = o->format == KVEV_MAP;

	switch (e->type) {
	case KVC_EV_STORED:
		if (map) {
			msgpack_pack_map(pk, 11);
			pack_cstr(pk, "type");
			pack_cstr(pk, "BlockStored");
			pack_cstr(pk, "block_hashes");
		} else {
			msgpack_pack_array(pk, 8);
			pack_cstr(pk, "BlockStored");
		}
		pack_hashes(pk, o, e);
		if (map)
			pack_cstr(pk, "parent_block_hash");
		if (e->has_parent)
			pack_hash(pk, o, e->parent);
		else
			msgpack_pack_nil(pk);
		if (map)
			pack_cstr(pk, "token_ids");
		msgpack_pack_array(pk, e->nhashes * o->block_size);
		for (size_t i = 0; i < e->nhashes * o->block_size; i++)
			msgpack_pack_uint32(pk, e->tokens[i]);
		if (map)
			pack_cstr(pk, "block_size");
		msgpack_pack_uint32(pk, o->block_size);
		if (map)
			pack_cstr(pk, "lora_id");
		if (e->lora_name)
			msgpack_pack_int64(pk, e->lora_id);
		else
			msgpack_pack_nil(pk);
		if (map)
			pack_cstr(pk, "medium");
		pack_cstr(pk, "GPU");
		if (map)
			pack_cstr(pk, "lora_name");
		if (e->lora_name)
			pack_cstr(pk, e->lora_name);
		else
			msgpack_pack_nil(pk);
		if (map) {
			/* per block: null, or the tuple of its keys (msgspec packs it as an array)
			 */
			pack_cstr(pk, "extra_keys");
			msgpack_pack_array(pk, e->nhashes);
			for (size_t i = 0; i < e->nhashes; i++) {
				bool salt = i == 0 && e->salt;
				unsigned nk = (e->lora_name ? 1u : 0u) + (salt ? 1u : 0u);

				if (!nk) {
					msgpack_pack_nil(pk);
					continue;
				}
				msgpack_pack_array(pk, nk);
				if (e->lora_name)
					pack_cstr(pk, e->lora_name);
				if (salt)
					pack_cstr(pk, e->salt);
			}
			pack_cstr(pk, "group_idx");
			msgpack_pack_uint32(pk, 0);
			pack_cstr(pk, "kv_cache_spec_kind");
			pack_cstr(pk, "full_attention");
		}
		break;
	case KVC_EV_REMOVED:
		if (map) {
			msgpack_pack_map(pk, 4);
			pack_cstr(pk, "type");
			pack_cstr(pk, "BlockRemoved");
			pack_cstr(pk, "block_hashes");
		} else {
			msgpack_pack_array(pk, 3);
			pack_cstr(pk, "BlockRemoved");
		}
		pack_hashes(pk, o, e);
		if (map)
			pack_cstr(pk, "medium");
		pack_cstr(pk, "GPU");
		if (map) {
			pack_cstr(pk, "group_idx");
			msgpack_pack_uint32(pk, 0);
		}
		break;
	case KVC_EV_CLEARED:
		if (map) {
			msgpack_pack_map(pk, 1);
			pack_cstr(pk, "type");
		} else {
			msgpack_pack_array(pk, 1);
		}
		pack_cstr(pk, "AllBlocksCleared");
		break;
	}
}

int kvev_encode(const struct kvev_opts *o, const struct kvc_events *ev, double ts, char **out,
		size_t *outlen)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (o->format == KVEV_MAP) {
		msgpack_pack_map(&pk, 3);
		pack_cstr(&pk, "ts");
		msgpack_pack_double(&pk, ts);
		pack_cstr(&pk, "events");
	} else {
		msgpack_pack_array(&pk, 3);
		msgpack_pack_double(&pk, ts);
	}
	msgpack_pack_array(&pk, ev->n);
	for (size_t i = 0; i < ev->n; i++)
		pack_event(&pk, o, &ev->v[i]);
	if (o->format == KVEV_MAP)
		pack_cstr(&pk, "data_parallel_rank");
	msgpack_pack_uint32(&pk, 0);
	if (!sb.data) {
		msgpack_sbuffer_destroy(&sb);
		return -ENOMEM;
	}
	*outlen = sb.size;
	*out = msgpack_sbuffer_release(&sb);
	return 0;
}

struct kvev *kvev_open(const struct kvev_opts *o, char *err, size_t errlen)
{
	struct kvev *p = calloc(1, sizeof(*p));
	int hwm = 100000, linger = 0;

	if (!p)
		goto nomem;
	p->o = *o;
	p->topic = strdup(o->topic ? o->topic : "");
	p->ring = calloc(o->buffer_steps ? o->buffer_steps : 1, sizeof(*p->ring));
	if (!p->topic || !p->ring)
		goto nomem;
	if (!p->o.buffer_steps)
		p->o.buffer_steps = 1;
	p->ctx = zmq_ctx_new();
	if (!p->ctx)
		goto nomem;
	if (o->endpoint) {
		p->pub = zmq_socket(p->ctx, ZMQ_PUB);
		zmq_setsockopt(p->pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
		zmq_setsockopt(p->pub, ZMQ_LINGER, &linger, sizeof(linger));
		if (zmq_bind(p->pub, o->endpoint) != 0) {
			snprintf(err, errlen, "bind %s: %s", o->endpoint,
				 zmq_strerror(zmq_errno()));
			goto fail;
		}
	}
	if (o->replay_endpoint) {
		p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
		zmq_setsockopt(p->router, ZMQ_LINGER, &linger, sizeof(linger));
		if (zmq_bind(p->router, o->replay_endpoint) != 0) {
			snprintf(err, errlen, "bind %s: %s", o->replay_endpoint,
				 zmq_strerror(zmq_errno()));
			goto fail;
		}
	}
	return p;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	kvev_close(p);
	return NULL;
}

int kvev_endpoints(struct kvev *p, char *pub, size_t publen, char *replay, size_t replaylen)
{
	pub[0] = replay[0] = '\0';
	if (p->pub && zmq_getsockopt(p->pub, ZMQ_LAST_ENDPOINT, pub, &publen) != 0)
		return -errno;
	if (p->router && zmq_getsockopt(p->router, ZMQ_LAST_ENDPOINT, replay, &replaylen) != 0)
		return -errno;
	return 0;
}

void kvev_close(struct kvev *p)
{
	if (!p)
		return;
	if (p->pub)
		zmq_close(p->pub);
	if (p->router)
		zmq_close(p->router);
	if (p->ctx)
		zmq_ctx_term(p->ctx);
	if (p->ring)
		for (size_t i = 0; i < p->o.buffer_steps; i++)
			free(p->ring[i].buf);
	free(p->ring);
	free(p->topic);
	free(p);
}

static void be64(uint8_t *b, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = v & 0xff;
}

int kvev_publish(struct kvev *p, const struct kvc_events *ev, double ts)
{
	struct ring_ent *slot;
	uint8_t seqb[8];
	char *buf;
	size_t len;
	int err;

	if (!ev->n)
		return 0;
	if ((err = kvev_encode(&p->o, ev, ts, &buf, &len)))
		return err;
	be64(seqb, p->seq);
	if (p->drop_next) {
		p->drop_next--; /* numbered and kept for replay, never sent */
	} else if (p->pub) {
		/* PUB never blocks: past the high-water mark messages are dropped, as in vLLM. */
		zmq_send(p->pub, p->topic, strlen(p->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(p->pub, seqb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(p->pub, buf, len, ZMQ_DONTWAIT);
	}
	slot = &p->ring[(p->head + p->n) % p->o.buffer_steps];
	if (p->n == p->o.buffer_steps) {
		slot = &p->ring[p->head];
		p->head = (p->head + 1) % p->o.buffer_steps;
	} else {
		p->n++;
	}
	free(slot->buf);
	slot->buf = buf;
	slot->len = len;
	slot->seq = p->seq++;
	kvev_poll(p);
	return 0;
}

int kvev_fd(struct kvev *p)
{
	int fd;
	size_t sz = sizeof(fd);

	if (!p->router || zmq_getsockopt(p->router, ZMQ_FD, &fd, &sz) != 0)
		return -1;
	return fd;
}

uint64_t kvev_next_seq(const struct kvev *p)
{
	return p->seq;
}

void kvev_drop_next(struct kvev *p, uint64_t n)
{
	p->drop_next = n;
}

void kvev_replay_mute(struct kvev *p, bool mute)
{
	p->replay_mute = mute;
}

void kvev_poll(struct kvev *p)
{
	static const uint8_t end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	if (!p->router)
		return;
	for (;;) {
		zmq_msg_t part[4];
		int nparts = 0, more = 1;
		uint64_t start = 0;

		while (more) {
			zmq_msg_t m;

			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, p->router, ZMQ_DONTWAIT) < 0) {
				zmq_msg_close(&m);
				for (int i = 0; i < nparts; i++)
					zmq_msg_close(&part[i]);
				return;
			}
			more = zmq_msg_more(&m);
			if (nparts < 4)
				part[nparts++] = m;
			else
				zmq_msg_close(&m);
		}
		/* [identity][empty][start seq]; anything else is ignored. */
		if (nparts == 3 && zmq_msg_size(&part[2]) == 8 && !p->replay_mute) {
			const uint8_t *s = zmq_msg_data(&part[2]);

			for (int i = 0; i < 8; i++)
				start = start << 8 | s[i];
			for (size_t i = 0; i < p->n; i++) {
				struct ring_ent *e = &p->ring[(p->head + i) % p->o.buffer_steps];
				uint8_t seqb[8];

				if (e->seq < start)
					continue;
				be64(seqb, e->seq);
				zmq_send(p->router, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]),
					 ZMQ_SNDMORE | ZMQ_DONTWAIT);
				zmq_send(p->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
				zmq_send(p->router, seqb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
				zmq_send(p->router, e->buf, e->len, ZMQ_DONTWAIT);
			}
			zmq_send(p->router, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]),
				 ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(p->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(p->router, end, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(p->router, "", 0, ZMQ_DONTWAIT);
		}
		for (int i = 0; i < nparts; i++)
			zmq_msg_close(&part[i]);
	}
}
