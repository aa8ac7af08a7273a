// SPDX-License-Identifier: Apache-2.0
/* bpfctl + bpf/kvsplice.bpf.c with the real kernel: the programs are loaded, pinned and attached
 * to a cgroup this test creates and joins, inside a network namespace it creates (unshare), so
 * nothing touches the machine's own namespace or other processes. In that namespace lo carries
 * the proxy address 169.254.20.11 and the "Service" address 10.96.0.50, where a plain listener
 * stands in for the kube-proxy (DNAT) path: a connect that is not intercepted lands there.
 *
 * BPF_PROG_TEST_RUN is not used: the kernel refuses it (ENOTSUPP) for cgroup/connect4,
 * cgroup/getpeername4 and sockops, so every path is driven by real sockets instead. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "node/bpfctl.h"
#include "kvsplice_abi.h"
#include "core/log.h"
#include "tap.h"

#define PROXY_IP "169.254.20.11"
#define PROXY_PORT 15001
#define SVC_IP "10.96.0.50"
#define SVC_PORT 8000
#define OWN_MARK 0x4b56

static char cg_root[1024], cg_dir[1200], cg_orig[2 * PATH_MAX], pin_dir[256];

static int find_cgroup2(char *out, size_t n)
{
	char dev[256], dir[PATH_MAX], type[64];
	FILE *f = fopen("/proc/mounts", "r");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fscanf(f, "%255s %4095s %63s %*s %*d %*d", dev, dir, type) == 3)
		if (strcmp(type, "cgroup2") == 0)
			found = snprintf(out, n, "%s", dir) > 0;
	fclose(f);
	return found;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

static int join_cgroup(const char *dir)
{
	char path[PATH_MAX + 16], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_file(path, pid);
}

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static int tcp_listen(const char *ip, int port)
{
	struct sockaddr_in a = addr_of(ip, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Connects to the Service address (mark: SO_MARK or 0). Returns the fd or -1. */
