// SPDX-License-Identifier: Apache-2.0
/* discovery_k8s_view: the pure part of the Kubernetes source (discovery.h, "The pure part"): the
 * Service and EndpointSlice objects as the API server lists and watches them, turned into the
 * Services snapshot. No I/O, no clock, no thread of its own: discovery_k8s.c's thread owns one
 * view and feeds it list pages and watch lines; tests/unit/test_discovery_k8s.c feeds it tables.
 *
 * What it keeps. Only Services that opt in (kvsplice.io/route) are stored; EndpointSlices are
 * stored compactly (addresses, conditions, pod names, ports), all of them, because a slice may
 * arrive before its Service opts in. Objects are keyed "namespace/name" in chained hash maps; a
 * list in pages fills a staging map that replaces the live one only when the last page is in.
 * Every input is bounded (the K8S_* tunables below: objects and endpoints stored, Services and
 * endpoints per snapshot); past a bound the object is left out with a log line naming the bound.
 *
 * The snapshot is rebuilt whole from the maps (sorted, so every node builds the same one from
 * the same objects) and fingerprinted, so the source hands over only snapshots that differ. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "discovery/discovery.h"
#include "core/log.h"

/* Objects stored per kind (opted-in Services; EndpointSlices of the whole cluster). */
#ifndef K8S_MAX_OBJECTS
#define K8S_MAX_OBJECTS 65536
#endif
/* Endpoints stored over all EndpointSlices. */
#ifndef K8S_MAX_STORED_ENDPOINTS
#define K8S_MAX_STORED_ENDPOINTS 262144
#endif
/* Endpoints and ports one EndpointSlice may carry (the API's own limits: 1000 and 100). */
#ifndef K8S_SLICE_MAX_ENDPOINTS
#define K8S_SLICE_MAX_ENDPOINTS 1000
#endif
#ifndef K8S_SLICE_MAX_PORTS
#define K8S_SLICE_MAX_PORTS 100
#endif
/* Services per snapshot (the BPF services map holds 1024). */
#ifndef K8S_MAX_SERVICES
#define K8S_MAX_SERVICES 1024
#endif
/* Endpoints per Service in a snapshot. */
#ifndef K8S_MAX_ENDPOINTS
#define K8S_MAX_ENDPOINTS 1024
#endif

/* "namespace/name": a namespace is at most 63 bytes, an EndpointSlice name 253. */
#define K8S_KEY_MAX 320
/* Port names are DNS labels (at most 63 bytes); annotation values kept up to this. */
#define K8S_PORTNAME_MAX 64

#define ANN_ROUTE "kvsplice.io/route"
#define ANN_PORT "kvsplice.io/port"
#define ANN_EVENTS "kvsplice.io/events-port"
#define ANN_REPLAY "kvsplice.io/replay-port"
#define ANN_MODEL "kvsplice.io/model"
#define ANN_TOKENIZERS "kvsplice.io/model-tokenizers"
#define LABEL_SERVICE "kubernetes.io/service-name"

#define STR_(x) #x
#define XSTR(x) STR_(x)

/* --- line splitter --------------------------------------------------------------------------- */

int k8s_lines_feed(struct k8s_lines *l, const char *data, size_t n,
		   int (*fn)(const char *line, size_t len, void *arg), void *arg)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		const char *line = data;
		size_t len = take;
		int rc;

		if (l->len + take > l->max) {
			l->len = 0;
			return -E2BIG;
		}
		if (!nl || l->len) { /* keep the partial line (or complete the one kept) */
			if (l->len + take + 1 > l->cap) {
				size_t cap = l->cap ? l->cap : 4096;
				char *p;

				while (cap < l->len + take + 1)
					cap *= 2;
				p = realloc(l->buf, cap);
				if (!p)
					return -ENOMEM;
				l->buf = p;
				l->cap = cap;
			}
			memcpy(l->buf + l->len, data, take);
			l->len += take;
			if (!nl)
				return 0;
			line = l->buf;
			len = l->len;
		}
		data += take + 1;
		n -= take + 1;
		if (len && line[len - 1] == '\r')
			len--;
		l->len = 0;
		rc = fn(line, len, arg);
		if (rc)
			return rc;
	}
	return 0;
}

void k8s_lines_free(struct k8s_lines *l)
{
	free(l->buf);
	l->buf = NULL;
	l->len = l->cap = 0;
}

/* --- objects and their maps ------------------------------------------------------------------ */

struct k8s_obj {
	struct k8s_obj *next; /* hash chain */
	uint64_t hash;
	char key[K8S_KEY_MAX]; /* "namespace/name" */
};

struct k8s_map {
	struct k8s_obj **b;
	size_t nb, n;
	size_t neps; /* endpoints of the slices held (slices maps only) */
};

struct k8s_port {
	char name[K8S_PORTNAME_MAX]; /* "" for an unnamed port */
	uint16_t port;
	bool tcp;
};

