// SPDX-License-Identifier: Apache-2.0
/* bench/relay: throughput of large responses through kvsplice per relay path, side by side in one
 * run: a direct connection to the upstream (the ceiling), kvsplice --relay copy, kvsplice --relay
 * splice. Bodies: Content-Length (where splice applies), chunked with 16 KiB chunks, and
 * SSE-sized 256-byte chunks (both framed by reading, so copy in either mode). Runs are
 * interleaved (path after path, rep after rep) so machine noise hits all alike; medians are
 * reported, with kvsplice's CPU seconds per GiB relayed. Prints a table; writes JSON.
 * The BPF relay paths (sk_msg / sk_skb verdict) are not in bpf/ yet, so they are not measured.
 * Usage: build/bench/relay [--mib N] [--reps N] [--json FILE] [--kvsplice BIN] */
#include <getopt.h>

#include "../lib/benchnet.h"

#define NPATHS 3
#define NBODIES 3

static const char *const path_names[NPATHS] = {"direct", "kvsplice copy", "kvsplice splice"};

int main(int argc, char **argv)
{
	const char *json = "build/bench/relay.json", *bin = "build/kvsplice";
	long mib = 256, reps = 5;
	struct bn_kvs kvs[NPATHS] = {0};
	struct {
		const char *name;
		char target[128];
		long long bytes;
	} bodies[NBODIES];
	double mbps[NBODIES][NPATHS][64], cpu[NBODIES][NPATHS][64];
	struct buf rb = {0};
	int up, opt, fds[NPATHS];
	FILE *f;
	static const struct option lo[] = {{"mib", 1, 0, 'm'},
					   {"reps", 1, 0, 'r'},
					   {"json", 1, 0, 'j'},
					   {"kvsplice", 1, 0, 'k'},
					   {0, 0, 0, 0}};

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'm':
			mib = atol(optarg);
			break;
		case 'r':
			reps = atol(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		case 'k':
			bin = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [--mib N] [--reps N] [--json FILE] [--kvsplice BIN]\n",
				argv[0]);
			return 2;
		}
	}
	if (mib < 1 || reps < 1 || reps > 64)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	up = bn_upstream_start();
	if (up < 0) {
		perror("upstream");
		return 1;
	}
	bodies[0].name = "Content-Length";
	bodies[0].bytes = mib << 20;
	snprintf(bodies[0].target, sizeof(bodies[0].target), "/big?bytes=%lld", bodies[0].bytes);
	bodies[1].name = "chunked 16 KiB";
	bodies[1].bytes = mib << 20;
	snprintf(bodies[1].target, sizeof(bodies[1].target), "/chunked?bytes=%lld&chunk=16384",
		 bodies[1].bytes);
	bodies[2].name = "chunked 256 B (SSE-sized)";
	bodies[2].bytes = (mib << 20) / 16;
	snprintf(bodies[2].target, sizeof(bodies[2].target), "/chunked?bytes=%lld&chunk=256",
		 bodies[2].bytes);
	{
		static const char *const copy[] = {"--relay", "copy", NULL};
		static const char *const spl[] = {"--relay", "splice", NULL};

		if (bn_kvs_start(&kvs[1], bin, up, copy) || bn_kvs_start(&kvs[2], bin, up, spl)) {
			fprintf(stderr, "relay: cannot start %s\n", bin);
			return 1;
		}
	}
	fds[0] = bn_connect(up);
	fds[1] = bn_connect(kvs[1].port);
	fds[2] = bn_connect(kvs[2].port);
	for (int p = 0; p < NPATHS; p++)
		if (fds[p] < 0) {
			perror("connect");
			return 1;
		}
	for (int r = 0; r < reps; r++)
		for (int b = 0; b < NBODIES; b++)
			for (int p = 0; p < NPATHS; p++) {
				char req[256];
				int n =
				    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: b\r\n\r\n",
					     bodies[b].target);
				double c0 = p ? bn_cpu(kvs[p].pid) : 0, t0 = bn_now(), t1;
				long long got = bn_exchange(fds[p], req, (size_t)n, &rb, NULL);

				t1 = bn_now();
				if (got != bodies[b].bytes) {
					fprintf(
					    stderr, "relay: %s via %s: got %lld of %lld bytes\n",
					    bodies[b].name, path_names[p], got, bodies[b].bytes);
					return 1;
				}
				mbps[b][p][r] = (double)got / (1 << 20) / (t1 - t0);
				cpu[b][p][r] =
				    p ? (bn_cpu(kvs[p].pid) - c0) / ((double)got / (1 << 30)) : 0;
			}
	printf(
	    "relay: %ld MiB per Content-Length / 16 KiB-chunk response, %ld MiB of 256 B chunks; "
	    "median of %ld interleaved runs\n\n",
	    mib, mib / 16, reps);
	printf("| body | path | MiB/s | kvsplice CPU s per GiB |\n| --- | --- | ---: | ---: |\n");
	f = fopen(json, "w");
	if (f)
		fprintf(f, "{\"mib\": %ld, \"reps\": %ld, \"results\": [", mib, reps);
	for (int b = 0; b < NBODIES; b++)
		for (int p = 0; p < NPATHS; p++) {
			double m = bn_quantile(mbps[b][p], (int)reps, 0.5);
			double c = bn_quantile(cpu[b][p], (int)reps, 0.5);

			if (p)
				printf("| %s | %s | %.0f | %.2f |\n", bodies[b].name, path_names[p],
				       m, c);
			else
				printf("| %s | %s | %.0f | - |\n", bodies[b].name, path_names[p],
				       m);
			if (f)
				fprintf(
				    f,
				    "%s{\"body\": \"%s\", \"path\": \"%s\", \"mib_per_s\": %.1f, "
				    "\"cpu_s_per_gib\": %.3f}",
				    b || p ? ", " : "", bodies[b].name, path_names[p], m, c);
		}
	if (f) {
		fprintf(
		    f,
		    "], \"not_measured\": \"sk_msg / sk_skb relay: no such programs in bpf/\"}\n");
		fclose(f);
	}
	printf("\nsk_msg / sk_skb relay paths: not measured (no such programs in bpf/ yet).\n");
	for (int p = 0; p < NPATHS; p++)
		close(fds[p]);
	bn_kvs_stop(&kvs[1]);
	bn_kvs_stop(&kvs[2]);
	buf_free(&rb);
	return 0;
}
