// SPDX-License-Identifier: Apache-2.0
// events: the runtime of events.h: per-worker ZMQ sockets (SUB + DEALER replay, each watched by
// a libzmq monitor), the sequence rules, the live queue kept during a replay and its bounds, the
// sync with discovery, counters, /metrics and /debug/index. Payloads are decoded by
// events_decode.c.
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <zmq.h>

#include "core/clock.h"
#include "discovery/discovery.h"
#include "kv/events.h"
#include "core/log.h"

/* Replayed batches remembered per worker (payload hashes, 8 bytes each) to recognise their live
 * copies arriving after the replay. */
#ifndef EVENTS_REPLAY_RECALL
#define EVENTS_REPLAY_RECALL 1024
#endif

/* How long a socket may stay disconnected with no reconnect announced by libzmq before events
 * reconnects it itself, ms (libzmq announces its own reconnect right after the drop). */
#ifndef EVENTS_RELINK_MS
#define EVENTS_RELINK_MS 200
#endif

/* Monitor events watched on every socket (evsock). */
#define EVSOCK_EVENTS                                                                              \
	(ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_DELAYED | ZMQ_EVENT_CONNECT_RETRIED |             \
	 ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |                           \
	 ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* A live batch kept while the worker's replay runs. */
struct pend {
	uint64_t seq;
	size_t len;
	unsigned char *data;
};

/* One SUB or DEALER with the PAIR that receives its libzmq monitor events.
 * Why the monitor: every socket refuses frames above max_payload (ZMQ_MAXMSGSIZE), and
 * libzmq (4.3) treats such a frame as a protocol error: it closes the connection and, unlike
 * for any other loss, never reconnects. A SUB would then hear nothing from its worker again
 * while the index kept the worker's last blocks for ever. A connection lost otherwise (peer
 * restarted, network) is announced as DISCONNECTED followed at once by CONNECT_RETRIED; a
 * DISCONNECTED with no retry within EVENTS_RELINK_MS is therefore a refused peer, and events
 * reconnects the socket itself (zmq_disconnect + zmq_connect keeps what is already queued) and
 * counts it. */
struct evsock {
	void *s;	 /* the SUB or DEALER; NULL when closed */
	void *mon;	 /* PAIR connected to s's monitor */
	bool lost;	 /* disconnected, and libzmq has announced no reconnect (yet) */
	bool hs_failed;	 /* the connection failed its handshake (not ZMTP): not a size matter */
	int64_t lost_ms; /* when lost was set */
};

struct evw {
	enum events_state state; /* EVENTS_ST_FREE: slot unused; moved only by step() */
	unsigned flags;		 /* enum events_flags */
	char *name, *pub, *replay, *topic;
	struct evsock sub, dealer;
	uint64_t next_seq;    /* the seq expected next (meaningful: events_state_has_seq) */
	uint64_t seq_at_loss; /* with EVENTS_F_CHECK_RESTART: where the stream stood when lost */
	uint64_t replay_from; /* first seq asked */
	int64_t deadline_ms;
	struct pend *pend;
	size_t pend_head, pend_n, pend_cap;
	size_t pend_bytes; /* payload bytes in pend, at most max_pending_bytes */
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
	size_t max_pending_bytes;
	size_t max_pending_total_bytes;
	size_t pend_total; /* bytes queued over all workers, at most max_pending_total_bytes */
	int rcvhwm;
	size_t max_payload;
	bool initial_replay;
	void *zctx;
	uint64_t mon_seq; /* names the monitors' inproc endpoints */
	int epfd, tfd;
	struct events_decoder *dec;
	struct evw *w;
	uint32_t nw;
	uint32_t rr; /* first worker events_poll looks at */
	/* current apply target (for the decode callback) */
	struct evw *cur;
	uint32_t cur_id;
};

/* Moves worker w by input in (events_state.c's table). A move the table does not have is a bug
 * of this file: asserted, and refused (w keeps its state) when asserts are compiled out. */
static void step(struct evw *w, enum events_input in)
{
	enum events_state to = events_state_next(w->state, in);

	assert(to != EVENTS_ST_INVALID);
	if (to == EVENTS_ST_INVALID) {
		log_error("events", "worker %s: no move on %s from %s", w->name ? w->name : "?",
			  events_input_name(in), events_state_name(w->state));
		return;
	}
	w->state = to;
}

static bool in_use(const struct evw *w)
{
	return w->state != EVENTS_ST_FREE;
}

static bool replaying(const struct evw *w)
{
	return events_state_replaying(w->state);
}

static bool has_seq(const struct evw *w)
{
	return events_state_has_seq(w->state);
}

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

void events_cfg_default(struct events_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->replay_timeout_ms = EVENTS_DEFAULT_REPLAY_TIMEOUT_MS;
	c->max_pending = EVENTS_DEFAULT_MAX_PENDING;
	c->max_pending_bytes = EVENTS_DEFAULT_MAX_PENDING_BYTES;
	c->max_pending_total_bytes = EVENTS_DEFAULT_MAX_PENDING_TOTAL_BYTES;
	c->rcvhwm = EVENTS_DEFAULT_RCVHWM;
	c->max_payload = EVENTS_DEFAULT_MAX_PAYLOAD;
}

int events_new(const struct events_cfg *cfg, struct events **out)
{
	struct events *ev = calloc(1, sizeof(*ev));
	struct epoll_event ee = {.events = EPOLLIN};

	*out = NULL;
	if (!ev || !cfg || !cfg->index) {
		free(ev);
		errno = EINVAL;
		return -EINVAL;
	}
	ev->idx = cfg->index;
	if (cfg->replay_timeout_ms < 0 || cfg->rcvhwm < 0) {
		free(ev);
		errno = EINVAL;
		return -EINVAL;
	}
	/* 0 is off: no bound (the largest value), no timeout */
	ev->replay_timeout_ms = cfg->replay_timeout_ms;
	ev->max_pending = cfg->max_pending ? cfg->max_pending : SIZE_MAX;
	ev->max_pending_bytes = cfg->max_pending_bytes ? cfg->max_pending_bytes : SIZE_MAX;
	ev->max_pending_total_bytes =
	    cfg->max_pending_total_bytes ? cfg->max_pending_total_bytes : SIZE_MAX;
	ev->rcvhwm = cfg->rcvhwm;
	ev->max_payload = cfg->max_payload ? cfg->max_payload : SIZE_MAX;
	ev->initial_replay = !cfg->no_initial_replay;
	ev->epfd = ev->tfd = -1;
	ev->nw = index_max_workers(cfg->index);
	ev->w = calloc(ev->nw, sizeof(*ev->w));
	events_decoder_new(&ev->dec);
	ev->zctx = zmq_ctx_new();
	if (!ev->w || !ev->dec || !ev->zctx)
		goto cleanup;
	events_decoder_set_max_payload(ev->dec, ev->max_payload);
	{
		/* per worker a SUB and a DEALER, each with a monitor: libzmq's PAIR and ours */
		int want = 6 * (int)ev->nw + 16, limit = zmq_ctx_get(ev->zctx, ZMQ_SOCKET_LIMIT);
		if (want > ZMQ_MAX_SOCKETS_DFLT)
			zmq_ctx_set(ev->zctx, ZMQ_MAX_SOCKETS,
				    limit > 0 && want > limit ? limit : want);
	}
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (ev->epfd < 0 || ev->tfd < 0)
		goto cleanup;
	ee.data.u64 = UINT64_MAX;
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, ev->tfd, &ee))
		goto cleanup;
	*out = ev;
	return 0;