/* An opted-in Service, as its object says (checked when a snapshot is made). */
struct k8s_svc {
	struct k8s_obj o;
	char bad[160];	   /* why it cannot be served whatever its slices say; "" */
	struct in_addr ip; /* IPv4 ClusterIP */
	char route[K8S_PORTNAME_MAX], port[K8S_PORTNAME_MAX];
	char events[K8S_PORTNAME_MAX], replay[K8S_PORTNAME_MAX];
	char model[DISCOVERY_MODEL_MAX];
	char tokenizers[DISCOVERY_TOKENIZERS_MAX];
	size_t nports;
	struct k8s_port *ports;
	uint64_t logged; /* hash of the state last logged (0: none yet) */
	long idx;	 /* position in the snapshot being built, -1: not in it */
};

/* An endpoint of a slice that gets (or finishes) requests. */
struct k8s_sep {
	struct in_addr ip;
	bool terminating;
	char pod[DISCOVERY_NAME_MAX]; /* targetRef Pod name; "" when none or too long */
};

struct k8s_slice {
	struct k8s_obj o;
	char svc_key[K8S_KEY_MAX]; /* "namespace/service name" of its label */
	size_t nports, neps;
	struct k8s_port *ports;
	struct k8s_sep *eps;
};

struct k8s_view {
	struct k8s_map live[2], staging[2];
	bool dirty;
	bool full_logged[2]; /* a bound was logged since the last complete list */
};

