// SPDX-License-Identifier: Apache-2.0
/* kvsplice interception: hands TCP connects aimed at a selected Service (ClusterIP:port) to the
 * node-local kvsplice proxy, and leaves every other connect alone.
 *
 *   cgroup/connect4     rewrite ClusterIP:port -> proxy address, only while the proxy's listening
 *                       socket is in proxy_listener; remember the original destination by cookie
 *                       (with match_endpoints also a Service's endpoint address, which is what a
 *                       socket load balancer that ran first leaves)
 *   sockops             at ACTIVE_ESTABLISHED copy it to a (client ip, client port) key, which is
 *                       what the proxy sees as the accepted socket's peer; drop both on close
 *   cgroup/getpeername4 show the client the ClusterIP it asked for, not the proxy
 *   cgroup/connect6,    the same for dual-stack IPv6 sockets connecting to an IPv4-mapped
 *   cgroup/getpeername6 ClusterIP (::ffff:10.96.0.50; e.g. Java clients), which never reach
 *                       the IPv4 hooks
 *
 * Every path bumps one counter in stats (enum kvs_stat), so "why was this connection (not)
 * intercepted?" always has an answer. Internal functions return a kvs_stat reason; only the
 * section entry points turn that into a verdict, and the verdict is always "allow": interception
 * must never be the reason a connect fails. */
#include "vmlinux.h"
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "kvsplice_abi.h"

/* Intercepted connections whose original destination is remembered at once (entries, LRU). */
#ifndef KVS_MAX_CONNS
#define KVS_MAX_CONNS 65536
#endif

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define IPPROTO_TCP 6

/* Set by bpfctl on skel->rodata before load. */
const volatile __u32 proxy_ip4 = 0;  /* proxy address, network order */
const volatile __u16 proxy_port = 0; /* proxy port, network order */
const volatile __u32 own_mark = 0;   /* SO_MARK of the proxy's own sockets; 0 = no mark check */
/* --intercept-endpoints: a connect aimed at an endpoint of a selected Service counts as one aimed
 * at that Service (what is left when a socket load balancer that runs first translated the
 * ClusterIP). Needs own_mark: kvsplice's own upstream connects go to those endpoints. */
const volatile __u32 match_endpoints = 0;

/* Selected Services: ClusterIP:port -> service id. Written by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KVS_MAX_SERVICES);
	__type(key, struct kvs_svc_key);
	__type(value, struct kvs_svc_val);
} services SEC(".maps");

/* Endpoints of the selected Services: pod IP:port -> its Service. Written by the daemon, and only
 * read when match_endpoints is set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KVS_MAX_ENDPOINTS);
	__type(key, struct kvs_svc_key);
	__type(value, struct kvs_ep_val);
} endpoints SEC(".maps");

/* The proxy's listening socket (key 0). Interception is on only while it is here; the kernel
 * removes it when the socket closes, so a dead proxy turns interception off with no window. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} proxy_listener SEC(".maps");

/* Original destination by client socket cookie, written by connect4 (the 4-tuple is not known
 * yet there); read by getpeername4 and sockops; removed on close. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_MAX_CONNS);
	__type(key, __u64);
	__type(value, struct kvs_origdst);
} origdst_cookie SEC(".maps");

/* Original destination by client (ip, port), the accepted socket's peer as the proxy sees it.
 * Written by sockops at ACTIVE_ESTABLISHED; taken (looked up and deleted) by the proxy, or
 * removed on close. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KVS_MAX_CONNS);
	__type(key, struct kvs_peer_key);
	__type(value, struct kvs_origdst);
} origdst SEC(".maps");

/* Per-reason counters (index: enum kvs_stat), summed over CPUs by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KVS_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &reason);

	if (c)
		*c += 1;
}

/* Is the proxy listening right now? A lookup in a SOCKMAP from this program type takes a
 * reference on the socket, which must be released. */
