// SPDX-License-Identifier: Apache-2.0
/* nodesetup: see nodesetup.h. The address part speaks rtnetlink directly (one NETLINK_ROUTE socket
 * per call, every request acknowledged, nothing cached): a handful of messages do not justify a
 * library, and ip(8) is not in the image's PATH contract. */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "core/log.h"
#include "node/nodesetup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#define BTF_VMLINUX "/sys/kernel/btf/vmlinux"
#define NL_BUF 32768 /* bytes: room for one rtnetlink reply about one link, or an ack */

struct nodesetup {
	char device[IFNAMSIZ];
	struct in_addr addr;
	int prefix;
	char label[IFNAMSIZ]; /* the address's label on a device not kvsplice's ("": none) */
	bool own_device;      /* created by a kvsplice (NODESETUP_ALIAS): removed on undo */
	bool own_addr;	      /* on own_device, or labelled by a kvsplice: removed on undo */
};

/* ---- the probe ---------------------------------------------------------------------------- */

/* Records one missing thing: logged, and the first one kept in why. */
static void probe_missing(int *nmissing, char *why, size_t whylen, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_error("nodesetup", "%s", line);
	if (!*nmissing && why && whylen)
		snprintf(why, whylen, "%s", line);
	(*nmissing)++;
}

int nodesetup_find_cgroup2(char *out, size_t n)
{
	static const char *const cands[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
	struct statfs st;

	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (statfs(cands[i], &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(out, n, "%s", cands[i]);
			return 0;
		}
	return -ENOENT;
}

/* Effective capabilities, as a 64-bit set; 0 when capget fails. */
static unsigned long long caps_effective(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return (unsigned long long)d[0].effective | (unsigned long long)d[1].effective << 32;
}

static bool has_cap(unsigned long long set, int cap)
{
	return (set >> cap) & 1;
}

/* Is bpf(2) itself refused? A map of type 0 (unspec) is invalid: the kernel answers EINVAL once
 * the syscall gets to it, a seccomp filter or an LSM answers EPERM before. */
static bool bpf_syscall_refused(void)
{
	union bpf_attr attr;

	memset(&attr, 0, sizeof(attr));
	return syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof(attr)) < 0 && errno == EPERM;
}

int nodesetup_probe(const struct nodesetup_probe_cfg *cfg, char *cgroup_out, size_t n, char *why,
		    size_t whylen)
{
	static const enum bpf_prog_type progs[] = {BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
						   BPF_PROG_TYPE_SOCK_OPS};
	static const enum bpf_map_type maps[] = {BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LRU_HASH,
						 BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_SOCKMAP};
	char parent[PATH_MAX], tmp[PATH_MAX];
	const char *pin = cfg && cfg->pin_dir ? cfg->pin_dir : "";
	unsigned long long caps = caps_effective();
	struct statfs sf;
	struct stat st;
	int missing = 0;

	if (why && whylen)
		why[0] = '\0';
	/* cgroup v2: where the programs attach */
	if (cfg && cfg->cgroup && cfg->cgroup[0]) {
		if (cgroup_out != cfg->cgroup)
			snprintf(cgroup_out, n, "%s", cfg->cgroup);
		if (statfs(cfg->cgroup, &sf) < 0)
			probe_missing(&missing, why, whylen, "--cgroup %s: %s", cfg->cgroup,
				      strerror(errno));
		else if (sf.f_type != CGROUP2_SUPER_MAGIC)
			probe_missing(&missing, why, whylen,
				      "--cgroup %s is not a cgroup v2 directory: give one in the "
				      "cgroup2 mount (its root for the whole node)",
				      cfg->cgroup);
	} else if (nodesetup_find_cgroup2(cgroup_out, n) < 0) {
		probe_missing(
		    &missing, why, whylen,
		    "no cgroup v2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified: mount "
		    "one (mount -t cgroup2 none /sys/fs/cgroup) or give --cgroup");
	}
	/* bpffs: the pin directory, or where it will be created */
	snprintf(parent, sizeof(parent), "%s", pin);
	if (!pin[0] || (stat(pin, &st) < 0 && errno == ENOENT)) {
		snprintf(tmp, sizeof(tmp), "%s", pin);
		snprintf(parent, sizeof(parent), "%s", dirname(tmp));
	}
	if (statfs(parent, &sf) < 0 || sf.f_type != BPF_FS_MAGIC)
		probe_missing(
		    &missing, why, whylen,
		    "--pin-dir %s: %s is not on a bpf filesystem: mount one (mount -t bpf "
		    "bpf /sys/fs/bpf; in a pod, a hostPath volume of the host's bpffs) "
		    "or give a --pin-dir in one",
		    pin, parent);
	if (access(BTF_VMLINUX, R_OK) < 0)
		probe_missing(&missing, why, whylen,
			      "no kernel BTF (%s: %s): the programs need a kernel built with "
			      "CONFIG_DEBUG_INFO_BTF=y",
			      BTF_VMLINUX, strerror(errno));
	if (!has_cap(caps, CAP_BPF) && !has_cap(caps, CAP_SYS_ADMIN))
		probe_missing(&missing, why, whylen,
			      "capability CAP_BPF missing: loading programs and maps needs it "
			      "(securityContext.capabilities.add: [BPF]; Linux >= 5.8)");
	if (!has_cap(caps, CAP_NET_ADMIN) && !has_cap(caps, CAP_SYS_ADMIN))
		probe_missing(&missing, why, whylen,
			      "capability CAP_NET_ADMIN missing: the socket program types, the "
			      "sockmap and the cgroup attach need it "
			      "(securityContext.capabilities.add: [NET_ADMIN])");
	if (missing)
		return missing; /* without the capabilities every type below would look missing */
	if (bpf_syscall_refused()) {
		probe_missing(
		    &missing, why, whylen,
		    "bpf(2) refused (EPERM) although the capabilities are there: a seccomp "
		    "profile that allows bpf only with CAP_SYS_ADMIN (RuntimeDefault of "
		    "containerd < 1.6.9, of containers-common < 0.60: CRI-O, podman) or an "
		    "LSM policy; give a profile allowing bpf with CAP_BPF");
		return missing; /* every type below would look missing too */
	}
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (libbpf_probe_bpf_prog_type(progs[i], NULL) != 1)
			probe_missing(
			    &missing, why, whylen,
			    "the kernel cannot load BPF programs of type %s: Linux >= 5.11 "
			    "with CONFIG_BPF_SYSCALL and CONFIG_CGROUP_BPF is needed",
			    libbpf_bpf_prog_type_str(progs[i]));
	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
		if (libbpf_probe_bpf_map_type(maps[i], NULL) != 1)
			probe_missing(&missing, why, whylen,
				      "the kernel cannot create BPF maps of type %s: Linux >= 5.11 "
				      "with CONFIG_BPF_SYSCALL is needed",
				      libbpf_bpf_map_type_str(maps[i]));
	return missing;
}

int nodesetup_parse_address(const char *s, struct in_addr *addr, int *prefix)
{
	char host[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t len = slash ? (size_t)(slash - s) : strlen(s);

	*prefix = 32;
	if (len == 0 || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (inet_pton(AF_INET, host, addr) != 1 || addr->s_addr == 0)
		return -EINVAL;
	if (slash) {
		char *end;
		long p = strtol(slash + 1, &end, 10);

		if (*end || end == slash + 1 || p < 1 || p > 32)
			return -EINVAL;
		*prefix = (int)p;
	}
	return 0;
}

/* ---- rtnetlink ---------------------------------------------------------------------------- */

struct nl_req {
	struct nlmsghdr h;
	char body[1024 - sizeof(struct nlmsghdr)];
};

/* Appends attribute type with len bytes of data at the end of the request (nest: data NULL, the
 * caller fixes rta_len). Returns the attribute, or NULL when it does not fit. */
static struct rtattr *nl_attr(struct nl_req *r, unsigned short type, const void *data, size_t len)
{
	size_t off = NLMSG_ALIGN(r->h.nlmsg_len);
	struct rtattr *a = (struct rtattr *)((char *)r + off);

	if (off + RTA_SPACE(len) > sizeof(*r))
		return NULL;
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (data)
		memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = (uint32_t)(off + RTA_SPACE(len));
	return a;
}

/* Opens a NETLINK_ROUTE socket in the caller's network namespace. Returns the fd or -errno. */
static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct timeval tv = {.tv_sec = 5};

	if (fd < 0)
		return -errno;
	/* a kernel that never answers must not hang the daemon's start */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

typedef void (*nl_cb)(const struct nlmsghdr *h, void *arg);

/* Sends r (NLM_F_REQUEST added, and NLM_F_ACK unless it is a dump) and reads its answer: each
 * message of it goes to cb (when given) until the acknowledgement or, for a dump, NLMSG_DONE.
 * Returns 0, or the kernel's negative errno (-ENODEV, -EEXIST, -EPERM, ...). */
static int nl_talk(int fd, struct nl_req *r, nl_cb cb, void *arg)
{
	static uint32_t seq;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	char *buf;
	int err = -EIO;

	r->h.nlmsg_flags |= NLM_F_REQUEST;
	if ((r->h.nlmsg_flags & NLM_F_DUMP) != NLM_F_DUMP)
		r->h.nlmsg_flags |= NLM_F_ACK;
	r->h.nlmsg_seq = ++seq;
	if (sendto(fd, r, r->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	buf = malloc(NL_BUF);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = recv(fd, buf, NL_BUF, 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n < 0) {
			err = errno == EAGAIN ? -ETIMEDOUT : -errno;
			goto out;
		}
		for (size_t left = (size_t)n; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != r->h.nlmsg_seq)
				continue; /* a late answer to an earlier request */
			if (h->nlmsg_type == NLMSG_DONE) {
				err = 0;
				goto out;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				err = h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) ? e->error : -EIO;
				goto out;
			}
			if (cb)
				cb(h, arg);
		}
	}
out:
	free(buf);
	return err;
}

struct link_info {
	int index;   /* 0: not seen */
	bool marked; /* IFLA_IFALIAS == NODESETUP_ALIAS: created by a kvsplice */
};

/* The answer to link_get's RTM_GETLINK. */
static void link_parse(const struct nlmsghdr *h, void *arg)
{
	struct link_info *li = arg;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifi));

	if (h->nlmsg_type != RTM_NEWLINK || len < 0)
		return;
	li->index = ifi->ifi_index;
	for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == IFLA_IFALIAS)
			li->marked =
			    strnlen(RTA_DATA(a), RTA_PAYLOAD(a)) == sizeof(NODESETUP_ALIAS) - 1 &&
			    memcmp(RTA_DATA(a), NODESETUP_ALIAS, sizeof(NODESETUP_ALIAS) - 1) == 0;
}

