// SPDX-License-Identifier: Apache-2.0
/* kvstub: a stand-in for the kvsplice daemon that exercises only the BPF interception, so the
 * interception can be tested in the netns node on its own (tests/node/test_intercept.sh). It is a
 * test helper, not a proxy: it takes kvsplice's flags, loads and attaches the programs through
 * bpfctl, selects the Services of --services, registers its listener, and answers every
 * intercepted connection itself (no worker is involved) with an HTTP response that reports what
 * BPF told it:
 *   x-kvs-stub-origdst: 10.96.0.50:8000   (bpfctl_origdst_take, or "none")
 *   x-kvs-stub-peer:    10.244.0.2:41234  (the accepted socket's peer)
 * usage: kvstub --services FILE --listen IP:PORT --cgroup DIR --pin-dir DIR [--admin ADDR]
 *        kvstub detach --pin-dir DIR
 *        kvstub stats --pin-dir DIR        (prints "name value" per BPF counter) */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "node/bpfctl.h"
#include "core/log.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char ip[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = 0;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, ip, &a->sin_addr) == 1 && a->sin_port ? 0 : -EINVAL;
}

/* Selects every Service of the services JSON file. Returns the count or a negative errno. */
static int add_services(struct bpfctl *b, const char *path)
{
	const cJSON *svc;
	cJSON *root = NULL;
	char *text = NULL;
	long n = 0;
	int count = 0, err = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (text = calloc(1, (size_t)n + 1)) && fread(text, 1, (size_t)n, f) == (size_t)n)
		root = cJSON_Parse(text);
	if (!root) {
		err = -EINVAL;
		goto cleanup;
	}
	cJSON_ArrayForEach(svc, cJSON_GetObjectItem(root, "services"))
	{
		const cJSON *ip = cJSON_GetObjectItem(svc, "cluster_ip");
		const cJSON *port = cJSON_GetObjectItem(svc, "port");
		struct in_addr a;

		if (!cJSON_IsString(ip) || !cJSON_IsNumber(port) ||
		    inet_pton(AF_INET, ip->valuestring, &a) != 1) {
			err = -EINVAL;
			goto cleanup;
		}
		err = bpfctl_service_add(b, a.s_addr, htons((uint16_t)port->valueint),
					 (uint32_t)count + 1);
		if (err)
			goto cleanup;
		count++;
	}
	err = count;
cleanup:
	cJSON_Delete(root);
	free(text);
	fclose(f);
	return err;
}

static void serve(struct bpfctl *b, int fd)
{
	struct sockaddr_in peer, orig;
	socklen_t len = sizeof(peer);
	char req[4096], od[64] = "none", pr[64], resp[512];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	int n;

	if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0)
		return;
	if (bpfctl_origdst_take(b, &peer, &orig) == 0)
		snprintf(od, sizeof(od), "%s:%u", inet_ntoa(orig.sin_addr), ntohs(orig.sin_port));
	snprintf(pr, sizeof(pr), "%s:%u", inet_ntoa(peer.sin_addr), ntohs(peer.sin_port));
	/* read the request head (best effort: one second at most) */
	while (got < sizeof(req) - 1 && poll(&p, 1, 1000) > 0) {
		ssize_t r = read(fd, req + got, sizeof(req) - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = 0;
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	n = snprintf(resp, sizeof(resp),
		     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nx-kvs-stub-origdst: %s\r\n"
		     "x-kvs-stub-peer: %s\r\nContent-Length: 5\r\nConnection: close\r\n\r\nstub\n",
		     od, pr);
	if (write(fd, resp, (size_t)n) != n)
		log_warn("kvstub", "short write to %s", pr);
}

int main(int argc, char **argv)
{
	struct bpfctl_opts opts = {.own_mark = 0x4b56};
	const char *services = NULL, *listen_at = NULL;
	struct sigaction sa = {.sa_handler = on_signal};
	struct bpfctl *b = NULL;
	int lfd = -1, one = 1, err, detach = 0, stats = 0;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "detach") || !strcmp(argv[i], "stats")) {
			detach = argv[i][0] == 'd';
			stats = argv[i][0] == 's';
			continue;
		}
		if (!v) {
			fprintf(stderr, "kvstub: %s needs a value\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--services"))
			services = v;
		else if (!strcmp(argv[i], "--listen"))
			listen_at = v;
		else if (!strcmp(argv[i], "--cgroup"))
			opts.cgroup_path = v;
		else if (!strcmp(argv[i], "--pin-dir"))
			opts.pin_dir = v;
		else if (strcmp(argv[i], "--admin")) {
			fprintf(stderr, "kvstub: unknown flag %s\n", argv[i]);
			return 2;
		}
		i++;
	}
	if (detach)
		return bpfctl_detach(opts.pin_dir) ? 1 : 0;
	if (stats) {
		uint64_t v[64];
		int k = bpfctl_stats_pinned(opts.pin_dir, v, 64);

		for (int i = 0; i < k; i++)
			printf("%s %llu\n", bpfctl_stat_name(i), (unsigned long long)v[i]);
		return k < 0 ? 1 : 0;
	}
	if (!services || !listen_at || !opts.cgroup_path || parse_addr(listen_at, &opts.proxy)) {
		fprintf(stderr, "usage: kvstub --services FILE --listen IP:PORT --cgroup DIR "
				"--pin-dir DIR [--admin ADDR]\n");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	err = bpfctl_open(&opts, &b);
	if (err)
		return 1;
	err = add_services(b, services);
	if (err < 0) {
		log_error("kvstub", "services %s: %s", services, strerror(-err));
		goto cleanup;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&opts.proxy, sizeof(opts.proxy)) < 0 ||
	    listen(lfd, 512) < 0) {
		err = -errno;
		log_error("kvstub", "listen %s: %s", listen_at, strerror(errno));
		goto cleanup;
	}
	err = bpfctl_set_listener(b, lfd);
	if (err)
		goto cleanup;
	log_info("kvstub", "intercepting %d service(s) to %s", 1, listen_at);
	while (!stop) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			continue;
		serve(b, fd);
		close(fd);
	}
	err = 0;
cleanup:
	if (lfd >= 0)
		close(lfd);
	bpfctl_close(b);
	return err ? 1 : 0;
}
