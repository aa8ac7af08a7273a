// SPDX-License-Identifier: Apache-2.0
/* bpfctl: see bpfctl.h. Lifecycle of the pinned state under pin_dir:
 *   maps   services, endpoints, proxy_listener, origdst_cookie, origdst, stats: pinned by libbpf at
 *          the first
 *          load, reused by every later load whose definitions match (recreated otherwise);
 *   links  link_connect4, link_getpeername4, link_sockops, link_connect6, link_getpeername6:
 *          cgroup bpf_links pinned after the first attach, which puts them first at the cgroup
 *          where the kernel can order cgroup programs (BPF_F_BEFORE), so a socket load balancer
 *          attached at the same cgroup runs after kvsplice whichever came first; a later daemon
 *          swaps its freshly loaded programs into them in place (bpf_link__update_program, which
 *          keeps their position), so interception never goes through a detached state.
 * Nothing here ever decides to intercept: that is the proxy listener's presence in the sockmap. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>

#include "node/bpfctl.h"
#include "kvsplice_abi.h"
#include "kvsplice.skel.h"
#include "core/log.h"

#define NLINKS 5

#ifndef BPF_F_BEFORE
#define BPF_F_BEFORE (1U << 3)
#endif

struct bpfctl {
	struct kvsplice_bpf *skel;
	struct bpf_link *links[NLINKS];
	char pin_dir[PATH_MAX - 64];
	char cgroup_path[PATH_MAX];
	bool match_endpoints;
	int ncpus;
	__u64 *percpu; /* scratch for one per-CPU stats value */
};

static const char *const map_names[] = {"services",	  "endpoints", "proxy_listener",
					"origdst_cookie", "origdst",   "stats"};
static const char *const link_names[NLINKS] = {KVS_PIN_LINK_CONNECT4, KVS_PIN_LINK_GETPEERNAME4,
					       KVS_PIN_LINK_SOCKOPS, KVS_PIN_LINK_CONNECT6,
					       KVS_PIN_LINK_GETPEERNAME6};

static const char *const stat_names[KVS_STAT_MAX] = {
#define KVS_STAT_NAME(e, name) [KVS_STAT_##e] = name,
    KVS_STATS(KVS_STAT_NAME)
#undef KVS_STAT_NAME
};

/* libbpf's own messages: warnings (verifier logs, pin conflicts) as warnings, chatter as debug. */
static int bpfctl_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	if (level == LIBBPF_WARN)
		log_warn("libbpf", "%s", line);
	else
		log_debug("libbpf", "%s", line);
	return 0;
}

/* Builds dir/name into out (PATH_MAX). Returns 0 or -ENAMETOOLONG. */
static int pin_path(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Creates pin_dir (one level) and refuses a directory that is not on bpffs, where pinning would
 * fail later with a confusing error. */
static int pin_dir_prepare(const char *dir)
{
	struct statfs st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		log_error("bpfctl", "mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (statfs(dir, &st) < 0) {
		log_error("bpfctl", "statfs %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (st.f_type != BPF_FS_MAGIC) {
		log_error("bpfctl", "%s is not on a bpf filesystem (mount -t bpf bpf /sys/fs/bpf)",
			  dir);
		return -EINVAL;
	}
	return 0;
}

static void unpin_maps(const char *dir)
{
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(map_names) / sizeof(map_names[0]); i++)
		if (pin_path(path, dir, map_names[i]) == 0)
			unlink(path);
}

/* Opens and loads a fresh skeleton whose maps are pinned under dir (reused when already there).
 * Returns 0 and *out, or a negative errno. */
static int skel_load(const struct bpfctl_opts *opts, const char *dir, struct kvsplice_bpf **out)
{
	char path[PATH_MAX];
	struct kvsplice_bpf *skel;
	struct bpf_map *map;
	int err;

	skel = kvsplice_bpf__open();
	if (!skel) {
		err = -errno;
		log_error("bpfctl", "open BPF object: %s", strerror(-err));
		return err;
	}
	skel->rodata->proxy_ip4 = opts->proxy.sin_addr.s_addr;
	skel->rodata->proxy_port = opts->proxy.sin_port;
	skel->rodata->own_mark = opts->own_mark;
	skel->rodata->match_endpoints = opts->match_endpoints && opts->own_mark;
	bpf_object__for_each_map(map, skel->obj)
	{
		if (bpf_map__is_internal(map))
			continue; /* .rodata: per load, never pinned */
		err = pin_path(path, dir, bpf_map__name(map));
		if (!err)
			err = bpf_map__set_pin_path(map, path);
		if (err)
			goto cleanup;
	}
	err = kvsplice_bpf__load(skel);
	if (err) {
		log_error("bpfctl", "load BPF programs: %s", strerror(-err));
		goto cleanup;
	}
	*out = skel;
	return 0;
cleanup:
	kvsplice_bpf__destroy(skel);
	return err;
}

/* Is the pinned link at path a cgroup link of this attach type on this cgroup? */
static int link_matches(struct bpf_link *link, __u64 cgroup_id, enum bpf_attach_type type)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_link__fd(link), &info, &len) < 0)
		return 0;
	return info.type == BPF_LINK_TYPE_CGROUP && info.cgroup.cgroup_id == cgroup_id &&
	       info.cgroup.attach_type == type;
}

