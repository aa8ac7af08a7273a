// SPDX-License-Identifier: Apache-2.0
/* keeper: see keeper.h. */
#include "node/keeper.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node/bpfctl.h"
#include "core/clock.h"
#include "node/handover.h"
#include "core/log.h"
#include "core/loop.h"

/* The daemon's end. */
struct keeper {
	pid_t pid;
	int pipe_wr; /* its end of the pipe: "q" then close = leave; closed by a crash = take over
		      */
};

pid_t keeper_pid(const struct keeper *k)
{
	return k ? k->pid : -1;
}

int keeper_spawn(const struct keeper_opts *o, struct keeper **out)
{
	char a_lfd[16], a_pfd[16], a_addr[32], a_mark[16], a_hold[16], a_idle[16], a_queue[16];
	char ip[INET_ADDRSTRLEN], *argv[11];
	struct keeper *k;
	int p[2];
	pid_t pid;

	*out = NULL;
	if (o->listen_fd < 0 || !o->pin_dir)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	/* the daemon's end close-on-exec (nothing else it starts may hold it: the keeper would
	 * never see it end); the keeper's end is opened for the exec below only */
	if (pipe2(p, O_CLOEXEC) < 0) {
		int err = -errno;

		free(k);
		return err;
	}
	inet_ntop(AF_INET, &o->addr.sin_addr, ip, sizeof(ip));
	snprintf(a_lfd, sizeof(a_lfd), "%d", o->listen_fd);
	snprintf(a_pfd, sizeof(a_pfd), "%d", p[0]);
	snprintf(a_addr, sizeof(a_addr), "%s:%u", ip, ntohs(o->addr.sin_port));
	snprintf(a_mark, sizeof(a_mark), "%u", o->own_mark);
	snprintf(a_hold, sizeof(a_hold), "%d", o->hold_ms);
	snprintf(a_idle, sizeof(a_idle), "%d", o->idle_ms);
	snprintf(a_queue, sizeof(a_queue), "%d", o->queue_ms);
	argv[0] = "kvsplice";
	argv[1] = "--keeper";
	argv[2] = a_lfd;
	argv[3] = a_pfd;
	argv[4] = a_addr;
	argv[5] = (char *)o->pin_dir;
	argv[6] = a_mark;
	argv[7] = a_hold;
	argv[8] = a_idle;
	argv[9] = a_queue;
	argv[10] = NULL;

	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(p[0]);
		close(p[1]);
		free(k);
		log_error("keeper", "fork: %s", strerror(-err));
		return err;
	}
	if (pid == 0) {
		/* the child of a process that may have threads: async-signal-safe calls only, up to
		 * the exec. The daemon's blocked signals (its signalfd's) must not stay blocked. */
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (fcntl(o->listen_fd, F_SETFD, 0) < 0 || fcntl(p[0], F_SETFD, 0) < 0)
			_exit(127);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(p[0]);
	k->pid = pid;
	k->pipe_wr = p[1];
	*out = k;
	log_info("keeper",
		 "pid %d holds a second reference to the listener (a crash resets nothing)",
		 (int)pid);
	return 0;
}

void keeper_release(struct keeper *k)
{
	int st;

	if (!k)
		return;
	if (write(k->pipe_wr, "q", 1) != 1)
		log_warn("keeper", "pid %d is gone already (%s)", (int)k->pid, strerror(errno));
	close(k->pipe_wr);
	/* it leaves at once; a keeper stuck for a second is killed rather than left behind */
	for (int i = 0; i < 100; i++) {
		pid_t r = waitpid(k->pid, &st, WNOHANG);

		if (r == k->pid || (r < 0 && errno == ECHILD)) {
			free(k);
			return;
		}
		struct timespec ts = {0, 10 * 1000000L};

		nanosleep(&ts, NULL);
	}
	log_warn("keeper", "pid %d did not leave: killed", (int)k->pid);
	kill(k->pid, SIGKILL);
	waitpid(k->pid, &st, 0);
	free(k);
}

/* ------------------------------------------------------------------------------------------ */
/* The keeper process. */

