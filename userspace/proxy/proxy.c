// SPDX-License-Identifier: Apache-2.0
/* proxy: the driver (see proxy.h for the contract, proxy/types.h for the files of the proxy and
 * docs/internals/proxy.md for the state machine). Options, listeners, accept, a connection's
 * epoll interest, housekeeping and drain are here; so is the state machine's step function: the
 * steps (request, upstream, relay, answer) say what happened (enum step) and drive() alone
 * moves a connection's state. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "node/bpfctl.h"
#include "core/clock.h"
#include "core/log.h"
#include "proxy/answer.h"
#include "proxy/conn.h"
#include "proxy/limits.h"
#include "proxy/pool.h"
#include "proxy/relay.h"
#include "proxy/request.h"
#include "proxy/upstream.h"

void proxy_opts_default(struct proxy_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backlog = PROXY_DEFAULT_BACKLOG;
	o->max_head = 64 << 10;
	o->max_body = 32 << 20;
	o->header_timeout_ms = 30000;
	o->idle_timeout_ms = 300000;
	o->connect_timeout_ms = 3000;
	o->drain_timeout_ms = 30000;
	o->pool_idle_timeout_ms = 4000; /* below uvicorn's (vLLM's) 5 s keep-alive timeout */
	o->pool_max = 64;
	o->mark = 0;
	o->relay = PROXY_RELAY_SPLICE;
	o->max_conns = PROXY_DEFAULT_MAX_CONNS;
	o->max_conns_per_ip = PROXY_DEFAULT_MAX_CONNS_PER_IP;
	o->max_buffered = PROXY_DEFAULT_MAX_BUFFERED;
	o->forwarded_for = true;
	for (int i = 0; i < PROXY_MAX_LISTEN; i++)
		o->listen_fd[i] = -1;
}

int proxy_relay_parse(const char *s)
{
	if (strcmp(s, "copy") == 0)
		return PROXY_RELAY_COPY;
	if (strcmp(s, "splice") == 0)
		return PROXY_RELAY_SPLICE;
	return -1;
}

const char *proxy_relay_name(enum proxy_relay r)
{
	return r == PROXY_RELAY_COPY ? "copy" : "splice";
}

/* --- a connection's life ---------------------------------------------------------------------- */

static void on_client(struct loop_ev *ev, uint32_t events);
static void listeners_close(struct proxy *p);

static struct conn *alloc_conn(struct proxy *p)
{
	struct conn *c = p->free_conns;

	if (c) {
		conn_list_unlink(&p->free_conns, c);
		p->nfree--;
		memset(c, 0, sizeof(*c)); /* its buffers were freed when it was reaped */
	} else {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
	}
	c->p = p;
	c->pipe[0] = c->pipe[1] = -1;
	c->ev.cb = on_client;
	return c;
}

/* Which Service is this connection for? BPF's original destination; for a connection that did
 * not come through BPF (no --cgroup, tests) the listener's port, else the only Service. Returns
 * false for an intercepted connection whose original destination no current Service has (one
 * removed since, or an entry a previous process left in the pinned map): it must be closed,
 * never handed to another Service; the client's retry then takes kube-proxy's path. */
static bool find_service(struct conn *c)
{
	struct proxy *p = c->p;
	const struct service *svc = NULL;
	struct sockaddr_in orig;

	if (p->bpf && bpfctl_origdst_take(p->bpf, &c->peer, &orig) == 0) {
		svc = services_find_vip(p->svcs, orig.sin_addr.s_addr, orig.sin_port);
		if (!svc) {
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &orig.sin_addr, a, sizeof(a));
			log_warn("proxy",
				 "intercepted connection for %s:%u matches no Service: closed", a,
				 ntohs(orig.sin_port));
			metrics_inc(p->st.refused_unknown);
			/* a stale selection: the client's retry must take kube-proxy's path */
			bpfctl_service_del(p->bpf, orig.sin_addr.s_addr, orig.sin_port);
			return false;
		}
	}
	for (size_t i = 0; !svc && p->svcs && i < p->svcs->n; i++)
		if (p->svcs->v[i].vip.sin_port == p->l[c->lidx].addr.sin_port)
			svc = &p->svcs->v[i];
	if (!svc && p->svcs && p->svcs->n == 1)
		svc = &p->svcs->v[0];
	if (svc)
		snprintf(c->svc_name, sizeof(c->svc_name), "%s", svc->name);
	return true;
}

/* Is a new connection from peer over a connection limit? Returns the refusal's message (and
 * counts it), or NULL. */
static const char *over_limit(struct proxy *p, const struct sockaddr_in *peer)
{
	if (p->o.max_conns && p->nlive >= p->o.max_conns) {
		metrics_inc(p->st.refused_conns);
		return "kvsplice has too many connections (--max-conns); retry later";
	}
	if (p->o.max_conns_per_ip &&
	    limits_ip_count(&p->ips, peer->sin_addr.s_addr) >= (uint32_t)p->o.max_conns_per_ip) {
		metrics_inc(p->st.refused_per_ip);
		return "too many connections from this client (--max-conns-per-ip); retry later";
	}
	return NULL;
}

