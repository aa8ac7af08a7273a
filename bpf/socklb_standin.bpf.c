// SPDX-License-Identifier: Apache-2.0
/* A STAND-IN for a socket load balancer such as Cilium's kube-proxy replacement (also GKE
 * Dataplane V2), for the node testbed only: Cilium itself cannot run here (no cluster, no agent).
 * It is the one program of this kind in the tree; kvsplice never loads it. What it copies from
 * Cilium's socket-LB is only the behaviour that decides whether kvsplice still sees Service
 * connects:
 *
 *   cgroup/connect4     a connect to a ClusterIP:port of slb_services is rewritten to one of the
 *                       Service's endpoints, chosen at random per connect (as kube-proxy and
 *                       Cilium do); a connect to anything else is left alone (kvsplice's
 *                       node-local proxy address included)
 *   cgroup/getpeername4 the reverse: a socket whose peer is the endpoint this program chose for
 *                       it (looked up by socket cookie AND that endpoint, as Cilium's reverse
 *                       map is keyed) shows the ClusterIP again
 *
 * tests/node/socklb.c loads it, attaches it where and in which order a test asks (a link at the
 * end or at the front of a cgroup's list, with BPF_F_PREORDER, or an exclusive PROG_ATTACH as
 * Cilium before 1.14 did) and fills the maps. Every verdict is "allow". */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define SOCK_STREAM 1
#define SLB_MAX_BACKENDS 64

struct slb_key {
	__u32 ip; /* network order */
	__u16 port;
	__u16 pad;
};

struct slb_service {
	__u32 count; /* backends[0..count) are its endpoints */
	__u32 pad;
	struct slb_key backends[SLB_MAX_BACKENDS];
};

struct slb_rev_key {
	__u64 cookie;
	__u32 ip; /* the endpoint chosen */
	__u16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct slb_key);
	__type(value, struct slb_service);
} slb_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct slb_rev_key);
	__type(value, struct slb_key);
} slb_revnat SEC(".maps");

/* [0] connects translated, [1] getpeername restored */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} slb_stats SEC(".maps");

static __always_inline void slb_count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&slb_stats, &i);

	if (c)
		*c += 1;
}

SEC("cgroup/connect4")
int slb_connect4(struct bpf_sock_addr *ctx)
{
	struct slb_key k = {.ip = ctx->user_ip4, .port = (__u16)ctx->user_port};
	struct slb_rev_key rk = {};
	struct slb_service *svc;
	__u32 i;

	if (ctx->type != SOCK_STREAM)
		return 1;
	svc = bpf_map_lookup_elem(&slb_services, &k);
	if (!svc || !svc->count || svc->count > SLB_MAX_BACKENDS)
		return 1;
	i = bpf_get_prandom_u32() % svc->count;
	if (i >= SLB_MAX_BACKENDS)
		return 1;
	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.ip = svc->backends[i].ip;
	rk.port = svc->backends[i].port;
	bpf_map_update_elem(&slb_revnat, &rk, &k, BPF_ANY);
	ctx->user_ip4 = rk.ip;
	ctx->user_port = rk.port;
	slb_count(0);
	return 1;
}

SEC("cgroup/getpeername4")
int slb_getpeername4(struct bpf_sock_addr *ctx)
{
	struct slb_rev_key rk = {.ip = ctx->user_ip4, .port = (__u16)ctx->user_port};
	struct slb_key *svc;

	rk.cookie = bpf_get_socket_cookie(ctx);
	svc = bpf_map_lookup_elem(&slb_revnat, &rk);
	if (svc) {
		ctx->user_ip4 = svc->ip;
		ctx->user_port = svc->port;
		slb_count(1);
	}
	return 1;
}

char LICENSE[] SEC("license") = "Apache-2.0";
