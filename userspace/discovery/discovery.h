/* SPDX-License-Identifier: Apache-2.0 */
/* discovery: which Services kvsplice serves and their endpoints (worker pods). A source produces
 * immutable, reference-counted snapshots; two sources implement the same ops: the static JSON file
 * (--services FILE, below) and the Kubernetes API (Services + EndpointSlices, discovery_k8s.c).
 *
 * File format:
 *   {"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,
 *     "route":"kv","model":"Qwen/Qwen3-0.6B",
 *     "endpoints":[{"name":"w1","ip":"10.0.1.2","port":8000,"events_port":20080,
 *                   "replay_port":20081,"terminating":false}]}]}
 * events_port / replay_port are optional (0 = none); route (a policy name), model and
 * terminating are optional too. Not thread-safe: the daemon's main thread owns sources; a
 * snapshot may be read from any thread while a reference is held (the reference count itself is
 * not atomic: take and drop references on one thread). */
#ifndef KVS_DISCOVERY_H
#define KVS_DISCOVERY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DISCOVERY_NAME_MAX 64
/* Longest routing policy name + 1 ("round-robin"). */
#define DISCOVERY_POLICY_MAX 16
/* Longest served model name + 1. */
#define DISCOVERY_MODEL_MAX 128
/* Longest tokenizers list of a Service ("NAME=DIR[,NAME=DIR]"), bytes. */
#define DISCOVERY_TOKENIZERS_MAX 1024

struct endpoint {
	char name[DISCOVERY_NAME_MAX];
	struct sockaddr_in addr; /* the worker's HTTP address */
	uint16_t events_port;	 /* ZMQ PUB port of KV events, host order; 0 = none */
	uint16_t replay_port;	 /* ZMQ ROUTER replay port, host order; 0 = none */
	bool terminating;	 /* shutting down: finishes what it has, gets no new requests */
};

struct service {
	char name[DISCOVERY_NAME_MAX];
	struct sockaddr_in vip; /* ClusterIP:port clients connect to */
	uint32_t id;		/* position in the snapshot + 1 (handed to BPF) */
	size_t nendpoints;
	struct endpoint *endpoints;
	char policy[DISCOVERY_POLICY_MAX]; /* its routing policy; "" = the daemon's --router */
	char model[DISCOVERY_MODEL_MAX];   /* the model its workers serve; "" = not said */
	/* the tokenizers of its models, "NAME=DIR[,NAME=DIR]" with each DIR relative to the
	 * daemon's --tokenizer-root ("model_tokenizers" in the file, kvsplice.io/model-tokenizers
	 * in Kubernetes); "" = none. Checked and loaded by the daemon (daemon/tokenizers.h). */
	char tokenizers[DISCOVERY_TOKENIZERS_MAX];
};

struct services {
	int refs;
	uint64_t generation; /* grows with every new snapshot of a source */
	size_t n;
	struct service *v;
};

/* The route names a Service may carry ("route" in the file, kvsplice.io/route in Kubernetes).
 * Discovery sits below the route layer, so whoever links the policies sets the check once at
 * start (route/policy.h's policy_routes); until then every name is taken. */
struct discovery_routes {
	bool (*known)(const char *name);
	const char *(*names)(void); /* for the error: "kv, dynamo, ..." */
};
void discovery_set_routes(const struct discovery_routes *r);
bool discovery_route_known(const char *name);
const char *discovery_route_names(void);

/* Parses the JSON text. Returns 0 and a snapshot with one reference in *out, or -EINVAL with a
 * one-line reason in err (duplicate names or ClusterIP:port, bad address or port, missing
 * fields), or -ENOMEM. */
int discovery_parse(const char *json, size_t len, struct services **out, char *err, size_t errlen);

/* A snapshot of n zeroed Services (ids 1..n, no endpoints yet), one reference. Returns 0 and *out
 * or -ENOMEM. */
int services_new(size_t n, struct services **out);
/* Takes / drops a reference; the last put frees the snapshot. */
struct services *services_get(struct services *s);
void services_put(struct services *s);

/* The Service whose ClusterIP:port is vip (network order), or NULL. */
const struct service *services_find_vip(const struct services *s, uint32_t ip, uint16_t port);
/* The Service called name, or NULL. */
const struct service *services_find_name(const struct services *s, const char *name);