/* Looks device up by name. Returns 0 and *li, -ENODEV when there is none, or a negative errno. */
static int link_get(int fd, const char *device, struct link_info *li)
{
	struct nl_req r = {
	    .h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_GETLINK}};
	int err;

	((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_family = AF_UNSPEC;
	if (!nl_attr(&r, IFLA_IFNAME, device, strlen(device) + 1))
		return -ENAMETOOLONG;
	memset(li, 0, sizeof(*li));
	err = nl_talk(fd, &r, link_parse, li);
	return err ? err : li->index > 0 ? 0 : -EIO;
}

/* Creates device as a dummy device (fails with -EEXIST when one of that name exists, with
 * -EOPNOTSUPP when the kernel has no dummy driver). */
static int link_create(int fd, const char *device)
{
	struct nl_req r = {.h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)),
				 .nlmsg_type = RTM_NEWLINK,
				 .nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL}};
	struct rtattr *info;

	((struct ifinfomsg *)NLMSG_DATA(&r.h))->ifi_family = AF_UNSPEC;
	if (!nl_attr(&r, IFLA_IFNAME, device, strlen(device) + 1) ||
	    !(info = nl_attr(&r, IFLA_LINKINFO, NULL, 0)) ||
	    !nl_attr(&r, IFLA_INFO_KIND, "dummy", 5))
		return -ENAMETOOLONG;
	info->rta_len = (unsigned short)((char *)&r + r.h.nlmsg_len - (char *)info);
	return nl_talk(fd, &r, NULL, NULL);
}

