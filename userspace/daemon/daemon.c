// SPDX-License-Identifier: Apache-2.0
/* daemon: the daemon's phases (daemon.h): start-up, the epoll loop that runs the proxy, the
 * router, the KV events and the admin server, the Services reloads (SIGHUP, a changed file, a
 * Kubernetes snapshot), the drain and the exit that takes the node setup off (nodesetup.h;
 * --keep-on-exit keeps it). docs/internals/daemon.md tells why start-up runs in this order and
 * how a restart hands the listeners over. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "daemon/admin.h"
#include "daemon/daemon.h"
#include "daemon/tokenizers.h"
#include "discovery/discovery.h"
#include "kv/events.h"
#include "kv/index.h"
#include "node/bpfctl.h"
#include "node/handover.h"
#include "node/keeper.h"
#include "node/nodesetup.h"
#include "node/supervisor.h"
#include "prompt/chat.h"
#include "prompt/models.h"
#include "proxy/proxy.h"
#include "route/policy.h"
#include "route/router.h"

/* Signals received and not acted on yet. */
#define PENDING_STOP 0x1u /* SIGTERM, SIGINT, or a failure to serve */
#define PENDING_HUP 0x2u  /* SIGHUP: reload the Services now */

struct daemon {
	const struct daemon_cfg *cfg;
	enum daemon_phase phase;
	unsigned pending; /* PENDING_* */
	struct loop *loop;
	struct metrics *metrics;
	struct router *router;
	struct models *models;
	struct tokenizers *toks; /* the tokenizers the Services name, loaded off this thread */
	struct proxy *proxy;
	struct admin *admin;
	struct admin *mon; /* --metrics: /metrics /healthz /readyz only (NULL: off) */
	struct bpfctl *bpf;
	struct discovery_source *src;
	struct services *svcs;
	struct loop_ev src_ev; /* the source's notify fd (Kubernetes), -1 when it has none */
	struct loop_ev sig;
	sigset_t mask;
	/* restarts (handover.h): our listeners offered to a successor (NULL: --no-handover, or
	 * not serving yet); the connection to the process we took them from, to say READY on once
	 * we serve them (-1: none), and its pid; the sockets it passed */
	struct handover *handover;
	int hconn;
	pid_t old_pid;
	struct handover_fd hfds[HANDOVER_MAX_FDS];
	int nhfds;
	int admin_fd;	      /* the admin listener taken over, until the admin server owns it */
	int mon_fd;	      /* the same for the --metrics listener */
	struct proxy_opts po; /* cfg's, with the listeners taken over */
	/* fail-open across a crash (keeper.h): the keeper holding a second reference to the
	 * registered listener (NULL: --no-keeper, no BPF, or not serving yet) */
	struct keeper *keeper;
	struct keeper_opts kopts;
	/* SYNCING waits for the workers' initial syncs (events_initial_syncs), --sync-wait at
	 * most: routing on an index that does not know the caches yet would place every prefix
	 * as new. serve_at: when the wait started (0: not yet) */
	uint64_t serve_at;
	uint64_t last_poll, stop_ms;
	uint64_t *reloads, *reload_errors;
	int64_t *nservices, *nendpoints;
	/* KV events (--events): the index is written on this loop's thread only */
	struct index *index;
	struct events *events;
	struct loop_ev events_ev;
	int events_more;
	/* node setup (nodesetup.h), taken off again by a final exit (node_exit) */
	char cgroup[4096];	/* the attach point the probe found */
	struct nodesetup *node; /* the node address, when --node-address */
	const char *bpf_pins;	/* the pin directory once BPF is set up, else NULL */
	int64_t *node_ready;
};

static const char *const phase_names[DAEMON_NPHASES] = {
    "starting", "degraded", "listing", "syncing", "serving", "draining", "handed-over",
};

/* The arrows of daemon.h's phase graph: allowed[a] has bit b when a -> b is one. */
#define BIT(p) (1u << (p))
static const unsigned allowed[DAEMON_NPHASES] = {
    [DAEMON_STARTING] = BIT(DAEMON_DEGRADED) | BIT(DAEMON_LISTING) | BIT(DAEMON_SYNCING),
    [DAEMON_LISTING] = BIT(DAEMON_SYNCING) | BIT(DAEMON_DRAINING),
    [DAEMON_SYNCING] = BIT(DAEMON_SERVING) | BIT(DAEMON_DRAINING),
    [DAEMON_SERVING] = BIT(DAEMON_DRAINING) | BIT(DAEMON_HANDED_OVER),
};

const char *daemon_phase_name(enum daemon_phase p)
{
	return (unsigned)p < DAEMON_NPHASES ? phase_names[p] : "?";
}

bool daemon_phase_allowed(enum daemon_phase a, enum daemon_phase b)
{
	return (unsigned)a < DAEMON_NPHASES && (unsigned)b < DAEMON_NPHASES &&
	       (allowed[a] & BIT(b));
}