/* A source of snapshots. */
struct discovery_source {
	const char *kind; /* "file", "kubernetes" */
	/* Returns 1 and a new snapshot (one reference for the caller) when the Services changed
	 * since the last call, 0 when unchanged, or a negative errno (the caller keeps its current
	 * snapshot). The file source's first call always returns one; the Kubernetes source returns
	 * 0 until it has a complete view (both lists done). force re-reads even when nothing seems
	 * to have changed (SIGHUP: the file is read again; Kubernetes relists). */
	int (*poll)(struct discovery_source *src, int force, struct services **out);
	void (*free)(struct discovery_source *src);
	/* Optional (NULL: poll on a timer only): an fd that turns readable when poll has something
	 * new, for the daemon's epoll loop; poll drains it. */
	int (*notify_fd)(struct discovery_source *src);
};

/* Default largest Services file read, bytes (kvsplice --services-max-bytes; an endpoint takes
 * about 100). */
#ifndef DISCOVERY_FILE_DEFAULT_MAX
#define DISCOVERY_FILE_DEFAULT_MAX (16u << 20)
#endif

/* The static file source: re-reads path when its mtime, size or inode change (poll it about once
 * a second) or when forced. A file larger than max_bytes (0: no bound; the daemon's default is
 * DISCOVERY_FILE_DEFAULT_MAX) is refused unread: poll returns -EFBIG and logs the size and the
 * bound. Returns 0 and *out, or -ENOMEM. */
int discovery_file_source(const char *path, size_t max_bytes, struct discovery_source **out);

/* --- The Kubernetes source (discovery_k8s.c) ------------------------------------------------
 *
 * Services opt in by annotation; everything else in the cluster is ignored:
 *   kvsplice.io/route: kv           the policy (kv, dynamo, round-robin, random, approx): required
 *   kvsplice.io/port: http          which Service port is intercepted (name or number); optional
 *                                   when the Service has one TCP port or one named "http"
 *   kvsplice.io/events-port: 20080  the workers' vLLM KV events port (number, or the name of a
 *                                   port the Service lists); optional
 *   kvsplice.io/replay-port: 20081  their replay port, the same way; optional
 *   kvsplice.io/model: Qwen/Qwen3-0.6B   the model served; optional
 * A Service of the snapshot is "namespace/name" with its IPv4 ClusterIP and the chosen port; its
 * endpoints come from the EndpointSlices labelled kubernetes.io/service-name=name, at the slice
 * port whose name is the Service port's name: ready ones serve, terminating ones are kept with
 * terminating set (no new requests, the ones in flight finish), the others (serving but not ready,
 * or neither) are left out. Headless, ExternalName and IPv6-only Services, and annotations that do
 * not resolve, are skipped with one log line per Service and reason. */

/* Where the in-cluster configuration is read from (the service account's projected volume). */
#define DISCOVERY_K8S_TOKEN "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define DISCOVERY_K8S_CA "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
/* Default largest list page response, bytes (kvsplice --k8s-list-max-bytes; pages hold up to 500
 * objects). */
#ifndef DISCOVERY_K8S_DEFAULT_LIST_MAX
#define DISCOVERY_K8S_DEFAULT_LIST_MAX (64u << 20)
#endif
/* Default largest watch event (one JSON line), bytes (kvsplice --k8s-event-max-bytes; etcd keeps
 * objects below 1.5 MiB). */
#ifndef DISCOVERY_K8S_DEFAULT_EVENT_MAX
#define DISCOVERY_K8S_DEFAULT_EVENT_MAX (3u << 20)
#endif

/* What discovery_k8s_cfg_default gives; list_max_bytes and event_max_bytes 0 are off (no bound),
 * the timeouts and backoffs must be above 0. */
struct discovery_k8s_cfg {
	const char *api;	/* "https://HOST:PORT"; NULL: https://$KUBERNETES_SERVICE_HOST:
				 * $KUBERNETES_SERVICE_PORT */
	const char *token_path; /* NULL: DISCOVERY_K8S_TOKEN; re-read on each (re)connect and 401 */
	const char *ca_path;	/* NULL: DISCOVERY_K8S_CA */
	const char *ns;		/* only this namespace; NULL or "": all */
	/* timeoutSeconds asked of each watch: drawn from [min, max] per watch (300..600), so that
	 * many nodes' watches do not all end at once */
	int watch_timeout_min_s, watch_timeout_max_s;
	int backoff_min_ms;	/* first retry delay after a failure (500) */
	int backoff_max_ms;	/* retry delay bound (30000) */
	int request_timeout_ms; /* connect, and a whole list request (30000) */
	size_t list_max_bytes;	/* largest list page (DISCOVERY_K8S_DEFAULT_LIST_MAX) */
	size_t event_max_bytes; /* largest watch event (DISCOVERY_K8S_DEFAULT_EVENT_MAX) */
};

