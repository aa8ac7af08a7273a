// SPDX-License-Identifier: Apache-2.0
/* main: `kvsplice` parses its flags (config.h), then runs (daemon.h). Two more ways in:
 * `kvsplice detach` removes the pinned BPF state (bpfctl.h), and `kvsplice --keeper`, which
 * kvsplice starts itself, is the keeper process (keeper.h). As a container's PID 1 it stays a
 * tiny init and the daemon runs as its child (supervisor.h). */
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "node/bpfctl.h"
#include "node/keeper.h"
#include "node/supervisor.h"

static int detach(int argc, char **argv)
{
	struct daemon_cfg cfg;
	int rc;

	daemon_cfg_default(&cfg);
	switch (opt_parse(&daemon_detach_options, argc, argv, &cfg)) {
	case OPT_RUN:
		break;
	case OPT_EXIT:
		return 0;
	case OPT_ERROR:
		return 2;
	}
	rc = bpfctl_detach(cfg.pin_dir);
	if (rc < 0) {
		fprintf(stderr, "kvsplice detach: %s: %s\n", cfg.pin_dir, strerror(-rc));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon_cfg cfg;
	int rc;

	if (argc > 1 && strcmp(argv[1], "detach") == 0)
		return detach(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "--keeper") == 0)
		return keeper_main(argc, argv);
	if ((rc = supervisor_run()) >= 0)
		return rc;
	daemon_cfg_default(&cfg);
	switch (opt_parse(&daemon_options, argc, argv, &cfg)) {
	case OPT_RUN:
		break;
	case OPT_EXIT:
		return 0;
	case OPT_ERROR:
		return 2;
	}
	if (daemon_cfg_check(&cfg) < 0)
		return 2;
	return daemon_run(&cfg);
}
