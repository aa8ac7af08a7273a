/* SPDX-License-Identifier: Apache-2.0 */
/* benchnet: what the proxy benchmarks share (header-only, static functions; bench/lib has no .c
 * so the Makefile does not take it for a benchmark):
 *   - a fast HTTP/1.1 upstream in C (16 threads, each serving one connection at a time with
 *     blocking I/O) on 127.0.0.1:0:
 *       GET /big?bytes=N            N bytes with Content-Length
 *       GET /chunked?bytes=N&chunk=K N bytes in chunks of K
 *       GET or POST /small           reads the body (Content-Length), answers 200 bytes of JSON
 *   - starting build/kvsplice --no-bpf in front of it (kvs_start / kvs_stop);
 *   - a blocking HTTP client that reads one whole response (http_get).
 * The upstream stands in for a vLLM worker whose cost must not hide the proxy's. */
#ifndef KVS_BENCHNET_H
#define KVS_BENCHNET_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/http.h"

static char bn_blk[1 << 20];

/* bn_now() when the upstream last had a whole request (head and body) in hand, for a client in
 * the same process that sends one request at a time: the time its request took to reach the
 * worker, apart from the way back. */
static _Atomic double bn_arrival;

static inline double bn_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int bn_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static inline long bn_query(const char *target, size_t tlen, const char *key, long dflt)
{
	char t[512], *p;

	snprintf(t, sizeof(t), "%.*s", (int)tlen, target);
	p = strstr(t, key);
	return p ? atol(p + strlen(key)) : dflt;
}

static inline void *bn_serve(void *arg)
{
	int fd = (int)(long)arg;
	struct buf in = {0};
	char head[256];

	for (;;) {
		struct http_msg m;
		int rc;

		while ((rc = http_parse_request(buf_rptr(&in), buf_unread(&in), 65536, &m)) == 0) {
			ssize_t r;

			buf_reserve(&in, 65536);
			r = read(fd, in.data + in.len, in.cap - in.len - 1);
			if (r <= 0)
				goto out;
			in.len += (size_t)r;
		}
		if (rc < 0)
			goto out;
		/* the body (Content-Length only here) */
		while (buf_unread(&in) < (size_t)rc + m.content_length) {
			ssize_t r;

			buf_reserve(&in, 65536);
			r = read(fd, in.data + in.len, in.cap - in.len - 1);
			if (r <= 0)
				goto out;
			in.len += (size_t)r;
		}
		bn_arrival = bn_now();
		if (m.target_len >= 4 && memcmp(m.target, "/big", 4) == 0) {
			long n = bn_query(m.target, m.target_len, "bytes=", 1 << 20);

			snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\nContent-Type: "
				 "application/octet-stream\r\n\r\n",
				 n);
			if (bn_write_all(fd, head, strlen(head)))
				goto out;
			while (n > 0) {
				size_t k = n < (long)sizeof(bn_blk) ? (size_t)n : sizeof(bn_blk);

				if (bn_write_all(fd, bn_blk, k))
					goto out;
				n -= (long)k;
			}
		} else if (m.target_len >= 8 && memcmp(m.target, "/chunked", 8) == 0) {
			long n = bn_query(m.target, m.target_len, "bytes=", 1 << 20);
			long k = bn_query(m.target, m.target_len, "chunk=", 16384);
			char line[32];

			if (k <= 0 || k > (long)sizeof(bn_blk))
				k = 16384;
			snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: "
				 "text/event-stream\r\n\r\n");
			if (bn_write_all(fd, head, strlen(head)))
				goto out;
			while (n > 0) {
				long c = n < k ? n : k;
				struct iovec iov[3];
				ssize_t w;
				size_t want;

				snprintf(line, sizeof(line), "%lx\r\n", c);
				iov[0] = (struct iovec){line, strlen(line)};
				iov[1] = (struct iovec){bn_blk, (size_t)c};
				iov[2] = (struct iovec){(void *)"\r\n", 2};
				want = iov[0].iov_len + iov[1].iov_len + 2;
				w = writev(fd, iov, 3);
				if (w < 0)
					goto out;
				if ((size_t)w < want) {
					/* rare: finish the chunk the slow way */
					char *tmp = malloc(want);
					size_t o = 0;

					memcpy(tmp, line, iov[0].iov_len);
					memcpy(tmp + iov[0].iov_len, bn_blk, (size_t)c);
					memcpy(tmp + iov[0].iov_len + (size_t)c, "\r\n", 2);
					o = (size_t)w;
					rc = bn_write_all(fd, tmp + o, want - o);
					free(tmp);
					if (rc)
						goto out;
				}
				n -= c;
			}
			if (bn_write_all(fd, "0\r\n\r\n", 5))
				goto out;
		} else {
			static const char body[] =
			    "{\"id\":\"cmpl-bench\",\"object\":\"text_completion\",\"model\":"
			    "\"qwen\","
			    "\"choices\":[{\"index\":0,\"text\":\"ok\",\"finish_reason\":"
			    "\"length\"}],"
			    "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}";

			snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\n\r\n",
				 sizeof(body) - 1);
			struct iovec iov[2] = {{head, strlen(head)},
					       {(void *)body, sizeof(body) - 1}};

			if (writev(fd, iov, 2) != (ssize_t)(iov[0].iov_len + iov[1].iov_len))
				goto out;
		}
		buf_consume(&in, (size_t)rc + m.content_length);
	}
out:
	buf_free(&in);
	close(fd);
	return NULL;
}

/* Upstream threads: each accepts a connection and serves it to the end, then accepts again, so no
 * thread is created per connection (that would bias a new-connection comparison). */
#define BN_THREADS 16

static inline void *bn_accept_loop(void *arg)
{
	int lfd = (int)(long)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL), one = 1;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		bn_serve((void *)(long)fd);
	}
}