/* BPF_LINK_CREATE of a cgroup link with BPF_F_BEFORE and no anchor: first among the programs of
 * its hook at the cgroup (the kernel's ordering of cgroup programs, Linux 6.16). The system's
 * headers predate the fields, so the attribute is laid out here as the kernel's UAPI has it.
 * Returns the link's fd, or a negative errno (-EINVAL: a kernel without the ordering). */
static int link_create_first(int prog_fd, int cgroup_fd, enum bpf_attach_type type)
{
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u32 relative_fd; /* 0: no anchor */
		__u32 pad;
		__u64 expected_revision; /* 0: any */
	} attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (__u32)prog_fd;
	attr.target_fd = (__u32)cgroup_fd;
	attr.attach_type = type;
	attr.flags = BPF_F_BEFORE;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}

/* A new link of prog at the cgroup, first there where the kernel can order it, else last (said
 * once). Returns the link (not pinned) or NULL with errno set. */
static struct bpf_link *link_attach(struct bpf_program *prog, int cgroup_fd, const char *path)
{
	static bool said;
	enum bpf_attach_type type = bpf_program__expected_attach_type(prog);
	int fd = link_create_first(bpf_program__fd(prog), cgroup_fd, type);
	struct bpf_link *link;

	if (fd >= 0) {
		int err = bpf_obj_pin(fd, path) ? -errno : 0;

		close(fd);
		if (err) {
			errno = -err;
			return NULL;
		}
		link = bpf_link__open(path);
		if (!link)
			unlink(path);
		return link;
	}
	if (fd != -EINVAL) {
		errno = -fd;
		return NULL;
	}
	if (!said)
		log_warn(
		    "bpfctl",
		    "this kernel cannot order cgroup programs (BPF_F_BEFORE, Linux 6.16): "
		    "attached after the programs already at the cgroup; a socket load balancer "
		    "attached there before kvsplice runs first (docs/kubernetes.md)");
	said = true;
	link = bpf_program__attach_cgroup(prog, cgroup_fd);
	if (link && bpf_link__pin(link, path)) {
		int err = errno;

		bpf_link__destroy(link);
		errno = err;
		return NULL;
	}
	return link;
}

/* Attaches prog at the cgroup through the link pinned at path: updated in place when one is there
 * for the same cgroup and hook (keeping its position), otherwise (first start, other cgroup, stale
 * link) a new pinned link replaces it. Returns 0 and *out, or a negative errno. */
static int link_take_over(struct bpf_program *prog, int cgroup_fd, __u64 cgroup_id,
			  const char *path, struct bpf_link **out)
{
	enum bpf_attach_type type = bpf_program__expected_attach_type(prog);
	struct bpf_link *link;
	int err;

	link = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
	if (link) {
		if (link_matches(link, cgroup_id, type)) {
			err = bpf_link__update_program(link, prog);
			if (!err) {
				log_info("bpfctl", "took over %s", path);
				*out = link;
				return 0;
			}
			log_warn("bpfctl", "update %s: %s; re-attaching", path, strerror(-err));
		} else {
			log_info("bpfctl", "%s is for another cgroup or hook; replacing it", path);
		}
		bpf_link_detach(bpf_link__fd(link));
		bpf_link__unpin(link);
		bpf_link__destroy(link);
		unlink(path);
	}
	link = link_attach(prog, cgroup_fd, path);
	if (!link) {
		err = -errno;
		log_error("bpfctl", "attach %s: %s%s", bpf_program__name(prog), strerror(-err),
			  err == -EPERM ? " (a program attached at this cgroup or above it without "
					  "BPF_F_ALLOW_MULTI forbids any other: docs/kubernetes.md)"
					: "");
		return err;
	}
	*out = link;
	return 0;
}