struct relay {
	int client;
	struct sockaddr_in orig;
};

struct kp {
	struct loop *loop;
	struct loop_ev pipe_ev, listen_ev;
	int listen_fd;
	struct sockaddr_in addr;
	int hold_ms;
	int map_listener, map_origdst; /* pinned maps */
	struct handover *handover;
	bool took_over;	      /* the daemon died */
	bool open;	      /* fallen open: out of the sockmap, accepting and relaying */
	bool handed;	      /* a successor serves the listener */
	int queue_ms;	      /* connects queue this long for a successor before falling open */
	uint64_t queue_until; /* fall open then */
	uint64_t hold_until;  /* close the listener then (once fallen open) */
	uint64_t accepted, no_origdst, refused;
	pthread_attr_t attr;
};

static atomic_int relays_running;
static atomic_ulong relays_failed, relays_done;
static int relay_mark, relay_idle_ms;

/* Writes all of buf to fd (blocking, bounded by SO_SNDTIMEO). 0 or -1. */
static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Copies both ways until both sides have closed theirs, an error, or idle_ms of silence. */
static void relay_pump(int c, int u)
{
	struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = u, .events = POLLIN}};
	int fds[2] = {c, u};
	char buf[16384];

	while (p[0].fd >= 0 || p[1].fd >= 0) {
		int n = poll(p, 2, relay_idle_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* silent for the idle timeout, or poll failed */
		for (int i = 0; i < 2; i++) {
			ssize_t r;

			if (p[i].fd < 0 || !p[i].revents)
				continue;
			r = recv(fds[i], buf, sizeof(buf), 0);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r < 0)
				return;
			if (r == 0) { /* this side is done sending: pass the FIN on */
				shutdown(fds[1 - i], SHUT_WR);
				p[i].fd = -1;
				continue;
			}
			if (write_all(fds[1 - i], buf, (size_t)r) < 0)
				return;
		}
	}
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;
	struct timeval tv;
	int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = false;

	if (u >= 0) {
		if (relay_mark)
			setsockopt(u, SOL_SOCKET, SO_MARK, &relay_mark, sizeof(relay_mark));
		tv.tv_sec = KEEPER_CONNECT_MS / 1000;
		tv.tv_usec = (KEEPER_CONNECT_MS % 1000) * 1000;
		setsockopt(u, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(u, (struct sockaddr *)&r->orig, sizeof(r->orig)) == 0) {
			ok = true;
			tv.tv_sec = relay_idle_ms / 1000;
			tv.tv_usec = (relay_idle_ms % 1000) * 1000;
			setsockopt(u, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			setsockopt(r->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			relay_pump(r->client, u);
		} else {
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &r->orig.sin_addr, ip, sizeof(ip));
			log_warn("keeper", "relay to %s:%u: %s", ip, ntohs(r->orig.sin_port),
				 strerror(errno));
		}
		close(u);
	}
	close(r->client);
	free(r);
	atomic_fetch_add(ok ? &relays_done : &relays_failed, 1);
	atomic_fetch_sub(&relays_running, 1);
	return NULL;
}

static void accept_all(struct kp *k)
{
	for (;;) {
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		struct relay *r;
		pthread_t t;
		int c = accept4(k->listen_fd, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN, or out of files: the next wake-up tries again */
		}
		k->accepted++;
		r = calloc(1, sizeof(*r));
		if (!r || peer.sin_family != AF_INET ||
		    bpfctl_origdst_take_map(k->map_origdst, &peer, &r->orig) < 0) {
			/* not intercepted (or its record lost): nowhere to send it */
			k->no_origdst++;
			free(r);
			close(c);
			continue;
		}
		if (atomic_load(&relays_running) >= KEEPER_MAX_RELAYS) {
			k->refused++;
			free(r);
			close(c);
			continue;
		}
		r->client = c;
		atomic_fetch_add(&relays_running, 1);
		if (pthread_create(&t, &k->attr, relay_main, r) != 0) {
			atomic_fetch_sub(&relays_running, 1);
			k->refused++;
			free(r);
			close(c);
		}
	}
}

