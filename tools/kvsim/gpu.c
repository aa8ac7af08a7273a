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

#define GPU_MAGIC 0x6b767367707531ull /* "kvsgpu1" */

struct gpu_clock {
	_Atomic uint64_t magic;
	_Atomic uint64_t busy_until_ns;
};

struct gpu_share {
	struct gpu_clock *c;
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
	return g;
}

double gpu_share_reserve(struct gpu_share *g, double start, double dur)
{
	uint64_t s = (uint64_t)(start * 1e9), d = (uint64_t)(dur * 1e9);
	uint64_t cur = atomic_load(&g->c->busy_until_ns), from;

	do
		from = cur > s ? cur : s;
	while (!atomic_compare_exchange_weak(&g->c->busy_until_ns, &cur, from + d));
	return (double)(from + d) / 1e9;
}

void gpu_share_close(struct gpu_share *g)
{
	if (!g)
		return;
	munmap(g->c, sizeof(struct gpu_clock));
	free(g);
}