int bpfctl_open(const struct bpfctl_opts *opts, struct bpfctl **out)
{
	struct bpf_program *progs[NLINKS];
	char path[PATH_MAX];
	struct bpfctl *b = NULL;
	const char *dir;
	int cgroup_fd = -1, err, n;
	struct stat st;

	if (!opts || !opts->cgroup_path || !out || opts->proxy.sin_family != AF_INET ||
	    !opts->proxy.sin_port || !opts->proxy.sin_addr.s_addr) {
		log_error("bpfctl", "need a cgroup path and an IPv4 proxy address with a port");
		return -EINVAL;
	}
	dir = opts->pin_dir && *opts->pin_dir ? opts->pin_dir : BPFCTL_DEFAULT_PIN_DIR;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->match_endpoints = opts->match_endpoints && opts->own_mark;
	n = snprintf(b->pin_dir, sizeof(b->pin_dir), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(b->pin_dir) ||
	    (size_t)snprintf(b->cgroup_path, sizeof(b->cgroup_path), "%s", opts->cgroup_path) >=
		sizeof(b->cgroup_path)) {
		err = -ENAMETOOLONG;
		goto cleanup;
	}
	b->ncpus = libbpf_num_possible_cpus();
	if (b->ncpus <= 0) {
		err = b->ncpus ? b->ncpus : -EINVAL;
		goto cleanup;
	}
	b->percpu = calloc((size_t)b->ncpus, sizeof(__u64));
	if (!b->percpu) {
		err = -ENOMEM;
		goto cleanup;
	}
	libbpf_set_print(bpfctl_libbpf_print);

	cgroup_fd = open(opts->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cgroup_fd < 0 || fstat(cgroup_fd, &st) < 0) {
		err = -errno;
		log_error("bpfctl", "cgroup %s: %s", opts->cgroup_path, strerror(-err));
		goto cleanup;
	}
	err = pin_dir_prepare(b->pin_dir);
	if (err)
		goto cleanup;

	err = skel_load(opts, b->pin_dir, &b->skel);
	if (err == -EINVAL) {
		/* Most likely pinned maps from an incompatible build: start over with fresh maps
		 * (the old programs keep their own references until their links are updated). */
		log_warn("bpfctl", "pinned maps under %s do not match this build; recreating them",
			 b->pin_dir);
		unpin_maps(b->pin_dir);
		err = skel_load(opts, b->pin_dir, &b->skel);
	}
	if (err)
		goto cleanup;

	progs[0] = b->skel->progs.kvs_connect4;
	progs[1] = b->skel->progs.kvs_getpeername4;
	progs[2] = b->skel->progs.kvs_sockops;
	progs[3] = b->skel->progs.kvs_connect6;
	progs[4] = b->skel->progs.kvs_getpeername6;
	for (int i = 0; i < NLINKS; i++) {
		err = pin_path(path, b->pin_dir, link_names[i]);
		if (!err)
			/* cgroup v2 id == the directory's inode number on 64-bit kernels */
			err = link_take_over(progs[i], cgroup_fd, (__u64)st.st_ino, path,
					     &b->links[i]);
		if (err)
			goto cleanup;
	}
	log_info("bpfctl", "interception attached at %s, pinned under %s", opts->cgroup_path,
		 b->pin_dir);
	if (opts->match_endpoints && !opts->own_mark)
		log_warn("bpfctl", "endpoints are not matched without a mark on kvsplice's own "
				   "connects (they go to those endpoints)");
	{
		struct bpfctl_order o;

		if (bpfctl_order(b, &o) == 0 && o.position == 1)
			log_info("bpfctl", "connect4 at %s: kvsplice's program runs first of %d",
				 opts->cgroup_path, o.programs);
		else if (o.position > 1)
			log_warn(
			    "bpfctl",
			    "connect4 at %s: %s runs before kvsplice's program (%d of %d): if it "
			    "is a socket load balancer, Service connects reach kvsplice already "
			    "translated to a pod (--intercept-endpoints, docs/kubernetes.md)",
			    opts->cgroup_path, o.first, o.position, o.programs);
	}
	close(cgroup_fd);
	*out = b;
	return 0;
cleanup:
	if (cgroup_fd >= 0)
		close(cgroup_fd);
	bpfctl_close(b);
	return err;
}

