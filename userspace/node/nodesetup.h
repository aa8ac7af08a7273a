/* SPDX-License-Identifier: Apache-2.0 */
/* nodesetup: what kvsplice needs from the node before it intercepts anything, and what it puts on
 * the node and takes off again.
 *
 * 1. The kernel feature probe (nodesetup_probe): cgroup v2 mounted (the attach point: --cgroup, or
 *    /sys/fs/cgroup/unified, else /sys/fs/cgroup), bpffs under the pin directory, kernel BTF
 *    (/sys/kernel/btf/vmlinux: the programs are CO-RE), CAP_BPF and CAP_NET_ADMIN (or
 *    CAP_SYS_ADMIN, which implies both), and the program and map types bpf/ uses loadable. Every
 *    missing thing is one log line saying what to do.
 * 2. The node-local address (nodesetup_address_up): a dummy device (default kvsplice0) created
 *    when absent (on a kernel without dummy devices, lo instead), the proxy address on it, the
 *    device up, all through rtnetlink in the caller's network namespace. What a kvsplice put
 *    there is marked: a device it created carries the alias NODESETUP_ALIAS, an address it added
 *    to a device not its own the label DEVICE NODESETUP_LABEL_SUFFIX ("lo:kvs"). So a later
 *    kvsplice (after a crash, SIGKILL, OOM) adopts them: no error on an existing device or
 *    address, and its final exit removes them. What was there without the mark belongs to
 *    someone else: it is used, and left on exit.
 * 3. Undo (nodesetup_undo): the device if it is kvsplice's (its addresses and local routes go
 *    with it), else the address if it is kvsplice's.
 *
 * Fail-open: when the probe or the address setup fails, the daemon stays up but out of the way:
 * nothing attached, nothing listening on the proxy address, /healthz 200, /readyz 503 with the
 * reason, kvsplice_node_ready 0, until SIGTERM. Connects on that node go the kube-proxy way. Flag
 * errors (bad values) still exit 2: they are not a property of the node. Why it does not exit
 * non-zero (a DaemonSet's crash loop): docs/design.md, "Fail-open".
 *
 * Not thread-safe; the daemon's main thread only. Needs CAP_NET_ADMIN for the address. */
#ifndef KVS_NODESETUP_H
#define KVS_NODESETUP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#define NODESETUP_DEFAULT_DEVICE "kvsplice0"
/* The alias (ip link: "alias") marking a device created by kvsplice. */
#define NODESETUP_ALIAS "kvsplice node-local proxy address"
/* Appended to the device name: the label of an address kvsplice added to a device not its own. */
#define NODESETUP_LABEL_SUFFIX ":kvs"

struct nodesetup_probe_cfg {
	const char *cgroup;  /* --cgroup, or NULL / "" to look for the cgroup2 mount root */
	const char *pin_dir; /* --pin-dir: it, or its parent when it does not exist yet, on bpffs */
};

/* Probes the kernel and the mounts for the BPF interception. Writes the cgroup directory to attach
 * to into cgroup_out[n] (the given one, or the cgroup2 root found). Returns 0 when everything is
 * there, else the number of missing things: each logged (error level, one line, what to do), the
 * first one also written into why[whylen] for /readyz. cgroup_out may be cfg->cgroup. */
int nodesetup_probe(const struct nodesetup_probe_cfg *cfg, char *cgroup_out, size_t n, char *why,
		    size_t whylen);

/* The cgroup2 mount root: /sys/fs/cgroup/unified (hybrid hosts), else /sys/fs/cgroup. Returns 0
 * and the path in out[n], or -ENOENT. */
int nodesetup_find_cgroup2(char *out, size_t n);

/* Parses "A.B.C.D" or "A.B.C.D/N" (N 1..32, default 32). Returns 0 or -EINVAL. */
int nodesetup_parse_address(const char *s, struct in_addr *addr, int *prefix);

struct nodesetup;

/* Puts addr/prefix on device (NULL: NODESETUP_DEFAULT_DEVICE), creating it as a dummy device when
 * absent, and sets it up. Returns 0 and *out (what to undo later), or a negative errno: the reason
 * logged and written into why[whylen]; whatever this call created is removed again. */
int nodesetup_address_up(const char *device, struct in_addr addr, int prefix,
			 struct nodesetup **out, char *why, size_t whylen);

/* Removes what the node carries for kvsplice (see 3. above) and frees ns (NULL: nothing). Errors
 * are logged, the rest still done. */
void nodesetup_undo(struct nodesetup *ns);

/* Frees ns and leaves the node as it is (--keep-on-exit, or a successor took over). */
void nodesetup_free(struct nodesetup *ns);

#endif