cleanup:
	events_free(ev);
	if (!errno)
		errno = ENOMEM;
	return -errno;
}

static void pend_clear(struct events *ev, struct evw *w)
{
	for (size_t i = 0; i < w->pend_n; i++)
		free(w->pend[(w->pend_head + i) % w->pend_cap].data);
	w->pend_head = w->pend_n = 0;
	ev->pend_total -= w->pend_bytes;
	w->pend_bytes = 0;
}

/* Removes ZMQ socket s's fd from the epoll set. */
static void epoll_del_sock(struct events *ev, void *s)
{
	int fd = -1;
	size_t fl = sizeof(fd);
	struct epoll_event dummy = {0};

	if (s && !zmq_getsockopt(s, ZMQ_FD, &fd, &fl) && fd >= 0)
		epoll_ctl(ev->epfd, EPOLL_CTL_DEL, fd, &dummy);
}

/* Adds ZMQ socket s's fd to the epoll set. 0 or -1. */
static int epoll_add_sock(struct events *ev, void *s)
{
	int fd;
	size_t fl = sizeof(fd);
	struct epoll_event ee = {.events = EPOLLIN};

	if (zmq_getsockopt(s, ZMQ_FD, &fd, &fl) || epoll_ctl(ev->epfd, EPOLL_CTL_ADD, fd, &ee))
		return -1;
	return 0;
}

/* Closes sk's socket and monitor (either may be missing); sk is left all zero. */
static void close_sock(struct events *ev, struct evsock *sk)
{
	epoll_del_sock(ev, sk->s);
	epoll_del_sock(ev, sk->mon);
	if (sk->s) {
		zmq_socket_monitor(sk->s, NULL, 0);
		zmq_close(sk->s);
	}
	if (sk->mon)
		zmq_close(sk->mon);
	memset(sk, 0, sizeof(*sk));
}

