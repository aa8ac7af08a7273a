/* SPDX-License-Identifier: Apache-2.0 */
/* discovery: which Services kvsplice serves and their endpoints (worker pods). A source produces
 * immutable, reference-counted snapshots; the static JSON file (--services FILE) is the first
 * source, a Kubernetes API (Services + EndpointSlices) source implements the same ops later.
 *
 * File format:
 *   {"services":[{"name":"qwen","cluster_ip":"10.96.0.50","port":8000,
 *     "endpoints":[{"name":"w1","ip":"10.0.1.2","port":8000,"events_port":20080,
 *                   "replay_port":20081}]}]}
 * events_port / replay_port are optional (0 = none). Not thread-safe: the daemon's main thread
 * owns sources; a snapshot may be read from any thread while a reference is held. */
#ifndef KVS_DISCOVERY_H
#define KVS_DISCOVERY_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define DISCOVERY_NAME_MAX 64

struct endpoint {
	char name[DISCOVERY_NAME_MAX];
	struct sockaddr_in addr; /* the worker's HTTP address */
	uint16_t events_port;	 /* ZMQ PUB port of KV events, host order; 0 = none */
	uint16_t replay_port;	 /* ZMQ ROUTER replay port, host order; 0 = none */
};

struct service {
	char name[DISCOVERY_NAME_MAX];
	struct sockaddr_in vip; /* ClusterIP:port clients connect to */
	uint32_t id;		/* position in the snapshot + 1 (handed to BPF) */
	size_t nendpoints;
	struct endpoint *endpoints;
};

struct services {
	int refs;
	uint64_t generation; /* grows with every new snapshot of a source */
	size_t n;
	struct service *v;
};

/* Parses the JSON text. Returns 0 and a snapshot with one reference in *out, or -EINVAL with a
 * one-line reason in err (duplicate names or ClusterIP:port, bad address or port, missing
 * fields), or -ENOMEM. */
int discovery_parse(const char *json, size_t len, struct services **out, char *err,
		    size_t errlen);

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
	 * since the last call (the first call always returns one), 0 when unchanged, or a negative
	 * errno (the caller keeps its current snapshot). force re-reads even when nothing seems to
	 * have changed (SIGHUP). */
	int (*poll)(struct discovery_source *src, int force, struct services **out);
	void (*free)(struct discovery_source *src);
};

/* The static file source: re-reads path when its mtime, size or inode change (poll it about once
 * a second) or when forced. Returns 0 and *out, or -ENOMEM. */
int discovery_file_source(const char *path, struct discovery_source **out);

#endif