static void interest(struct conn *c);

/* Makes fd, a client connection from peer (to listener lidx), a struct conn, or answers it 503
 * and closes it when it is over a connection limit. Returns 0, or -ENOMEM (fd closed). */
static int admit(struct proxy *p, int fd, const struct sockaddr_in *peer, int lidx)
{
	const char *refuse = over_limit(p, peer);
	struct conn *c;

	if (refuse) {
		struct sockaddr_in orig;

		if (p->bpf) /* its original destination is not needed: drop it */
			bpfctl_origdst_take(p->bpf, peer, &orig);
		answer_refused(p, fd, refuse);
		return 0;
	}
	c = alloc_conn(p);
	if (!c || (p->o.max_conns_per_ip && limits_ip_add(&p->ips, peer->sin_addr.s_addr))) {
		if (c)
			conn_list_push(&p->zombies, c);
		close(fd);
		return -ENOMEM;
	}
	c->ev.fd = fd; /* TCP_NODELAY is inherited from the listener */
	c->peer = *peer;
	c->lidx = lidx;
	c->state = C_HEAD;
	c->t_idle = clock_ms();
	c->deadline = c->t_idle + (uint64_t)p->o.header_timeout_ms;
	conn_list_push(&p->live, c);
	p->nlive++;
	metrics_inc(p->st.accepted);
	metrics_gauge_add(p->st.active, 1);
	if (!find_service(c)) {
		conn_close(c);
		return 0;
	}
	interest(c);
	return 0;
}

static void on_accept(struct loop_ev *ev, uint32_t events)
{
	struct listener *l = container_of(ev, struct listener, ev);
	struct proxy *p = l->p;

	for (int n = 0; n < 64; n++) {
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		int fd =
		    accept4(ev->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* out of descriptors or memory: stop accepting for a moment instead
				 * of spinning on a listener that stays readable */
				log_warn("proxy", "accept: %s: pausing accepts for %d ms",
					 strerror(errno), PROXY_ACCEPT_PAUSE_MS);
				loop_set(p->loop, ev, 0);
				p->accept_resume = clock_ms() + PROXY_ACCEPT_PAUSE_MS;
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_warn("proxy", "accept: %s", strerror(errno));
			}
			return;
		}
		admit(p, fd, &peer, l->idx);
	}
}

int proxy_adopt(struct proxy *p, int fd, const struct sockaddr_in *peer)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return admit(p, fd, peer, 0);
}

/* --- interest --------------------------------------------------------------------------------- */

/* The most client bytes buffered in c->in in c's state: a head is at most --max-head, so that is
 * all the pipelined input worth holding while heads are read (the rest waits in the socket);
 * body bytes move to c->body as they come; while the upstream has the request, pipelined or
 * tunnel bytes wait up to PROXY_HIGH_WATER. */
static size_t client_in_limit(const struct conn *c)
{
	if (c->state == C_HEAD)
		return c->p->o.max_head;
	return PROXY_HIGH_WATER;
}

/* Sets ev's interest; none takes it out of epoll (ERR/HUP would still wake us: "CPU" in
 * docs/internals/proxy.md). */
static int ev_want(struct loop *l, struct loop_ev *ev, uint32_t events)
{
	if (!events) {
		loop_del(l, ev);
		return 0;
	}
	return loop_set(l, ev, events);
}

/* Sets the epoll interest of c and its upstream from the state, and closes a connection that is
 * finished (or lingers it). */
