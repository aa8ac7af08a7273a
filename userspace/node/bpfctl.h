/* SPDX-License-Identifier: Apache-2.0 */
/* bpfctl: loads, pins, takes over and removes kvsplice's BPF interception (bpf/), and gives the
 * daemon what it needs from it: the proxy listener registration (which is what turns interception
 * on; the kernel drops it when the process dies, which turns it off with no window), the selected
 * Services, the original destination of an accepted connection, and the counters. Pinned state
 * lives under pin_dir (default BPFCTL_DEFAULT_PIN_DIR) and survives the daemon. Not thread-safe:
 * call from the daemon's main thread. */
#ifndef KVS_BPFCTL_H
#define KVS_BPFCTL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "discovery/discovery.h"

/* Where the pinned state lives unless told otherwise (kvsplice --pin-dir). */
#define BPFCTL_DEFAULT_PIN_DIR "/sys/fs/bpf/kvsplice"

struct bpfctl;

struct bpfctl_opts {
	const char *cgroup_path;  /* cgroup v2 directory the programs attach to */
	const char *pin_dir;	  /* bpffs directory for pinned maps and links */
	struct sockaddr_in proxy; /* node-local address connects are rewritten to */
	uint32_t own_mark; /* SO_MARK on the daemon's own upstream sockets (never rewritten) */
	/* --intercept-endpoints: a connect aimed at an endpoint of a selected Service is taken as
	 * that Service's (needs own_mark); bpfctl_sync_services then also keeps the endpoints */
	bool match_endpoints;
};

/* Where kvsplice's connect4 program runs among every connect4 program that runs for a process in
 * its cgroup (the kernel's effective list, ancestors' included; not programs of descendant
 * cgroups, which run before all of these). */
struct bpfctl_order {
	int position;	/* 1 = first; 0 = not in the list (not attached) */
	int programs;	/* how many run */
	char first[16]; /* the name of the program that runs first */
};

/* Loads the programs, or takes over the ones pinned under pin_dir (maps reused, links updated
 * in place), and attaches them. Returns 0 and *out, or a negative errno (message logged). */
int bpfctl_open(const struct bpfctl_opts *opts, struct bpfctl **out);

/* Registers the proxy's listening socket: rewriting starts now and stops by itself when the
 * socket closes (process exit, crash). Returns 0 or a negative errno. */
int bpfctl_set_listener(struct bpfctl *b, int listen_fd);

/* Takes listen_fd's socket out of the sockmap, if it is the one registered: interception falls
 * open for new connects at once, while the socket still accepts what was already sent its way
 * (a stop without loss). A socket registered by another process since (a successor that took
 * over) is left alone. Returns 1 removed, 0 not registered (or another socket), or a negative
 * errno. */
int bpfctl_clear_listener(struct bpfctl *b, int listen_fd);
/* The same on the sockmap map (an fd of the pinned proxy_listener map: the keeper, keeper.h). */
int bpfctl_clear_listener_map(int map, int listen_fd);

/* Is a proxy listener registered right now (by this or any process)? Returns 1, 0, or a negative
 * errno. */
int bpfctl_listener_registered(struct bpfctl *b);

/* Fills *o from the kernel's effective connect4 list of kvsplice's cgroup. Returns 0 or a
 * negative errno. */
int bpfctl_order(struct bpfctl *b, struct bpfctl_order *o);

/* Selects / unselects a Service (addresses and ports in network byte order). */
int bpfctl_service_add(struct bpfctl *b, uint32_t ip, uint16_t port, uint32_t service_id);
int bpfctl_service_del(struct bpfctl *b, uint32_t ip, uint16_t port);
/* Makes the Service selection exactly s's ClusterIP:port set (s NULL: none): adds or updates s's
 * Services first, then deletes every other entry of the map, including entries a previous
 * process left in the pinned map for a Service removed while kvsplice was down. With
 * match_endpoints the endpoints map is made s's endpoint set the same way (an endpoint of two
 * Services counts as the first one's), else emptied. Returns the number of Service entries
 * deleted, or the first negative errno (every failure is logged, the rest is still done). */
int bpfctl_sync_services(struct bpfctl *b, const struct services *s);

/* Original destination (ClusterIP:port) of an accepted connection whose client address is peer.
 * Removes the entry. Returns 0, or -ENOENT when the connection was not intercepted. */
int bpfctl_origdst_take(struct bpfctl *b, const struct sockaddr_in *peer, struct sockaddr_in *orig);
/* The same on the origdst map (an fd of the pinned map: the keeper). */
int bpfctl_origdst_take_map(int map, const struct sockaddr_in *peer, struct sockaddr_in *orig);
/* An fd of the map pinned as name under pin_dir (NULL: the default), or a negative errno. */
int bpfctl_map_pinned(const char *pin_dir, const char *name);

/* Copies the per-reason counters (summed over CPUs) into out[n]; returns the number of reasons. */
int bpfctl_stats(struct bpfctl *b, uint64_t *out, int n);
/* Like bpfctl_stats, from the stats map pinned under pin_dir (NULL: the default), without loading
 * or attaching anything: for tools and tests that only read. */
int bpfctl_stats_pinned(const char *pin_dir, uint64_t *out, int n);
/* The name of counter i ("rewritten", "not_service", "proxy_absent", ...). */
const char *bpfctl_stat_name(int i);
/* The series bpfctl_metrics writes (daemon/catalog.c lists them for docs/reference/metrics.md). */
extern const struct metrics_family bpfctl_families[];
extern const size_t bpfctl_nfamilies;
/* Appends the Prometheus text of the counters and of the listener registration to out
 * (bpfctl_families: kvsplice_bpf_events_total{reason}, kvsplice_bpf_listener_registered,
 * kvsplice_bpf_services, kvsplice_bpf_endpoints, kvsplice_bpf_connect4_position,
 * kvsplice_bpf_connect4_programs); nothing when b is NULL. */
void bpfctl_metrics(struct bpfctl *b, struct buf *out);

/* Closes the daemon's handles; pinned programs, maps and links stay (interception falls open
 * while no listener is registered). */
void bpfctl_close(struct bpfctl *b);

/* Detaches and unpins everything under pin_dir and removes the directory (left, empty, when it is
 * a mount point). Returns 0 or a negative errno. */
int bpfctl_detach(const char *pin_dir);

#endif