static __always_inline int proxy_present(void)
{
	__u32 key = 0;
	struct bpf_sock *sk = bpf_map_lookup_elem(&proxy_listener, &key);

	if (!sk)
		return 0;
	bpf_sk_release(sk);
	return 1;
}

/* Decides one connect to *ip:*port (network order); rewrites them to the proxy when it
 * intercepts. Order matters: the cheap, common "not a Service" exit first; the proxy's own
 * sockets are excluded before the rewrite so an endpoint that is itself a Service address can
 * never loop back into the proxy. */
static __always_inline __u32 connect_decide(struct bpf_sock_addr *ctx, __u32 *ip, __u16 *port)
{
	struct kvs_svc_key key = {.ip = *ip, .port = *port};
	struct kvs_origdst od = {};
	struct kvs_svc_val *svc;
	struct kvs_ep_val *ep = NULL;
	struct bpf_sock *sk;
	__u64 cookie;

	if (ctx->type != SOCK_STREAM || (ctx->protocol && ctx->protocol != IPPROTO_TCP))
		return KVS_STAT_NOT_TCP;
	svc = bpf_map_lookup_elem(&services, &key);
	if (svc) {
		od.ip = key.ip;
		od.port = key.port;
		od.service_id = svc->service_id;
	} else if (match_endpoints && own_mark &&
		   (ep = bpf_map_lookup_elem(&endpoints, &key)) != NULL) {
		/* recorded as the Service's ClusterIP: the proxy finds the Service by it, the
		 * keeper relays to it, getpeername shows it */
		od.ip = ep->svc_ip;
		od.port = ep->svc_port;
		od.service_id = ep->service_id;
	} else {
		return KVS_STAT_NOT_SERVICE;
	}
	sk = ctx->sk;
	if (own_mark && sk && sk->mark == own_mark)
		return KVS_STAT_OWN_CONNECT;
	if (!proxy_present())
		return KVS_STAT_PROXY_ABSENT;

	cookie = bpf_get_socket_cookie(ctx);
	od.cookie = cookie;
	/* Without the record the proxy could not tell which Service this is for: then rather not
	 * intercept at all. */
	if (bpf_map_update_elem(&origdst_cookie, &cookie, &od, BPF_ANY))
		return KVS_STAT_ORIGDST_FULL;
	*ip = proxy_ip4;
	*port = proxy_port;
	if (ep)
		stat_inc(KVS_STAT_ENDPOINT);
	return KVS_STAT_REWRITTEN;
}

SEC("cgroup/connect4")
int kvs_connect4(struct bpf_sock_addr *ctx)
{
	__u32 ip = ctx->user_ip4;
	__u16 port = (__u16)ctx->user_port;
	__u32 reason = connect_decide(ctx, &ip, &port);

	if (reason == KVS_STAT_REWRITTEN) {
		ctx->user_ip4 = ip;
		ctx->user_port = port;
	}
	stat_inc(reason);
	return 1;
}

/* ::ffff:a.b.c.d? */
static __always_inline int v4mapped(struct bpf_sock_addr *ctx)
{
	return ctx->user_ip6[0] == 0 && ctx->user_ip6[1] == 0 &&
	       ctx->user_ip6[2] == bpf_htonl(0x0000ffff);
}

SEC("cgroup/connect6")
int kvs_connect6(struct bpf_sock_addr *ctx)
{
	__u32 ip, reason;
	__u16 port;

	if (!v4mapped(ctx)) {
		stat_inc(KVS_STAT_NOT_IPV4);
		return 1;
	}
	ip = ctx->user_ip6[3];
	port = (__u16)ctx->user_port;
	reason = connect_decide(ctx, &ip, &port);
	if (reason == KVS_STAT_REWRITTEN) {
		ctx->user_ip6[3] = ip;
		ctx->user_port = port;
	}
	stat_inc(reason);
	return 1;
}

