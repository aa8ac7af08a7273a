// SPDX-License-Identifier: Apache-2.0
/* bench/overhead: latency a request gains by going through kvsplice, side by side in one run:
 * the same requests to the upstream directly and through kvsplice (--no-bpf, on loopback),
 * alternating request by request so noise hits both alike. Requests: GET with a small answer, and
 * POST of a 10 KB JSON body (a prompt-sized request; kvsplice reads it whole before choosing);
 * each over one keep-alive connection and with a new connection per request (as kvbench does).
 * Prints p50/p99 per path and the difference; writes JSON.
 * With --target HOST:PORT --label NAME (up to 3 times) it measures those addresses instead, the
 * first being the reference (bench/overhead/netns.sh: the DNAT path, the intercepted path, the
 * pod directly, inside the netns node).
 * --serve PORT runs only the upstream, on 0.0.0.0:PORT (the worker pod of netns.sh).
 * Usage: build/bench/overhead [--n N] [--json FILE] [--kvsplice BIN]
 *                             [--target HOST:PORT --label NAME]... | --serve PORT */
#include <getopt.h>

#include "../lib/benchnet.h"

#define NCASES 4

struct kase {
	const char *name;
	bool post, newconn;
};

static const struct kase cases[NCASES] = {
	{"GET small, keep-alive", false, false},
	{"POST 10 KB, keep-alive", true, false},
	{"GET small, new connection", false, true},
	{"POST 10 KB, new connection", true, true},
};

static int connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One request; returns its latency in µs or -1. *fd is the keep-alive connection. */
static double one(const struct kase *k, const struct sockaddr_in *a, int *fd, const struct buf *req,
		  struct buf *rb)
{
	double t0 = bn_now(), t;

	if (k->newconn || *fd < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = connect_to(a);
		if (*fd < 0)
			return -1;
	}
	if (bn_exchange(*fd, req->data, req->len, rb, NULL) < 0)
		return -1;
	t = (bn_now() - t0) * 1e6;
	if (k->newconn) {
		close(*fd);
		*fd = -1;
	}
	return t;
}

static void build_req(struct buf *b, bool post, const char *host)
{
	buf_reset(b);
	if (!post) {
		buf_printf(b, "GET /small HTTP/1.1\r\nHost: %s\r\n\r\n", host);
		return;
	}
	struct buf body = {0};

	buf_puts(&body, "{\"model\":\"qwen\",\"max_tokens\":1,\"prompt\":\"");
	while (body.len < 10200)
		buf_puts(&body, "The quick brown fox jumps over the lazy dog. ");
	buf_puts(&body, "\"}");
	buf_printf(b,
		   "POST /small HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\n\r\n",
		   host, body.len);
	buf_append(b, body.data, body.len);
	buf_free(&body);
}

#define MAXP 3