static int svc_connect(int type, unsigned mark)
{
	struct sockaddr_in a = addr_of(SVC_IP, SVC_PORT);
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (mark)
		setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Which of the two listeners got the pending connection: 'p' proxy, 'd' DNAT, '-' neither.
 * The accepted socket is returned in *acc (or -1). */
static char which(int lp, int ld, int *acc)
{
	struct pollfd p[2] = {{.fd = lp, .events = POLLIN}, {.fd = ld, .events = POLLIN}};

	*acc = -1;
	if (poll(p, 2, 2000) <= 0)
		return '-';
	if (p[0].revents & POLLIN) {
		*acc = accept4(lp, NULL, NULL, SOCK_CLOEXEC);
		return 'p';
	}
	*acc = accept4(ld, NULL, NULL, SOCK_CLOEXEC);
	return 'd';
}

static uint64_t stat_of(struct bpfctl *b, int reason)
{
	uint64_t v[KVS_STAT_MAX] = {0};

	return bpfctl_stats(b, v, KVS_STAT_MAX) == KVS_STAT_MAX ? v[reason] : (uint64_t)-1;
}

static unsigned link_id(const char *name, unsigned *prog_id)
{
	char path[PATH_MAX + 64];
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		info.id = 0;
	close(fd);
	if (prog_id)
		*prog_id = info.prog_id;
	return info.id;
}

static int setup(void)
{
	char line[PATH_MAX];
	FILE *f;

	if (!find_cgroup2(cg_root, sizeof(cg_root)))
		return -1;
	f = fopen("/proc/self/cgroup", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(cg_orig, sizeof(cg_orig), "%s%s", cg_root, line + 3);
		}
	fclose(f);
	snprintf(cg_dir, sizeof(cg_dir), "%s/kvsplice-unit-%d", cg_root, getpid());
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/kvsplice-unit-%d", getpid());
	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	if (system("ip link set lo up && ip addr add " PROXY_IP "/32 dev lo && "
		   "ip addr add " SVC_IP "/32 dev lo"))
		return -1;
	if (mkdir(cg_dir, 0755) < 0 || join_cgroup(cg_dir) < 0)
		return -1;
	return 0;
}

static void teardown(void)
{
	bpfctl_detach(pin_dir);
	if (cg_orig[0])
		join_cgroup(cg_orig);
	rmdir(cg_dir);
}

int main(void)
{
	struct bpfctl_opts opts = {.proxy = addr_of(PROXY_IP, PROXY_PORT), .own_mark = OWN_MARK};
	struct sockaddr_in peer, orig, svc = addr_of(SVC_IP, SVC_PORT);
	socklen_t sl = sizeof(peer);
	struct bpfctl *b = NULL;
	int lp = -1, ld = -1, c, a, r, pipefd[2];
	unsigned l1, p1, l2, p2;
	uint64_t before;
	pid_t child;
	char w;

	log_set_level(LOG_WARN);
	if (geteuid() != 0 || setup() < 0) {
		printf("ok - bpfctl with the kernel # SKIP needs root, cgroup2, bpffs and unshare "
		       "(%s)\n",
		       strerror(errno));
		teardown();
		return 0;
	}
	opts.cgroup_path = cg_dir;
	opts.pin_dir = pin_dir;
	ld = tcp_listen(SVC_IP, SVC_PORT);
	lp = tcp_listen(PROXY_IP, PROXY_PORT);
	CHECK(ld >= 0 && lp >= 0, "listeners for the DNAT stand-in and the proxy");

	r = bpfctl_open(&opts, &b);
	CHECK_EQ(r, 0, "bpfctl_open loads, pins and attaches");
	if (!b)
		goto out;
	CHECK(bpfctl_stat_name(KVS_STAT_REWRITTEN) && !strcmp(bpfctl_stat_name(0), "rewritten") &&
		  bpfctl_stat_name(KVS_STAT_MAX) == NULL,
	      "stat names");
	{
		/* every counter has a distinct name (/metrics prints them with %s) */
		int named = 1;

		for (int i = 0; i < KVS_STAT_MAX; i++) {
			named &= bpfctl_stat_name(i) != NULL && bpfctl_stat_name(i)[0];
			for (int k = 0; named && k < i; k++)
				named &= strcmp(bpfctl_stat_name(i), bpfctl_stat_name(k)) != 0;
		}
		CHECK(named && !strcmp(bpfctl_stat_name(KVS_STAT_NOT_IPV4), "not_ipv4"),
		      "every one of the %d counters has its own name (not_ipv4 included)",
		      KVS_STAT_MAX);
	}

	/* 1. not a selected Service: untouched */
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'd', "unselected Service address goes the DNAT way");
	CHECK_EQ(stat_of(b, KVS_STAT_NOT_SERVICE), 1, "counted not_service");
	close(a), close(c);

	/* 2. selected, but no proxy listener: fail open */
	r = bpfctl_service_add(b, svc.sin_addr.s_addr, svc.sin_port, 7);
	CHECK_EQ(r, 0, "service_add");
	r = bpfctl_listener_registered(b);
	CHECK_EQ(r, 0, "no listener registered yet");
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'd', "Service without proxy goes the DNAT way");
	CHECK_EQ(stat_of(b, KVS_STAT_PROXY_ABSENT), 1, "counted proxy_absent");
	close(a), close(c);

	/* 3. proxy listening: rewritten, original destination found, ClusterIP shown */
	r = bpfctl_set_listener(b, lp);
	CHECK_EQ(r, 0, "set_listener");
	r = bpfctl_listener_registered(b);
	CHECK_EQ(r, 1, "listener registered");
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'p', "Service connect rewritten to the proxy");
	CHECK_EQ(stat_of(b, KVS_STAT_REWRITTEN), 1, "counted rewritten");
	CHECK_EQ(stat_of(b, KVS_STAT_ORIGDST_STORED), 1, "counted origdst_stored");
	memset(&peer, 0, sizeof(peer));
	CHECK(getpeername(c, (struct sockaddr *)&peer, &sl) == 0 &&
		  peer.sin_addr.s_addr == svc.sin_addr.s_addr && peer.sin_port == svc.sin_port,
	      "client's getpeername shows the ClusterIP:port");
	CHECK_EQ(stat_of(b, KVS_STAT_PEER_RESTORED), 1, "counted peer_restored");
	sl = sizeof(peer);
	getpeername(a, (struct sockaddr *)&peer, &sl);
	CHECK(bpfctl_origdst_take(b, &peer, &orig) == 0 &&
		  orig.sin_addr.s_addr == svc.sin_addr.s_addr && orig.sin_port == svc.sin_port,
	      "origdst_take gives the ClusterIP:port for the accepted peer");
	r = bpfctl_origdst_take(b, &peer, &orig);
	CHECK_EQ(r, -ENOENT, "origdst_take removes the entry");
	close(a), close(c);

	/* 4. an entry not taken is removed when the connection closes */
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'p', "second connect rewritten");
	sl = sizeof(peer);
	getpeername(a, (struct sockaddr *)&peer, &sl);
	before = stat_of(b, KVS_STAT_CLOSED);
	close(c);
	close(a);
	usleep(50 * 1000);
	CHECK(stat_of(b, KVS_STAT_CLOSED) > before, "close of an intercepted connection counted");
	r = bpfctl_origdst_take(b, &peer, &orig);
	CHECK_EQ(r, -ENOENT, "its origdst entry removed on close");

	/* 5. the proxy's own sockets (SO_MARK) and non-TCP sockets are never rewritten */
	c = svc_connect(SOCK_STREAM, OWN_MARK);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'd', "own (marked) connect not rewritten");
	CHECK_EQ(stat_of(b, KVS_STAT_OWN_CONNECT), 1, "counted own_connect");
	close(a), close(c);
	c = svc_connect(SOCK_DGRAM, 0);
	CHECK(c >= 0 && stat_of(b, KVS_STAT_NOT_TCP) == 1,
	      "UDP connect untouched, counted not_tcp");
	close(c);

	/* 5b. dual-stack IPv6 sockets: v4-mapped ClusterIP intercepted, real IPv6 untouched */
	{
		struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = htons(SVC_PORT)};
		struct sockaddr_in6 p6;
		socklen_t l6 = sizeof(p6);

		inet_pton(AF_INET6, "::ffff:" SVC_IP, &m.sin6_addr);
		c = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = connect(c, (struct sockaddr *)&m, sizeof(m));
		w = which(lp, ld, &a);
		CHECK(r == 0 && w == 'p',
		      "v4-mapped connect6 to the Service rewritten to the proxy");
		memset(&p6, 0, sizeof(p6));
		getpeername(c, (struct sockaddr *)&p6, &l6);
		CHECK(!memcmp(&p6.sin6_addr, &m.sin6_addr, 16) && p6.sin6_port == m.sin6_port,
		      "its getpeername shows ::ffff:" SVC_IP);
		sl = sizeof(peer);
		getpeername(a, (struct sockaddr *)&peer, &sl);
		r = bpfctl_origdst_take(b, &peer, &orig);
		CHECK(r == 0 && orig.sin_addr.s_addr == svc.sin_addr.s_addr,
		      "origdst found for the v4-mapped connection");
		close(a), close(c);
		before = stat_of(b, KVS_STAT_NOT_IPV4);
		inet_pton(AF_INET6, "::1", &m.sin6_addr);
		c = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
		connect(c, (struct sockaddr *)&m, sizeof(m));
		close(c);
		CHECK_EQ(stat_of(b, KVS_STAT_NOT_IPV4), before + 1,
			 "a real IPv6 connect counted not_ipv4");
	}

	/* 6. a proxy killed with SIGKILL turns interception off at once */
	if (pipe(pipefd) < 0)
		goto out;
	child = fork();
	if (child == 0) {
		int l;

		close(lp), close(ld);
		l = tcp_listen(PROXY_IP, PROXY_PORT + 1);
		w = l >= 0 && bpfctl_set_listener(b, l) == 0 ? 'y' : 'n';
		if (write(pipefd[1], &w, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	w = 0;
	CHECK(read(pipefd[0], &w, 1) == 1 && w == 'y', "a child process registered its listener");
	close(pipefd[0]), close(pipefd[1]);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	r = bpfctl_listener_registered(b);
	CHECK_EQ(r, 0, "the kernel removed the dead listener");
	before = stat_of(b, KVS_STAT_PROXY_ABSENT);
	c = svc_connect(SOCK_STREAM, 0);
	CHECK(c >= 0, "connect right after the kill succeeds");
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'd', "and goes the DNAT way");
	CHECK_EQ(stat_of(b, KVS_STAT_PROXY_ABSENT), before + 1, "counted proxy_absent");
	close(a), close(c);

	/* 7. a new process takes over: same links (updated in place), same maps */
	r = bpfctl_set_listener(b, lp);
	CHECK_EQ(r, 0, "listener registered again");
	before = stat_of(b, KVS_STAT_REWRITTEN);
	l1 = link_id(KVS_PIN_LINK_CONNECT4, &p1);
	bpfctl_close(b);
	b = NULL;
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'p', "interception survives the daemon closing its handles");
	close(a), close(c);
	r = bpfctl_open(&opts, &b);
	CHECK_EQ(r, 0, "bpfctl_open takes over the pinned state");
	if (!b)
		goto out;
	l2 = link_id(KVS_PIN_LINK_CONNECT4, &p2);
	CHECK(l1 && l1 == l2 && p1 != p2, "same link (id %u), new program (%u -> %u)", l2, p1, p2);
	CHECK_EQ(stat_of(b, KVS_STAT_REWRITTEN), before + 1, "counters kept across the takeover");
	r = bpfctl_listener_registered(b);
	CHECK_EQ(r, 1, "listener map kept across the takeover");
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'p', "Service still selected after the takeover");
	close(a), close(c);

	/* 8. detach removes everything */
	r = bpfctl_detach(pin_dir);
	CHECK_EQ(r, 0, "bpfctl_detach");
	CHECK(access(pin_dir, F_OK) < 0 && errno == ENOENT, "pin dir removed");
	c = svc_connect(SOCK_STREAM, 0);
	w = which(lp, ld, &a);
	CHECK_EQ(w, 'd', "after detach connects are not intercepted");
	close(a), close(c);
	r = bpfctl_service_add(b, 0, 0, 0);
	CHECK_EQ(r, -EINVAL, "service_add refuses a zero address");
	r = bpfctl_detach(pin_dir);
	CHECK_EQ(r, 0, "bpfctl_detach again is a no-op");
	bpfctl_close(b);
	b = NULL;

	/* 9. pinned maps of another layout (older build) are replaced, not fatal */
	mkdir(pin_dir, 0700);
	{
		char path[512];
		int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "stats", 4, 8, 3, NULL);

		snprintf(path, sizeof(path), "%s/stats", pin_dir);
		CHECK(fd >= 0 && bpf_obj_pin(fd, path) == 0, "pinned a stats map of another size");
		if (fd >= 0)
			close(fd);
	}
	r = bpfctl_open(&opts, &b);
	CHECK_EQ(r, 0, "bpfctl_open recreates incompatible pinned maps");
	CHECK_EQ(b ? bpfctl_stats(b, NULL, 0) : -1, KVS_STAT_MAX, "stats readable after that");
	r = bpfctl_detach(pin_dir);
	CHECK_EQ(r, 0, "detach");
out:
	bpfctl_close(b);
	close(lp), close(ld);
	teardown();
	return tap_done();
}