static uint64_t key_hash(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

static void obj_free(enum k8s_kind kind, struct k8s_obj *o)
{
	if (!o)
		return;
	if (kind == K8S_SERVICES) {
		free(((struct k8s_svc *)o)->ports);
	} else {
		free(((struct k8s_slice *)o)->ports);
		free(((struct k8s_slice *)o)->eps);
	}
	free(o);
}

static size_t obj_neps(enum k8s_kind kind, const struct k8s_obj *o)
{
	return kind == K8S_SLICES && o ? ((const struct k8s_slice *)o)->neps : 0;
}

static struct k8s_obj *map_find(const struct k8s_map *m, const char *key)
{
	uint64_t h;

	if (!m->nb)
		return NULL;
	h = key_hash(key);
	for (struct k8s_obj *o = m->b[h & (m->nb - 1)]; o; o = o->next)
		if (o->hash == h && strcmp(o->key, key) == 0)
			return o;
	return NULL;
}

/* Unlinks and returns the object under key, or NULL. */
static struct k8s_obj *map_take(struct k8s_map *m, enum k8s_kind kind, const char *key)
{
	uint64_t h;

	if (!m->nb)
		return NULL;
	h = key_hash(key);
	for (struct k8s_obj **pp = &m->b[h & (m->nb - 1)]; *pp; pp = &(*pp)->next) {
		struct k8s_obj *o = *pp;

		if (o->hash == h && strcmp(o->key, key) == 0) {
			*pp = o->next;
			m->n--;
			m->neps -= obj_neps(kind, o);
			return o;
		}
	}
	return NULL;
}

/* Inserts o (its key not present). Returns 0 or -ENOMEM. */
static int map_add(struct k8s_map *m, enum k8s_kind kind, struct k8s_obj *o)
{
	if (m->n + 1 > m->nb) {
		size_t nb = m->nb ? m->nb * 2 : 64;
		struct k8s_obj **b = calloc(nb, sizeof(*b));

		if (!b)
			return -ENOMEM;
		for (size_t i = 0; i < m->nb; i++)
			while (m->b[i]) {
				struct k8s_obj *x = m->b[i];

				m->b[i] = x->next;
				x->next = b[x->hash & (nb - 1)];
				b[x->hash & (nb - 1)] = x;
			}
		free(m->b);
		m->b = b;
		m->nb = nb;
	}
	o->hash = key_hash(o->key);
	o->next = m->b[o->hash & (m->nb - 1)];
	m->b[o->hash & (m->nb - 1)] = o;
	m->n++;
	m->neps += obj_neps(kind, o);
	return 0;
}

static void map_clear(struct k8s_map *m, enum k8s_kind kind)
{
	for (size_t i = 0; i < m->nb; i++)
		while (m->b[i]) {
			struct k8s_obj *o = m->b[i];

			m->b[i] = o->next;
			obj_free(kind, o);
		}
	free(m->b);
	memset(m, 0, sizeof(*m));
}

/* --- parsing objects ------------------------------------------------------------------------- */

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *jobj(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsObject(v) ? v : NULL;
}

/* Copies s into out (n bytes). Returns -1 when it does not fit. */
static int copy_str(char *out, size_t n, const char *s)
{
	size_t l = strlen(s);

	if (l >= n)
		return -1;
	memcpy(out, s, l + 1);
	return 0;
}

/* "namespace/name" of an object's metadata into key. Returns 0 or -EINVAL. */
static int meta_key(const cJSON *obj, char *key, char *err, size_t errlen)
{
	const cJSON *md = jobj(obj, "metadata");
	const char *ns = jstr(md, "namespace"), *name = jstr(md, "name");

	if (!ns || !name || !*name || strlen(ns) > 63 ||
	    (size_t)snprintf(key, K8S_KEY_MAX, "%s/%s", ns, name) >= K8S_KEY_MAX) {
		snprintf(err, errlen, "object without a usable metadata.namespace / name");
		return -EINVAL;
	}
	return 0;
}

static void rv_of(const cJSON *obj, char *rv, size_t rvlen)
{
	const char *s = jstr(jobj(obj, "metadata"), "resourceVersion");

	if (s && rvlen && strlen(s) < rvlen)
		strcpy(rv, s);
}

/* Ports of a Service spec or an EndpointSlice. Returns 0, -EINVAL (err) or -ENOMEM. */
static int parse_ports(const cJSON *arr, struct k8s_port **out, size_t *n, char *err, size_t errlen)
{
	const cJSON *p;
	size_t k = 0, max = (size_t)cJSON_GetArraySize(arr);

	*out = NULL;
	*n = 0;
	if (!arr || cJSON_IsNull(arr)) /* the API writes an empty list as null */
		return 0;
	if (!cJSON_IsArray(arr) || max > K8S_SLICE_MAX_PORTS) {
		snprintf(err, errlen, "ports: not an array of at most %d", K8S_SLICE_MAX_PORTS);
		return -EINVAL;
	}
	*out = calloc(max ? max : 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	cJSON_ArrayForEach(p, arr)
	{
		const cJSON *num = cJSON_GetObjectItemCaseSensitive(p, "port");
		const char *name = jstr(p, "name"), *proto = jstr(p, "protocol");
		struct k8s_port *o = &(*out)[k];

		/* a slice port without a number means "all ports": nothing to route to */
		if (!cJSON_IsNumber(num) || num->valuedouble < 1 || num->valuedouble > 65535)
			continue;
		if (name && copy_str(o->name, sizeof(o->name), name))
			continue;
		o->port = (uint16_t)num->valueint;
		o->tcp = !proto || strcmp(proto, "TCP") == 0;
		k++;
	}
	*n = k;
	return 0;
}

static void ann_copy(const cJSON *ann, const char *key, char *out, size_t n, char *bad,
		     size_t badlen)
{
	const char *v = jstr(ann, key);

	out[0] = '\0';
	if (v && copy_str(out, n, v) && !bad[0])
		snprintf(bad, badlen, "annotation %s longer than %zu bytes", key, n - 1);
}

/* A Service object. *out is NULL when it does not opt in (no kvsplice.io/route). */
static int parse_service(const cJSON *obj, struct k8s_svc **out, char *err, size_t errlen)
{
	const cJSON *md = jobj(obj, "metadata"), *spec = jobj(obj, "spec");
	const cJSON *ann = jobj(md, "annotations"), *ips;
	const char *type, *cip;
	struct k8s_svc *s;
	int rc;

	*out = NULL;
	if (!jstr(ann, ANN_ROUTE))
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if ((rc = meta_key(obj, s->o.key, err, errlen)) < 0)
		goto fail;
	ann_copy(ann, ANN_ROUTE, s->route, sizeof(s->route), s->bad, sizeof(s->bad));
	ann_copy(ann, ANN_PORT, s->port, sizeof(s->port), s->bad, sizeof(s->bad));
	ann_copy(ann, ANN_EVENTS, s->events, sizeof(s->events), s->bad, sizeof(s->bad));
	ann_copy(ann, ANN_REPLAY, s->replay, sizeof(s->replay), s->bad, sizeof(s->bad));
	ann_copy(ann, ANN_MODEL, s->model, sizeof(s->model), s->bad, sizeof(s->bad));
	ann_copy(ann, ANN_TOKENIZERS, s->tokenizers, sizeof(s->tokenizers), s->bad, sizeof(s->bad));
	type = jstr(spec, "type");
	cip = jstr(spec, "clusterIP");
	if (type && strcmp(type, "ExternalName") == 0) {
		snprintf(s->bad, sizeof(s->bad), "type ExternalName (no ClusterIP)");
	} else if (!cip || strcmp(cip, "None") == 0 || !*cip) {
		snprintf(s->bad, sizeof(s->bad),
			 "headless (clusterIP None): no address to intercept");
	} else if (inet_pton(AF_INET, cip, &s->ip) != 1) {
		const cJSON *ip;
		bool found = false;

		/* dual stack with IPv6 first: the IPv4 one is among clusterIPs */
		ips = cJSON_GetObjectItemCaseSensitive(spec, "clusterIPs");
		if (!cJSON_IsArray(ips))
			ips = NULL;
		cJSON_ArrayForEach(ip, ips)
		{
			if (!found && cJSON_IsString(ip) &&
			    inet_pton(AF_INET, ip->valuestring, &s->ip) == 1)
				found = true;
		}
		if (!found)
			snprintf(s->bad, sizeof(s->bad), "no IPv4 ClusterIP (%.60s)", cip);
	}
	rc = parse_ports(cJSON_GetObjectItemCaseSensitive(spec, "ports"), &s->ports, &s->nports,
			 err, errlen);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	obj_free(K8S_SERVICES, &s->o);
	return rc;
}

/* An EndpointSlice object. *out is NULL when it serves nothing kvsplice can use (no
 * service-name label, not IPv4). Endpoints that are neither ready nor terminating are left out. */
static int parse_slice(const cJSON *obj, struct k8s_slice **out, char *err, size_t errlen)
{
	const cJSON *md = jobj(obj, "metadata"), *eps, *e;
	const char *svc = jstr(jobj(md, "labels"), LABEL_SERVICE), *at = jstr(obj, "addressType");
	struct k8s_slice *s;
	size_t max, k = 0;
	int rc;

	*out = NULL;
	if (!svc || !at || strcmp(at, "IPv4") != 0)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if ((rc = meta_key(obj, s->o.key, err, errlen)) < 0)
		goto fail;
	if ((size_t)snprintf(s->svc_key, sizeof(s->svc_key), "%s", s->o.key) >= sizeof(s->svc_key))
		goto inval;
	*(strchr(s->svc_key, '/') + 1) = '\0';
	if (strlen(svc) > 63 || strlen(s->svc_key) + strlen(svc) >= sizeof(s->svc_key))
		goto inval;
	strcat(s->svc_key, svc);
	rc = parse_ports(cJSON_GetObjectItemCaseSensitive(obj, "ports"), &s->ports, &s->nports, err,
			 errlen);
	if (rc < 0)
		goto fail;
	eps = cJSON_GetObjectItemCaseSensitive(obj, "endpoints");
	if (cJSON_IsNull(eps)) /* no endpoints: null, as the API writes an empty list */
		eps = NULL;
	max = (size_t)cJSON_GetArraySize(eps);
	if (eps && (!cJSON_IsArray(eps) || max > K8S_SLICE_MAX_ENDPOINTS)) {
		snprintf(err, errlen, "%s: endpoints: not an array of at most %d", s->o.key,
			 K8S_SLICE_MAX_ENDPOINTS);
		rc = -EINVAL;
		goto fail;
	}
	s->eps = calloc(max ? max : 1, sizeof(*s->eps));
	if (!s->eps) {
		rc = -ENOMEM;
		goto fail;
	}
	cJSON_ArrayForEach(e, eps)
	{
		const cJSON *cond = jobj(e, "conditions"), *addrs, *ref;
		const cJSON *ready = cJSON_GetObjectItemCaseSensitive(cond, "ready");
		const cJSON *term = cJSON_GetObjectItemCaseSensitive(cond, "terminating");
		struct k8s_sep *o = &s->eps[k];
		const char *kind, *name;

		/* ready: unset means ready (the API's rule); terminating: unset means not */
		o->terminating = cJSON_IsTrue(term);
		if (!o->terminating && cJSON_IsFalse(ready))
			continue; /* not ready and not terminating: starting, or failing probes */
		addrs = cJSON_GetObjectItemCaseSensitive(e, "addresses");
		if (!cJSON_IsArray(addrs) || !cJSON_IsString(cJSON_GetArrayItem(addrs, 0)) ||
		    inet_pton(AF_INET, cJSON_GetArrayItem(addrs, 0)->valuestring, &o->ip) != 1)
			continue;
		ref = jobj(e, "targetRef");
		kind = jstr(ref, "kind");
		name = jstr(ref, "name");
		if (kind && name && strcmp(kind, "Pod") == 0)
			copy_str(o->pod, sizeof(o->pod), name);
		k++;
	}
	s->neps = k;
	*out = s;
	return 0;
inval:
	snprintf(err, errlen, "%s: label %s unusable", s->o.key, LABEL_SERVICE);
	rc = -EINVAL;
fail:
	obj_free(K8S_SLICES, &s->o);
	return rc;
}

/* --- the view -------------------------------------------------------------------------------- */

static const char *const kind_name[2] = {"Services", "EndpointSlices"};

const char *k8s_kind_name(enum k8s_kind kind)
{
	return (unsigned)kind < 2 ? kind_name[kind] : "?";
}

size_t k8s_view_count(const struct k8s_view *v, enum k8s_kind kind)
{
	return (unsigned)kind < 2 ? v->live[kind].n : 0;
}

int k8s_view_new(struct k8s_view **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void k8s_view_free(struct k8s_view *v)
{
	if (!v)
		return;
	for (int k = 0; k < 2; k++) {
		map_clear(&v->live[k], (enum k8s_kind)k);
		map_clear(&v->staging[k], (enum k8s_kind)k);
	}
	free(v);
}

bool k8s_view_dirty(const struct k8s_view *v)
{
	return v->dirty;
}

/* Whether slice o (may be NULL) belongs to an opted-in Service: a change of any other slice
 * cannot change the snapshot, and in a big cluster most slice events are of those. */
static bool slice_counts(const struct k8s_view *v, const struct k8s_obj *o)
{
	return o && map_find(&v->live[K8S_SERVICES], ((const struct k8s_slice *)o)->svc_key);
}

/* Puts one object (or, for del or an object that does not count, removes its key) into m.
 * Returns 0, -EINVAL (err; the object is ignored) or -ENOMEM. */
static int view_put(struct k8s_view *v, struct k8s_map *m, enum k8s_kind kind, const cJSON *obj,
		    bool del, char *err, size_t errlen)
{
	struct k8s_obj *o = NULL, *old;
	char key[K8S_KEY_MAX];
	int rc;

	if ((rc = meta_key(obj, key, err, errlen)) < 0)
		return rc;
	if (!del) {
		if (kind == K8S_SERVICES)
			rc = parse_service(obj, (struct k8s_svc **)&o, err, errlen);
		else
			rc = parse_slice(obj, (struct k8s_slice **)&o, err, errlen);
		if (rc < 0)
			return rc;
	}
	old = map_take(m, kind, key);
	if (o && kind == K8S_SERVICES && old) /* keep what was logged about it */
		((struct k8s_svc *)o)->logged = ((struct k8s_svc *)old)->logged;
	if (kind == K8S_SERVICES ? old || o : slice_counts(v, old) || slice_counts(v, o))
		v->dirty = true;
	obj_free(kind, old);
	if (!o)
		return 0;
	if (m->n >= K8S_MAX_OBJECTS || m->neps + obj_neps(kind, o) > K8S_MAX_STORED_ENDPOINTS) {
		if (!v->full_logged[kind])
			log_error("k8s",
				  "more than %d %s or %d endpoints stored: %s and others left out "
				  "(watch one namespace, or raise K8S_MAX_OBJECTS / "
				  "K8S_MAX_STORED_ENDPOINTS)",
				  K8S_MAX_OBJECTS, kind_name[kind], K8S_MAX_STORED_ENDPOINTS, key);
		v->full_logged[kind] = true;
		obj_free(kind, o);
		return 0;
	}
	if (map_add(m, kind, o) < 0) {
		obj_free(kind, o);
		return -ENOMEM;
	}
	return 0;
}

int k8s_view_list(struct k8s_view *v, enum k8s_kind kind, const char *json, size_t len, bool first,
		  char *cont, size_t contlen, char *rv, size_t rvlen, char *err, size_t errlen)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *items, *it, *md;
	const char *c;
	int rc = 0;

	if (contlen)
		cont[0] = '\0';
	if (first)
		map_clear(&v->staging[kind], kind);
	items = cJSON_GetObjectItemCaseSensitive(root, "items");
	md = jobj(root, "metadata");
	if (!root || (items && !cJSON_IsArray(items)) || !md) {
		snprintf(err, errlen, "%s list: not a list object", kind_name[kind]);
		rc = -EINVAL;
		goto cleanup;
	}
	cJSON_ArrayForEach(it, items)
	{
		char why[256] = "";

		rc = view_put(v, &v->staging[kind], kind, it, false, why, sizeof(why));
		if (rc == -ENOMEM)
			goto cleanup;
		if (rc < 0)
			log_warn("k8s", "%s list: an object left out: %s", kind_name[kind], why);
		rc = 0;
	}
	rv_of(root, rv, rvlen);
	c = jstr(md, "continue");
	if (c && *c) {
		if (strlen(c) >= contlen) {
			snprintf(err, errlen, "%s list: continue token too long", kind_name[kind]);
			rc = -EINVAL;
		} else {
			strcpy(cont, c);
		}
		goto cleanup;
	}
	/* the list is complete: it replaces what the view held */
	if (kind == K8S_SERVICES)
		for (size_t i = 0; i < v->staging[kind].nb; i++)
			for (struct k8s_obj *o = v->staging[kind].b[i]; o; o = o->next) {
				struct k8s_obj *old = map_find(&v->live[kind], o->key);

				if (old)
					((struct k8s_svc *)o)->logged =
					    ((struct k8s_svc *)old)->logged;
			}
	map_clear(&v->live[kind], kind);
	v->live[kind] = v->staging[kind];
	memset(&v->staging[kind], 0, sizeof(v->staging[kind]));
	v->full_logged[kind] = false;
	v->dirty = true;
cleanup:
	if (rc < 0)
		map_clear(&v->staging[kind], kind);
	cJSON_Delete(root);
	return rc;
}

enum k8s_event k8s_view_event(struct k8s_view *v, enum k8s_kind kind, const char *line, size_t len,
			      char *rv, size_t rvlen, char *err, size_t errlen)
{
	cJSON *root = cJSON_ParseWithLength(line, len);
	const cJSON *obj = jobj(root, "object");
	const char *type = jstr(root, "type");
	enum k8s_event ev = K8S_EV_APPLIED;
	int rc;

	if (rvlen)
		rv[0] = '\0';
	if (!type || !obj) {
		snprintf(err, errlen, "%s watch: not a watch event", kind_name[kind]);
		ev = K8S_EV_BAD;
	} else if (strcmp(type, "BOOKMARK") == 0) {
		rv_of(obj, rv, rvlen);
		ev = K8S_EV_BOOKMARK;
	} else if (strcmp(type, "ERROR") == 0) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
		const char *msg = jstr(obj, "message");

		snprintf(err, errlen, "%s watch: %d %s", kind_name[kind],
			 cJSON_IsNumber(code) ? code->valueint : 0, msg ? msg : "");
		ev = cJSON_IsNumber(code) && code->valueint == 410 ? K8S_EV_GONE : K8S_EV_ERROR;
	} else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0 ||
		   strcmp(type, "DELETED") == 0) {
		rc = view_put(v, &v->live[kind], kind, obj, type[0] == 'D', err, errlen);
		if (rc == -EINVAL) /* one unusable object: ignored, the stream goes on */
			log_warn("k8s", "%s watch: an object left out: %s", kind_name[kind], err);
		else if (rc < 0) {
			snprintf(err, errlen, "%s watch: out of memory", kind_name[kind]);
			ev = K8S_EV_BAD;
		}
		rv_of(obj, rv, rvlen);
	} else {
		snprintf(err, errlen, "%s watch: unknown event type %.32s", kind_name[kind], type);
		ev = K8S_EV_BAD;
	}
	cJSON_Delete(root);
	return ev;
}