/* The daemon's own /metrics families (the catalog lists them), one table per condition. */
enum { DA_NODE_READY, DA_COUNT };
const struct metrics_family daemon_always_families[DA_COUNT] = {
    [DA_NODE_READY] = {"kvsplice_node_ready", METRICS_GAUGE,
		       "1 when the node has what interception needs (kernel probe, node address); "
		       "0: kvsplice stays out of the way, /readyz says why.",
		       NULL},
};
const size_t daemon_always_nfamilies = DA_COUNT;
enum { DS_RELOADS, DS_RELOAD_ERRORS, DS_SERVICES, DS_ENDPOINTS, DS_COUNT };
const struct metrics_family daemon_serving_families[DS_COUNT] = {
    [DS_RELOADS] = {"kvsplice_services_reloads_total", METRICS_COUNTER,
		    "Services snapshots loaded.", NULL},
    [DS_RELOAD_ERRORS] = {"kvsplice_services_reload_errors_total", METRICS_COUNTER,
			  "Services reloads refused (the previous one is kept).", NULL},
    [DS_SERVICES] = {"kvsplice_services", METRICS_GAUGE, "Services served.", NULL},
    [DS_ENDPOINTS] = {"kvsplice_endpoints", METRICS_GAUGE, "Endpoints over all Services.", NULL},
};
const size_t daemon_serving_nfamilies = DS_COUNT;
enum { DF_LIMIT, DF_COUNT };
const struct metrics_family daemon_file_families[DF_COUNT] = {
    [DF_LIMIT] = {"kvsplice_services_limit_bytes", METRICS_GAUGE,
		  "Largest --services file read; a larger one is refused (--services-max-bytes).",
		  NULL},
};
const size_t daemon_file_nfamilies = DF_COUNT;
enum { DK_LIST_LIMIT, DK_EVENT_LIMIT, DK_COUNT };
const struct metrics_family daemon_k8s_families[DK_COUNT] = {
    [DK_LIST_LIMIT] = {"kvsplice_k8s_limit_list_bytes", METRICS_GAUGE,
		       "Largest list response page read from the API server; a larger one is "
		       "abandoned and listed again (--k8s-list-max-bytes).",
		       NULL},
    [DK_EVENT_LIMIT] = {"kvsplice_k8s_limit_event_bytes", METRICS_GAUGE,
			"Largest watch event read from the API server; a larger one is abandoned "
			"and listed again (--k8s-event-max-bytes).",
			NULL},
};
const size_t daemon_k8s_nfamilies = DK_COUNT;

/* The one place the phase changes. */
static void enter(struct daemon *d, enum daemon_phase p)
{
	if (!daemon_phase_allowed(d->phase, p)) {
		log_error("main", "phase %s -> %s is not one of daemon.h's: ignored",
			  daemon_phase_name(d->phase), daemon_phase_name(p));
		return;
	}
	log_debug("main", "phase: %s -> %s", daemon_phase_name(d->phase), daemon_phase_name(p));
	d->phase = p;
}

/* Whether the BPF Service selection follows the snapshots: once the source delivered one (before,
 * what a previous process pinned stays), until a successor serves (then it is the successor's). */
static bool selection_ours(const struct daemon *d)
{
	return d->phase == DAEMON_SYNCING || d->phase == DAEMON_SERVING ||
	       d->phase == DAEMON_DRAINING;
}

/* The bounds of the Services source in use, as gauges: the file's (k NULL) or the API server's.
 * 0 or -ENOMEM. */
static int discovery_limit_gauges(struct daemon *d, const struct discovery_k8s_cfg *k,
				  size_t file_max)
{
	int64_t *g[3] = {NULL};

	if (!k) {
		g[0] = metrics_gauge_of(d->metrics, &daemon_file_families[DF_LIMIT], NULL);
		if (!g[0])
			return -ENOMEM;
		metrics_gauge_set(g[0], (int64_t)file_max);
		return 0;
	}
	g[1] = metrics_gauge_of(d->metrics, &daemon_k8s_families[DK_LIST_LIMIT], NULL);
	g[2] = metrics_gauge_of(d->metrics, &daemon_k8s_families[DK_EVENT_LIMIT], NULL);
	if (!g[1] || !g[2])
		return -ENOMEM;
	metrics_gauge_set(g[1], (int64_t)k->list_max_bytes);
	metrics_gauge_set(g[2], (int64_t)k->event_max_bytes);
	return 0;
}

static void bpf_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	bpfctl_metrics(d->bpf, out);
}

static void admin_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	if (d->admin)
		admin_metrics(d->admin, out);
}

/* /readyz of the admin and the --metrics listener. */
static void set_ready(struct daemon *d, bool ready)
{
	if (d->admin)
		admin_set_ready(d->admin, ready);
	if (d->mon)
		admin_set_ready(d->mon, ready);
}

static void events_cb(struct loop_ev *ev, uint32_t events)
{
	struct daemon *d = container_of(ev, struct daemon, events_ev);

	d->events_more = events_poll(d->events, 0);
}

static void events_collector(struct buf *out, void *arg)
{
	struct daemon *d = arg;

	events_metrics(d->events, out);
}

static int debug_index(struct buf *body, const char *query, const char **content_type, void *arg)
{
	struct daemon *d = arg;

	*content_type = "application/json";
	return events_debug_json(d->events, body) ? 500 : 200;
}

/* Applies a new snapshot: the BPF Service selection first (exactly s's: also what a previous
 * process left pinned), then events, the router and the proxy. */
static void services_apply(struct daemon *d, struct services *s)
{
	size_t neps = 0;

	if (d->bpf && selection_ours(d))
		bpfctl_sync_services(d->bpf, s);
	if (d->events && events_sync_services(d->events, s, d->cfg->events_topic) != 0)
		log_warn("main", "events: not every endpoint could be followed");
	tokenizers_sync(d->toks, s);
	router_set_services(d->router, s);
	proxy_set_services(d->proxy, s);
	services_put(d->svcs);
	d->svcs = s;
	for (size_t i = 0; i < s->n; i++)
		neps += s->v[i].nendpoints;
	metrics_gauge_set(d->nservices, (int64_t)s->n);
	metrics_gauge_set(d->nendpoints, (int64_t)neps);
	log_info("main", "services: %zu service(s), %zu endpoint(s) (generation %llu)", s->n, neps,
		 (unsigned long long)s->generation);
}

static const struct handover_ops handover_ops;

