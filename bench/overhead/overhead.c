// SPDX-License-Identifier: Apache-2.0
/* bench/overhead: latency a request gains by going through kvsplice, side by side in one run:
 * the same requests to the upstream directly and through kvsplice (--no-bpf, on loopback),
 * interleaved in small blocks so noise hits both alike. Requests: GET with a small answer, and
 * POST of a 10 KB JSON body (a prompt-sized request; kvsplice reads it whole before choosing);
 * each over one keep-alive connection and with a new connection per request (as kvbench does).
 * Prints p50/p99 per path and the difference; writes JSON.
 * With --target HOST:PORT it measures only that address (used by bench/overhead/netns.sh for the
 * DNAT path against the intercepted path inside the netns node).
 * --serve PORT runs only the upstream, on 0.0.0.0:PORT (the worker pod of netns.sh).
 * Usage: build/bench/overhead [--n N] [--json FILE] [--kvsplice BIN]
 *                             [--target HOST:PORT [--label NAME]] | --serve PORT */
#include <getopt.h>

#include "../lib/benchnet.h"

#define NCASES 4
#define BLOCK 10

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

int main(int argc, char **argv)
{
	const char *json = "build/bench/overhead.json", *bin = "build/kvsplice", *target = NULL;
	const char *label = NULL;
	int n = 4000, opt, npaths;
	struct bn_kvs kvs = {0};
	struct sockaddr_in addr[2];
	const char *pname[2] = {"direct", "kvsplice"};
	static double lat[NCASES][2][100000];
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
		case 't': target = optarg; break;
		case 'l': label = optarg; break;
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
				"[--label NAME]]\n",
				argv[0]);
			return 2;
		}
	}
	if (n < BLOCK || n > 100000 || (label && !target))
		return 2;
	n -= n % BLOCK;
	signal(SIGPIPE, SIG_IGN);
	memset(addr, 0, sizeof(addr));
	if (target) {
		char host[64];
		const char *c = strrchr(target, ':');

		if (!c || (size_t)(c - target) >= sizeof(host))
			return 2;
		snprintf(host, sizeof(host), "%.*s", (int)(c - target), target);
		addr[0].sin_family = AF_INET;
		addr[0].sin_port = htons((uint16_t)atoi(c + 1));
		if (inet_pton(AF_INET, host, &addr[0].sin_addr) != 1)
			return 2;
		pname[0] = label ? label : target;
		npaths = 1;
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
		int fd[2] = {-1, -1};

		/* warm-up: connections, pools, caches */
		for (int i = 0; i < 100; i++)
			for (int p = 0; p < npaths; p++)
				one(&cases[c], &addr[p], &fd[p], &req[cases[c].post], &rb);
		double c0 = kvs.pid > 0 ? bn_cpu(kvs.pid) : 0;

		for (int i = 0; i < n; i += BLOCK)
			for (int p = 0; p < npaths; p++)
				for (int j = 0; j < BLOCK; j++) {
					double us = one(&cases[c], &addr[p], &fd[p],
							&req[cases[c].post], &rb);

					if (us < 0) {
						fprintf(stderr, "overhead: %s via %s failed\n",
							cases[c].name, pname[p]);
						return 1;
					}
					lat[c][p][i + j] = us;
				}
		if (kvs.pid > 0)
			cpu_us[c] = (bn_cpu(kvs.pid) - c0) * 1e6 / n;
		for (int p = 0; p < npaths; p++)
			if (fd[p] >= 0)
				close(fd[p]);
	}
	printf("overhead: %d requests per case and path, interleaved in blocks of %d\n\n", n,
	       BLOCK);
	if (npaths == 2)
		printf("| request | direct p50 µs | direct p99 µs | kvsplice p50 µs | kvsplice p99 µs "
		       "| added p50 µs | added p99 µs | kvsplice CPU µs/request |\n"
		       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	else
		printf("| request | %s p50 µs | %s p99 µs |\n| --- | ---: | ---: |\n", pname[0],
		       pname[0]);
	f = fopen(json, "w");
	if (f)
		fprintf(f, "{\"n\": %d, \"cases\": [", n);
	for (int c = 0; c < NCASES; c++) {
		double q[2][2];

		for (int p = 0; p < npaths; p++) {
			q[p][0] = bn_quantile(lat[c][p], n, 0.5);
			q[p][1] = bn_quantile(lat[c][p], n, 0.99);
		}
		if (npaths == 2)
			printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
			       cases[c].name, q[0][0], q[0][1], q[1][0], q[1][1], q[1][0] - q[0][0],
			       q[1][1] - q[0][1], cpu_us[c]);
		else
			printf("| %s | %.1f | %.1f |\n", cases[c].name, q[0][0], q[0][1]);
		if (f) {
			fprintf(f, "%s{\"case\": \"%s\"", c ? ", " : "", cases[c].name);
			for (int p = 0; p < npaths; p++)
				fprintf(f, ", \"%s\": {\"p50_us\": %.1f, \"p99_us\": %.1f}", pname[p],
					q[p][0], q[p][1]);
			if (npaths == 2)
				fprintf(f, ", \"kvsplice_cpu_us_per_request\": %.2f", cpu_us[c]);
			fprintf(f, "}");
		}
	}
	if (f) {
		fprintf(f, "]}\n");
		fclose(f);
	}
	if (!target)
		bn_kvs_stop(&kvs);
	buf_free(&req[0]);
	buf_free(&req[1]);
	buf_free(&rb);
	return 0;
}