/* The original destination of this socket if its peer is the proxy, else NULL. */
static __always_inline struct kvs_origdst *peer_lookup(struct bpf_sock_addr *ctx, __u32 ip,
						       __u16 port)
{
	struct kvs_origdst *od;
	__u64 cookie;

	if (ip != proxy_ip4 || port != proxy_port)
		return NULL;
	cookie = bpf_get_socket_cookie(ctx);
	od = bpf_map_lookup_elem(&origdst_cookie, &cookie);
	stat_inc(od ? KVS_STAT_PEER_RESTORED : KVS_STAT_PEER_UNKNOWN);
	return od;
}

SEC("cgroup/getpeername6")
int kvs_getpeername6(struct bpf_sock_addr *ctx)
{
	struct kvs_origdst *od;

	if (!v4mapped(ctx))
		return 1;
	od = peer_lookup(ctx, ctx->user_ip6[3], (__u16)ctx->user_port);
	if (od) {
		ctx->user_ip6[3] = od->ip;
		ctx->user_port = od->port;
	}
	return 1;
}

SEC("cgroup/getpeername4")
int kvs_getpeername4(struct bpf_sock_addr *ctx)
{
	struct kvs_origdst *od = peer_lookup(ctx, ctx->user_ip4, (__u16)ctx->user_port);

	if (od) {
		ctx->user_ip4 = od->ip;
		ctx->user_port = od->port;
	}
	return 1;
}

static __always_inline struct kvs_peer_key peer_key_of(struct bpf_sock_ops *skops)
{
	/* This runs on the client's socket: its local end is the accepted socket's peer.
	 * local_port is in host order (unlike remote_port). For a v4-mapped IPv6 socket
	 * local_ip4 is its IPv4 source too. */
	struct kvs_peer_key k = {.ip = skops->local_ip4,
				 .port = bpf_htons((__u16)skops->local_port)};

	return k;
}

/* Why a separate peer-keyed copy: the proxy only knows the accepted socket's 4-tuple, never the
 * client socket's cookie. Why at ACTIVE_ESTABLISHED: the source port is chosen after connect4. */
static __always_inline void sockops_established(struct bpf_sock_ops *skops, struct kvs_origdst *od)
{
	struct kvs_peer_key k = peer_key_of(skops);

	if (bpf_map_update_elem(&origdst, &k, od, BPF_ANY))
		stat_inc(KVS_STAT_ORIGDST_LOST);
	else
		stat_inc(KVS_STAT_ORIGDST_STORED);
}

/* Removes the records of a closing intercepted connection. The peer-keyed entry is removed only if
 * it still belongs to this socket (the proxy may have taken it, and the port may be reused). */
static __always_inline void sockops_closed(struct bpf_sock_ops *skops, __u64 cookie)
{
	struct kvs_peer_key k = peer_key_of(skops);
	struct kvs_origdst *cur = bpf_map_lookup_elem(&origdst, &k);

	if (cur && cur->cookie == cookie)
		bpf_map_delete_elem(&origdst, &k);
	bpf_map_delete_elem(&origdst_cookie, &cookie);
	stat_inc(KVS_STAT_CLOSED);
}

SEC("sockops")
int kvs_sockops(struct bpf_sock_ops *skops)
{
	struct kvs_origdst *od;
	__u64 cookie;

	if (skops->family != AF_INET && skops->family != AF_INET6)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_STATE_CB:
		break;
	default:
		return 1;
	}
	cookie = bpf_get_socket_cookie(skops);
	od = bpf_map_lookup_elem(&origdst_cookie, &cookie);
	if (!od)
		return 1;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		/* Ask for state changes from the first SYN on, so a connect that never establishes
		 * (refused, timed out) still frees its cookie entry. */
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						     BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		sockops_established(skops, od);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == BPF_TCP_CLOSE)
			sockops_closed(skops, cookie);
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "Apache-2.0";