/* Once the Services are known: the listener goes into BPF's sockmap (interception starts), the
 * proxy accepts (listeners taken over wait for this), /readyz says yes; then the process the
 * listeners were taken from hears READY (it stops accepting and drains), and ours are offered to
 * a successor. Returns 0, or a negative errno when the listener could not be registered
 * (connects keep going the kube-proxy way; the caller stops). */
static int serving_start(struct daemon *d)
{
	struct sockaddr_in key;
	int rc;

	if (d->bpf && (rc = bpfctl_set_listener(d->bpf, proxy_listen_fd(d->proxy, 0))) < 0) {
		log_error("main", "BPF listener registration: %s", strerror(-rc));
		return rc;
	}
	if (d->bpf && !d->cfg->no_keeper && !d->keeper) {
		d->kopts.listen_fd = proxy_listen_fd(d->proxy, 0);
		proxy_listen_addr(d->proxy, 0, &d->kopts.addr);
		if (keeper_spawn(&d->kopts, &d->keeper) < 0)
			log_warn("main",
				 "no keeper: a crash will reset what is queued for the proxy");
	}
	proxy_accept(d->proxy, true);
	if (!(d->pending & PENDING_STOP))
		set_ready(d, true);
	if (d->hconn >= 0) {
		rc = handover_ready(d->hconn);
		d->hconn = -1;
		if (rc < 0)
			log_warn("main", "handover: pid %d did not hear READY (%s)",
				 (int)d->old_pid, strerror(-rc));
	}
	if (!d->cfg->no_handover && !d->handover && proxy_listen_addr(d->proxy, 0, &key) == 0 &&
	    key.sin_port && handover_listen(d->loop, &key, &handover_ops, d, &d->handover) < 0)
		log_warn("main", "cannot offer the listeners to a successor");
	return 0;
}

/* Serving starts once the workers' initial syncs are done, or sync_wait_ms after it could. A
 * failure to register the listener stops the daemon (connects keep going the kube-proxy way). */
static void serving_poll(struct daemon *d)
{
	uint64_t now = clock_ms();
	size_t syncing;

	if (d->phase != DAEMON_SYNCING || !d->serve_at || (d->pending & PENDING_STOP))
		return;
	syncing = events_initial_syncs(d->events);
	if (syncing && now < d->serve_at + (uint64_t)d->cfg->sync_wait_ms)
		return;
	if (syncing)
		log_warn("main", "serving with %zu worker(s) not synced after %d ms (--sync-wait)",
			 syncing, d->cfg->sync_wait_ms);
	else if (d->events)
		log_info("main", "workers synced in %llu ms: serving",
			 (unsigned long long)(now - d->serve_at));
	enter(d, DAEMON_SERVING);
	if (serving_start(d) < 0)
		d->pending |= PENDING_STOP;
}

/* The source delivered its first snapshot (at start-up, or later with Kubernetes). */
static void syncing_start(struct daemon *d)
{
	d->serve_at = clock_ms();
	serving_poll(d);
}

static void services_poll(struct daemon *d, bool force)
{
	struct services *s = NULL;
	int rc = d->src->poll(d->src, force, &s);

	if (rc == 1) {
		bool first = d->phase == DAEMON_LISTING;

		metrics_inc(d->reloads);
		if (first)
			enter(d, DAEMON_SYNCING);
		services_apply(d, s);
		if (first)
			syncing_start(d);
	} else if (rc < 0) {
		metrics_inc(d->reload_errors);
	}
}

/* The source says a snapshot is waiting (Kubernetes): take it now, not at the next second. */
static void src_cb(struct loop_ev *ev, uint32_t events)
{
	services_poll(container_of(ev, struct daemon, src_ev), false);
}

static void signal_cb(struct loop_ev *ev, uint32_t events)
{
	struct daemon *d = container_of(ev, struct daemon, sig);
	struct signalfd_siginfo si;

	while (read(ev->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			d->pending |= PENDING_HUP;
		else
			d->pending |= PENDING_STOP;
	}
}

/* handover_ops: the listening sockets still open (the proxy's, the admin's). */
static int handover_offer(void *arg, struct handover_fd *out, int max)
{
	struct daemon *d = arg;
	int n = 0;

	for (int i = 0; i < PROXY_MAX_LISTEN && n < max; i++) {
		int fd = proxy_listen_fd(d->proxy, i);

		if (fd >= 0 && proxy_listen_addr(d->proxy, i, &out[n].addr) == 0) {
			out[n].fd = fd;
			out[n++].kind = HANDOVER_PROXY;
		}
	}
	if (n < max && admin_listen_fd(d->admin) >= 0) {
		out[n].fd = admin_listen_fd(d->admin);
		admin_addr(d->admin, &out[n].addr);
		out[n++].kind = HANDOVER_ADMIN;
	}
	if (n < max && d->mon && admin_listen_fd(d->mon) >= 0) {
		out[n].fd = admin_listen_fd(d->mon);
		admin_addr(d->mon, &out[n].addr);
		out[n++].kind = HANDOVER_ADMIN;
	}
	return n;
}

/* handover_ops: the successor serves our listeners (and its listener is in the sockmap). */
static void handover_done_cb(void *arg, pid_t successor)
{
	struct daemon *d = arg;

	log_info("main", "pid %d took the listeners over: draining, then exiting", (int)successor);
	enter(d, DAEMON_HANDED_OVER);
	set_ready(d, false);
	admin_release_listener(d->admin);
	if (d->mon)
		admin_release_listener(d->mon);
	proxy_handed_over(d->proxy);
	/* the listener is the successor's (and its keeper's) now: ours must not take it out of the
	 * sockmap if this process dies while draining */
	keeper_release(d->keeper);
	d->keeper = NULL;
}

static const struct handover_ops handover_ops = {handover_offer, handover_done_cb};

/* Does the admin listener h (HANDOVER_ADMIN) serve sa? exact: the same port; otherwise sa's
 * port 0 (any port of its address) matches too. */
static bool admin_match(const struct handover_fd *h, const struct sockaddr_in *sa, bool exact)
{
	return sa->sin_family && sa->sin_addr.s_addr == h->addr.sin_addr.s_addr &&
	       (sa->sin_port == h->addr.sin_port || (!exact && !sa->sin_port));
}

/* Sockets a running kvsplice passed (n of them): the proxy's go to po->listen_fd by address, the
 * admin's to *admin_fd when it is on admin_sa, the --metrics listener's to *mon_fd when on
 * mon_sa; any other is closed (its connections stay with the old process only if it still holds
 * it: it does not, after READY). */
static void handover_assign(struct handover_fd *h, int n, struct proxy_opts *po,
			    const struct sockaddr_in *admin_sa, int *admin_fd,
			    const struct sockaddr_in *mon_sa, int *mon_fd)
{
	for (int k = 0; k < n; k++) {
		bool used = false;

		for (int i = 0; h[k].kind == HANDOVER_PROXY && !used && i < po->nlisten; i++)
			if (po->listen_fd[i] < 0 &&
			    po->listen[i].sin_addr.s_addr == h[k].addr.sin_addr.s_addr &&
			    po->listen[i].sin_port == h[k].addr.sin_port) {
				po->listen_fd[i] = h[k].fd;
				used = true;
			}
		/* Exact ports first, so an --admin on port 0 cannot take the --metrics socket. */
		for (int pass = 0; h[k].kind == HANDOVER_ADMIN && !used && pass < 2; pass++) {
			if (*admin_fd < 0 && admin_match(&h[k], admin_sa, pass == 0)) {
				*admin_fd = h[k].fd;
				used = true;
			} else if (*mon_fd < 0 && admin_match(&h[k], mon_sa, pass == 0)) {
				*mon_fd = h[k].fd;
				used = true;
			}
		}
		if (!used) {
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &h[k].addr.sin_addr, a, sizeof(a));
			log_warn("main",
				 "handover: the previous process listened on %s:%u, not "
				 "configured here: closed",
				 a, ntohs(h[k].addr.sin_port));
			close(h[k].fd);
		}
	}
}