/* Starts the upstream on addr:port (0.0.0.0 when any is true, else 127.0.0.1; port 0 picks one);
 * returns its port (host order) or -1. */
static inline int bn_upstream_start_at(bool any, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(any ? INADDR_ANY : INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	pthread_t t;

	memset(bn_blk, 'x', sizeof(bn_blk));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1024) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	for (int i = 0; i < BN_THREADS; i++) {
		if (pthread_create(&t, NULL, bn_accept_loop, (void *)(long)fd) != 0)
			return -1;
		pthread_detach(t);
	}
	return ntohs(a.sin_port);
}

static inline int bn_upstream_start(void)
{
	return bn_upstream_start_at(false, 0);
}

struct bn_kvs {
	pid_t pid;
	int port, admin_port;
	char dir[64];
};

/* Starts kvsplice (--no-bpf) in front of 127.0.0.1:up_port with extra flags (NULL-terminated).
 * Returns 0 or -1. */
static inline int bn_kvs_start(struct bn_kvs *k, const char *bin, int up_port,
			       const char *const *extra)
{
	char svc[128], ports[128];
	const char *argv[40];
	int n = 0;
	FILE *f;

	snprintf(k->dir, sizeof(k->dir), "/tmp/kvs-bench.XXXXXX");
	if (!mkdtemp(k->dir))
		return -1;
	snprintf(svc, sizeof(svc), "%s/services.json", k->dir);
	snprintf(ports, sizeof(ports), "%s/ports", k->dir);
	f = fopen(svc, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"services\":[{\"name\":\"bench\",\"cluster_ip\":\"10.96.0.99\",\"port\":8000,"
		"\"endpoints\":[{\"name\":\"up\",\"ip\":\"127.0.0.1\",\"port\":%d}]}]}\n",
		up_port);
	fclose(f);
	argv[n++] = bin;
	argv[n++] = "--no-bpf";
	argv[n++] = "--services";
	argv[n++] = svc;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--admin";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--port-file";
	argv[n++] = ports;
	argv[n++] = "--log-level";
	argv[n++] = "warn";
	for (int i = 0; extra && extra[i] && n < 38; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	k->pid = fork();
	if (k->pid == 0) {
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		f = fopen(ports, "r");
		if (f) {
			int ok = fscanf(f, "%d %d", &k->port, &k->admin_port) == 2;

			fclose(f);
			if (ok)
				return 0;
		}
		usleep(20000);
	}
	return -1;
}

static inline void bn_kvs_stop(struct bn_kvs *k)
{
	char cmd[128];

	if (k->pid > 0) {
		kill(k->pid, SIGTERM);
		waitpid(k->pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "%s/services.json", k->dir);
	unlink(cmd);
	snprintf(cmd, sizeof(cmd), "%s/ports", k->dir);
	unlink(cmd);
	rmdir(k->dir);
}

/* CPU seconds (user + system) the process has used so far. */
static inline double bn_cpu(pid_t pid)
{
	char path[64], line[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(line, ')');
	/* fields after ")": state(3) ... utime(14) stime(15) */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static inline int bn_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends req (whole) and reads one response. rb is a scratch buffer (kept across calls). Returns
 * the body bytes, or -1. *first_byte gets the time of the first body byte when not NULL. */
static inline long long bn_exchange(int fd, const char *req, size_t reqlen, struct buf *rb,
				    double *first_byte)
{
	struct http_msg m;
	long long body = 0;
	int hl;

	buf_reset(rb);
	if (bn_write_all(fd, req, reqlen))
		return -1;
	for (;;) {
		ssize_t r;

		hl = http_parse_response(buf_rptr(rb), buf_unread(rb), 65536, "GET", &m);
		if (hl < 0)
			return -1;
		if (hl > 0)
			break;
		buf_reserve(rb, 1 << 16);
		r = read(fd, rb->data + rb->len, rb->cap - rb->len - 1);
		if (r <= 0)
			return -1;
		rb->len += (size_t)r;
	}
	buf_consume(rb, (size_t)hl);
	if (m.body == HTTP_BODY_LENGTH) {
		uint64_t left = m.content_length;
		size_t have = buf_unread(rb) < left ? buf_unread(rb) : (size_t)left;

		if (have && first_byte)
			*first_byte = bn_now();
		left -= have;
		body += (long long)have;
		buf_reset(rb);
		while (left) {
			char tmp[1 << 18];
			ssize_t r = read(fd, tmp, left < sizeof(tmp) ? (size_t)left : sizeof(tmp));

			if (r <= 0)
				return -1;
			if (!body && first_byte)
				*first_byte = bn_now();
			left -= (uint64_t)r;
			body += r;
		}
		return body;
	}
	if (m.body == HTTP_BODY_CHUNKED) {
		struct http_chunked ch = {0};
		bool done = false;
		char tmp[1 << 18];

		if (buf_unread(rb)) {
			if (http_chunked_feed(&ch, buf_rptr(rb), buf_unread(rb), NULL, &done) < 0)
				return -1;
			if (first_byte && ch.total)
				*first_byte = bn_now();
		}
		while (!done) {
			ssize_t r = read(fd, tmp, sizeof(tmp));
			uint64_t before = ch.total;

			if (r <= 0)
				return -1;
			if (http_chunked_feed(&ch, tmp, (size_t)r, NULL, &done) < 0)
				return -1;
			if (first_byte && !before && ch.total)
				*first_byte = bn_now();
		}
		return (long long)ch.total;
	}
	return 0;
}

static inline int bn_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of v[n], sorting v. */
static inline double bn_quantile(double *v, int n, double q)
{
	int i;

	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), bn_cmp_double);
	i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

#endif