static void interest(struct conn *c)
{
	struct proxy *p = c->p;
	uint32_t ce = 0, ue = 0;
	int rc;

	if (c->ev.fd < 0)
		return;
	if (conn_out_sendable(c) || c->pipe_bytes)
		ce |= EPOLLOUT;
	switch (c->state) {
	case C_HEAD:
	case C_BODY:
		/* answers kvsplice queued are bounded too: no more reading (and no more requests
		 * answered) while a client does not read them */
		if (!conn_has(c, CF_CLI_DONE) && buf_unread(&c->out) < PROXY_HIGH_WATER &&
		    buf_unread(&c->in) < client_in_limit(c))
			ce |= EPOLLIN;
		break;
	/* While a request is with the upstream the client stays readable (pipelined bytes are
	 * buffered, an EOF is noticed) and the upstream keeps the pool's IN|RDHUP mask: in the
	 * common case a request then costs no epoll_ctl at all. */
	case C_CONNECT:
		ue |= EPOLLOUT;
		goto client_in;
	case C_SEND:
		ue |= EPOLLOUT | EPOLLIN | EPOLLRDHUP;
		goto client_in;
	case C_RESP:
		if (buf_unread(&c->out) < PROXY_HIGH_WATER && !c->pipe_bytes)
			ue |= EPOLLIN | EPOLLRDHUP;
	client_in:
		if (!conn_has(c, CF_CLI_RDHUP) && buf_unread(&c->in) < PROXY_HIGH_WATER)
			ce |= EPOLLIN;
		break;
	case C_TUNNEL:
		if (!conn_has(c, CF_CLI_EOF) && buf_unread(&c->in) < PROXY_HIGH_WATER)
			ce |= EPOLLIN;
		if (!conn_has(c, CF_UP_EOF) && buf_unread(&c->out) < PROXY_HIGH_WATER &&
		    !c->pipe_bytes)
			ue |= EPOLLIN;
		if (buf_unread(&c->in))
			ue |= EPOLLOUT;
		break;
	case C_CLOSING:
		if (!conn_out_sendable(c) && !c->pipe_bytes) {
			if (!conn_has(c, CF_LINGER) || conn_has(c, CF_CLI_RDHUP)) {
				conn_close(c);
				return;
			}
			/* lingering close: our side is done, read and drop until the client closes
			 */
			if (!conn_has(c, CF_CLI_SHUT)) {
				shutdown(c->ev.fd, SHUT_WR);
				conn_set(c, CF_CLI_SHUT);
				c->deadline = clock_ms() + PROXY_LINGER_MS;
			}
			ce |= EPOLLIN;
		}
		break;
	}
	/* a client that goes away while we wait for the upstream is noticed (once); while a request
	 * is read, its EOF is found by reading (and with reading paused, a half-close must not
	 * wake us: RDHUP stays level-triggered) */
	if (!conn_has(c, CF_CLI_RDHUP) && c->state != C_TUNNEL &&
	    ((c->state != C_HEAD && c->state != C_BODY) || (ce & EPOLLIN)))
		ce |= EPOLLRDHUP;
	limits_account(c);
	/* outside a tunnel an ERR or HUP of the client closes it (on_client): it stays registered
	 * even with nothing to wait for, so that a client gone while its request is with the
	 * upstream is noticed (and the upstream's work abandoned) */
	rc = c->state == C_TUNNEL ? ev_want(p->loop, &c->ev, ce) : loop_set(p->loop, &c->ev, ce);
	if (rc < 0) {
		conn_close(c);
		return;
	}
	if (c->up && c->up->ev.fd >= 0 && ev_want(p->loop, &c->up->ev, ue) < 0)
		conn_close(c);
}

/* --- driving a connection --------------------------------------------------------------------- */

/* Moves c's state as a step said: the one place (with progress and the event handlers below)
 * where a connection's state changes. A complete request is routed, a lost upstream handed to
 * upstream_failed, and their outcomes applied in turn. Returns the last step. */
static inline enum step drive(struct conn *c, enum step s)
{
	for (;;) {
		switch (s) {
		case STEP_ROUTE:
			s = upstream_route(c);
			continue;
		case STEP_UPSTREAM_LOST:
			s = upstream_failed(c, false);
			continue;
		case STEP_BODY:
			c->state = C_BODY;
			break;
		case STEP_CONNECT:
			c->state = C_CONNECT;
			break;
		case STEP_SEND:
			c->state = C_SEND;
			break;
		case STEP_TUNNEL:
			c->state = C_TUNNEL;
			break;
		case STEP_NEXT:
			c->state = C_HEAD;
			break;
		case STEP_CLOSE:
			c->state = C_CLOSING;
			break;
		case STEP_WAIT:
		case STEP_GONE:
		case STEP_SENT:
			break;
		}
		return s;
	}
}

/* Makes every step possible now, then sets the epoll interest. */
static void progress(struct conn *c)
{
	struct proxy *p = c->p;

	for (int guard = 0; guard < 64 && c->ev.fd >= 0; guard++) {
		enum cstate s = c->state;
		bool again = false;
		enum step r;

		switch (c->state) {
		case C_HEAD:
		case C_BODY:
			if (relay_flush(c) == STEP_GONE)
				return;
			if (buf_unread(&c->out) >= PROXY_HIGH_WATER)
				break; /* answers pile up: wait until the client reads them */
			r = request_read(c);
			if (r == STEP_ROUTE) {
				drive(c, r);
				break;
			}
			r = drive(c, r);
			if (r == STEP_NEXT && buf_unread(&c->in)) {
				/* answered by kvsplice and kept alive: the next pipelined request,
				 * now (bounded by the guard, and by the answers queued) */
				again = true;
			} else if ((r == STEP_WAIT || r == STEP_BODY) && conn_has(c, CF_CLI_DONE)) {
				/* the client has said all it will: a request cut short is an abort
				 */
				if (buf_unread(&c->in) || c->state == C_BODY)
					metrics_inc(p->st.client_aborts);
				c->state = C_CLOSING;
			}
			break;
		case C_CONNECT:
			break;
		case C_SEND:
			r = upstream_send(c);
			if (r != STEP_SENT) {
				drive(c, r);
				break;
			}
			if (conn_has(c, CF_PASSTHROUGH)) {
				c->state = C_TUNNEL;
				conn_touch(c);
				break;
			}
			/* nothing to read before the upstream answers: wait for EPOLLIN instead of
			 * a read that would fail; meanwhile the router finishes what its decision
			 * left for later, in slices while the loop is idle (router_work) */
			c->state = C_RESP;
			interest(c);
			router_sent(p->router, &c->ticket);
			return;
		case C_RESP:
			drive(c, relay_response(c));
			break;
		case C_TUNNEL:
			relay_tunnel(c);
			break;
		case C_CLOSING:
			/* once flushed, interest() closes (or lingers) */
			if (relay_flush(c) == STEP_GONE)
				return;
			break;
		}
		if (c->ev.fd < 0 || (c->state == s && !again))
			break;
	}
	interest(c);
}