/* Before /metrics or a /debug page is read: the requests done, counted whole. */
static void admin_before(void *arg)
{
	struct daemon *d = arg;

	if (d->router)
		router_settle(d->router);
}

static int debug_route(struct buf *body, const char *query, const char **ctype, void *arg)
{
	struct daemon *d = arg;

	*ctype = "application/json";
	return router_debug_json(d->router, body) < 0 ? 500 : 200;
}

static int debug_workers(struct buf *body, const char *query, const char **ctype, void *arg)
{
	struct daemon *d = arg;

	*ctype = "application/json";
	return router_workers_json(d->router, body) < 0 ? 500 : 200;
}

/* The default tokenizer: beside the binary (a source tree), else the image's; NULL if none. */
static const char *default_tokenizer(char *buf, size_t n)
{
	char exe[4096];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (l > 0) {
		char *slash;

		exe[l] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			if ((size_t)snprintf(buf, n, "%s%s", exe, DAEMON_TOKENIZER_REL) < n &&
			    access(buf, R_OK) == 0)
				return buf;
		}
	}
	return access(DAEMON_TOKENIZER_SYS, R_OK) == 0 ? DAEMON_TOKENIZER_SYS : NULL;
}

/* Node setup before anything is loaded: the kernel probe when BPF is on (cgroup[n] becomes the
 * attach point), then the node address when node_addr is given. Returns 0, or -1 with the reason
 * in why[whylen] (logged): the caller then stays out of the way (run_degraded). */
static int node_setup(struct daemon *d, bool bpf, char *cgroup, size_t n, const char *pin_dir,
		      const char *node_addr, const char *node_dev, char *why, size_t whylen)
{
	struct nodesetup_probe_cfg pc = {.cgroup = cgroup, .pin_dir = pin_dir};
	struct in_addr addr;
	int prefix;

	if (bpf && nodesetup_probe(&pc, cgroup, n, why, whylen) > 0)
		return -1;
	if (node_addr && (nodesetup_parse_address(node_addr, &addr, &prefix) < 0 ||
			  nodesetup_address_up(node_dev, addr, prefix, &d->node, why, whylen) < 0))
		return -1;
	return 0;
}

/* Fail-open (nodesetup.h says why this and not an exit): nothing attached, nothing listening on
 * the proxy address; only the admin server answers (/readyz 503 with why) until SIGTERM/SIGINT.
 * Returns the exit code. */
static int run_degraded(struct daemon *d, const struct sockaddr_in *admin_sa,
			const struct admin_opts *ao, const sigset_t *mask, const char *why)
{
	int rc;

	log_error("main", "node not ready, staying out of the way (no interception: connects go "
			  "the kube-proxy way); fix the above and restart kvsplice");
	metrics_gauge_set(d->node_ready, 0);
	if ((rc = admin_new(d->loop, admin_sa, -1, ao, d->metrics, &d->admin)) < 0 ||
	    (rc = metrics_add_collector(d->metrics, admin_collector, d)) < 0 ||
	    (d->cfg->metrics.sin_family &&
	     admin_new(d->loop, &d->cfg->metrics, -1, ao, d->metrics, &d->mon) < 0))
		return 1;
	admin_set_not_ready_reason(d->admin, why);
	if (d->mon)
		admin_set_not_ready_reason(d->mon, why);
	d->sig.fd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
	d->sig.cb = signal_cb;
	if (d->sig.fd < 0 || loop_set(d->loop, &d->sig, EPOLLIN) < 0) {
		log_error("main", "signalfd: %s", strerror(errno));
		return 1;
	}
	while (!(d->pending & PENDING_STOP)) {
		if ((rc = loop_run(d->loop, 1000)) < 0) {
			log_error("main", "epoll: %s", strerror(-rc));
			return 1;
		}
		admin_tick(d->admin);
		if (d->mon)
			admin_tick(d->mon);
	}
	log_info("main", "stopping (node was not ready)");
	return 0;
}