/* The snapshot being built: per Service its chosen port and the endpoints gathered so far. */
struct build_svc {
	struct k8s_svc *s;
	const struct k8s_port *port; /* the Service port intercepted */
	uint16_t events, replay;     /* numeric annotations; 0: by name per slice or none */
	struct endpoint *eps;
	size_t n, cap;
	char note[200]; /* served, but something to say (cut, unresolved port name) */
};

/* A port annotation: a number, or the name of a port looked up later. Returns 0 (a number in
 * *num, or 0 with a name), -1 when a number is out of range. */
static int ann_port(const char *a, uint16_t *num)
{
	char *end;
	long v;

	*num = 0;
	if (!a[0] || a[0] < '0' || a[0] > '9')
		return 0;
	v = strtol(a, &end, 10);
	if (*end || v < 1 || v > 65535)
		return -1;
	*num = (uint16_t)v;
	return 0;
}

/* Checks Service s and picks its port; the reason it cannot be served goes to why ("" if it can).
 */
static void build_check(struct build_svc *b, char *why, size_t n)
{
	struct k8s_svc *s = b->s;
	const struct k8s_port *only = NULL, *http = NULL;
	size_t ntcp = 0;
	uint16_t num;

	why[0] = '\0';
	if (s->bad[0]) {
		snprintf(why, n, "%s", s->bad);
		return;
	}
	if (!discovery_route_known(s->route)) {
		snprintf(why, n, "%s \"%.40s\" is not a policy (%s)", ANN_ROUTE, s->route,
			 discovery_route_names());
		return;
	}
	if (strlen(s->o.key) >= DISCOVERY_NAME_MAX) {
		snprintf(why, n, "namespace/name longer than %d bytes", DISCOVERY_NAME_MAX - 1);
		return;
	}
	if (ann_port(s->events, &b->events) || ann_port(s->replay, &b->replay)) {
		snprintf(why, n, "%s / %s must be a port number (1-65535) or a port name",
			 ANN_EVENTS, ANN_REPLAY);
		return;
	}
	if (ann_port(s->port, &num)) {
		snprintf(why, n, "%s \"%s\" is not a port", ANN_PORT, s->port);
		return;
	}
	for (size_t i = 0; i < s->nports; i++) {
		const struct k8s_port *p = &s->ports[i];

		if (!p->tcp)
			continue;
		if (s->port[0] && (num ? p->port == num : strcmp(p->name, s->port) == 0)) {
			b->port = p;
			return;
		}
		ntcp++;
		only = p;
		if (strcmp(p->name, "http") == 0)
			http = p;
	}
	if (s->port[0])
		snprintf(why, n, "%s \"%s\" is not one of its TCP ports", ANN_PORT, s->port);
	else if (ntcp == 1)
		b->port = only;
	else if (http)
		b->port = http;
	else if (!ntcp)
		snprintf(why, n, "no TCP port");
	else
		snprintf(why, n, "%zu TCP ports and none named http: say which with %s", ntcp,
			 ANN_PORT);
}