static void listen_cb(struct loop_ev *ev, uint32_t events)
{
	(void)events;
	accept_all(container_of(ev, struct kp, listen_ev));
}

/* Stops accepting and closes this copy; with take, what is queued is taken first (no successor:
 * nobody else would). A successor serving the same socket accepts what is queued itself. */
static void listener_close(struct kp *k, bool take)
{
	if (k->listen_fd < 0)
		return;
	if (take)
		accept_all(k);
	if (k->listen_ev.fd >= 0)
		loop_del(k->loop, &k->listen_ev);
	close(k->listen_fd);
	k->listen_fd = -1;
	k->listen_ev.fd = -1;
}

static int kp_offer(void *arg, struct handover_fd *out, int max)
{
	struct kp *k = arg;

	if (k->listen_fd < 0 || max < 1)
		return 0;
	out[0].fd = k->listen_fd;
	out[0].kind = HANDOVER_PROXY;
	out[0].addr = k->addr;
	return 1;
}

static void kp_done(void *arg, pid_t successor)
{
	struct kp *k = arg;

	log_info("keeper", "pid %d serves the listener now", (int)successor);
	k->handed = true;
	listener_close(k, false);
}

static const struct handover_ops kp_ops = {kp_offer, kp_done};

/* Interception off for new connects; what was sent our way (and still arrives) relayed. */
static void fall_open(struct kp *k)
{
	int rc;

	k->open = true;
	k->hold_until = clock_ms() + (uint64_t)k->hold_ms;
	/* only if it is still this socket (bpfctl.h) */
	if ((rc = bpfctl_clear_listener_map(k->map_listener, k->listen_fd)) < 0)
		log_error("keeper", "listener not unregistered: %s", strerror(-rc));
	log_warn("keeper",
		 "%s: listener out of the sockmap (new connects fall open), relaying what was sent "
		 "to it to the Service; holding it for a successor for %d ms",
		 k->queue_ms ? "no successor yet" : "kvsplice died", k->hold_ms);
	fcntl(k->listen_fd, F_SETFL, fcntl(k->listen_fd, F_GETFL) | O_NONBLOCK);
	k->listen_ev.fd = k->listen_fd;
	k->listen_ev.cb = listen_cb;
	if (loop_set(k->loop, &k->listen_ev, EPOLLIN) < 0)
		log_error("keeper", "epoll: %s", strerror(errno));
	accept_all(k);
}

/* The daemon died. With a queue window (a successor is expected at once, e.g. started by the PID
 * 1 supervisor) connects keep queueing on the listener for it, so they are routed as before;
 * else, or once the window has passed, the listener falls open. Either way it is offered to a
 * successor at once. */
static void take_over(struct kp *k)
{
	k->took_over = true;
	if (k->addr.sin_port && handover_listen(k->loop, &k->addr, &kp_ops, k, &k->handover) < 0)
		log_warn("keeper", "cannot offer the listener to a successor");
	if (!k->queue_ms) {
		fall_open(k);
		return;
	}
	k->queue_until = clock_ms() + (uint64_t)k->queue_ms;
	log_warn("keeper",
		 "kvsplice died: connects queue on its listener for the next kvsplice for %d ms "
		 "(--keeper-queue), then fall open",
		 k->queue_ms);
}