/* Whether this exit takes the node setup off. The one place that decides: by default a final
 * exit leaves nothing behind; --keep-on-exit keeps it; a process whose listeners a successor
 * took over must keep it too (the successor runs on it). */
static bool node_exit_undoes(const struct daemon *d)
{
	return !d->cfg->keep_on_exit && d->phase != DAEMON_HANDED_OVER;
}

/* Closes the BPF handles and, when node_exit_undoes, detaches and unpins the BPF state and takes
 * the node address off (after the proxy closed its listeners). */
static void node_exit(struct daemon *d)
{
	bool undo = node_exit_undoes(d);

	bpfctl_close(d->bpf);
	d->bpf = NULL;
	if (undo && d->bpf_pins) {
		if (bpfctl_detach(d->bpf_pins) == 0)
			log_info("main", "BPF interception detached, %s unpinned", d->bpf_pins);
	}
	if (undo)
		nodesetup_undo(d->node);
	else
		nodesetup_free(d->node);
	d->node = NULL;
}

/* GET /debug/daemon: the phase and the configuration it runs with, as flags. */
static int debug_daemon(struct buf *body, const char *query, const char **ctype, void *arg)
{
	struct daemon *d = arg;
	char *flags = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&flags, &len);
	cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "config");
	char *text;
	int rc = 500;

	*ctype = "application/json";
	if (!f || !o || !a)
		goto out;
	opt_print_config(&daemon_options, d->cfg, f);
	if (fclose(f) != 0)
		goto out;
	f = NULL;
	cJSON_AddStringToObject(o, "phase", daemon_phase_name(d->phase));
	cJSON_AddNumberToObject(o, "pid", (double)getpid());
	for (char *line = flags, *nl; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		cJSON_AddItemToArray(a, cJSON_CreateString(line));
	}
	text = cJSON_PrintUnformatted(o);
	if (text && buf_puts(body, text) == 0)
		rc = 200;
	free(text);
out:
	if (f)
		fclose(f);
	free(flags);
	cJSON_Delete(o);
	return rc;
}

/* The --chat-template file of model name (NULL: the default tokenizer's), or NULL. */
static const char *chat_template_of(const struct daemon_cfg *c, const char *name)
{
	for (size_t i = 0; i < c->nchat_tmpl; i++) {
		const char *eq = strchr(c->chat_tmpl[i], '=');

		if (!eq ? !name
			: name && strlen(name) == (size_t)(eq - c->chat_tmpl[i]) &&
			      !strncmp(name, c->chat_tmpl[i], (size_t)(eq - c->chat_tmpl[i])))
			return eq ? eq + 1 : c->chat_tmpl[i];
	}
	return NULL;
}

/* A --chat-template for a model no --model-tokenizer names (or for the default tokenizer when
 * there is none) is a mistake: said, and the exit code. */
static int check_chat_templates(const struct daemon_cfg *c, bool have_default)
{
	for (size_t i = 0; i < c->nchat_tmpl; i++) {
		const char *t = c->chat_tmpl[i], *eq = strchr(t, '=');
		bool found = !eq && have_default;

		for (size_t j = 0; eq && !found && j < c->nmodel_tok; j++)
			found = !strncmp(c->model_tok[j], t, (size_t)(eq - t) + 1);
		if (!found) {
			fprintf(stderr, "kvsplice: --chat-template %s: %s\n", t,
				eq ? "no --model-tokenizer names this model"
				   : "there is no default tokenizer (--no-tokenizer)");
			return 2;
		}
	}
	return 0;
}

/* STARTING: the tokenizers, --tokenizer (or the default one) and every --model-tokenizer, each
 * with its --chat-template if given. Returns 0, or the exit code. */
static int load_models(struct daemon *d)
{
	const struct daemon_cfg *c = d->cfg;
	char tokbuf[4096];
	const char *tokenizer = c->no_tokenizer ? NULL
				: c->tokenizer	? c->tokenizer
						: default_tokenizer(tokbuf, sizeof(tokbuf));

	if (check_chat_templates(c, tokenizer != NULL))
		return 2;
	{
		char err[128];

		if (chat_server_configure(c->chat_kwargs, c->trust_request_tmpl, err,
					  sizeof(err))) {
			fprintf(stderr, "kvsplice: %s\n", err);
			return 2;
		}
	}

	for (size_t i = 0; i <= c->nmodel_tok; i++) {
		char err[256], name[256];
		const char *path = i < c->nmodel_tok ? strchr(c->model_tok[i], '=') + 1 : tokenizer;
		int rc;

		if (!path)
			break;
		if (i < c->nmodel_tok)
			snprintf(name, sizeof(name), "%.*s", (int)(path - 1 - c->model_tok[i]),
				 c->model_tok[i]);
		rc = models_add_with(d->models, i < c->nmodel_tok ? name : NULL, path,
				     chat_template_of(c, i < c->nmodel_tok ? name : NULL), err,
				     sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "kvsplice: tokenizer %s: %s\n", path,
				rc == -ENOMEM ? "out of memory" : err);
			return 2;
		}
	}
	if (!models_count(d->models))
		log_warn("main", "no tokenizer: text prompts are routed on the approximate view "
				 "(give --tokenizer)");
	return 0;
}

/* STARTING: the index and the KV events runtime (unless --no-events), then the router.
 * Returns 0, or the exit code. */