/* Reads what the client sent into c->in, within client_in_limit. Returns 0, 1 on EOF, -1 when
 * the connection was closed. */
static int client_read(struct conn *c)
{
	struct proxy *p = c->p;

	for (int i = 0; i < 4; i++) {
		size_t limit = client_in_limit(c), un = buf_unread(&c->in), room;
		ssize_t n;

		if (un >= limit)
			break; /* pipelined bytes wait in the socket */
		if (buf_reserve(&c->in, PROXY_CLIENT_CHUNK) < 0) {
			conn_close(c);
			return -1;
		}
		room = c->in.cap - c->in.len - 1;
		if (room > limit - un)
			room = limit - un;
		n = read(c->ev.fd, c->in.data + c->in.len, room);
		if (n > 0) {
			c->in.len += (size_t)n;
			c->in.data[c->in.len] = '\0';
			if (c->requests > 0 && !c->t_req && c->state == C_HEAD)
				c->deadline = clock_ms() + (uint64_t)p->o.header_timeout_ms;
			if ((size_t)n < room)
				break;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n < 0) {
			conn_close(c);
			return -1;
		}
		return 1;
	}
	return 0;
}

/* Events of a client socket. */
static void on_client(struct loop_ev *ev, uint32_t events)
{
	struct conn *c = container_of(ev, struct conn, ev);
	struct proxy *p = c->p;

	if (events & EPOLLERR) {
		metrics_inc(p->st.client_aborts);
		conn_close(c);
		return;
	}
	if ((events & EPOLLRDHUP) && c->state != C_TUNNEL && c->state != C_HEAD &&
	    c->state != C_BODY) {
		/* the client went away (or half-closed) while its response is pending: finish
		 * this response, then close */
		conn_set(c, CF_CLI_RDHUP | CF_CLOSE_AFTER);
	}
	if ((events & EPOLLIN) && c->state == C_CLOSING) {
		char junk[16384];
		ssize_t n = read(c->ev.fd, junk, sizeof(junk));

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	if ((events & EPOLLIN) && c->state != C_TUNNEL) {
		int r = client_read(c);

		if (r < 0)
			return;
		if (r == 1) {
			/* EOF: serve what was sent (complete requests, or a pass-through
			 * stream), then close */
			conn_set(c, CF_CLI_RDHUP | CF_CLI_DONE);
			if (c->state == C_HEAD && !buf_unread(&c->in) && !conn_out_sendable(c) &&
			    !c->pipe_bytes) {
				conn_close(c); /* the usual end of a keep-alive connection */
				return;
			}
		}
	}
	if ((events & EPOLLHUP) && c->state != C_TUNNEL) {
		conn_close(c);
		return;
	}
	progress(c);
}

/* Events of an upstream socket (its owner's state machine, or the pool's); pool.c gives it to
 * every upstream as p->upstream_cb. */
static void on_upstream(struct loop_ev *ev, uint32_t events)
{
	struct upstream *u = container_of(ev, struct upstream, ev);
	struct conn *c = u->c;

	if (!c) { /* idle in the pool: the server closed it or sent junk */
		pool_close(u);
		return;
	}
	if (c->state == C_CONNECT) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(u->ev.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			char show[CONN_SHOW_MAX];

			log_debug("proxy", "upstream connect: %s (%s)", strerror(err),
				  conn_show(c, show, sizeof(show)));
			drive(c, upstream_failed(c, true));
			progress(c);
			return;
		}
		u->connecting = false;
		router_connect_ok(c->p->router, &c->ticket);
		c->state = C_SEND;
		conn_touch(c);
	} else if (c->state == C_SEND && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		/* the server answers (or closes) before taking the whole request */
		enum step r = upstream_send(c);

		if (r != STEP_SENT && r != STEP_WAIT) {
			drive(c, r);
			progress(c);
			return;
		}
		if (!conn_has(c, CF_PASSTHROUGH)) {
			if (c->fwd_sent < c->fwd.len + c->body.len) {
				/* stop sending; the connection cannot be reused after this */
				c->fwd_sent = c->fwd.len + c->body.len;
				c->rs.extra = true;
			}
			c->state = C_RESP;
		}
	}
	/* no deadline moves here: only bytes moved do (a dead socket's wake-ups are not life) */
	progress(c);
}