static void pipe_cb(struct loop_ev *ev, uint32_t events)
{
	struct kp *k = container_of(ev, struct kp, pipe_ev);
	char c;
	ssize_t n = read(ev->fd, &c, 1);

	(void)events;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n == 1 && c == 'q')
		exit(0); /* the daemon exits in order: nothing to keep */
	loop_del(k->loop, ev);
	close(ev->fd);
	ev->fd = -1;
	take_over(k);
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* argv: --keeper LISTEN_FD PIPE_FD IP:PORT PIN_DIR MARK HOLD_MS IDLE_MS QUEUE_MS (keeper_spawn) */
int keeper_main(int argc, char **argv)
{
	struct kp k = {.listen_fd = -1, .map_listener = -1, .map_origdst = -1};
	long lfd, pfd, mark, hold, idle, queue;
	char ip[INET_ADDRSTRLEN] = "", *colon;
	long port;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if (argc != 10 || parse_int(argv[2], 0, INT_MAX, &lfd) ||
	    parse_int(argv[3], 0, INT_MAX, &pfd) || !(colon = strrchr(argv[4], ':')) ||
	    (size_t)(colon - argv[4]) >= sizeof(ip) || parse_int(colon + 1, 0, 65535, &port) ||
	    parse_int(argv[6], 0, UINT32_MAX, &mark) || parse_int(argv[7], 0, INT_MAX, &hold) ||
	    parse_int(argv[8], 1, INT_MAX, &idle) || parse_int(argv[9], 0, INT_MAX, &queue)) {
		fprintf(stderr, "kvsplice --keeper is started by kvsplice itself\n");
		return 2;
	}
	memcpy(ip, argv[4], (size_t)(colon - argv[4]));
	k.addr.sin_family = AF_INET;
	k.addr.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, ip, &k.addr.sin_addr) != 1) {
		fprintf(stderr, "kvsplice --keeper: bad address %s\n", argv[4]);
		return 2;
	}
	k.listen_fd = (int)lfd;
	k.hold_ms = (int)hold;
	k.queue_ms = (int)queue;
	k.listen_ev.fd = -1;
	relay_mark = (int)mark; /* the relay threads' settings: one copy, read only after this */
	relay_idle_ms = (int)idle;
	fcntl(k.listen_fd, F_SETFD, FD_CLOEXEC);
	fcntl((int)pfd, F_SETFD, FD_CLOEXEC);
	/* opened now, not at the crash: what the take-over needs must not be able to fail then */
	k.map_listener = bpfctl_map_pinned(argv[5], "proxy_listener");
	k.map_origdst = bpfctl_map_pinned(argv[5], "origdst");
	if (k.map_listener < 0 || k.map_origdst < 0) {
		log_error("keeper", "pinned maps under %s: %s; not keeping the listener", argv[5],
			  strerror(-(k.map_listener < 0 ? k.map_listener : k.map_origdst)));
		return 1;
	}
	if (loop_new(&k.loop) < 0)
		return 1;
	pthread_attr_init(&k.attr);
	pthread_attr_setdetachstate(&k.attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&k.attr, 128 << 10);
	k.pipe_ev.fd = (int)pfd;
	k.pipe_ev.cb = pipe_cb;
	if (loop_set(k.loop, &k.pipe_ev, EPOLLIN) < 0)
		return 1;

	for (;;) {
		uint64_t now;

		if (loop_run(k.loop, !k.took_over ? -1 : k.open ? 100 : 10) < 0)
			return 1;
		if (!k.took_over)
			continue;
		handover_tick(k.handover);
		now = clock_ms();
		/* the queue window passed with no successor (one taking over finishes first) */
		if (!k.open && !k.handed && now >= k.queue_until &&
		    (!handover_pending(k.handover) || now >= k.queue_until + HANDOVER_TIMEOUT_MS))
			fall_open(&k);
		if (k.open && k.listen_fd >= 0 && now >= k.hold_until &&
		    (!handover_pending(k.handover) || now >= k.hold_until + HANDOVER_TIMEOUT_MS)) {
			log_info("keeper", "no successor within %d ms: listener closed", k.hold_ms);
			listener_close(&k, true);
		}
		if (k.listen_fd < 0 && atomic_load(&relays_running) == 0)
			break;
	}
	log_info("keeper",
		 "done: %llu connection(s) accepted, %lu relayed, %lu relay(s) failed to connect, "
		 "%llu without an original destination, %llu refused (full); listener %s",
		 (unsigned long long)k.accepted, atomic_load(&relays_done),
		 atomic_load(&relays_failed), (unsigned long long)k.no_origdst,
		 (unsigned long long)k.refused, k.handed ? "handed to a successor" : "closed");
	handover_free(k.handover);
	loop_free(k.loop);
	return 0;
}