static int start_routing(struct daemon *d)
{
	const struct daemon_cfg *c = d->cfg;
	struct router_cfg rcfg;

	router_cfg_default(&rcfg);
	if (c->events) {
		struct index_cfg icfg = c->index;
		struct events_cfg ecfg = c->ev;
		int rc;

		icfg.max_entries = (size_t)c->index_max_entries;
		if ((rc = index_new(&icfg, &d->index)) == 0) {
			ecfg.index = d->index;
			ecfg.max_pending = c->kv_queue_batches;
			rc = events_new(&ecfg, &d->events);
		}
		if (rc < 0) {
			log_error("main", "events: cannot start (%s)", strerror(-rc));
			return 1;
		}
		d->events_ev.fd = events_fd(d->events);
		d->events_ev.cb = events_cb;
		if (loop_set(d->loop, &d->events_ev, EPOLLIN) < 0 ||
		    metrics_add_collector(d->metrics, events_collector, d) < 0)
			return 1;
	}
	rcfg.policy = c->router;
	rcfg.kv = &c->kv;
	rcfg.index = d->index;
	rcfg.events = d->events;
	rcfg.models = d->models;
	rcfg.metrics = d->metrics;
	rcfg.loop = d->loop;
	rcfg.mark = c->mark;
	rcfg.scrape_interval_ms = c->scrape_ms;
	rcfg.models_interval_ms = c->models_ms;
	rcfg.scrape_max_body = c->scrape_max_body;
	rcfg.scrape_max_head = c->scrape_max_head;
	rcfg.scrape_timeout_ms = c->scrape_timeout_ms;
	rcfg.approx_ttl_s = c->approx_ttl_ms / 1000.0;
	rcfg.approx_max_entries = c->approx_max;
	rcfg.tokcache_bytes = (long)c->tokcache;
	rcfg.whole_prompt = c->whole_prompt;
	rcfg.seed = (uint64_t)getpid() ^ (uint64_t)time(NULL);
	return router_new(&rcfg, &d->router) < 0 ? 1 : 0;
}

/* STARTING: the listeners (taken over from a kvsplice running for this address, else bound)
 * and the proxy on them, then BPF, then the first snapshot applied. s: the first snapshot (an
 * empty one while LISTING). Returns 0, or the exit code. */
static int start_serving_path(struct daemon *d, struct services *s)
{
	const struct daemon_cfg *c = d->cfg;
	int rc;

	d->po = c->proxy;
	d->po.mark = c->mark;
	if (!c->no_handover) {
		d->nhfds = handover_take(&d->po.listen[0], d->hfds, HANDOVER_MAX_FDS, &d->hconn,
					 &d->old_pid);
		if (d->nhfds < 0)
			log_error("main",
				  "a kvsplice (pid %d) runs for this address but did not hand its "
				  "listeners over: %s",
				  (int)d->old_pid, strerror(-d->nhfds));
		else if (d->nhfds > 0)
			log_info("main", "taking over %d listening socket(s) from pid %d", d->nhfds,
				 (int)d->old_pid);
		handover_assign(d->hfds, d->nhfds > 0 ? d->nhfds : 0, &d->po, &c->admin,
				&d->admin_fd, &c->metrics, &d->mon_fd);
	}
	rc = proxy_new(&d->po, d->loop, d->metrics, d->router, &d->proxy);
	for (int i = 0; i < d->po.nlisten; i++)
		d->po.listen_fd[i] = -1; /* the proxy's now, even on failure */
	if (rc < 0) {
		services_put(s);
		return 1;
	}
	/* sockets taken over are in the sockmap already: connects BPF sends there wait in the
	 * backlog (the old process still accepts them) until we serve */
	if (d->nhfds > 0 && d->phase == DAEMON_LISTING)
		proxy_accept(d->proxy, false);
	if (!c->no_bpf) {
		struct bpfctl_opts bo = {
		    .cgroup_path = d->cgroup,
		    .pin_dir = c->pin_dir,
		    .proxy = d->po.listen[0],
		    .own_mark = c->mark,
		    .match_endpoints = c->intercept_endpoints,
		};

		d->bpf_pins = c->pin_dir; /* a failure below may have pinned some */
		rc = bpfctl_open(&bo, &d->bpf);
		if (rc < 0) {
			log_error("main", "BPF: %s (use --no-bpf to run without interception)",
				  strerror(-rc));
			services_put(s);
			return 1;
		}
		proxy_set_bpf(d->proxy, d->bpf);
	}
	services_apply(d, s);
	return 0;
}

/* STARTING: the Services source and its first poll (a snapshot: SYNCING; none yet: LISTING),
 * then the serving path. Returns 0, or the exit code. */
static int start_services(struct daemon *d)
{
	const struct daemon_cfg *c = d->cfg;
	struct services *s = NULL;
	int rc;

	if (c->kubernetes) {
		char err[256] = "";

		rc = discovery_k8s_source(&c->k8s, &d->src, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "kvsplice: --kubernetes: %s\n",
				err[0] ? err : strerror(-rc));
			return 2;
		}
	} else if (discovery_file_source(c->services, c->services_max, &d->src) < 0) {
		return 1;
	}
	if (discovery_limit_gauges(d, c->kubernetes ? &c->k8s : NULL, c->services_max) < 0)
		return 1;
	rc = d->src->poll(d->src, 1, &s);
	if (rc < 0) {
		fprintf(stderr, "kvsplice: cannot load --services %s: %s\n", c->services,
			rc == -EFBIG ? "larger than --services-max-bytes" : strerror(-rc));
		return 2;
	}
	/* Kubernetes: nothing listed yet. Until the first snapshot the proxy and the router have
	 * no Service, the pinned BPF selection stays as a previous process left it, the listener
	 * is not registered (connects go the kube-proxy way) and /readyz says no. */
	enter(d, rc == 1 ? DAEMON_SYNCING : DAEMON_LISTING);
	if (rc == 0 && services_new(0, &s) < 0)
		return 1;
	return start_serving_path(d, s);
}

