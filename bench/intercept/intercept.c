// SPDX-License-Identifier: Apache-2.0
/* bench/intercept: what the BPF interception costs a client's connect(). In a network namespace
 * and a cgroup of its own (like tests/unit/test_bpfctl.c), it times blocking TCP connects over
 * loopback in four states, interleaved in rounds so the shared machine's noise hits all alike:
 *   none         no programs attached (the baseline)
 *   not_service  programs attached, destination not a selected Service (every other connect of
 *                every pod on a node pays this)
 *   proxy_absent a selected Service while no proxy listens (fail-open path)
 *   rewritten    a selected Service handed to the proxy (cookie map + sockops peer record)
 * Prints a table (connect() latency p50/p99/mean in microseconds) and writes JSON.
 * usage: intercept [--connects N] [--rounds R] [--json FILE]     (root) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "node/bpfctl.h"
#include "core/log.h"

#define PROXY_IP "169.254.20.11"
#define SVC_IP "10.96.0.50"

enum { M_NONE, M_NOT_SERVICE, M_PROXY_ABSENT, M_REWRITTEN, M_MAX };
static const char *const mode_names[M_MAX] = {"none", "not_service", "proxy_absent", "rewritten"};

struct samples {
	double *v;
	size_t n, cap;
};

static char cg_root[1024], cg_dir[1200], cg_orig[2048], pin_dir[256];

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
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1024) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* n connects to the Service address, each accepted (on whichever listener got it) and closed;
 * the connect() call alone is timed. Returns 0 or -1. */
static int run(struct samples *s, int n, int lp, int ld)
{
	struct sockaddr_in svc = addr_of(SVC_IP, 8000);
	int linger_fd;

	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), a;
		struct linger lg = {.l_onoff = 1, .l_linger = 0};
		double t0, t1;

		/* RST on close: no TIME_WAIT pile-up eating ports over many runs */
		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		t0 = now_us();
		if (connect(c, (struct sockaddr *)&svc, sizeof(svc)) < 0) {
			perror("connect");
			close(c);
			return -1;
		}
		t1 = now_us();
		a = accept4(lp, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (a < 0)
			a = accept4(ld, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		linger_fd = a;
		close(c);
		if (linger_fd >= 0)
			close(linger_fd);
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 4096;
			double *v = realloc(s->v, cap * sizeof(*v));

			if (!v)
				return -1;
			s->v = v, s->cap = cap;
		}
		s->v[s->n++] = t1 - t0;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const struct samples *s, double p)
{
	size_t i = (size_t)(p * (double)(s->n - 1));

	return s->n ? s->v[i] : 0;
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
	char path[2100], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_file(path, pid);
}

static int setup(void)
{
	char line[1024], dev[256], type[64];
	FILE *f = fopen("/proc/mounts", "r");

	while (f && fscanf(f, "%255s %1023s %63s %*s %*d %*d", dev, cg_root, type) == 3)
		if (strcmp(type, "cgroup2") == 0)
			break;
	if (!f || strcmp(type, "cgroup2"))
		return -1;
	fclose(f);
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(cg_orig, sizeof(cg_orig), "%s%s", cg_root, line + 3);
		}
	if (f)
		fclose(f);
	snprintf(cg_dir, sizeof(cg_dir), "%s/kvsplice-bench-%d", cg_root, getpid());
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/kvsplice-bench-%d", getpid());
	if (unshare(CLONE_NEWNET) < 0 ||
	    system("ip link set lo up && ip addr add " PROXY_IP "/32 dev lo && "
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

int main(int argc, char **argv)
{
	struct bpfctl_opts opts = {.proxy = addr_of(PROXY_IP, 15001), .own_mark = 0x4b56};
	struct sockaddr_in svc = addr_of(SVC_IP, 8000);
	struct samples s[M_MAX] = {{0}};
	const char *json = "build/bench/intercept.json";
	int connects = 20000, rounds = 4, lp = -1, ld = -1, rc = 1;
	struct bpfctl *b = NULL;
	FILE *jf;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--connects"))
			connects = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--json"))
			json = argv[i + 1];
	}
	if (connects < rounds * M_MAX || rounds < 1) {
		fprintf(stderr, "usage: intercept [--connects N] [--rounds R] [--json FILE]\n");
		return 2;
	}
	log_set_level(LOG_ERROR);
	if (geteuid() != 0 || setup() < 0) {
		fprintf(stderr, "intercept: needs root, cgroup2, bpffs (%s)\n", strerror(errno));
		teardown();
		return 1;
	}
	opts.cgroup_path = cg_dir;
	opts.pin_dir = pin_dir;
	ld = tcp_listen(SVC_IP, 8000);
	if (ld < 0)
		goto cleanup;

	int per = connects / rounds / M_MAX;
	for (int r = 0; r < rounds; r++) {
		/* none: nothing attached (opened and detached again every round) */
		if (run(&s[M_NONE], per, ld, ld))
			goto cleanup;
		if (bpfctl_open(&opts, &b))
			goto cleanup;
		if (run(&s[M_NOT_SERVICE], per, ld, ld))
			goto cleanup;
		bpfctl_service_add(b, svc.sin_addr.s_addr, svc.sin_port, 1);
		if (run(&s[M_PROXY_ABSENT], per, ld, ld))
			goto cleanup;
		lp = tcp_listen(PROXY_IP, 15001);
		if (lp < 0 || bpfctl_set_listener(b, lp) || run(&s[M_REWRITTEN], per, lp, ld))
			goto cleanup;
		close(lp);
		lp = -1;
		bpfctl_close(b);
		b = NULL;
		bpfctl_detach(pin_dir);
	}

	jf = fopen(json, "w");
	printf("%-14s %9s %10s %10s %10s\n", "state", "connects", "p50 us", "p99 us", "mean us");
	if (jf)
		fprintf(jf, "{\"bench\":\"intercept\",\"unit\":\"us\",\"states\":[");
	for (int m = 0; m < M_MAX; m++) {
		double sum = 0;

		qsort(s[m].v, s[m].n, sizeof(double), cmp_double);
		for (size_t i = 0; i < s[m].n; i++)
			sum += s[m].v[i];
		printf("%-14s %9zu %10.1f %10.1f %10.1f\n", mode_names[m], s[m].n, pct(&s[m], 0.5),
		       pct(&s[m], 0.99), s[m].n ? sum / (double)s[m].n : 0);
		if (jf)
			fprintf(jf,
				"%s{\"state\":\"%s\",\"connects\":%zu,\"p50\":%.2f,\"p99\":%.2f,"
				"\"mean\":%.2f}",
				m ? "," : "", mode_names[m], s[m].n, pct(&s[m], 0.5),
				pct(&s[m], 0.99), s[m].n ? sum / (double)s[m].n : 0);
	}
	if (jf) {
		fprintf(jf, "]}\n");
		fclose(jf);
		printf("json: %s\n", json);
	}
	rc = 0;
cleanup:
	if (rc)
		fprintf(stderr, "intercept: failed (%s)\n", strerror(errno));
	bpfctl_close(b);
	if (lp >= 0)
		close(lp);
	if (ld >= 0)
		close(ld);
	for (int m = 0; m < M_MAX; m++)
		free(s[m].v);
	teardown();
	return rc;
}
