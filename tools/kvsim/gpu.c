// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"

#define GPU_MAGIC 0x6b767367707532ull /* "kvsgpu2" */

/* The clock is one word, so that one compare-and-swap moves it: the time the GPU is busy until
 * (CLOCK_MONOTONIC microseconds, 48 bits: 8.9 years of uptime) and which worker ran last (16
 * bits, ids handed out by the file's counter). */
struct gpu_clock {
	_Atomic uint64_t magic;
	_Atomic uint64_t word;
	_Atomic uint64_t next_id;
};

#define OWNER_BITS 16
#define OWNER_MASK ((1ull << OWNER_BITS) - 1)

struct gpu_share {
	struct gpu_clock *c;
	uint64_t id; /* 1..65535 */
};

struct gpu_share *gpu_share_open(const char *path, char *err, size_t errlen)
{
	struct gpu_share *g;
	struct stat st;
	void *p;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	/* A new (empty) file is sized here, zero-filled: an idle GPU. A file another worker uses
	 * keeps its clock; any other file is refused, never overwritten. */
	if (fstat(fd, &st) < 0 ||
	    (st.st_size == 0 && ftruncate(fd, (off_t)sizeof(struct gpu_clock)) < 0)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (st.st_size != 0 && (size_t)st.st_size != sizeof(struct gpu_clock)) {
		snprintf(err, errlen, "%s: not a kvsim GPU clock file", path);
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct gpu_clock), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
		return NULL;
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		munmap(p, sizeof(struct gpu_clock));
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->c = p;
	{
		uint64_t zero = 0;

		atomic_compare_exchange_strong(&g->c->magic, &zero, GPU_MAGIC);
	}
	if (atomic_load(&g->c->magic) != GPU_MAGIC) {
		snprintf(err, errlen, "%s: not a kvsim GPU clock file", path);
		gpu_share_close(g);
		return NULL;
	}
	g->id = atomic_fetch_add(&g->c->next_id, 1) % OWNER_MASK + 1;
	return g;
}

double gpu_share_reserve(struct gpu_share *g, double start, double dur, double switch_s)
{
	uint64_t s = (uint64_t)(start * 1e6), d = (uint64_t)(dur * 1e6),
		 sw = (uint64_t)(switch_s * 1e6);
	uint64_t cur = atomic_load(&g->c->word), until, from, end;

	do {
		until = cur >> OWNER_BITS;
		from = until > s ? until : s;
		/* Another worker's step still running when this one is ready: the GPU switches
		 * contexts first. */
		end = from + d + (until > s && (cur & OWNER_MASK) != g->id ? sw : 0);
	} while (!atomic_compare_exchange_weak(&g->c->word, &cur, end << OWNER_BITS | g->id));
	return (double)end / 1e6;
}

void gpu_share_close(struct gpu_share *g)
{
	if (!g)
		return;
	munmap(g->c, sizeof(struct gpu_clock));
	free(g);
}