/* STARTING: the admin server (on the socket taken over, if any), its pages and collectors, and
 * the signals. Returns 0, or the exit code. */
static int start_admin(struct daemon *d)
{
	int rc = admin_new(d->loop, &d->cfg->admin, d->admin_fd, &d->cfg->admin_opts, d->metrics,
			   &d->admin);

	d->admin_fd = -1; /* the admin's now, even on failure */
	if (rc < 0)
		return 1;
	admin_before_read(d->admin, admin_before, d);
	if (d->cfg->metrics.sin_family) {
		rc = admin_new(d->loop, &d->cfg->metrics, d->mon_fd, &d->cfg->admin_opts,
			       d->metrics, &d->mon);
		d->mon_fd = -1;
		if (rc < 0)
			return 1;
		admin_before_read(d->mon, admin_before, d);
	}
	if (metrics_add_collector(d->metrics, bpf_collector, d) < 0 ||
	    metrics_add_collector(d->metrics, admin_collector, d) < 0 ||
	    admin_handle(d->admin, "/debug/route", debug_route, d) < 0 ||
	    admin_handle(d->admin, "/debug/workers", debug_workers, d) < 0 ||
	    admin_handle(d->admin, "/debug/daemon", debug_daemon, d) < 0 ||
	    (d->events && admin_handle(d->admin, "/debug/index", debug_index, d) < 0))
		return 1;
	d->sig.fd = signalfd(-1, &d->mask, SFD_NONBLOCK | SFD_CLOEXEC);
	d->sig.cb = signal_cb;
	if (d->sig.fd < 0 || loop_set(d->loop, &d->sig, EPOLLIN) < 0) {
		log_error("main", "signalfd: %s", strerror(errno));
		return 1;
	}
	return 0;
}

/* Start-up is done: one log line, and --port-file. Returns 0, or the exit code. */
static int announce(struct daemon *d)
{
	struct sockaddr_in la, aa, ma;
	char ls[INET_ADDRSTRLEN], as[INET_ADDRSTRLEN];
	const char *port_file = d->cfg->port_file;

	proxy_listen_addr(d->proxy, 0, &la);
	admin_addr(d->admin, &aa);
	inet_ntop(AF_INET, &la.sin_addr, ls, sizeof(ls));
	inet_ntop(AF_INET, &aa.sin_addr, as, sizeof(as));
	log_info("main", "kvsplice ready: proxy %s:%u, admin %s:%u, bpf %s, router %s, relay %s%s",
		 ls, ntohs(la.sin_port), as, ntohs(aa.sin_port), d->bpf ? "on" : "off",
		 router_policy(d->router), proxy_relay_name(d->po.relay),
		 d->nhfds > 0 ? ", listeners taken over" : "");
	if (d->mon) {
		admin_addr(d->mon, &ma);
		inet_ntop(AF_INET, &ma.sin_addr, as, sizeof(as));
		log_info("main", "metrics listener %s:%u (/metrics /healthz /readyz)", as,
			 ntohs(ma.sin_port));
	}
	if (port_file) {
		char tmp[4096];
		FILE *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%u %u\n", ntohs(la.sin_port), ntohs(aa.sin_port)) < 0 ||
		    fclose(f) != 0 || rename(tmp, port_file) < 0) {
			log_error("main", "--port-file %s: %s", port_file, strerror(errno));
			return 1;
		}
	}
	return 0;
}

/* LISTING to DRAINING: the loop, until the proxy has drained. Returns 0, or the exit code. */
static int run_loop(struct daemon *d)
{
	while (!proxy_done(d->proxy)) {
		uint64_t now;
		int rc = loop_run(d->loop, d->events_more || router_busy(d->router) ? 0 : 100);

		if (rc < 0) {
			log_error("main", "epoll: %s", strerror(-rc));
			return 1;
		}
		/* the rest of sent prompts (router_sent), a slice a turn and more while no event
		 * waits: bytes to relay and requests to decide come first */
		while (router_work(d->router) && !loop_ready(d->loop))
			;
		proxy_tick(d->proxy);
		router_tick(d->router);
		admin_tick(d->admin);
		if (d->mon)
			admin_tick(d->mon);
		handover_tick(d->handover);
		serving_poll(d);
		if (d->events_more) /* events left input unread: the fd may not signal it again */
			d->events_more = events_poll(d->events, 0);
		now = clock_ms();
		if ((d->pending & PENDING_HUP) || now - d->last_poll >= 1000) {
			services_poll(d, d->pending & PENDING_HUP);
			d->pending &= ~PENDING_HUP;
			d->last_poll = now;
		}
		if ((d->pending & PENDING_STOP) && !d->stop_ms)
			d->stop_ms = now;
		/* a successor taking the listeners over finishes first (for HANDOVER_TIMEOUT_MS at
		 * most): its READY makes this a drain, not a stop */
		if ((d->pending & PENDING_STOP) && !proxy_draining(d->proxy) &&
		    (!handover_pending(d->handover) || now >= d->stop_ms + HANDOVER_TIMEOUT_MS)) {
			log_info("main", "stopping: new connects fall open, draining");
			enter(d, DAEMON_DRAINING);
			set_ready(d, false);
			proxy_stop(d->proxy);
			/* nothing to hand over any more: a new process binds once the listeners
			 * close (proxy_new retries the bind) */
			handover_free(d->handover);
			d->handover = NULL;
		}
	}
	log_info("main", "drained, exiting");
	return 0;
}

