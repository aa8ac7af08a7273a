// SPDX-License-Identifier: Apache-2.0
/* kvsim's time-sliced GPU (--gpu-share): the steps of workers sharing a clock file never overlap,
 * an idle GPU costs nothing, concurrent reservations from several processes lose none, and a
 * file that is not a clock is refused, never overwritten. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tools/kvsim/gpu.c"
#include "tap.h"

int main(void)
{
	char dir[] = "/tmp/test_gpu.XXXXXX", path[256], other[256], err[256];
	struct gpu_share *a, *b;
	double e;
	FILE *f;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/gpu-a", dir);
	snprintf(other, sizeof(other), "%s/not-a-clock", dir);

	a = gpu_share_open(path, err, sizeof(err));
	b = gpu_share_open(path, err, sizeof(err));
	CHECK(a && b, "two workers open one clock (%s)", a && b ? "ok" : err);
	e = gpu_share_reserve(a, 100.0, 0.010, 0);
	CHECK(fabs(e - 100.010) < 1e-6, "an idle GPU: the step runs at once (ends %.6f)", e);
	e = gpu_share_reserve(b, 100.004, 0.010, 0);
	CHECK(fabs(e - 100.020) < 1e-6,
	      "the neighbour's step waits for it: 100.010 + 0.010 (ends %.6f)", e);
	e = gpu_share_reserve(a, 100.005, 0.002, 0);
	CHECK(fabs(e - 100.022) < 1e-6,
	      "steps are granted in order: the third after the second (%.6f)", e);
	e = gpu_share_reserve(b, 200.0, 0.001, 0);
	CHECK(fabs(e - 200.001) < 1e-6, "after an idle gap nothing is owed (%.6f)", e);
	gpu_share_reserve(b, 300.0, 0.001, 0.0005);
	e = gpu_share_reserve(a, 300.0, 0.001, 0.0005);
	CHECK(fabs(e - 300.0025) < 1e-6,
	      "a step waiting for another worker's pays the switch (%.6f)", e);
	e = gpu_share_reserve(a, 300.0, 0.001, 0.0005);
	CHECK(fabs(e - 300.0035) < 1e-6, "waiting for its own step: no switch (%.6f)", e);
	e = gpu_share_reserve(b, 400.0, 0.001, 0.0005);
	CHECK(fabs(e - 400.001) < 1e-6, "an idle GPU: no switch either (%.6f)", e);
	gpu_share_close(b);

	/* Two processes, 20,000 reservations each of 1 us from t=400: none lost. */
	{
		pid_t pid[2];
		int st, okc = 0;

		for (int k = 0; k < 2; k++) {
			pid[k] = fork();
			if (pid[k] == 0) {
				struct gpu_share *g = gpu_share_open(path, err, sizeof(err));

				if (!g)
					_exit(2);
				for (int i = 0; i < 20000; i++)
					gpu_share_reserve(g, 400.0, 1e-6, 0);
				_exit(0);
			}
		}
		for (int k = 0; k < 2; k++)
			if (waitpid(pid[k], &st, 0) == pid[k] && WIFEXITED(st) &&
			    WEXITSTATUS(st) == 0)
				okc++;
		CHECK_EQ(okc, 2, "both processes ran");
		e = gpu_share_reserve(a, 0, 0, 0);
		CHECK(fabs(e - 400.041) < 1e-6,
		      "40,000 concurrent 1 us steps after it end at 400.041 (%.6f)", e);
	}
	gpu_share_close(a);

	f = fopen(other, "w");
	fputs("some other file, not a clock\n", f);
	fclose(f);
	CHECK(gpu_share_open(other, err, sizeof(err)) == NULL && strstr(err, "not a kvsim GPU"),
	      "a file that is not a clock is refused (%s)", err);
	f = fopen(other, "r");
	{
		char line[64] = "";

		CHECK(fgets(line, sizeof(line), f) &&
			  strcmp(line, "some other file, not a clock\n") == 0,
		      "and left as it was");
	}
	fclose(f);
	snprintf(err, sizeof(err), "%s/none/gpu", dir);
	CHECK(gpu_share_open(err, other, sizeof(other)) == NULL,
	      "a path that cannot be created: an error (%s)", other);
	unlink(other);
	unlink(path);
	snprintf(path, sizeof(path), "%s/not-a-clock", dir);
	unlink(path);
	rmdir(dir);
	return tap_done();
}