/* --- housekeeping ----------------------------------------------------------------------------- */

static void reap(struct proxy *p)
{
	while (p->zombies) {
		struct conn *c = p->zombies;

		conn_list_unlink(&p->zombies, c);
		buf_free(&c->in);
		buf_free(&c->out);
		buf_free(&c->fwd);
		buf_free(&c->body);
		if (p->nfree < PROXY_FREE_MAX) {
			conn_list_push(&p->free_conns, c);
			p->nfree++;
		} else {
			free(c);
		}
	}
	pool_reap(p, false);
}

void proxy_tick(struct proxy *p)
{
	uint64_t now = clock_ms();
	struct conn *c, *next;

	reap(p);
	if (p->draining && p->listen_until && now >= p->listen_until)
		listeners_close(p);
	if (p->accept_resume && now >= p->accept_resume) {
		p->accept_resume = 0;
		if (!p->accept_off)
			for (int i = 0; i < p->nl; i++)
				if (p->l[i].ev.fd >= 0)
					loop_set(p->loop, &p->l[i].ev, EPOLLIN);
	}
	for (c = p->live; c; c = next) {
		next = c->next;
		if ((c->acct || c->pipe[0] >= 0) && c->state == C_HEAD && !c->t_req &&
		    !buf_unread(&c->in) && !buf_unread(&c->out) && !c->pipe_bytes &&
		    now >= c->t_idle + PROXY_IDLE_TRIM_MS) {
			/* idle keep-alive: it holds no buffer, and no pipe descriptors */
			limits_trim(c, 0);
			conn_pipe_close(c);
		}
		if ((c->state == C_SEND || c->state == C_RESP) &&
		    router_ticket_hung(p->router, &c->ticket)) {
			enum step s = upstream_abandon(c);

			if (s != STEP_WAIT) {
				drive(c, s);
				progress(c);
			}
			if (c->ev.fd < 0)
				continue;
		}
		if (p->draining && c->state == C_HEAD && !c->t_req && !buf_unread(&c->in) &&
		    !conn_out_sendable(c) && !c->pipe_bytes &&
		    now >= (c->t_idle > p->drain_start ? c->t_idle : p->drain_start) +
			       PROXY_DRAIN_IDLE_MS) {
			conn_close(c); /* its client sent nothing more: nothing races the close */
			continue;
		}
		if (c->deadline > now)
			continue;
		switch (c->state) {
		case C_HEAD:
			if (!buf_unread(&c->in) && !conn_out_sendable(c)) {
				metrics_inc(p->st.idle_timeouts);
				conn_close(c);
				break;
			}
			/* fallthrough */
		case C_BODY:
			drive(c, answer_error(c, 408, "timed out reading the request", true));
			interest(c);
			break;
		case C_CLOSING:
			conn_close(c); /* a slow reader of an error, or the end of a linger */
			break;
		case C_CONNECT: {
			char show[CONN_SHOW_MAX];

			log_debug("proxy", "upstream connect timed out (%s)",
				  conn_show(c, show, sizeof(show)));
			drive(c, upstream_failed(c, true));
			progress(c);
			break;
		}
		case C_SEND:
		case C_RESP:
			if (!c->rs.started) {
				/* the endpoint took the request but says nothing */
				drive(c, answer_error(c, 504, "the endpoint did not answer in time",
						      true));
				interest(c);
				break;
			}
			/* fallthrough */
		default:
			metrics_inc(p->st.idle_timeouts);
			conn_close(c);
			break;
		}
	}
	pool_expire(p, now);
	if (p->draining && now >= p->drain_deadline) {
		listeners_close(p);
		for (c = p->live; c; c = next) {
			next = c->next;
			conn_close(c);
		}
	}
	reap(p);
}

/* Closes this process's listening sockets. Shared ones (handed over) live on in the other
 * process: they leave this loop's epoll set first (closing our fd alone would not remove them). */
static void listeners_close(struct proxy *p)
{
	for (int i = 0; i < p->nl; i++) {
		if (p->l[i].ev.fd < 0)
			continue;
		loop_del(p->loop, &p->l[i].ev);
		close(p->l[i].ev.fd);
		p->l[i].ev.fd = -1;
	}
	p->listen_until = 0;
}

static void drain_start(struct proxy *p)
{
	uint64_t now = clock_ms();

	p->draining = true;
	p->drain_start = now;
	p->drain_deadline = now + (uint64_t)p->o.drain_timeout_ms;
	metrics_gauge_set(p->st.draining, 1);
	pool_expire(p, UINT64_MAX);
	log_info("proxy", "draining %d connection(s)", p->nlive);
}