/* Fills c with the defaults (api, token, CA and namespace NULL: their rules above). */
void discovery_k8s_cfg_default(struct discovery_k8s_cfg *c);

/* The Kubernetes source: a thread lists then watches Services and EndpointSlices and hands
 * complete snapshots over (poll takes the newest; notify_fd signals one). A list page or a watch
 * event past its bound is abandoned, logged with the bound, and the kind listed again after a
 * backoff. Returns 0 and *out;
 * -EINVAL with a reason in err (no API address, unreadable CA file); -ENOMEM; another negative
 * errno when the thread cannot start. */
int discovery_k8s_source(const struct discovery_k8s_cfg *cfg, struct discovery_source **out,
			 char *err, size_t errlen);

/* The pure part of the Kubernetes source (discovery_k8s_view.c), without I/O (the thread drives
 * it; tests too): the opted-in Services and all EndpointSlices as last listed / watched, and the
 * snapshot they make. Not thread-safe: one owner. */
enum k8s_kind { K8S_SERVICES, K8S_SLICES };
enum k8s_event {
	K8S_EV_APPLIED,	 /* ADDED / MODIFIED / DELETED taken in */
	K8S_EV_BOOKMARK, /* only the resource version moved */
	K8S_EV_GONE,	 /* ERROR with a Status 410: the version is too old, relist */
	K8S_EV_ERROR,	 /* ERROR with another Status: reconnect */
	K8S_EV_BAD,	 /* not a watch event, or out of memory: relist */
};
struct k8s_view;
/* Returns 0 and *out or -ENOMEM. */
int k8s_view_new(struct k8s_view **out);
void k8s_view_free(struct k8s_view *v);
/* Takes one page of a list response (a ServiceList / EndpointSliceList). The first page
 * (first = true) starts a new list; the page without metadata.continue ends it and replaces what
 * the view held of kind. cont (contlen bytes) gets the continue token ("" on the last page), rv
 * (rvlen) the list's resourceVersion. Returns 0, -EINVAL (not a list; reason in err) or
 * -ENOMEM. */
int k8s_view_list(struct k8s_view *v, enum k8s_kind kind, const char *json, size_t len, bool first,
		  char *cont, size_t contlen, char *rv, size_t rvlen, char *err, size_t errlen);
/* Takes one watch event (one line of the stream, without its newline). rv gets the event's
 * resourceVersion when it has one; err a reason for K8S_EV_ERROR / K8S_EV_BAD. */
enum k8s_event k8s_view_event(struct k8s_view *v, enum k8s_kind kind, const char *line, size_t len,
			      char *rv, size_t rvlen, char *err, size_t errlen);
/* Objects of kind the view holds (the last complete list and the events since). */
size_t k8s_view_count(const struct k8s_view *v, enum k8s_kind kind);
/* "Services" / "EndpointSlices", for messages. */
const char *k8s_kind_name(enum k8s_kind kind);
/* Whether an event or a list changed the view since the last k8s_view_snapshot. */
bool k8s_view_dirty(const struct k8s_view *v);
/* The Services snapshot the view makes (sorted by namespace/name, endpoints by address), one
 * reference, generation 0; *fingerprint (may be NULL) a hash of its content, equal for equal
 * snapshots. Returns 0 or -ENOMEM. Logs each Service skipped or cut, once per reason. */
int k8s_view_snapshot(struct k8s_view *v, struct services **out, uint64_t *fingerprint);

/* Splits a byte stream into lines: feed bytes as they come; each complete line (without its
 * '\n'; a '\r' before it is dropped) is handed to fn. A line longer than max is refused: fn is
 * not called, feeding returns -E2BIG and the buffer is emptied. Returns 0, -E2BIG, -ENOMEM or
 * fn's first nonzero return (the rest of data is then dropped). */
struct k8s_lines {
	char *buf;
	size_t len, cap, max;
};
int k8s_lines_feed(struct k8s_lines *l, const char *data, size_t n,
		   int (*fn)(const char *line, size_t len, void *arg), void *arg);
void k8s_lines_free(struct k8s_lines *l);

#endif
