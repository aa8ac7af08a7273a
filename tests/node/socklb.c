// SPDX-License-Identifier: Apache-2.0
/* socklb: loads and attaches bpf/socklb_standin.bpf.c, the testbed's STAND-IN for a socket load
 * balancer (Cilium's kube-proxy replacement; see that file), where and in the order a test asks.
 *
 *   socklb attach --cgroup DIR --pin-dir DIR --mode MODE --service VIP:PORT=EP:PORT[,EP:PORT...]
 *   socklb stats --pin-dir DIR       prints "translated N restored M"
 *   socklb detach --pin-dir DIR [--cgroup DIR]
 *
 * MODE says how its connect4 and getpeername4 programs attach at DIR:
 *   link       a bpf_link with no flags, after what is there (what Cilium >= 1.14 does)
 *   first      a bpf_link with BPF_F_BEFORE: first at DIR (a program that puts itself first)
 *   preorder   a bpf_link with BPF_F_PREORDER: before the programs of DIR's descendants
 *   exclusive  BPF_PROG_ATTACH without flags (Cilium before 1.14, and upgrades from it): no other
 *              program may attach at DIR or below it
 * The links (or, for exclusive, the programs) and maps are pinned under --pin-dir, so the stand-in
 * stays attached after this process exits; detach removes them (exclusive needs --cgroup). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "socklb_standin.skel.h"

#ifndef BPF_F_BEFORE
#define BPF_F_BEFORE (1U << 3)
#endif
#ifndef BPF_F_PREORDER
#define BPF_F_PREORDER (1U << 6)
#endif

#define MAX_BACKENDS 64

struct slb_key {
	__u32 ip;
	__u16 port;
	__u16 pad;
};

struct slb_service {
	__u32 count;
	__u32 pad;
	struct slb_key backends[MAX_BACKENDS];
};

static const char *const progs[] = {"connect4", "getpeername4"};
static const char *const maps[] = {"slb_services", "slb_revnat", "slb_stats"};

static int usage(void)
{
	fprintf(stderr, "usage: socklb attach --cgroup DIR --pin-dir DIR --mode "
			"link|first|preorder|exclusive --service VIP:PORT=EP:PORT[,...]\n"
			"       socklb stats --pin-dir DIR\n"
			"       socklb detach --pin-dir DIR [--cgroup DIR]\n");
	return 2;
}

static int parse_addr(const char *s, struct slb_key *k)
{
	char ip[64];
	const char *colon = strrchr(s, ':');
	struct in_addr a;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = 0;
	port = strtol(colon + 1, NULL, 10);
	if (inet_pton(AF_INET, ip, &a) != 1 || port <= 0 || port > 65535)
		return -1;
	memset(k, 0, sizeof(*k));
	k->ip = a.s_addr;
	k->port = htons((__u16)port);
	return 0;
}

/* VIP:PORT=EP:PORT[,EP:PORT...] */
static int parse_service(const char *arg, struct slb_key *vip, struct slb_service *svc)
{
	char buf[4096], *eq, *tok, *save = NULL;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	eq = strchr(buf, '=');
	if (!eq)
		return -1;
	*eq = 0;
	if (parse_addr(buf, vip) < 0)
		return -1;
	memset(svc, 0, sizeof(*svc));
	for (tok = strtok_r(eq + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (svc->count == MAX_BACKENDS || parse_addr(tok, &svc->backends[svc->count]) < 0)
			return -1;
		svc->count++;
	}
	return svc->count ? 0 : -1;
}

static void pin_path(char *out, const char *dir, const char *kind, const char *name)
{
	snprintf(out, PATH_MAX, "%s/%s_%s", dir, kind, name);
}

/* BPF_LINK_CREATE with flags (the system's headers predate the cgroup fields). */
static int link_create(int prog_fd, int cg_fd, enum bpf_attach_type type, __u32 flags)
{
	struct {
		__u32 prog_fd, target_fd, attach_type, flags;
		__u32 relative_fd, pad;
		__u64 expected_revision;
	} attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (__u32)prog_fd;
	attr.target_fd = (__u32)cg_fd;
	attr.attach_type = type;
	attr.flags = flags;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : (int)fd;
}

static int do_attach(const char *cgroup, const char *dir, const char *mode, const char *service)
{
	struct bpf_program *p[2];
	struct socklb_standin_bpf *skel;
	struct slb_service svc;
	struct slb_key vip;
	char path[PATH_MAX];
	__u32 flags = 0;
	bool exclusive = false;
	int cg, rc = 1;

	if (!strcmp(mode, "first"))
		flags = BPF_F_BEFORE;
	else if (!strcmp(mode, "preorder"))
		flags = BPF_F_PREORDER;
	else if (!strcmp(mode, "exclusive"))
		exclusive = true;
	else if (strcmp(mode, "link"))
		return usage();
	if (parse_service(service, &vip, &svc) < 0) {
		fprintf(stderr, "socklb: bad --service %s\n", service);
		return 2;
	}
	cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0) {
		fprintf(stderr, "socklb: %s: %s\n", cgroup, strerror(errno));
		return 1;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "socklb: mkdir %s: %s\n", dir, strerror(errno));
		close(cg);
		return 1;
	}
	skel = socklb_standin_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "socklb: load: %s\n", strerror(errno));
		close(cg);
		return 1;
	}
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.slb_services), &vip, &svc, BPF_ANY)) {
		fprintf(stderr, "socklb: service entry: %s\n", strerror(errno));
		goto out;
	}
	p[0] = skel->progs.slb_connect4;
	p[1] = skel->progs.slb_getpeername4;
	for (int i = 0; i < 2; i++) {
		enum bpf_attach_type type = bpf_program__expected_attach_type(p[i]);
		int fd = bpf_program__fd(p[i]);

		if (exclusive) {
			if (bpf_prog_attach(fd, cg, type, 0)) {
				fprintf(stderr, "socklb: attach %s: %s\n", progs[i],
					strerror(errno));
				goto out;
			}
			pin_path(path, dir, "prog", progs[i]);
			if (bpf_obj_pin(fd, path)) {
				fprintf(stderr, "socklb: pin %s: %s\n", path, strerror(errno));
				goto out;
			}
			continue;
		}
		fd = link_create(fd, cg, type, flags);
		if (fd < 0) {
			fprintf(stderr, "socklb: attach %s (%s): %s\n", progs[i], mode,
				strerror(-fd));
			goto out;
		}
		pin_path(path, dir, "link", progs[i]);
		if (bpf_obj_pin(fd, path)) {
			fprintf(stderr, "socklb: pin %s: %s\n", path, strerror(errno));
			close(fd);
			goto out;
		}
		close(fd);
	}
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(skel->obj, maps[i]);

		pin_path(path, dir, "map", maps[i]);
		if (!m || bpf_map__pin(m, path)) {
			fprintf(stderr, "socklb: pin %s: %s\n", path, strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	socklb_standin_bpf__destroy(skel);
	close(cg);
	return rc;
}

static int do_stats(const char *dir)
{
	char path[PATH_MAX];
	int ncpu = libbpf_num_possible_cpus(), fd;
	__u64 v[2] = {0, 0}, *per;

	pin_path(path, dir, "map", "slb_stats");
	fd = bpf_obj_get(path);
	if (fd < 0 || ncpu <= 0) {
		fprintf(stderr, "socklb: %s: %s\n", path, strerror(errno));
		return 1;
	}
	per = calloc((size_t)ncpu, sizeof(*per));
	for (__u32 i = 0; per && i < 2; i++)
		if (bpf_map_lookup_elem(fd, &i, per) == 0)
			for (int c = 0; c < ncpu; c++)
				v[i] += per[c];
	printf("translated %llu restored %llu\n", (unsigned long long)v[0],
	       (unsigned long long)v[1]);
	free(per);
	close(fd);
	return 0;
}

static int do_detach(const char *dir, const char *cgroup)
{
	static const enum bpf_attach_type types[] = {BPF_CGROUP_INET4_CONNECT,
						     BPF_CGROUP_INET4_GETPEERNAME};
	char path[PATH_MAX];
	int rc = 0, cg = cgroup ? open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	for (int i = 0; i < 2; i++) {
		int fd;

		pin_path(path, dir, "link", progs[i]);
		fd = bpf_obj_get(path);
		if (fd >= 0) {
			if (bpf_link_detach(fd) && errno != ENOLINK)
				rc = 1;
			close(fd);
			unlink(path);
		}
		pin_path(path, dir, "prog", progs[i]);
		fd = bpf_obj_get(path);
		if (fd >= 0) {
			if (cg < 0 || bpf_prog_detach2(fd, cg, types[i])) {
				fprintf(stderr, "socklb: detach %s: %s\n", path,
					cg < 0 ? "needs --cgroup" : strerror(errno));
				rc = 1;
			}
			close(fd);
			unlink(path);
		}
	}
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		pin_path(path, dir, "map", maps[i]);
		unlink(path);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		rc = 1;
	if (cg >= 0)
		close(cg);
	return rc;
}

int main(int argc, char **argv)
{
	const char *cgroup = NULL, *dir = NULL, *mode = "link", *service = NULL;

	if (argc < 2)
		return usage();
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--cgroup"))
			cgroup = argv[i + 1];
		else if (!strcmp(argv[i], "--pin-dir"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--mode"))
			mode = argv[i + 1];
		else if (!strcmp(argv[i], "--service"))
			service = argv[i + 1];
		else
			return usage();
	}
	if (!dir || argc % 2)
		return usage();
	if (!strcmp(argv[1], "attach"))
		return cgroup && service ? do_attach(cgroup, dir, mode, service) : usage();
	if (!strcmp(argv[1], "stats"))
		return do_stats(dir);
	if (!strcmp(argv[1], "detach"))
		return do_detach(dir, cgroup);
	return usage();
}