/* Sets the device up, and its alias when alias is not NULL. */
static int link_up(int fd, int index, const char *alias)
{
	struct nl_req r = {
	    .h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_NEWLINK}};
	struct ifinfomsg *ifi = NLMSG_DATA(&r.h);

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = index;
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	if (alias && !nl_attr(&r, IFLA_IFALIAS, alias, strlen(alias)))
		return -ENAMETOOLONG;
	return nl_talk(fd, &r, NULL, NULL);
}

static int link_del(int fd, int index)
{
	struct nl_req r = {
	    .h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)), .nlmsg_type = RTM_DELLINK}};
	struct ifinfomsg *ifi = NLMSG_DATA(&r.h);

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = index;
	return nl_talk(fd, &r, NULL, NULL);
}

struct addr_info {
	int index;	     /* the device looked at */
	struct in_addr addr; /* the address looked for */
	const char *label;   /* kvsplice's label on that device */
	bool found, marked;
};

/* One address of addr_find's dump. */
static void addr_parse(const struct nlmsghdr *h, void *arg)
{
	struct addr_info *ai = arg;
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifa));
	bool match = false, marked = false;

	if (h->nlmsg_type != RTM_NEWADDR || len < 0 || (int)ifa->ifa_index != ai->index)
		return;
	for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFA_LOCAL && RTA_PAYLOAD(a) == sizeof(ai->addr))
			match = memcmp(RTA_DATA(a), &ai->addr, sizeof(ai->addr)) == 0;
		if (a->rta_type == IFA_LABEL && ai->label)
			marked = strnlen(RTA_DATA(a), RTA_PAYLOAD(a)) == strlen(ai->label) &&
				 memcmp(RTA_DATA(a), ai->label, strlen(ai->label)) == 0;
	}
	if (match) {
		ai->found = true;
		ai->marked = marked;
	}
}