int bpfctl_set_listener(struct bpfctl *b, int listen_fd)
{
	__u32 key = 0;
	__u64 val = (__u64)listen_fd;

	if (!b || listen_fd < 0)
		return -EINVAL;
	if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.proxy_listener), &key, &val, BPF_ANY)) {
		int err = -errno;

		log_error("bpfctl", "register listener fd %d: %s", listen_fd, strerror(-err));
		return err;
	}
	return 0;
}

int bpfctl_clear_listener(struct bpfctl *b, int listen_fd)
{
	if (!b || listen_fd < 0)
		return -EINVAL;
	return bpfctl_clear_listener_map(bpf_map__fd(b->skel->maps.proxy_listener), listen_fd);
}

int bpfctl_clear_listener_map(int map, int listen_fd)
{
	__u32 key = 0;
	__u64 cookie = 0, mine = 0;
	socklen_t len = sizeof(mine);

	if (map < 0 || listen_fd < 0)
		return -EINVAL;
	if (getsockopt(listen_fd, SOL_SOCKET, SO_COOKIE, &mine, &len) < 0)
		return -errno;
	if (bpf_map_lookup_elem(map, &key, &cookie))
		return errno == ENOENT ? 0 : -errno;
	if (cookie != mine)
		return 0;
	if (bpf_map_delete_elem(map, &key))
		return errno == ENOENT ? 0 : -errno;
	log_info("bpfctl", "listener unregistered: new connects fall open");
	return 1;
}

int bpfctl_listener_registered(struct bpfctl *b)
{
	__u32 key = 0;
	__u64 cookie = 0;

	if (!b)
		return -EINVAL;
	if (bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.proxy_listener), &key, &cookie) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

int bpfctl_service_add(struct bpfctl *b, uint32_t ip, uint16_t port, uint32_t service_id)
{
	struct kvs_svc_key key = {.ip = ip, .port = port};
	struct kvs_svc_val val = {.service_id = service_id};

	if (!b || !ip || !port)
		return -EINVAL;
	if (bpf_map_update_elem(bpf_map__fd(b->skel->maps.services), &key, &val, BPF_ANY))
		return -errno;
	return 0;
}

int bpfctl_service_del(struct bpfctl *b, uint32_t ip, uint16_t port)
{
	struct kvs_svc_key key = {.ip = ip, .port = port};

	if (!b)
		return -EINVAL;
	if (bpf_map_delete_elem(bpf_map__fd(b->skel->maps.services), &key))
		return -errno;
	return 0;
}

static int sync_endpoints(struct bpfctl *b, const struct services *s);

int bpfctl_sync_services(struct bpfctl *b, const struct services *s)
{
	struct kvs_svc_key key, next, stale[KVS_MAX_SERVICES];
	size_t nstale = 0;
	int fd, rc = 0, deleted = 0;
	void *prev = NULL;

	if (!b)
		return -EINVAL;
	fd = bpf_map__fd(b->skel->maps.services);
	for (size_t i = 0; s && i < s->n; i++) {
		int r = bpfctl_service_add(b, s->v[i].vip.sin_addr.s_addr, s->v[i].vip.sin_port,
					   s->v[i].id);

		if (r < 0) {
			log_error("bpfctl", "select service %s: %s", s->v[i].name, strerror(-r));
			rc = rc ? rc : r;
		}
	}
	/* collect first, delete after: deleting while walking would restart the walk */
	while (nstale < KVS_MAX_SERVICES && bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (!s || !services_find_vip(s, key.ip, key.port))
			stale[nstale++] = key;
	}
	for (size_t i = 0; i < nstale; i++) {
		char a[INET_ADDRSTRLEN];
		struct in_addr ia = {.s_addr = stale[i].ip};

		inet_ntop(AF_INET, &ia, a, sizeof(a));
		if (bpf_map_delete_elem(fd, &stale[i]) && errno != ENOENT) {
			log_error("bpfctl", "unselect %s:%u: %s", a, ntohs(stale[i].port),
				  strerror(errno));
			rc = rc ? rc : -errno;
			continue;
		}
		log_info("bpfctl", "unselected %s:%u (no current Service has it)", a,
			 ntohs(stale[i].port));
		deleted++;
	}
	{
		int r = sync_endpoints(b, s);

		rc = rc ? rc : r;
	}
	return rc ? rc : deleted;
}