void proxy_stop(struct proxy *p)
{
	if (p->draining)
		return;
	/* new connects go the Service's DNAT way from now on; what BPF already sent here is
	 * still accepted for a moment, so nothing queued on the listener is reset */
	if (p->bpf && p->nl && p->l[0].ev.fd >= 0)
		bpfctl_clear_listener(p->bpf, p->l[0].ev.fd);
	drain_start(p);
	p->listen_until = p->drain_start + PROXY_STOP_GRACE_MS;
}

void proxy_handed_over(struct proxy *p)
{
	listeners_close(p);
	if (!p->draining)
		drain_start(p);
}

bool proxy_done(const struct proxy *p)
{
	bool listening = false;

	for (int i = 0; i < p->nl; i++)
		listening |= p->l[i].ev.fd >= 0;
	return p->draining && p->nlive == 0 && !listening;
}

bool proxy_draining(const struct proxy *p)
{
	return p->draining;
}

/* --- set-up ----------------------------------------------------------------------------------- */

/* The proxy's /metrics families (daemon/catalog.c lists them), in the order stats_init registers
 * them. */
enum {
	PF_ACCEPTED,
	PF_ACTIVE,
	PF_REFUSED,
	PF_REQUESTS,
	PF_RESPONSES,
	PF_ERRORS,
	PF_SHED,
	PF_BUFFER_BYTES,
	PF_IDLE_TIMEOUTS,
	PF_CLIENT_ABORTS,
	PF_PASSTHROUGH,
	PF_UPGRADES,
	PF_UP_CONNECTS,
	PF_UP_CONNECT_FAILURES,
	PF_UP_REUSED,
	PF_UP_STALE,
	PF_UP_RETRIES,
	PF_UP_RESETS,
	PF_UP_ABANDONED,
	PF_UP_BAD_RESPONSES,
	PF_UP_IDLE,
	PF_RELAY_BYTES,
	PF_DRAINING,
	PF_DURATION,
	PF_COUNT
};
const struct metrics_family proxy_families[PF_COUNT] = {
    [PF_ACCEPTED] = {"kvsplice_connections_accepted_total", METRICS_COUNTER,
		     "Client connections accepted.", NULL},
    [PF_ACTIVE] = {"kvsplice_connections_active", METRICS_GAUGE, "Client connections open now.",
		   NULL},
    [PF_REFUSED] = {"kvsplice_connections_refused_total", METRICS_COUNTER,
		    "Client connections closed at once, by reason: over a limit (answered 503), or "
		    "intercepted for an address no current Service has (closed: the retry takes "
		    "kube-proxy's path).",
		    "reason"},
    [PF_REQUESTS] = {"kvsplice_requests_total", METRICS_COUNTER,
		     "HTTP requests read from clients (complete heads).", NULL},
    [PF_RESPONSES] = {"kvsplice_responses_total", METRICS_COUNTER,
		      "Responses sent to clients, by status class.", "class"},
    [PF_ERRORS] = {"kvsplice_errors_total", METRICS_COUNTER,
		   "Requests answered by the proxy itself with an error.", "reason"},
    [PF_SHED] = {"kvsplice_shed_total", METRICS_COUNTER,
		 "Requests shed with 503 + Retry-After, by the limit.", "reason"},
    [PF_BUFFER_BYTES] = {"kvsplice_buffer_bytes", METRICS_GAUGE,
			 "Bytes of client connection buffers (request heads and bodies, relayed "
			 "bytes).",
			 NULL},
    [PF_IDLE_TIMEOUTS] = {"kvsplice_idle_timeouts_total", METRICS_COUNTER,
			  "Connections closed for idleness.", NULL},
    [PF_CLIENT_ABORTS] = {"kvsplice_client_aborts_total", METRICS_COUNTER,
			  "Client connections that failed or closed mid-request.", NULL},
    [PF_PASSTHROUGH] = {"kvsplice_passthrough_connections_total", METRICS_COUNTER,
			"Connections relayed as plain TCP (not HTTP/1.x).", NULL},
    [PF_UPGRADES] = {"kvsplice_upgrades_total", METRICS_COUNTER,
		     "Upgrade requests the endpoint switched (101) to a tunnel.", NULL},
    [PF_UP_CONNECTS] = {"kvsplice_upstream_connects_total", METRICS_COUNTER,
			"New upstream connections started.", NULL},
    [PF_UP_CONNECT_FAILURES] = {"kvsplice_upstream_connect_failures_total", METRICS_COUNTER,
				"Upstream connects that failed or timed out.", NULL},
    [PF_UP_REUSED] = {"kvsplice_upstream_reused_total", METRICS_COUNTER,
		      "Requests sent over a pooled upstream connection.", NULL},
    [PF_UP_STALE] = {"kvsplice_upstream_stale_total", METRICS_COUNTER,
		     "Pooled upstream connections found closed or holding stray bytes at reuse "
		     "(dropped).",
		     NULL},
    [PF_UP_RETRIES] = {"kvsplice_upstream_retries_total", METRICS_COUNTER,
		       "Requests retried on another (or a fresh) connection.", NULL},
    [PF_UP_RESETS] = {"kvsplice_upstream_resets_total", METRICS_COUNTER,
		      "Upstream connections lost mid-exchange.", NULL},
    [PF_UP_ABANDONED] = {"kvsplice_upstream_abandoned_total", METRICS_COUNTER,
			 "Requests taken from a worker that stopped answering (its scrapes "
			 "failed): retried elsewhere before any response byte, or their response "
			 "cut after PROXY_HUNG_SILENCE_MS of silence.",
			 "outcome"},
    [PF_UP_BAD_RESPONSES] = {"kvsplice_upstream_bad_responses_total", METRICS_COUNTER,
			     "Malformed responses from endpoints.", NULL},
    [PF_UP_IDLE] = {"kvsplice_upstream_idle_connections", METRICS_GAUGE,
		    "Upstream connections idle in the pool.", NULL},
    [PF_RELAY_BYTES] = {"kvsplice_relay_bytes_total", METRICS_COUNTER,
			"Bytes relayed, by direction.", "direction"},
    [PF_DRAINING] = {"kvsplice_draining", METRICS_GAUGE, "1 while draining after SIGTERM.", NULL},
    [PF_DURATION] = {"kvsplice_request_duration_seconds", METRICS_HISTOGRAM,
		     "From the first request byte to the last response byte.", NULL},
};
const size_t proxy_nfamilies = PF_COUNT;