/* Is addr on device index, and does it carry label? Returns 0 and *ai, or a negative errno. */
static int addr_find(int fd, int index, struct in_addr addr, const char *label,
		     struct addr_info *ai)
{
	struct nl_req r = {.h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg)),
				 .nlmsg_type = RTM_GETADDR,
				 .nlmsg_flags = NLM_F_DUMP}};

	((struct ifaddrmsg *)NLMSG_DATA(&r.h))->ifa_family = AF_INET;
	*ai = (struct addr_info){.index = index, .addr = addr, .label = label};
	return nl_talk(fd, &r, addr_parse, ai);
}

/* RTM_NEWADDR (create: -EEXIST when the device has it already; with label when not NULL) or
 * RTM_DELADDR. */
static int addr_change(int fd, int type, int index, struct in_addr addr, int prefix,
		       const char *label)
{
	struct nl_req r = {
	    .h = {.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg)),
		  .nlmsg_type = (unsigned short)type,
		  .nlmsg_flags = type == RTM_NEWADDR ? NLM_F_CREATE | NLM_F_EXCL : 0}};
	struct ifaddrmsg *ifa = NLMSG_DATA(&r.h);

	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)index;
	if (!nl_attr(&r, IFA_LOCAL, &addr, sizeof(addr)) ||
	    !nl_attr(&r, IFA_ADDRESS, &addr, sizeof(addr)) ||
	    (label && !nl_attr(&r, IFA_LABEL, label, strlen(label) + 1)))
		return -EMSGSIZE;
	return nl_talk(fd, &r, NULL, NULL);
}