/* The number of port name in a slice, or 0. */
static uint16_t slice_port(const struct k8s_slice *sl, const char *name)
{
	for (size_t i = 0; i < sl->nports; i++)
		if (sl->ports[i].tcp && strcmp(sl->ports[i].name, name) == 0)
			return sl->ports[i].port;
	return 0;
}

static void note_add(struct build_svc *b, const char *what)
{
	size_t l = strlen(b->note);

	if (strstr(b->note, what))
		return;
	snprintf(b->note + l, sizeof(b->note) - l, "%s%s", l ? "; " : "", what);
}

/* Adds the endpoints of slice sl to b (duplicates and the bound are handled once all are in).
 * Returns 0 or -ENOMEM. */
static int build_slice(struct build_svc *b, const struct k8s_slice *sl)
{
	uint16_t port = slice_port(sl, b->port->name), events = b->events, replay = b->replay;

	if (!port)
		return 0; /* a slice of another port set (the Service's ports are changing) */
	if (!events && b->s->events[0] && !(events = slice_port(sl, b->s->events)))
		note_add(b, "its events-port name is not a port of its EndpointSlices");
	if (!replay && b->s->replay[0] && !(replay = slice_port(sl, b->s->replay)))
		note_add(b, "its replay-port name is not a port of its EndpointSlices");
	if (b->n + sl->neps > b->cap) {
		size_t cap = b->cap ? b->cap : 8;
		struct endpoint *p;

		while (cap < b->n + sl->neps)
			cap *= 2;
		p = realloc(b->eps, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		b->eps = p;
		b->cap = cap;
	}
	for (size_t i = 0; i < sl->neps; i++) {
		const struct k8s_sep *e = &sl->eps[i];
		struct endpoint *d = &b->eps[b->n++];

		memset(d, 0, sizeof(*d));
		d->addr.sin_family = AF_INET;
		d->addr.sin_addr = e->ip;
		d->addr.sin_port = htons(port);
		d->events_port = events;
		d->replay_port = replay;
		d->terminating = e->terminating;
		snprintf(d->name, sizeof(d->name), "%s", e->pod);
	}
	return 0;
}

/* Address order (host order, so 10.0.0.9 < 10.0.0.10), then port; ready before terminating. */
static int ep_cmp(const void *a, const void *b)
{
	const struct endpoint *x = a, *y = b;
	uint32_t xi = ntohl(x->addr.sin_addr.s_addr), yi = ntohl(y->addr.sin_addr.s_addr);
	uint16_t xp = ntohs(x->addr.sin_port), yp = ntohs(y->addr.sin_port);

	if (xi != yi)
		return xi < yi ? -1 : 1;
	if (xp != yp)
		return xp < yp ? -1 : 1;
	return (int)x->terminating - (int)y->terminating;
}

/* Sorts b's endpoints, keeps one per address (the ready one: the same pod can be in two slices
 * while they are being rebalanced), applies the bound and names the unnamed and the twins. */
static void build_finish(struct build_svc *b)
{
	size_t k = 0;

	if (b->n)
		qsort(b->eps, b->n, sizeof(*b->eps), ep_cmp);
	for (size_t i = 0; i < b->n; i++) {
		if (k && b->eps[k - 1].addr.sin_addr.s_addr == b->eps[i].addr.sin_addr.s_addr &&
		    b->eps[k - 1].addr.sin_port == b->eps[i].addr.sin_port)
			continue;
		if (k == K8S_MAX_ENDPOINTS) {
			note_add(b, "more than " XSTR(
					K8S_MAX_ENDPOINTS) " endpoints: the rest left out");
			break;
		}
		b->eps[k++] = b->eps[i];
	}
	b->n = k;
	for (size_t i = 0; i < b->n; i++) {
		struct endpoint *e = &b->eps[i];
		bool twin = false;

		for (size_t j = 0; j < i && e->name[0] && !twin; j++)
			twin = strcmp(b->eps[j].name, e->name) == 0;
		if (!e->name[0] || twin) { /* no pod name, or one pod on two ports: its address */
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &e->addr.sin_addr, ip, sizeof(ip));
			if (twin)
				snprintf(e->name, sizeof(e->name), "%s:%u", ip,
					 ntohs(e->addr.sin_port));
			else
				snprintf(e->name, sizeof(e->name), "%s", ip);
		}
	}
}