/* Frees everything, in order. In order (drained, handed over: exit_code 0) the keeper leaves;
 * otherwise it stays, and takes over what our listener still holds once this process is gone,
 * as after a crash. */
static void teardown(struct daemon *d, int exit_code)
{
	if (exit_code == 0)
		keeper_release(d->keeper);
	if (d->hconn >= 0)
		close(d->hconn); /* never READY: the old process keeps its listeners */
	if (d->admin_fd >= 0)
		close(d->admin_fd);
	if (d->mon_fd >= 0)
		close(d->mon_fd);
	for (int i = 0; i < d->po.nlisten; i++)
		if (d->po.listen_fd[i] >= 0)
			close(d->po.listen_fd[i]);
	handover_free(d->handover);
	if (d->sig.fd >= 0) {
		loop_del(d->loop, &d->sig);
		close(d->sig.fd);
	}
	if (d->src_ev.fd >= 0)
		loop_del(d->loop, &d->src_ev);
	admin_free(d->admin);
	admin_free(d->mon);
	proxy_free(d->proxy);
	if (d->events) {
		loop_del(d->loop, &d->events_ev);
		events_free(d->events);
	}
	index_free(d->index);
	node_exit(d);
	services_put(d->svcs);
	if (d->src)
		d->src->free(d->src);
	router_free(d->router);
	tokenizers_free(d->toks); /* before the models it installs into */
	models_free(d->models);
	metrics_free(d->metrics);
	loop_free(d->loop);
}

/* STARTING up to serving (or DEGRADED), then the loop. Returns the exit code. */
static int run(struct daemon *d)
{
	const struct daemon_cfg *c = d->cfg;
	char why[256] = "";
	int rc;

	if (loop_new(&d->loop) < 0 || metrics_new(&d->metrics) < 0 || models_new(&d->models) < 0)
		return 1;
	d->node_ready = metrics_gauge_of(d->metrics, &daemon_always_families[DA_NODE_READY], NULL);
	if (node_setup(d, !c->no_bpf, d->cgroup, sizeof(d->cgroup), c->pin_dir, c->node_addr,
		       c->node_dev, why, sizeof(why)) < 0) {
		enter(d, DAEMON_DEGRADED);
		return run_degraded(d, &c->admin, &c->admin_opts, &d->mask, why);
	}
	metrics_gauge_set(d->node_ready, 1);
	if ((rc = load_models(d)) != 0)
		return rc;
	if (tokenizers_new(c->tokenizer_root, d->models, d->loop, d->metrics, &d->toks) < 0)
		return 1;
	d->reloads = metrics_counter_of(d->metrics, &daemon_serving_families[DS_RELOADS], NULL);
	d->reload_errors =
	    metrics_counter_of(d->metrics, &daemon_serving_families[DS_RELOAD_ERRORS], NULL);
	d->nservices = metrics_gauge_of(d->metrics, &daemon_serving_families[DS_SERVICES], NULL);
	d->nendpoints = metrics_gauge_of(d->metrics, &daemon_serving_families[DS_ENDPOINTS], NULL);
	if ((rc = start_routing(d)) != 0 || (rc = start_services(d)) != 0 ||
	    (rc = start_admin(d)) != 0)
		return rc;
	/* Interception starts now (or with the source's first snapshot): the listener goes into
	 * BPF's sockmap. */
	if (d->phase == DAEMON_SYNCING) {
		syncing_start(d);
		if (d->pending & PENDING_STOP)
			return 1;
	}
	if ((rc = announce(d)) != 0)
		return rc;
	if (d->src->notify_fd) {
		d->src_ev.fd = d->src->notify_fd(d->src);
		d->src_ev.cb = src_cb;
		if (loop_set(d->loop, &d->src_ev, EPOLLIN) < 0)
			return 1;
	}
	set_ready(d, d->phase == DAEMON_SERVING);
	return run_loop(d);
}

int daemon_run(const struct daemon_cfg *cfg)
{
	struct daemon d = {
	    .cfg = cfg,
	    .phase = DAEMON_STARTING,
	    .sig.fd = -1,
	    .src_ev.fd = -1,
	    .hconn = -1,
	    .admin_fd = -1,
	    .mon_fd = -1,
	};
	int exit_code;

	discovery_set_routes(&policy_routes);
	log_set_level((enum log_level)cfg->log_level);
	if (cfg->cgroup)
		snprintf(d.cgroup, sizeof(d.cgroup), "%s", cfg->cgroup);
	if (cfg->node_addr) {
		struct in_addr a;
		int p, i;

		nodesetup_parse_address(cfg->node_addr, &a, &p);
		for (i = 0;
		     i < cfg->proxy.nlisten && cfg->proxy.listen[i].sin_addr.s_addr != a.s_addr;
		     i++)
			;
		if (i == cfg->proxy.nlisten)
			log_warn("main", "--node-address %s is no --listen address",
				 cfg->node_addr);
	}
	d.kopts.pin_dir = cfg->pin_dir;
	d.kopts.own_mark = cfg->mark;
	d.kopts.idle_ms = cfg->proxy.idle_timeout_ms;
	d.kopts.hold_ms = cfg->keeper_hold_ms;
	/* a supervised daemon is started again at once: connects wait for it (keeper.h) */
	d.kopts.queue_ms = cfg->keeper_queue_ms >= 0 ? cfg->keeper_queue_ms
			   : supervisor_child()	     ? KEEPER_QUEUE_MS
						     : 0;
	/* SIGPIPE off (writes to a closed peer fail with EPIPE); the others through signalfd */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&d.mask);
	sigaddset(&d.mask, SIGTERM);
	sigaddset(&d.mask, SIGINT);
	sigaddset(&d.mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &d.mask, NULL);
	exit_code = run(&d);
	teardown(&d, exit_code);
	return exit_code;
}