static void stats_init(struct proxy *p, struct metrics *m)
{
	static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
					0.25,	0.5,   1,      2.5,   5,    10,	   30,	 60};
	static const char *const cls[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
	const struct metrics_family *f = proxy_families;
	struct stats *s = &p->st;
	char lb[32];

	s->accepted = metrics_counter_of(m, &f[PF_ACCEPTED], NULL);
	s->active = metrics_gauge_of(m, &f[PF_ACTIVE], NULL);
	s->refused_conns = metrics_counter_of(m, &f[PF_REFUSED], "reason=\"max_conns\"");
	s->refused_per_ip = metrics_counter_of(m, &f[PF_REFUSED], "reason=\"max_conns_per_ip\"");
	s->refused_unknown =
	    metrics_counter_of(m, &f[PF_REFUSED], "reason=\"unknown_destination\"");
	s->requests = metrics_counter_of(m, &f[PF_REQUESTS], NULL);
	for (int i = 1; i < 6; i++) {
		snprintf(lb, sizeof(lb), "class=\"%s\"", cls[i]);
		s->resp[i] = metrics_counter_of(m, &f[PF_RESPONSES], lb);
	}
	s->resp[0] = s->resp[5];
#define ERR(field, reason) s->field = metrics_counter_of(m, &f[PF_ERRORS], "reason=\"" reason "\"")
	ERR(err_bad, "bad_request");
	ERR(err_405, "method_not_allowed");
	ERR(err_431, "head_too_large");
	ERR(err_413, "body_too_large");
	ERR(err_501, "unsupported");
	ERR(err_503, "no_endpoint");
	ERR(err_502, "bad_gateway");
	ERR(err_504, "gateway_timeout");
	ERR(err_408, "request_timeout");
#undef ERR
	s->shed_buffered = metrics_counter_of(m, &f[PF_SHED], "reason=\"max_buffered\"");
	s->buffer_bytes = metrics_gauge_of(m, &f[PF_BUFFER_BYTES], NULL);
	s->idle_timeouts = metrics_counter_of(m, &f[PF_IDLE_TIMEOUTS], NULL);
	s->client_aborts = metrics_counter_of(m, &f[PF_CLIENT_ABORTS], NULL);
	s->passthrough = metrics_counter_of(m, &f[PF_PASSTHROUGH], NULL);
	s->upgrades = metrics_counter_of(m, &f[PF_UPGRADES], NULL);
	s->up_connects = metrics_counter_of(m, &f[PF_UP_CONNECTS], NULL);
	s->up_connect_fail = metrics_counter_of(m, &f[PF_UP_CONNECT_FAILURES], NULL);
	s->up_reused = metrics_counter_of(m, &f[PF_UP_REUSED], NULL);
	s->up_stale = metrics_counter_of(m, &f[PF_UP_STALE], NULL);
	s->up_retries = metrics_counter_of(m, &f[PF_UP_RETRIES], NULL);
	s->up_reset = metrics_counter_of(m, &f[PF_UP_RESETS], NULL);
	s->up_abandoned_retried = metrics_counter_of(m, &f[PF_UP_ABANDONED], "outcome=\"retried\"");
	s->up_abandoned_cut = metrics_counter_of(m, &f[PF_UP_ABANDONED], "outcome=\"cut\"");
	s->up_bad_resp = metrics_counter_of(m, &f[PF_UP_BAD_RESPONSES], NULL);
	s->idle_pool = metrics_gauge_of(m, &f[PF_UP_IDLE], NULL);
	s->bytes_up = metrics_counter_of(m, &f[PF_RELAY_BYTES], "direction=\"upstream\"");
	s->bytes_down = metrics_counter_of(m, &f[PF_RELAY_BYTES], "direction=\"downstream\"");
	s->draining = metrics_gauge_of(m, &f[PF_DRAINING], NULL);
	s->duration = metrics_histogram_of(m, &f[PF_DURATION], NULL, bounds,
					   (int)(sizeof(bounds) / sizeof(bounds[0])));
}