static int svc_cmp(const void *a, const void *b)
{
	return strcmp((*(struct k8s_svc *const *)a)->o.key, (*(struct k8s_svc *const *)b)->o.key);
}

/* Logs Service s's state once per change: why it is skipped, or that it is served (and what
 * is worth knowing). */
static void state_log(struct k8s_svc *s, const char *why, const struct build_svc *b)
{
	char state[512];
	uint64_t h;

	if (why[0])
		snprintf(state, sizeof(state), "not served: %s", why);
	else
		snprintf(state, sizeof(state), "served (route %s)%s%s", s->route,
			 b->note[0] ? ": " : "", b->note);
	h = XXH3_64bits(state, strlen(state)) | 1;
	if (h == s->logged)
		return;
	s->logged = h;
	if (why[0] || b->note[0])
		log_warn("k8s", "Service %s %s", s->o.key, state);
	else
		log_info("k8s", "Service %s %s", s->o.key, state);
}

/* A hash of everything a snapshot carries but its generation. */
static uint64_t fingerprint(const struct services *s)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (size_t i = 0; i < s->n; i++) {
		const struct service *v = &s->v[i];

		XXH3_64bits_update(st, v->name, sizeof(v->name));
		XXH3_64bits_update(st, &v->vip, sizeof(v->vip));
		XXH3_64bits_update(st, v->policy, sizeof(v->policy));
		XXH3_64bits_update(st, v->model, sizeof(v->model));
		XXH3_64bits_update(st, v->tokenizers, sizeof(v->tokenizers));
		XXH3_64bits_update(st, &v->nendpoints, sizeof(v->nendpoints));
		for (size_t k = 0; k < v->nendpoints; k++) {
			const struct endpoint *e = &v->endpoints[k];

			XXH3_64bits_update(st, e->name, sizeof(e->name));
			XXH3_64bits_update(st, &e->addr, sizeof(e->addr));
			XXH3_64bits_update(st, &e->events_port, sizeof(e->events_port));
			XXH3_64bits_update(st, &e->replay_port, sizeof(e->replay_port));
			XXH3_64bits_update(st, &e->terminating, sizeof(e->terminating));
		}
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

int k8s_view_snapshot(struct k8s_view *v, struct services **out, uint64_t *fp)
{
	struct k8s_map *sm = &v->live[K8S_SERVICES], *lm = &v->live[K8S_SLICES];
	struct k8s_svc **all = calloc(sm->n ? sm->n : 1, sizeof(*all));
	struct build_svc *b = calloc(sm->n ? sm->n : 1, sizeof(*b));
	struct services *s = NULL;
	size_t n = 0, nb = 0;
	int rc = -ENOMEM;

	if (!all || !b)
		goto cleanup;
	for (size_t i = 0; i < sm->nb; i++)
		for (struct k8s_obj *o = sm->b[i]; o; o = o->next)
			all[n++] = (struct k8s_svc *)o;
	if (n)
		qsort(all, n, sizeof(*all), svc_cmp);
	for (size_t i = 0; i < n; i++) {
		char why[256];

		all[i]->idx = -1;
		b[nb].s = all[i];
		build_check(&b[nb], why, sizeof(why));
		if (!why[0] && nb == K8S_MAX_SERVICES)
			snprintf(why, sizeof(why), "more than %d Services opted in",
				 K8S_MAX_SERVICES);
		if (why[0]) {
			state_log(all[i], why, &b[nb]);
			memset(&b[nb], 0, sizeof(b[nb]));
			continue;
		}
		all[i]->idx = (long)nb++;
	}
	for (size_t i = 0; i < lm->nb; i++)
		for (struct k8s_obj *o = lm->b[i]; o; o = o->next) {
			struct k8s_slice *sl = (struct k8s_slice *)o;
			struct k8s_svc *sv = (struct k8s_svc *)map_find(sm, sl->svc_key);

			if (sv && sv->idx >= 0 && build_slice(&b[sv->idx], sl) < 0)
				goto cleanup;
		}
	if (services_new(nb, &s) < 0)
		goto cleanup;
	for (size_t i = 0; i < nb; i++) {
		struct service *d = &s->v[i];

		build_finish(&b[i]);
		state_log(b[i].s, "", &b[i]);
		copy_str(d->name, sizeof(d->name), b[i].s->o.key); /* checked: it fits */
		d->vip.sin_family = AF_INET;
		d->vip.sin_addr = b[i].s->ip;
		d->vip.sin_port = htons(b[i].port->port);
		copy_str(d->policy, sizeof(d->policy), b[i].s->route); /* a policy name */
		snprintf(d->model, sizeof(d->model), "%s", b[i].s->model);
		snprintf(d->tokenizers, sizeof(d->tokenizers), "%s", b[i].s->tokenizers);
		d->endpoints = b[i].eps;
		d->nendpoints = b[i].n;
		b[i].eps = NULL;
		if (!d->endpoints && !(d->endpoints = calloc(1, sizeof(*d->endpoints))))
			goto cleanup;
	}
	if (fp)
		*fp = fingerprint(s);
	v->dirty = false;
	*out = s;
	s = NULL;
	rc = 0;
cleanup:
	for (size_t i = 0; b && i < nb; i++)
		free(b[i].eps);
	services_put(s);
	free(all);
	free(b);
	return rc;
}