static void worker_release(struct events *ev, struct evw *w)
{
	step(w, EVENTS_IN_REMOVE); /* the memset below leaves it EVENTS_ST_FREE (0) */
	close_sock(ev, &w->sub);
	close_sock(ev, &w->dealer);
	pend_clear(ev, w);
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
		if (in_use(&ev->w[i]))
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

/* Opens sk as a socket of type connected to ep, with its monitor, both in the epoll set.
 * 0, or -1 with zmq_errno() set (sk left closed). */
static int open_sock(struct events *ev, struct evsock *sk, int type, const char *ep)
{
	/* libzmq applies ZMQ_MAXMSGSIZE to each frame's body (not to the whole multipart message,
	 * nor to the ZMTP headers): the payload frame is the largest one, so its bound is the
	 * socket's (checked: a frame of exactly the bound passes, one byte more cuts) */
	int64_t maxmsg = ev->max_payload == SIZE_MAX ? -1 : (int64_t)ev->max_payload;
	char mon_ep[64];
	int zero = 0, err;

	memset(sk, 0, sizeof(*sk));
	snprintf(mon_ep, sizeof(mon_ep), "inproc://kvsplice-events-monitor-%llu",
		 (unsigned long long)ev->mon_seq++);
	sk->s = zmq_socket(ev->zctx, type);
	if (!sk->s)
		return -1;
	zmq_setsockopt(sk->s, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_setsockopt(sk->s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)))
		goto fail;
	if (type == ZMQ_SUB)
		zmq_setsockopt(sk->s, ZMQ_RCVHWM, &ev->rcvhwm, sizeof(ev->rcvhwm));
	/* The join sync sends its request right after connecting, often before the worker's
	 * replay endpoint listens (pod starting) or before the TCP handshake is done. With
	 * ZMQ_IMMEDIATE 0 (libzmq's default, set here because the sync relies on it) the request
	 * waits in the pipe and goes out once a connection is made, retried every
	 * ZMQ_RECONNECT_IVL; with 1, zmq_send would fail with EAGAIN and the sync never start.
	 * The replay deadline bounds the wait for an endpoint that never comes up. */
	if (type == ZMQ_DEALER)
		zmq_setsockopt(sk->s, ZMQ_IMMEDIATE, &zero, sizeof(zero));
	/* the monitor is connected before the socket, so no event of its connection is missed */
	if (zmq_socket_monitor(sk->s, mon_ep, EVSOCK_EVENTS))
		goto fail;
	sk->mon = zmq_socket(ev->zctx, ZMQ_PAIR);
	if (!sk->mon)
		goto fail;
	zmq_setsockopt(sk->mon, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(sk->mon, mon_ep) || epoll_add_sock(ev, sk->mon) || zmq_connect(sk->s, ep) ||
	    epoll_add_sock(ev, sk->s))
		goto fail;
	return 0;
fail:
	err = zmq_errno();
	close_sock(ev, sk);
	errno = err;
	return -1;
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
	if (in_use(w))
		return -EEXIST;
	if (!pub || !name)
		return -EINVAL;
	step(w, EVENTS_IN_ADD);
	w->name = strdup(name);
	w->pub = strdup(pub);
	w->replay = replay && *replay ? strdup(replay) : NULL;
	w->topic = strdup(t);
	if (!w->name || !w->pub || !w->topic || (replay && *replay && !w->replay)) {
		worker_release(ev, w);
		return -ENOMEM;
	}
	if (open_sock(ev, &w->sub, ZMQ_SUB, pub) ||
	    zmq_setsockopt(w->sub.s, ZMQ_SUBSCRIBE, t, strlen(t))) {
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
	if (id >= ev->nw || !in_use(&ev->w[id]))
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
		if (in_use(&ev->w[i]) && !strcmp(ev->w[i].name, name))
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
		if (!in_use(w))
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
			if (!in_use(&ev->w[id])) {
				rc = events_worker_add(ev, id, specs[i].name, specs[i].pub,
						       specs[i].replay, topic);
				break;
			}
		if (rc == -ENOMEM)
			return rc;
		if (rc == -ENOSPC) {
			log_warn("events",
				 "worker %s: not subscribed: already following %u workers "
				 "(--index-max-workers); it is seen as holding no block",
				 specs[i].name, ev->nw);
			failed++;
		} else if (rc) {
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
}

/* The earliest replay deadline or socket reconnect time, INT64_MAX when none. */
static int64_t next_deadline(const struct events *ev)
{
	int64_t first = INT64_MAX;

	for (uint32_t i = 0; i < ev->nw; i++) {
		const struct evw *w = &ev->w[i];
		if (!in_use(w))
			continue;
		if (replaying(w) && w->deadline_ms < first)
			first = w->deadline_ms;
		if (w->sub.lost && w->sub.lost_ms + EVENTS_RELINK_MS < first)
			first = w->sub.lost_ms + EVENTS_RELINK_MS;
		if (w->dealer.lost && w->dealer.lost_ms + EVENTS_RELINK_MS < first)
			first = w->dealer.lost_ms + EVENTS_RELINK_MS;
	}
	return first;
}

static void arm_timer(struct events *ev)
{
	int64_t first = next_deadline(ev), now = now_ms();
	struct itimerspec its = {0};

	if (first != INT64_MAX) {
		int64_t d = first > now ? first - now : 1;
		its.it_value.tv_sec = d / 1000;
		its.it_value.tv_nsec = (d % 1000) * 1000000;
	}
	timerfd_settime(ev->tfd, 0, &its, NULL);
}

/* What pend_push refused on. */
enum pend_full { PEND_OK, PEND_FULL_BATCHES, PEND_FULL_BYTES, PEND_FULL_TOTAL, PEND_NOMEM };

/* Queues live batch seq, p[0..n), for after worker w's replay. Every bound is checked before
 * anything is allocated or copied. PEND_OK or what refused it. */
static enum pend_full pend_push(struct events *ev, struct evw *w, uint64_t seq, const void *p,
				size_t n)
{
	struct pend *pe;

	if (w->pend_n >= ev->max_pending)
		return PEND_FULL_BATCHES;
	if (n > ev->max_pending_bytes - w->pend_bytes)
		return PEND_FULL_BYTES;
	if (n > ev->max_pending_total_bytes - ev->pend_total)
		return PEND_FULL_TOTAL;
	if (w->pend_n == w->pend_cap) {
		size_t ncap = w->pend_cap ? w->pend_cap * 2 : 16;
		struct pend *np = malloc(ncap * sizeof(*np));
		if (!np)
			return PEND_NOMEM;
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
		return PEND_NOMEM;
	memcpy(pe->data, p, n);
	pe->len = n;
	pe->seq = seq;
	w->pend_n++;
	w->pend_bytes += n;
	ev->pend_total += n;
	return PEND_OK;
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

	if (!w->dealer.s && open_sock(ev, &w->dealer, ZMQ_DEALER, w->replay))
		return -EIO;
	for (int i = 0; i < 8; i++)
		req[i] = (unsigned char)(from >> (56 - 8 * i));
	if (zmq_send(w->dealer.s, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(w->dealer.s, req, 8, ZMQ_DONTWAIT) < 0) {
		close_sock(ev, &w->dealer);
		return -EIO;
	}
	step(w, initial ? EVENTS_IN_SYNC : EVENTS_IN_GAP);
	w->recall_n = 0; /* a gap or a restart: the live stream is past the last replay */
	w->replay_from = from;
	w->deadline_ms = ev->replay_timeout_ms ? now_ms() + ev->replay_timeout_ms : INT64_MAX;
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

/* Forgets worker id's blocks and sequence state, abandoning a running replay: what is known of it
 * can no longer be trusted, and it is to be synced again from seq 0. */
static void worker_forget(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	/* replay answers carry no request id: only a new DEALER keeps the answers to a replay
	 * asked before (from the old process, or from another start seq) out of the new sync */
	close_sock(ev, &w->dealer);
	pend_clear(ev, w); /* queued for a replay that is abandoned; the new sync covers them */
	step(w, EVENTS_IN_FORGET);
	w->next_seq = w->replay_from = 0;
	w->recall_n = 0;
	worker_drop(ev, id); /* also lifts a stale mark left by an abandoned gap replay */
	arm_timer(ev);
}

int events_worker_resync(struct events *ev, uint32_t id)
{
	struct evw *w;

	if (id >= ev->nw || !in_use(&ev->w[id]))
		return -ENOENT;
	w = &ev->w[id];
	log_info("events", "worker %s (id %u): resync: blocks dropped, sync from seq 0", w->name,
		 id);
	worker_forget(ev, id); /* a restart check pending since a lost publisher stays pending */
	join_sync(ev, id);
	return 0;
}

/* Worker id's SUB lost its publisher (see events.h): its blocks are dropped at once. */
static void pub_lost(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	if (w->flags & EVENTS_F_PUB_LOST)
		return;
	w->flags |= EVENTS_F_PUB_LOST;
	w->st.disconnects++;
	if (has_seq(w)) {
		w->flags |= EVENTS_F_CHECK_RESTART;
		w->seq_at_loss = w->next_seq;
	}
	log_info("events",
		 "worker %s: connection to its publisher lost: its blocks are dropped "
		 "until it is back",
		 w->name);
	worker_forget(ev, id);
}

/* Worker id's SUB is connected to its publisher again: synced from 0 as on joining (unless the
 * live stream already started that). */
static void pub_back(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	if (!(w->flags & EVENTS_F_PUB_LOST))
		return;
	w->flags &= ~EVENTS_F_PUB_LOST;
	log_info("events", "worker %s: publisher connected again: synced from seq 0", w->name);
	if (!replaying(w) && !has_seq(w))
		join_sync(ev, id);
}

/* Worker id's stream has a position again after its publisher was lost: one below where it stood
 * then is a new process (a restart); one at or past it the same process (its cache still there,
 * what it published meanwhile replayed). */
static void loss_check(struct evw *w)
{
	if (!(w->flags & EVENTS_F_CHECK_RESTART) || !has_seq(w))
		return;
	w->flags &= ~EVENTS_F_CHECK_RESTART;
	if (w->next_seq < w->seq_at_loss) {
		w->st.restarts++;
		log_info("events", "worker %s: its sequence went back from %llu to %llu: restarted",
			 w->name, (unsigned long long)w->seq_at_loss,
			 (unsigned long long)w->next_seq);
	}
}

/* Applies the queued live batches in order, until drained or a new replay starts. A batch that
 * starts a new replay (a second gap, a restart) is queued again by handle_seq, at the back:
 * it goes back to the front, ahead of the later batches still queued, so that the queue stays in
 * seq order. */
static void drain_pending(struct events *ev, uint32_t id)
{
	struct evw *w = &ev->w[id];

	while (w->pend_n && !replaying(w)) {
		struct pend pe = w->pend[w->pend_head];
		size_t before;

		w->pend_head = (w->pend_head + 1) % w->pend_cap;
		w->pend_n--;
		w->pend_bytes -= pe.len;
		ev->pend_total -= pe.len;
		before = w->pend_n;
		/* already delivered by the replay: skip (a real restart shows a seq below the
		 * replay's start, and goes through handle_seq's restart rule) */
		if (has_seq(w) && pe.seq < w->next_seq && pe.seq >= w->replay_from)
			;
		else
			handle_seq(ev, id, pe.seq, pe.data, pe.len);
		if (replaying(w) && w->pend_n == before + 1 && before) {
			size_t tail = (w->pend_head + w->pend_n - 1) % w->pend_cap;
			struct pend again = w->pend[tail];

			w->pend_head = (w->pend_head + w->pend_cap - 1) % w->pend_cap;
			w->pend[w->pend_head] = again;
		}
		free(pe.data);
	}
}

static void replay_done(struct events *ev, uint32_t id, bool ok, const char *why)
{
	struct evw *w = &ev->w[id];
	bool applied_nothing = w->state == EVENTS_ST_SYNCING; /* an initial sync, nothing fed */

	/* over: live (the position known), or taking the stream as it comes (a failure, or an
	 * initial sync that found nothing; without this the next live batch would ask for the same
	 * sync again) */
	step(w, ok ? EVENTS_IN_REPLAY_OK : EVENTS_IN_REPLAY_BAD);
	if (ok) {
		w->st.replays_ok++;
		loss_check(w);
		index_write_lock(ev->idx);
		index_worker_set_stale(ev->idx, id, false);
		index_write_unlock(ev->idx);
		log_info("events", "worker %s: replay done, next seq %llu", w->name,
			 (unsigned long long)w->next_seq);
	} else {
		w->st.replays_failed++;
		close_sock(ev, &w->dealer); /* late answers to this request must not be read */
		if (applied_nothing) {
			/* an initial sync that applied nothing has nothing to drop (typically a
			 * worker whose replay endpoint does not listen yet, or never will) */
			log_warn("events", "worker %s: initial sync failed (%s): live stream taken",
				 w->name, why);
		} else {
			log_warn("events", "worker %s: replay failed (%s): its blocks are dropped",
				 w->name, why);
			worker_drop(ev, id);
		}
		w->recall_n = 0;
	}
	arm_timer(ev);
	drain_pending(ev, id);
}

/* Queues live batch seq for after worker id's running replay. When it does not fit (a bound, or
 * out of memory), the queue is full: discarded (counted), the replay given up (replay_done's
 * failure: blocks dropped unless an initial sync applied nothing), and the batch handled again
 * with the replay over: the newest batch is where the live stream is taken from. */
static void queue_live(struct events *ev, uint32_t id, uint64_t seq, const void *p, size_t n)
{
	struct evw *w = &ev->w[id];
	const char *why;

	switch (pend_push(ev, w, seq, p, n)) {
	case PEND_OK:
		return;
	case PEND_FULL_BATCHES:
		w->st.overflow_batches++;
		why = "live queue full (batches)";
		break;
	case PEND_FULL_BYTES:
		w->st.overflow_bytes++;
		why = "live queue full (bytes)";
		break;
	case PEND_FULL_TOTAL:
		w->st.overflow_total++;
		why = "live queues of all workers full (bytes)";
		break;
	default:
		why = "out of memory for the live queue";
		break;
	}
	w->st.dropped_queued += w->pend_n;
	pend_clear(ev, w);
	replay_done(ev, id, false, why);
	handle_seq(ev, id, seq, p, n);
}

/* Sequence rules for one live batch (see events.h). */
static void handle_seq(struct events *ev, uint32_t id, uint64_t seq, const void *p, size_t n)
{
	struct evw *w = &ev->w[id];

	if (replaying(w)) {
		queue_live(ev, id, seq, p, n);
		return;
	}
	if (has_seq(w) && seq < w->next_seq && recalled(w, seq, p, n))
		return; /* the live copy of a replayed batch, late */
	if (has_seq(w) && seq >= w->next_seq)
		w->recall_n = 0; /* SUB is ordered: no late copy can follow this batch */
	if (has_seq(w) && seq < w->next_seq) {
		w->st.restarts++;
		log_info("events",
			 "worker %s: seq went back from %llu to %llu: restart, blocks "
			 "dropped",
			 w->name, (unsigned long long)w->next_seq, (unsigned long long)seq);
		worker_drop(ev, id);
		step(w, EVENTS_IN_RESTART);
	}
	if (!has_seq(w)) {
		if (seq > 0 && w->replay && ev->initial_replay && w->state != EVENTS_ST_TAKING &&
		    !start_replay(ev, id, 0, true)) {
			queue_live(ev, id, seq, p, n);
			return;
		}
		step(w, EVENTS_IN_TAKE);
		w->next_seq = seq;
		loss_check(w);
	} else if (seq > w->next_seq) {
		w->st.gaps++;
		log_warn("events", "worker %s: seq gap, expected %llu got %llu", w->name,
			 (unsigned long long)w->next_seq, (unsigned long long)seq);
		if (w->replay && !start_replay(ev, id, w->next_seq, false)) {
			queue_live(ev, id, seq, p, n);
			return;
		}
		/* nothing can fill the gap: the blocks held may be wrong, so none is kept */
		worker_drop(ev, id);
		w->next_seq = seq;
	}
	apply_batch(ev, id, p, n);
	w->next_seq = seq + 1;
}

/* The size of payload frame m, checked before anything reads or copies it: one above
 * max_payload (possible only if ZMQ_MAXMSGSIZE did not hold it back) is counted and handled as
 * an empty payload: a batch that does not decode, its seq consumed. */
static size_t payload_size(const struct events *ev, struct evw *w, zmq_msg_t *m)
{
	size_t n = zmq_msg_size(m);

	if (n <= ev->max_payload)
		return n;
	w->st.oversized++;
	return 0;
}

/* One replay answer [(empty)][seq][payload] for worker id. */
static void handle_replay_msg(struct events *ev, uint32_t id, zmq_msg_t *parts, int np)
{
	struct evw *w = &ev->w[id];
	uint64_t seq;
	size_t n;
	int k = 0;

	if (np >= 1 && zmq_msg_size(&parts[0]) == 0)
		k = 1; /* a delimiter frame, if the ROUTER sends one */
	if (np - k < 1 || zmq_msg_size(&parts[k]) != 8) {
		w->st.bad_frames++;
		return;
	}
	seq = be64(zmq_msg_data(&parts[k]));
	if (!replaying(w)) /* an answer after we gave up */
		return;
	if (seq == UINT64_MAX) {
		if (!events_state_initial(w->state) && w->pend_n &&
		    w->pend[w->pend_head].seq > w->next_seq) {
			/* the answer stops short of the queued batches (e.g. a restarted worker's
			 * new buffer behind a batch of the old process): taking it as a success
			 * would ask the same replay again for ever */
			replay_done(ev, id, false, "replay ended before the gap was filled");
			return;
		}
		/* an initial sync fed nothing: nothing buffered there, the live stream is taken as
		 * it comes (EVENTS_ST_TAKING: else the queued batch would ask for the same sync
		 * again) */
		replay_done(ev, id, true, NULL);
		return;
	}
	if (np - k < 2) {
		w->st.bad_frames++;
		return;
	}
	if (w->state == EVENTS_ST_SYNCING) {
		/* joining a running worker: whatever the buffer still holds is the best start */
		step(w, EVENTS_IN_SYNC_FED);
		w->next_seq = seq;
	}
	if (seq < w->next_seq)
		return;
	if (seq > w->next_seq) {
		replay_done(ev, id, false, "replay buffer no longer holds the gap");
		return;
	}
	n = payload_size(ev, w, &parts[k + 1]);
	apply_batch(ev, id, zmq_msg_data(&parts[k + 1]), n);
	w->next_seq = seq + 1;
	recall_add(w, seq, zmq_msg_data(&parts[k + 1]), n);
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

/* One monitor event of worker id's socket sk (see struct evsock): [event u16, value u32]
 * [endpoint]. */
static void sock_event(struct events *ev, uint32_t id, struct evsock *sk, zmq_msg_t *parts, int np)
{
	bool sub = sk == &ev->w[id].sub;
	uint16_t e;

	if (np < 1 || zmq_msg_size(&parts[0]) < sizeof(e))
		return;
	memcpy(&e, zmq_msg_data(&parts[0]), sizeof(e));
	switch (e) {
	case ZMQ_EVENT_DISCONNECTED:
		if (!sk->lost) {
			sk->lost = true;
			sk->lost_ms = now_ms();
			arm_timer(ev);
		}
		break;
	case ZMQ_EVENT_CONNECTED:
		sk->hs_failed = false;
		sk->lost = false;
		if (sub)
			pub_back(ev, id);
		break;
	case ZMQ_EVENT_CONNECT_DELAYED:
	case ZMQ_EVENT_CONNECT_RETRIED:
		/* libzmq reconnects by itself: the peer closed the connection (its process died
		 * or restarted, or the network cut it), not libzmq for a frame it refused (that
		 * one it does not reconnect: relink) */
		if (sub && sk->lost)
			pub_lost(ev, id);
		sk->lost = false;
		break;
	case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
	case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
	case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
		sk->hs_failed = true;
		break;
	}
}

/* Handles up to *budget monitor events of worker id's socket sk. */
static void drain_monitor(struct events *ev, uint32_t id, struct evsock *sk, int *budget)
{
	zmq_msg_t parts[2];
	int np, total;

	while (*budget > 0 && readable(sk->mon)) {
		np = recv_parts(sk->mon, parts, 2, &total);
		if (!total)
			break;
		(*budget)--;
		sock_event(ev, id, sk, parts, np);
		for (int i = 0; i < np; i++)
			zmq_msg_close(&parts[i]);
	}
}

/* Worker id's socket sk lost its connection EVENTS_RELINK_MS ago and libzmq does not reconnect
 * (see struct evsock): the peer sent a frame above max_payload (counted as oversized) or
 * failed the handshake (a bad frame). The SUB is reconnected; the batch it lost shows as a gap.
 * The DEALER is closed (the next replay opens a new one), failing the replay it served. */
static void relink(struct events *ev, uint32_t id, struct evsock *sk)
{
	struct evw *w = &ev->w[id];
	bool sub = sk == &w->sub;
	const char *why = sk->hs_failed ? "its handshake failed" : "a message above the size bound";

	sk->lost = false;
	if (sk->hs_failed)
		w->st.bad_frames++;
	else
		w->st.oversized++;
	log_warn("events", "worker %s: ZMQ closed the connection to %s (%s): %s", w->name,
		 sub ? w->pub : w->replay, why, sub ? "reconnecting" : "replay socket closed");
	if (!sub) {
		if (replaying(w))
			replay_done(ev, id, false, "replay answer refused by ZMQ");
		else
			close_sock(ev, sk);
		return;
	}
	sk->hs_failed = false;
	zmq_disconnect(sk->s, w->pub); /* may fail: libzmq may have forgotten the endpoint */
	if (zmq_connect(sk->s, w->pub))
		log_warn("events", "worker %s: cannot reconnect to %s: %s", w->name, w->pub,
			 zmq_strerror(zmq_errno()));
}

/* Handles up to *budget messages of worker id's sockets. */
static void drain_worker(struct events *ev, uint32_t id, int *budget)
{
	struct evw *w = &ev->w[id];
	zmq_msg_t parts[4];
	int np, total;

	drain_monitor(ev, id, &w->sub, budget);
	drain_monitor(ev, id, &w->dealer, budget);
	while (*budget > 0 && in_use(w) && readable(w->dealer.s)) {
		np = recv_parts(w->dealer.s, parts, 4, &total);
		if (!total)
			break;
		(*budget)--;
		handle_replay_msg(ev, id, parts, np);
		for (int i = 0; i < np; i++)
			zmq_msg_close(&parts[i]);
	}
	while (*budget > 0 && in_use(w) && readable(w->sub.s)) {
		np = recv_parts(w->sub.s, parts, 4, &total);
		if (!total)
			break;
		(*budget)--;
		if (total != 3 || zmq_msg_size(&parts[1]) != 8) {
			w->st.bad_frames++;
		} else {
			uint64_t seq = be64(zmq_msg_data(&parts[1]));
			w->st.last_seq_seen = seq;
			handle_seq(ev, id, seq, zmq_msg_data(&parts[2]),
				   payload_size(ev, w, &parts[2]));
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
		if (!in_use(w))
			continue;
		drain_worker(ev, i, &budget); /* answers already here count, even if late */
		if (in_use(w) && w->sub.lost && now >= w->sub.lost_ms + EVENTS_RELINK_MS)
			relink(ev, i, &w->sub);
		if (in_use(w) && w->dealer.lost && now >= w->dealer.lost_ms + EVENTS_RELINK_MS)
			relink(ev, i, &w->dealer);
		if (in_use(w) && replaying(w) && now >= w->deadline_ms)
			replay_done(ev, i, false, "timeout");
		if (in_use(w) && (readable(w->sub.s) || readable(w->dealer.s) ||
				  readable(w->sub.mon) || readable(w->dealer.mon)))
			more = true;
		if (budget <= 0) {
			ev->rr = (i + 1) % ev->nw;
			more = true;
			break;
		}
	}
	return more;
}

size_t events_initial_syncs(const struct events *ev)
{
	size_t n = 0;

	for (uint32_t id = 0; ev && id < ev->nw; id++)
		n += events_state_initial(ev->w[id].state);
	return n;
}

int events_timeout_ms(const struct events *ev)
{
	int64_t first = next_deadline(ev), now = now_ms();

	if (first == INT64_MAX)
		return -1;
	return first > now ? (int)(first - now) : 0;
}

int events_worker_stats(const struct events *ev, uint32_t id, struct events_worker_stats *st)
{
	const struct evw *w;

	if (id >= ev->nw || !in_use(&ev->w[id]))
		return -ENOENT;
	w = &ev->w[id];
	*st = w->st;
	st->next_seq = w->next_seq;
	st->have_seq = has_seq(w);
	st->replaying = replaying(w);
	st->state = w->state;
	st->flags = w->flags;
	st->pending = w->pend_n;
	st->pending_bytes = w->pend_bytes;
	return 0;
}

/* Names by worker id, for the index's labels. Caller frees the array (not the names). */
static const char **name_table(const struct events *ev)
{
	const char **names = calloc(ev->nw, sizeof(*names));

	for (uint32_t i = 0; names && i < ev->nw; i++)
		names[i] = in_use(&ev->w[i]) ? ev->w[i].name : NULL;
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

/* The KV event stream's /metrics families (daemon/catalog.c lists them), in the order
 * events_metrics writes them; the index's own (kv/index.c: index_families) follow. */
enum {
	EF_BATCHES,
	EF_EVENTS,
	EF_SEQ_GAPS,
	EF_REPLAYS,
	EF_RESTARTS,
	EF_WORKER_DROPS,
	EF_DISCONNECTS,
	EF_DECODE_ERRORS,
	EF_UNKNOWN_EVENTS,
	EF_LAST_SEQ,
	EF_DROPPED,
	EF_QUEUE_OVERFLOWS,
	EF_REPLAYING,
	EF_QUEUE_LIMIT_BYTES,
	EF_QUEUE_LIMIT_BATCHES,
	EF_EVENT_LIMIT_BYTES,
	EF_EVENT_QUEUE_LIMIT,
	EF_REPLAY_LIMIT_TIMEOUT,
	EF_QUEUED_BYTES,
	EF_COUNT
};
const struct metrics_family events_families[EF_COUNT] = {
    [EF_BATCHES] = {"kvsplice_kv_batches_total", METRICS_COUNTER, "Event batches applied.",
		    "worker"},
    [EF_EVENTS] = {"kvsplice_kv_events_total", METRICS_COUNTER, "Events decoded, by type.",
		   "worker,type"},
    [EF_SEQ_GAPS] = {"kvsplice_kv_seq_gaps_total", METRICS_COUNTER,
		     "Sequence gaps (batches lost by PUB/SUB).", "worker"},
    [EF_REPLAYS] = {"kvsplice_kv_replays_total", METRICS_COUNTER,
		    "Replays from the worker's replay endpoint.", "worker,result"},
    [EF_RESTARTS] = {"kvsplice_kv_restarts_total", METRICS_COUNTER,
		     "Worker restarts seen (sequence went back).", "worker"},
    [EF_WORKER_DROPS] = {"kvsplice_kv_worker_drops_total", METRICS_COUNTER,
			 "Times a worker's blocks were dropped as untrustworthy.", "worker"},
    [EF_DISCONNECTS] = {"kvsplice_kv_disconnects_total", METRICS_COUNTER,
			"Connections to the worker's publisher lost (its blocks dropped, synced "
			"again when back).",
			"worker"},
    [EF_DECODE_ERRORS] = {"kvsplice_kv_decode_errors_total", METRICS_COUNTER,
			  "Input that did not decode, by what.", "worker,what"},
    [EF_UNKNOWN_EVENTS] = {"kvsplice_kv_unknown_events_total", METRICS_COUNTER,
			   "Events of unknown type (skipped).", "worker"},
    [EF_LAST_SEQ] = {"kvsplice_kv_last_seq", METRICS_GAUGE, "Last sequence number received.",
		     "worker"},
    [EF_DROPPED] = {"kvsplice_kv_dropped_total", METRICS_COUNTER,
		    "Input dropped unread: messages above the size bound, live batches discarded "
		    "with a full replay queue.",
		    "worker,what"},
    [EF_QUEUE_OVERFLOWS] = {"kvsplice_kv_queue_overflows_total", METRICS_COUNTER,
			    "Replays given up because the live queue hit a bound.", "worker,bound"},
    [EF_REPLAYING] = {"kvsplice_kv_replaying", METRICS_GAUGE,
		      "1 while a worker's replay (or initial sync) runs.", "worker"},
    [EF_QUEUE_LIMIT_BYTES] = {"kvsplice_kv_queue_limit_bytes", METRICS_GAUGE,
			      "Bound on the live batches queued during a replay (--kv-queue-bytes "
			      "per worker, --kv-queue-total-bytes over all).",
			      "scope"},
    [EF_QUEUE_LIMIT_BATCHES] = {"kvsplice_kv_queue_limit_batches", METRICS_GAUGE,
				"Bound on the number of live batches queued per worker during a "
				"replay (--kv-queue-batches).",
				"scope"},
    [EF_EVENT_LIMIT_BYTES] = {"kvsplice_kv_event_limit_bytes", METRICS_GAUGE,
			      "Largest KV event message read from a worker's publisher or replay "
			      "endpoint; a larger one is dropped unread (--kv-event-max-bytes).",
			      NULL},
    [EF_EVENT_QUEUE_LIMIT] = {"kvsplice_kv_event_queue_limit_messages", METRICS_GAUGE,
			      "KV event messages libzmq holds per worker until kvsplice reads them "
			      "(the SUB's receive high-water mark; past it the publisher drops: a "
			      "gap) (--kv-event-queue).",
			      NULL},
    [EF_REPLAY_LIMIT_TIMEOUT] = {"kvsplice_kv_replay_limit_timeout_seconds", METRICS_GAUGE,
				 "A worker's replay (or initial sync) not answered whole within "
				 "this long is given up (--kv-replay-timeout).",
				 NULL},
    [EF_QUEUED_BYTES] = {"kvsplice_kv_queued_bytes", METRICS_GAUGE,
			 "Payload bytes of the live batches queued during a replay.", "worker"},
};
const size_t events_nfamilies = EF_COUNT;

int events_metrics(const struct events *ev, struct buf *out)
{
	/* The per-worker counters, one row a series: its family, its field of the worker's stats,
	 * its label after worker's (NULL: none). A family's rows are adjacent. */
	static const struct {
		int family;
		size_t off;
		const char *label;
	} m[] = {
#define F(x) offsetof(struct events_worker_stats, x)
	    {EF_BATCHES, F(batches), NULL},
	    {EF_EVENTS, F(stored), "type=\"BlockStored\""},
	    {EF_EVENTS, F(removed), "type=\"BlockRemoved\""},
	    {EF_EVENTS, F(cleared), "type=\"AllBlocksCleared\""},
	    {EF_EVENTS, F(other_group_events), "type=\"other_kv_group\""},
	    {EF_SEQ_GAPS, F(gaps), NULL},
	    {EF_REPLAYS, F(replays_ok), "result=\"ok\""},
	    {EF_REPLAYS, F(replays_failed), "result=\"failed\""},
	    {EF_RESTARTS, F(restarts), NULL},
	    {EF_WORKER_DROPS, F(drops), NULL},
	    {EF_DISCONNECTS, F(disconnects), NULL},
	    {EF_DECODE_ERRORS, F(bad_frames), "what=\"frames\""},
	    {EF_DECODE_ERRORS, F(bad_batches), "what=\"batch\""},
	    {EF_DECODE_ERRORS, F(bad_events), "what=\"event\""},
	    {EF_UNKNOWN_EVENTS, F(unknown_events), NULL},
	    {EF_LAST_SEQ, F(last_seq_seen), NULL},
	    {EF_DROPPED, F(oversized), "what=\"oversized\""},
	    {EF_DROPPED, F(dropped_queued), "what=\"queued\""},
	    {EF_QUEUE_OVERFLOWS, F(overflow_batches), "bound=\"batches\""},
	    {EF_QUEUE_OVERFLOWS, F(overflow_bytes), "bound=\"worker_bytes\""},
	    {EF_QUEUE_OVERFLOWS, F(overflow_total), "bound=\"total_bytes\""},
#undef F
	};
	const struct metrics_family *f = events_families;
	const char **names;
	int rc = 0;

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		const char *name = f[m[k].family].name;

		if (k == 0 || m[k].family != m[k - 1].family)
			rc |= metrics_head(out, &f[m[k].family]);
		for (uint32_t i = 0; i < ev->nw; i++) {
			const struct evw *w = &ev->w[i];
			if (!in_use(w))
				continue;
			rc |= buf_printf(out, "%s{worker=\"", name);
			rc |= put_name(out, w->name);
			rc |= buf_printf(out, "\"%s%s} %llu\n", m[k].label ? "," : "",
					 m[k].label ? m[k].label : "",
					 (unsigned long long)*(
					     const uint64_t *)((const char *)&w->st + m[k].off));
		}
	}
	rc |= metrics_head(out, &f[EF_REPLAYING]);
	for (uint32_t i = 0; i < ev->nw; i++) {
		if (!in_use(&ev->w[i]))
			continue;
		rc |= buf_printf(out, "%s{worker=\"", f[EF_REPLAYING].name);
		rc |= put_name(out, ev->w[i].name);
		rc |= buf_printf(out, "\"} %d\n", replaying(&ev->w[i]));
	}
	rc |= metrics_head(out, &f[EF_QUEUE_LIMIT_BYTES]);
	rc |= buf_printf(out, "%s{scope=\"worker\"} %zu\n%s{scope=\"total\"} %zu\n",
			 f[EF_QUEUE_LIMIT_BYTES].name, ev->max_pending_bytes,
			 f[EF_QUEUE_LIMIT_BYTES].name, ev->max_pending_total_bytes);
	rc |= metrics_head(out, &f[EF_QUEUE_LIMIT_BATCHES]);
	rc |= buf_printf(out, "%s{scope=\"worker\"} %zu\n", f[EF_QUEUE_LIMIT_BATCHES].name,
			 ev->max_pending);
	rc |= metrics_head(out, &f[EF_EVENT_LIMIT_BYTES]);
	rc |= buf_printf(out, "%s %zu\n", f[EF_EVENT_LIMIT_BYTES].name, ev->max_payload);
	rc |= metrics_head(out, &f[EF_EVENT_QUEUE_LIMIT]);
	rc |= buf_printf(out, "%s %d\n", f[EF_EVENT_QUEUE_LIMIT].name, ev->rcvhwm);
	rc |= metrics_head(out, &f[EF_REPLAY_LIMIT_TIMEOUT]);
	rc |= buf_printf(out, "%s %g\n", f[EF_REPLAY_LIMIT_TIMEOUT].name,
			 ev->replay_timeout_ms / 1000.0);
	rc |= metrics_head(out, &f[EF_QUEUED_BYTES]);
	for (uint32_t i = 0; i < ev->nw; i++) {
		if (!in_use(&ev->w[i]))
			continue;
		rc |= buf_printf(out, "%s{worker=\"", f[EF_QUEUED_BYTES].name);
		rc |= put_name(out, ev->w[i].name);
		rc |= buf_printf(out, "\"} %zu\n", ev->w[i].pend_bytes);
	}
	names = name_table(ev);
	if (!names)
		return -ENOMEM;
	rc |= index_metrics(ev->idx, names, ev->nw, out);
	free(names);
	return rc ? -ENOMEM : 0;
}

/* The coarse state /debug/index has always shown as "state" (events_state_name is "seq_state"). */
static const char *state_summary(enum events_state s)
{
	if (events_state_initial(s))
		return "syncing";
	if (events_state_replaying(s))
		return "replaying";
	return events_state_has_seq(s) ? "live" : "waiting";
}

int events_debug_json(const struct events *ev, struct buf *out)
{
	const char **names;
	int rc = 0, first = 1;

	rc |= buf_puts(out, "{\"workers\":[");
	for (uint32_t i = 0; i < ev->nw; i++) {
		const struct evw *w = &ev->w[i];
		uint64_t gpu = 0, cpu = 0;
		if (!in_use(w))
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
		    ",\"state\":\"%s\",\"seq_state\":\"%s\",\"pub_lost\":%s,"
		    "\"restart_check\":%s,\"next_seq\":%llu,\"pending\":%zu,\"blocks_gpu\":%llu,"
		    "\"blocks_cpu\":%llu,\"stale\":%s,\"batches\":%llu,\"events\":%llu,"
		    "\"gaps\":%llu,\"replays_ok\":%llu,\"replays_failed\":%llu,\"restarts\":%llu,"
		    "\"drops\":%llu,\"bad_frames\":%llu,\"bad_batches\":%llu,\"bad_events\":%llu,"
		    "\"unknown_events\":%llu,\"pending_bytes\":%zu,\"oversized\":%llu,"
		    "\"queue_overflows\":%llu,\"dropped_queued\":%llu,\"disconnects\":%llu}",
		    state_summary(w->state), events_state_name(w->state),
		    w->flags & EVENTS_F_PUB_LOST ? "true" : "false",
		    w->flags & EVENTS_F_CHECK_RESTART ? "true" : "false",
		    (unsigned long long)w->next_seq, w->pend_n, (unsigned long long)gpu,
		    (unsigned long long)cpu, index_worker_stale(ev->idx, i) ? "true" : "false",
		    (unsigned long long)w->st.batches, (unsigned long long)w->st.events,
		    (unsigned long long)w->st.gaps, (unsigned long long)w->st.replays_ok,
		    (unsigned long long)w->st.replays_failed, (unsigned long long)w->st.restarts,
		    (unsigned long long)w->st.drops, (unsigned long long)w->st.bad_frames,
		    (unsigned long long)w->st.bad_batches, (unsigned long long)w->st.bad_events,
		    (unsigned long long)w->st.unknown_events, w->pend_bytes,
		    (unsigned long long)w->st.oversized,
		    (unsigned long long)(w->st.overflow_batches + w->st.overflow_bytes +
					 w->st.overflow_total),
		    (unsigned long long)w->st.dropped_queued,
		    (unsigned long long)w->st.disconnects);
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