int bpfctl_order(struct bpfctl *b, struct bpfctl_order *o)
{
	__u32 ids[64], cnt = 64, flags = 0, me;
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd, err = 0;

	if (!b || !o)
		return -EINVAL;
	memset(o, 0, sizeof(*o));
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(b->skel->progs.kvs_connect4), &info, &len))
		return -errno;
	me = info.id;
	fd = open(b->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (bpf_prog_query(fd, BPF_CGROUP_INET4_CONNECT, BPF_F_QUERY_EFFECTIVE, &flags, ids, &cnt))
		err = -errno;
	close(fd);
	if (err)
		return err;
	o->programs = (int)cnt;
	for (__u32 i = 0; i < cnt && i < 64; i++)
		if (ids[i] == me) {
			o->position = (int)i + 1;
			break;
		}
	if (cnt > 0) {
		int pfd = bpf_prog_get_fd_by_id(ids[0]);

		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &info, &len) == 0)
			snprintf(o->first, sizeof(o->first), "%s", info.name);
		if (pfd >= 0)
			close(pfd);
	}
	return 0;
}

struct ep_entry {
	struct kvs_svc_key k;
	struct kvs_ep_val v;
	size_t seq; /* order in the snapshot: the first Service of an endpoint wins */
};

static int ep_cmp(const void *a, const void *b)
{
	const struct ep_entry *x = a, *y = b;
	int c = memcmp(&x->k, &y->k, sizeof(x->k));

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int ep_key_cmp(const void *key, const void *e)
{
	return memcmp(key, &((const struct ep_entry *)e)->k, sizeof(struct kvs_svc_key));
}

/* The endpoints map made exactly s's endpoints (none without match_endpoints). Returns 0 or the
 * first negative errno. */
static int sync_endpoints(struct bpfctl *b, const struct services *s)
{
	int fd = bpf_map__fd(b->skel->maps.endpoints), rc = 0;
	struct kvs_svc_key key, next, *stale = NULL;
	struct ep_entry *e = NULL;
	size_t n = 0, ne = 0, nstale = 0;
	void *prev = NULL;

	for (size_t i = 0; b->match_endpoints && s && i < s->n; i++)
		n += s->v[i].nendpoints;
	if (n && !(e = calloc(n, sizeof(*e))))
		return -ENOMEM;
	for (size_t i = 0; b->match_endpoints && s && i < s->n; i++)
		for (size_t j = 0; j < s->v[i].nendpoints; j++) {
			struct ep_entry *x = &e[ne];

			x->k.ip = s->v[i].endpoints[j].addr.sin_addr.s_addr;
			x->k.port = s->v[i].endpoints[j].addr.sin_port;
			x->v.svc_ip = s->v[i].vip.sin_addr.s_addr;
			x->v.svc_port = s->v[i].vip.sin_port;
			x->v.service_id = s->v[i].id;
			x->seq = ne++;
		}
	qsort(e, ne, sizeof(*e), ep_cmp);
	n = 0; /* deduplicated in place: the first of each key */
	for (size_t i = 0; i < ne; i++)
		if (!n || memcmp(&e[n - 1].k, &e[i].k, sizeof(e[i].k)))
			e[n++] = e[i];
	if (n > KVS_MAX_ENDPOINTS) {
		log_error("bpfctl",
			  "%zu endpoints, more than the %d the map holds: the rest are not "
			  "matched",
			  n, KVS_MAX_ENDPOINTS);
		n = KVS_MAX_ENDPOINTS;
		rc = -E2BIG;
	}
	for (size_t i = 0; i < n; i++)
		if (bpf_map_update_elem(fd, &e[i].k, &e[i].v, BPF_ANY)) {
			rc = rc ? rc : -errno;
			log_error("bpfctl", "endpoint entry: %s", strerror(errno));
		}
	stale = calloc(KVS_MAX_ENDPOINTS, sizeof(*stale));
	while (stale && nstale < KVS_MAX_ENDPOINTS && bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (!n || !bsearch(&key, e, n, sizeof(*e), ep_key_cmp))
			stale[nstale++] = key;
	}
	for (size_t i = 0; i < nstale; i++)
		if (bpf_map_delete_elem(fd, &stale[i]) && errno != ENOENT)
			rc = rc ? rc : -errno;
	free(stale);
	free(e);
	return rc;
}

enum { BF_EVENTS, BF_LISTENER, BF_SERVICES, BF_ENDPOINTS, BF_POSITION, BF_PROGRAMS, BF_COUNT };

const struct metrics_family bpfctl_families[] = {
    [BF_EVENTS] = {"kvsplice_bpf_events_total", METRICS_COUNTER,
		   "BPF interception decisions, by reason (node-wide, since the programs were "
		   "first loaded).",
		   "reason"},
    [BF_LISTENER] = {"kvsplice_bpf_listener_registered", METRICS_GAUGE,
		     "1 when the proxy listener is in the BPF sockmap (interception on).", NULL},
    [BF_SERVICES] = {"kvsplice_bpf_services", METRICS_GAUGE,
		     "ClusterIP:port entries in the BPF Service selection.", NULL},
    [BF_ENDPOINTS] = {"kvsplice_bpf_endpoints", METRICS_GAUGE,
		      "Endpoint (pod IP:port) entries matched as their Service's "
		      "(--intercept-endpoints; 0 without it).",
		      NULL},
    [BF_POSITION] = {"kvsplice_bpf_connect4_position", METRICS_GAUGE,
		     "Where kvsplice's connect4 program runs among those run for its cgroup "
		     "(1: first; more: another program, e.g. a socket load balancer, sees "
		     "connects before it; 0: not attached).",
		     NULL},
    [BF_PROGRAMS] = {"kvsplice_bpf_connect4_programs", METRICS_GAUGE,
		     "connect4 programs run for a process in kvsplice's cgroup, its own included "
		     "(the kernel's effective list).",
		     NULL},
};
const size_t bpfctl_nfamilies = BF_COUNT;
_Static_assert(sizeof(bpfctl_families) / sizeof(bpfctl_families[0]) == BF_COUNT,
	       "a family per BF_ entry");

void bpfctl_metrics(struct bpfctl *b, struct buf *out)
{
	uint64_t v[64];
	int n, nsvc = 0;
	struct kvs_svc_key key, next;
	void *prev = NULL;

	if (!b)
		return;
	n = bpfctl_stats(b, v, 64);
	if (n > 0) {
		metrics_head(out, &bpfctl_families[BF_EVENTS]);
		for (int i = 0; i < n && i < 64; i++)
			buf_printf(out, "%s{reason=\"%s\"} %llu\n", bpfctl_families[BF_EVENTS].name,
				   bpfctl_stat_name(i), (unsigned long long)v[i]);
	}
	metrics_head(out, &bpfctl_families[BF_LISTENER]);
	buf_printf(out, "%s %d\n", bpfctl_families[BF_LISTENER].name,
		   bpfctl_listener_registered(b) == 1);
	while (nsvc < KVS_MAX_SERVICES &&
	       bpf_map_get_next_key(bpf_map__fd(b->skel->maps.services), prev, &next) == 0) {
		key = next;
		prev = &key;
		nsvc++;
	}
	metrics_head(out, &bpfctl_families[BF_SERVICES]);
	buf_printf(out, "%s %d\n", bpfctl_families[BF_SERVICES].name, nsvc);
	prev = NULL;
	nsvc = 0;
	while (nsvc < KVS_MAX_ENDPOINTS &&
	       bpf_map_get_next_key(bpf_map__fd(b->skel->maps.endpoints), prev, &next) == 0) {
		key = next;
		prev = &key;
		nsvc++;
	}
	metrics_head(out, &bpfctl_families[BF_ENDPOINTS]);
	buf_printf(out, "%s %d\n", bpfctl_families[BF_ENDPOINTS].name, nsvc);
	{
		struct bpfctl_order o;

		if (bpfctl_order(b, &o) == 0) {
			metrics_head(out, &bpfctl_families[BF_POSITION]);
			buf_printf(out, "%s %d\n", bpfctl_families[BF_POSITION].name, o.position);
			metrics_head(out, &bpfctl_families[BF_PROGRAMS]);
			buf_printf(out, "%s %d\n", bpfctl_families[BF_PROGRAMS].name, o.programs);
		}
	}
}

int bpfctl_origdst_take(struct bpfctl *b, const struct sockaddr_in *peer, struct sockaddr_in *orig)
{
	if (!b)
		return -EINVAL;
	return bpfctl_origdst_take_map(bpf_map__fd(b->skel->maps.origdst), peer, orig);
}

int bpfctl_origdst_take_map(int map, const struct sockaddr_in *peer, struct sockaddr_in *orig)
{
	struct kvs_peer_key key;
	struct kvs_origdst od;

	if (map < 0 || !peer || !orig || peer->sin_family != AF_INET)
		return -EINVAL;
	memset(&key, 0, sizeof(key));
	key.ip = peer->sin_addr.s_addr;
	key.port = peer->sin_port;
	if (bpf_map_lookup_and_delete_elem(map, &key, &od))
		return -errno;
	memset(orig, 0, sizeof(*orig));
	orig->sin_family = AF_INET;
	orig->sin_addr.s_addr = od.ip;
	orig->sin_port = od.port;
	return 0;
}

int bpfctl_stats(struct bpfctl *b, uint64_t *out, int n)
{
	int fd;

	if (!b || (n > 0 && !out))
		return -EINVAL;
	fd = bpf_map__fd(b->skel->maps.stats);
	for (__u32 i = 0; i < KVS_STAT_MAX && (int)i < n; i++) {
		out[i] = 0;
		if (bpf_map_lookup_elem(fd, &i, b->percpu))
			return -errno;
		for (int c = 0; c < b->ncpus; c++)
			out[i] += b->percpu[c];
	}
	return KVS_STAT_MAX;
}

int bpfctl_map_pinned(const char *pin_dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	if (pin_path(path, pin_dir && *pin_dir ? pin_dir : BPFCTL_DEFAULT_PIN_DIR, name))
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

int bpfctl_stats_pinned(const char *pin_dir, uint64_t *out, int n)
{
	const char *dir = pin_dir && *pin_dir ? pin_dir : BPFCTL_DEFAULT_PIN_DIR;
	char path[PATH_MAX];
	__u64 *percpu = NULL;
	int fd = -1, ncpus, err;

	if (n > 0 && !out)
		return -EINVAL;
	err = pin_path(path, dir, "stats");
	if (err)
		return err;
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0)
		return ncpus ? ncpus : -EINVAL;
	percpu = calloc((size_t)ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	fd = bpf_obj_get(path);
	if (fd < 0) {
		err = -errno;
		goto cleanup;
	}
	for (__u32 i = 0; i < KVS_STAT_MAX && (int)i < n; i++) {
		out[i] = 0;
		if (bpf_map_lookup_elem(fd, &i, percpu)) {
			err = -errno;
			goto cleanup;
		}
		for (int c = 0; c < ncpus; c++)
			out[i] += percpu[c];
	}
	err = KVS_STAT_MAX;
cleanup:
	if (fd >= 0)
		close(fd);
	free(percpu);
	return err;
}

const char *bpfctl_stat_name(int i)
{
	return i >= 0 && i < KVS_STAT_MAX ? stat_names[i] : NULL;
}

void bpfctl_close(struct bpfctl *b)
{
	if (!b)
		return;
	for (int i = 0; i < NLINKS; i++) {
		if (!b->links[i])
			continue;
		/* pinned: closing our fd leaves the link attached */
		bpf_link__disconnect(b->links[i]);
		bpf_link__destroy(b->links[i]);
	}
	kvsplice_bpf__destroy(b->skel);
	free(b->percpu);
	free(b);
}

int bpfctl_detach(const char *pin_dir)
{
	const char *dir = pin_dir && *pin_dir ? pin_dir : BPFCTL_DEFAULT_PIN_DIR;
	char path[PATH_MAX];
	int err = 0, fd;

	for (int i = 0; i < NLINKS; i++) {
		if (pin_path(path, dir, link_names[i]))
			return -ENAMETOOLONG;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			if (errno != ENOENT) {
				err = -errno;
				log_error("bpfctl", "open %s: %s", path, strerror(errno));
			}
			continue;
		}
		/* Detach now, even if a running daemon still holds the link open. */
		if (bpf_link_detach(fd) && errno != ENOLINK)
			log_warn("bpfctl", "detach %s: %s", path, strerror(errno));
		close(fd);
		if (unlink(path) < 0 && errno != ENOENT)
			err = -errno;
	}
	unpin_maps(dir);
	/* EBUSY: a mount point (the DaemonSet's hostPath volume); emptied, it stays */
	if (rmdir(dir) < 0 && errno != ENOENT && errno != EBUSY) {
		log_error("bpfctl", "rmdir %s: %s", dir, strerror(errno));
		if (!err)
			err = -errno;
	}
	return err;
}