/* bind(2) of fd to a, retried while the address is in use, for up to 2 s: a process that stops
 * (SIGTERM) keeps its listener for PROXY_STOP_GRACE_MS. 0, or -1 with errno set. */
static int bind_retry(int fd, const struct sockaddr_in *a)
{
	for (int waited = 0;; waited += 50) {
		struct timespec ts = {0, 50 * 1000000L};

		if (bind(fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
			return 0;
		if (errno != EADDRINUSE || waited >= 2000)
			return -1;
		nanosleep(&ts, NULL);
	}
}

int proxy_new(const struct proxy_opts *o, struct loop *loop, struct metrics *m, struct router *r,
	      struct proxy **out)
{
	struct proxy *p = calloc(1, sizeof(*p));
	int rc = -ENOMEM;

	if (!p)
		return -ENOMEM;
	p->o = *o;
	p->loop = loop;
	p->router = r;
	p->upstream_cb = on_upstream;
	stats_init(p, m);
	if (metrics_failed(m))
		goto cleanup;
	for (int i = 0; i < o->nlisten; i++) {
		struct listener *l = &p->l[i];
		socklen_t alen = sizeof(l->addr);
		int one = 1, fd;
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &o->listen[i].sin_addr, a, sizeof(a));
		if (o->listen_fd[i] >= 0) { /* taken over: listening already */
			l->ev.fd = o->listen_fd[i];
			p->nl = i + 1;
			if (getsockname(l->ev.fd, (struct sockaddr *)&l->addr, &alen) < 0) {
				rc = -errno;
				goto cleanup;
			}
			goto listening;
		}
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		l->ev.fd = fd;
		p->nl = i + 1;
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
		    bind_retry(fd, &o->listen[i]) < 0 || listen(fd, o->backlog) < 0 ||
		    getsockname(fd, (struct sockaddr *)&l->addr, &alen) < 0) {
			rc = -errno;
			log_error("proxy", "listen on %s:%u: %s", a, ntohs(o->listen[i].sin_port),
				  strerror(errno));
			goto cleanup;
		}
	listening:
		l->p = p;
		l->idx = i;
		l->ev.cb = on_accept;
		rc = loop_set(loop, &l->ev, EPOLLIN);
		if (rc < 0)
			goto cleanup;
	}
	*out = p;
	return 0;
cleanup:
	proxy_free(p);
	return rc;
}

void proxy_free(struct proxy *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nl; i++)
		if (p->l[i].ev.fd >= 0) {
			loop_del(p->loop, &p->l[i].ev);
			close(p->l[i].ev.fd);
		}
	while (p->live)
		conn_close(p->live);
	pool_expire(p, UINT64_MAX);
	reap(p);
	pool_reap(p, true);
	while (p->free_conns) {
		struct conn *c = p->free_conns;

		conn_list_unlink(&p->free_conns, c);
		free(c);
	}
	buf_free(&p->scratch);
	limits_ip_free(&p->ips);
	services_put(p->svcs);
	free(p);
}

void proxy_accept(struct proxy *p, bool on)
{
	if (p->accept_off == !on)
		return;
	p->accept_off = !on;
	if (on && p->accept_resume)
		return; /* paused (out of descriptors): proxy_tick resumes */
	for (int i = 0; i < p->nl; i++)
		if (p->l[i].ev.fd >= 0)
			loop_set(p->loop, &p->l[i].ev, on ? EPOLLIN : 0);
}

int proxy_listen_fd(const struct proxy *p, int i)
{
	return i >= 0 && i < p->nl ? p->l[i].ev.fd : -1;
}

int proxy_listen_addr(const struct proxy *p, int i, struct sockaddr_in *out)
{
	if (i < 0 || i >= p->nl || p->l[i].ev.fd < 0)
		return -EINVAL;
	*out = p->l[i].addr;
	return 0;
}

void proxy_set_bpf(struct proxy *p, struct bpfctl *b)
{
	p->bpf = b;
}

void proxy_set_services(struct proxy *p, struct services *s)
{
	services_get(s);
	services_put(p->svcs);
	p->svcs = s;
}
