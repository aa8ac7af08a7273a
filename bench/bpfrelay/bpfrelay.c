// SPDX-License-Identifier: Apache-2.0
/* bench/bpfrelay: the relay paths a proxy can use between an upstream connection and a local
 * client, side by side in one run (copy loop vs splice(2) vs sk_skb verdict splice vs sk_msg fast
 * path; docs/benchmarks.md#relay). An upstream server sends --mib MiB; a client reads them through
 * a relay: direct   client connected to the server (no relay: the ceiling) copy     the relay reads
 * the upstream socket and writes the client socket (64 KiB buffer) splice   the relay moves the
 * bytes with splice(2) through a pipe sk_skb   the upstream socket's received bytes are redirected
 * in the kernel to the client-facing socket's send side (bpf/relay.bpf.c, stream verdict); the
 * relay thread only waits sk_msg   copy loop, but what the relay writes to the client-facing socket
 * goes straight into the client socket's receive queue (sk_msg ingress redirect), skipping the TCP
 * stack sk_skb_hc sk_skb, but as a proxy would end it: the server closes after its last byte and
 * the relay half-closes the client side as soon as it sees the upstream FIN (bytes still queued in
 * the kernel redirect are then lost: counted as incomplete) Runs are interleaved (path after path,
 * rep after rep) in a private network namespace on lo; the median MiB/s per path is reported, and
 * whether every byte arrived. Prints a table, writes JSON. usage: bpfrelay [--mib N] [--reps N]
 * [--json FILE]     (root) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "relay.skel.h"

enum { P_DIRECT, P_COPY, P_SPLICE, P_SKB, P_MSG, P_SKB_HC, P_MAX };
static const char *const path_names[P_MAX] = {"direct", "copy",	  "splice",
					      "sk_skb", "sk_msg", "sk_skb_hc"};

#define CHUNK (64 * 1024)
#define MAXREPS 32

struct run {
	int path;
	long long bytes;
	struct relay_bpf *skel;
	int srv_l, prx_l;   /* listeners */
	int go;		    /* eventfd: the server starts sending */
	int done;	    /* eventfd: the client has everything (or gave up) */
	int c;		    /* client socket */
	int a, b;	    /* relay: client-facing, upstream-facing */
	struct timespec t0; /* when the server started */
	long long got;	    /* bytes the client received */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int listen_any(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a->sin_family = AF_INET;
	a->sin_port = 0;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(fd, 8) < 0 ||
	    getsockname(fd, (struct sockaddr *)a, &len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int dial(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void ev_wait(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

static void ev_post(int fd)
{
	uint64_t v = 1;

	if (write(fd, &v, sizeof(v)) < 0)
		perror("eventfd");
}

static void *server(void *arg)
{
	struct run *r = arg;
	char *buf = malloc(CHUNK);
	long long left = r->bytes;
	int s = accept4(r->srv_l, NULL, NULL, SOCK_CLOEXEC);

	memset(buf, 'k', CHUNK);
	ev_wait(r->go);
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	while (s >= 0 && left > 0) {
		ssize_t n = write(s, buf, left < CHUNK ? (size_t)left : CHUNK);

		if (n <= 0)
			break;
		left -= n;
	}
	if (r->path != P_SKB_HC)
		ev_wait(r->done); /* close only when the client is through: see sk_skb_hc */
	if (s >= 0)
		close(s);
	free(buf);
	return NULL;
}

static void *relay(void *arg)
{
	struct run *r = arg;
	char *buf = malloc(CHUNK);
	int p[2] = {-1, -1};

	if (r->path == P_SPLICE && pipe2(p, O_CLOEXEC) < 0)
		goto out;
	if (r->path == P_SKB_HC) {
		struct pollfd pf = {.fd = r->b, .events = POLLRDHUP};

		while (poll(&pf, 1, 10000) == 1 && !(pf.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			;
		shutdown(r->a, SHUT_WR);
		goto out;
	}
	for (;;) {
		ssize_t n, w, off = 0;

		if (r->path == P_SPLICE) {
			n = splice(r->b, NULL, p[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_MORE);
			while (n > 0 && off < n) {
				w = splice(p[0], NULL, r->a, NULL, (size_t)(n - off),
					   SPLICE_F_MOVE | SPLICE_F_MORE);
				if (w <= 0)
					goto out;
				off += w;
			}
		} else {
			n = read(r->b, buf, CHUNK);
			while (n > 0 && off < n) {
				w = write(r->a, buf + off, (size_t)(n - off));
				if (w <= 0)
					goto out;
				off += w;
			}
		}
		if (n <= 0)
			break;
	}
out:
	if (p[0] >= 0)
		close(p[0]), close(p[1]);
	free(buf);
	return NULL;
}

static int put(int map_fd, int sock)
{
	__u32 k = 0;
	__u64 v = (__u64)sock;

	return bpf_map_update_elem(map_fd, &k, &v, BPF_ANY);
}

/* One transfer on one path: returns MiB/s, or -1 if bytes were missing (10 s without progress). */
static double transfer(struct run *r)
{
	struct sockaddr_in sa, pa;
	pthread_t st, rt = 0;
	char *buf = malloc(CHUNK);
	long long got = 0;
	double mibs = -1, t1;

	r->srv_l = listen_any(&sa);
	r->prx_l = listen_any(&pa);
	r->go = eventfd(0, EFD_CLOEXEC);
	r->done = eventfd(0, EFD_CLOEXEC);
	r->a = r->b = -1;
	pthread_create(&st, NULL, server, r);
	if (r->path == P_DIRECT) {
		r->c = dial(&sa);
	} else {
		r->c = dial(&pa);
		r->a = accept4(r->prx_l, NULL, NULL, SOCK_CLOEXEC);
		r->b = dial(&sa);
	}
	if ((r->path == P_SKB || r->path == P_SKB_HC) &&
	    (put(bpf_map__fd(r->skel->maps.skb_dst), r->a) ||
	     put(bpf_map__fd(r->skel->maps.skb_src), r->b)))
		perror("sk_skb sockmap");
	if (r->path == P_MSG && (put(bpf_map__fd(r->skel->maps.msg_dst), r->c) ||
				 put(bpf_map__fd(r->skel->maps.msg_src), r->a)))
		perror("sk_msg sockmap");
	if (r->path == P_COPY || r->path == P_SPLICE || r->path == P_MSG || r->path == P_SKB_HC)
		pthread_create(&rt, NULL, relay, r);
	ev_post(r->go);
	while (got < r->bytes) {
		struct pollfd p = {.fd = r->c, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 10000) <= 0)
			break;
		n = read(r->c, buf, CHUNK);
		if (n <= 0)
			break;
		got += n;
	}
	t1 = now();
	r->got = got;
	if (got == r->bytes)
		mibs = (double)r->bytes / 1048576.0 / (t1 - (r->t0.tv_sec + r->t0.tv_nsec / 1e9));
	ev_post(r->done);
	pthread_join(st, NULL);
	if (r->b >= 0)
		shutdown(r->b, SHUT_RDWR); /* ends the relay loop if it still waits */
	if (rt)
		pthread_join(rt, NULL);
	close(r->c);
	if (r->a >= 0)
		close(r->a);
	if (r->b >= 0)
		close(r->b);
	close(r->srv_l), close(r->prx_l), close(r->go), close(r->done);
	free(buf);
	return mibs;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

int main(int argc, char **argv)
{
	const char *json = "build/bench/bpfrelay.json";
	double res[P_MAX][MAXREPS];
	int lost[P_MAX] = {0}, reps = 3, rc = 1;
	double least[P_MAX]; /* smallest share of the bytes received, % */
	long long mib = 256;
	struct relay_bpf *skel = NULL;
	FILE *jf;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mib"))
			mib = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--json"))
			json = argv[i + 1];
	}
	if (mib < 1 || reps < 1 || reps > MAXREPS) {
		fprintf(stderr, "usage: bpfrelay [--mib N] [--reps 1..%d] [--json FILE]\n",
			MAXREPS);
		return 2;
	}
	if (unshare(CLONE_NEWNET) < 0 || system("ip link set lo up")) {
		fprintf(stderr, "bpfrelay: needs root (private network namespace)\n");
		return 1;
	}
	skel = relay_bpf__open_and_load();
	if (!skel ||
	    bpf_prog_attach(bpf_program__fd(skel->progs.relay_skb_verdict),
			    bpf_map__fd(skel->maps.skb_src), BPF_SK_SKB_STREAM_VERDICT, 0) ||
	    bpf_prog_attach(bpf_program__fd(skel->progs.relay_msg_verdict),
			    bpf_map__fd(skel->maps.msg_src), BPF_SK_MSG_VERDICT, 0)) {
		fprintf(stderr, "bpfrelay: load/attach bpf/relay.bpf.c: %s\n", strerror(errno));
		goto cleanup;
	}
	for (int rep = 0; rep < reps; rep++)
		for (int p = 0; p < P_MAX; p++) {
			struct run r = {.path = p, .bytes = mib << 20, .skel = skel};

			res[p][rep] = transfer(&r);
			if (res[p][rep] < 0)
				lost[p]++;
			if (!rep || 100.0 * (double)r.got / (double)r.bytes < least[p])
				least[p] = 100.0 * (double)r.got / (double)r.bytes;
		}

	jf = fopen(json, "w");
	if (jf)
		fprintf(jf, "{\"bench\":\"bpfrelay\",\"mib\":%lld,\"reps\":%d,\"paths\":[", mib,
			reps);
	printf("%lld MiB per transfer, %d reps, median of complete transfers\n", mib, reps);
	printf("%-10s %10s %8s %11s %s\n", "path", "MiB/s", "vs copy", "incomplete",
	       "least received");
	double copy_med = 0;
	for (int p = 0; p < P_MAX; p++) {
		double ok[MAXREPS], med;
		int n = 0;

		for (int i = 0; i < reps; i++)
			if (res[p][i] > 0)
				ok[n++] = res[p][i];
		qsort(ok, (size_t)n, sizeof(double), cmp_double);
		med = n ? ok[n / 2] : 0;
		if (p == P_COPY)
			copy_med = med;
		printf("%-10s %10.0f %7.2fx %6d of %d %13.1f%%\n", path_names[p], med,
		       copy_med > 0 && p >= P_COPY ? med / copy_med : 0, lost[p], reps, least[p]);
		if (jf)
			fprintf(jf,
				"%s{\"path\":\"%s\",\"mib_per_s\":%.1f,\"incomplete\":%d,"
				"\"least_received_pct\":%.2f}",
				p ? "," : "", path_names[p], med, lost[p], least[p]);
	}
	if (jf) {
		fprintf(jf, "]}\n");
		fclose(jf);
		printf("json: %s\n", json);
	}
	rc = 0;
cleanup:
	relay_bpf__destroy(skel);
	return rc;
}