/* The failure of step what on device, logged and written into why. Returns err. */
static int setup_failed(char *why, size_t whylen, int err, const char *fmt, ...)
{
	char line[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_error("nodesetup", "%s: %s%s", line, strerror(-err),
		  err == -EPERM ? " (CAP_NET_ADMIN is needed)" : "");
	if (why && whylen)
		snprintf(why, whylen, "%s: %s", line, strerror(-err));
	return err;
}

int nodesetup_address_up(const char *device, struct in_addr addr, int prefix,
			 struct nodesetup **out, char *why, size_t whylen)
{
	struct nodesetup *ns;
	struct link_info li;
	struct addr_info ai;
	char a[INET_ADDRSTRLEN];
	bool created = false;
	size_t dlen;
	int fd, err;

	device = device && *device ? device : NODESETUP_DEFAULT_DEVICE;
	if (strlen(device) >= IFNAMSIZ || prefix < 1 || prefix > 32)
		return setup_failed(why, whylen, -EINVAL, "node device %s", device);
	inet_ntop(AF_INET, &addr, a, sizeof(a));
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	snprintf(ns->device, sizeof(ns->device), "%s", device);
	ns->addr = addr;
	ns->prefix = prefix;
	fd = nl_open();
	if (fd < 0) {
		free(ns);
		return setup_failed(why, whylen, fd, "rtnetlink socket");
	}
	err = link_get(fd, ns->device, &li);
	if (err == -ENODEV) {
		err = link_create(fd, ns->device);
		created = err == 0;
		if (err == -EOPNOTSUPP) {
			log_warn(
			    "nodesetup",
			    "this kernel has no dummy devices (CONFIG_DUMMY): %s/%d goes on lo", a,
			    prefix);
			snprintf(ns->device, sizeof(ns->device), "lo");
			err = 0;
		}
		if (err == 0 || err == -EEXIST) /* -EEXIST: made meanwhile by someone else */
			err = link_get(fd, ns->device, &li);
	}
	if (err) {
		setup_failed(why, whylen, err, "node device %s", ns->device);
		goto fail;
	}
	ns->own_device = created || li.marked;
	err = link_up(fd, li.index, created ? NODESETUP_ALIAS : NULL);
	if (err) {
		setup_failed(why, whylen, err, "set node device %s up", ns->device);
		goto fail;
	}
	/* on a device not kvsplice's, the address's label says it is kvsplice's */
	dlen = strlen(ns->device);
	if (!ns->own_device && dlen + sizeof(NODESETUP_LABEL_SUFFIX) <= sizeof(ns->label)) {
		memcpy(ns->label, ns->device, dlen);
		memcpy(ns->label + dlen, NODESETUP_LABEL_SUFFIX, sizeof(NODESETUP_LABEL_SUFFIX));
	}
	err = addr_find(fd, li.index, addr, ns->label[0] ? ns->label : NULL, &ai);
	if (!err && !ai.found) {
		err = addr_change(fd, RTM_NEWADDR, li.index, addr, prefix,
				  ns->label[0] ? ns->label : NULL);
		ai.marked = err == 0;
		if (err == -EEXIST) /* added meanwhile by someone else */
			err = 0;
	}
	if (err) {
		setup_failed(why, whylen, err, "add %s/%d to %s", a, prefix, ns->device);
		goto fail;
	}
	ns->own_addr = ns->own_device || ai.marked;
	log_info("nodesetup", "%s/%d on %s: device %s, address %s", a, prefix, ns->device,
		 created	  ? "created"
		 : ns->own_device ? "kvsplice's (adopted)"
				  : "not kvsplice's",
		 !ai.found && ai.marked ? "added"
		 : ns->own_addr		? "kvsplice's (adopted)"
					: "there before (kept at exit)");
	close(fd);
	*out = ns;
	return 0;
fail:
	if (created && link_get(fd, ns->device, &li) == 0)
		link_del(fd, li.index);
	close(fd);
	free(ns);
	return err;
}

void nodesetup_undo(struct nodesetup *ns)
{
	struct link_info li;
	char a[INET_ADDRSTRLEN];
	int fd, err;

	if (!ns)
		return;
	inet_ntop(AF_INET, &ns->addr, a, sizeof(a));
	if (!ns->own_addr) {
		log_info("nodesetup", "%s/%d on %s was there before: left", a, ns->prefix,
			 ns->device);
		goto out;
	}
	fd = nl_open();
	err = fd < 0 ? fd : link_get(fd, ns->device, &li);
	if (!err && ns->own_device)
		err = link_del(fd, li.index);
	else if (!err)
		err = addr_change(fd, RTM_DELADDR, li.index, ns->addr, ns->prefix, NULL);
	if (err == -ENODEV || err == -EADDRNOTAVAIL)
		err = 0; /* already gone */
	if (err)
		log_error("nodesetup", "remove %s %s: %s", ns->own_device ? "device" : "address",
			  ns->own_device ? ns->device : a, strerror(-err));
	else if (ns->own_device)
		log_info("nodesetup", "removed device %s (and %s/%d)", ns->device, a, ns->prefix);
	else
		log_info("nodesetup", "removed %s/%d from %s", a, ns->prefix, ns->device);
	if (fd >= 0)
		close(fd);
out:
	free(ns);
}

void nodesetup_free(struct nodesetup *ns)
{
	free(ns);
}