int main(int argc, char **argv)
{
	const char *json = "build/bench/overhead.json", *bin = "build/kvsplice";
	const char *targets[MAXP], *labels[MAXP] = {0};
	int n = 4000, opt, npaths = 0, ntargets = 0, nlabels = 0;
	struct bn_kvs kvs = {0};
	struct sockaddr_in addr[MAXP];
	const char *pname[MAXP] = {"direct", "kvsplice", ""};
	static double lat[NCASES][MAXP][100000];
	double cpu_us[NCASES] = {0};
	struct buf req[2] = {{0}}, rb = {0};
	FILE *f;
	static const struct option lo[] = {{"n", 1, 0, 'n'},	   {"json", 1, 0, 'j'},
					   {"kvsplice", 1, 0, 'k'}, {"target", 1, 0, 't'},
					   {"label", 1, 0, 'l'},   {"serve", 1, 0, 's'},
					   {0, 0, 0, 0}};

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'j': json = optarg; break;
		case 'k': bin = optarg; break;
		case 't':
			if (ntargets == MAXP)
				return 2;
			targets[ntargets++] = optarg;
			break;
		case 'l':
			if (nlabels == MAXP)
				return 2;
			labels[nlabels++] = optarg;
			break;
		case 's':
			if (bn_upstream_start_at(true, atoi(optarg)) < 0) {
				perror("overhead --serve");
				return 1;
			}
			for (;;)
				pause();
		default:
			fprintf(stderr,
				"usage: %s [--n N] [--json FILE] [--kvsplice BIN] [--target HOST:PORT "
				"--label NAME]... | --serve PORT\n",
				argv[0]);
			return 2;
		}
	}
	if (n < 100 || n > 100000 || nlabels > ntargets)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	memset(addr, 0, sizeof(addr));
	if (ntargets) {
		for (int t = 0; t < ntargets; t++) {
			char host[64];
			const char *c = strrchr(targets[t], ':');

			if (!c || (size_t)(c - targets[t]) >= sizeof(host))
				return 2;
			snprintf(host, sizeof(host), "%.*s", (int)(c - targets[t]), targets[t]);
			addr[t].sin_family = AF_INET;
			addr[t].sin_port = htons((uint16_t)atoi(c + 1));
			if (inet_pton(AF_INET, host, &addr[t].sin_addr) != 1)
				return 2;
			pname[t] = labels[t] ? labels[t] : targets[t];
		}
		npaths = ntargets;
	} else {
		int up = bn_upstream_start();

		if (up < 0 || bn_kvs_start(&kvs, bin, up, NULL)) {
			fprintf(stderr, "overhead: cannot start the upstream or %s\n", bin);
			return 1;
		}
		for (int p = 0; p < 2; p++) {
			addr[p].sin_family = AF_INET;
			addr[p].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			addr[p].sin_port = htons((uint16_t)(p ? kvs.port : up));
		}
		npaths = 2;
	}
	build_req(&req[0], false, "bench");
	build_req(&req[1], true, "bench");
	for (int c = 0; c < NCASES; c++) {
		int fd[MAXP] = {-1, -1, -1};
		double c0;

		/* warm-up: connections, pools, caches */
		for (int i = 0; i < 100; i++)
			for (int p = 0; p < npaths; p++)
				one(&cases[c], &addr[p], &fd[p], &req[cases[c].post], &rb);
		c0 = kvs.pid > 0 ? bn_cpu(kvs.pid) : 0;
		for (int i = 0; i < n; i++)
			for (int p = 0; p < npaths; p++) {
				double us = one(&cases[c], &addr[p], &fd[p], &req[cases[c].post], &rb);

				if (us < 0) {
					fprintf(stderr, "overhead: %s via %s failed\n", cases[c].name,
						pname[p]);
					return 1;
				}
				lat[c][p][i] = us;
			}
		if (kvs.pid > 0)
			cpu_us[c] = (bn_cpu(kvs.pid) - c0) * 1e6 / n;
		for (int p = 0; p < npaths; p++)
			if (fd[p] >= 0)
				close(fd[p]);
	}
	printf("overhead: %d requests per case and path, the paths alternating request by request\n\n",
	       n);
	printf("| request |");
	for (int p = 0; p < npaths; p++)
		printf(" %s p50 µs | %s p99 µs |", pname[p], pname[p]);
	for (int p = 1; p < npaths; p++)
		printf(" %s added p50 µs | added p99 µs |", pname[p]);
	if (kvs.pid > 0)
		printf(" kvsplice CPU µs/request |");
	printf("\n| --- |");
	for (int p = 0; p < 2 * npaths + 2 * (npaths - 1) + (kvs.pid > 0); p++)
		printf(" ---: |");
	printf("\n");
	f = fopen(json, "w");
	if (f)
		fprintf(f, "{\"n\": %d, \"cases\": [", n);
	for (int c = 0; c < NCASES; c++) {
		double q[MAXP][2];

		for (int p = 0; p < npaths; p++) {
			q[p][0] = bn_quantile(lat[c][p], n, 0.5);
			q[p][1] = bn_quantile(lat[c][p], n, 0.99);
		}
		printf("| %s |", cases[c].name);
		for (int p = 0; p < npaths; p++)
			printf(" %.1f | %.1f |", q[p][0], q[p][1]);
		for (int p = 1; p < npaths; p++)
			printf(" %.1f | %.1f |", q[p][0] - q[0][0], q[p][1] - q[0][1]);
		if (kvs.pid > 0)
			printf(" %.1f |", cpu_us[c]);
		printf("\n");
		if (f) {
			fprintf(f, "%s{\"case\": \"%s\"", c ? ", " : "", cases[c].name);
			for (int p = 0; p < npaths; p++)
				fprintf(f, ", \"%s\": {\"p50_us\": %.1f, \"p99_us\": %.1f}", pname[p],
					q[p][0], q[p][1]);
			if (kvs.pid > 0)
				fprintf(f, ", \"kvsplice_cpu_us_per_request\": %.2f", cpu_us[c]);
			fprintf(f, "}");
		}
	}
	if (f) {
		fprintf(f, "]}\n");
		fclose(f);
	}
	if (kvs.pid > 0)
		bn_kvs_stop(&kvs);
	buf_free(&req[0]);
	buf_free(&req[1]);
	buf_free(&rb);
	return 0;
}
