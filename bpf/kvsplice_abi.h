/* SPDX-License-Identifier: Apache-2.0 */
/* kvsplice_abi: the structs and enums shared by bpf/kvsplice.bpf.c and userspace/node/bpfctl.c.
 * Everything here is part of the pinned state a new daemon takes over: change a layout and the
 * pinned maps no longer match (bpfctl then recreates them). Addresses and ports are in network
 * byte order unless a field says otherwise. */
#ifndef KVS_KVSPLICE_ABI_H
#define KVS_KVSPLICE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Services that can be selected at once (entries of the services map). */
#define KVS_MAX_SERVICES 1024

/* Key of the services map: a selected Service's ClusterIP and port. */
struct kvs_svc_key {
	__u32 ip;
	__u16 port;
	__u16 pad; /* must be zero */
};

/* Value of the services map. */
struct kvs_svc_val {
	__u32
	    service_id; /* opaque to BPF, handed back to the daemon with the original destination */
	__u32 flags;	/* reserved, zero */
};

/* Endpoints (pod IP:port) of selected Services that can be recognised at once (entries of the
 * endpoints map, filled only with --intercept-endpoints). */
#define KVS_MAX_ENDPOINTS 16384

/* Value of the endpoints map (key: a struct kvs_svc_key holding the endpoint's address): the
 * Service the endpoint belongs to, whose ClusterIP:port is recorded as the original destination
 * of a connect that another program (a socket load balancer) already translated to it. */
struct kvs_ep_val {
	__u32 svc_ip;	  /* the Service's ClusterIP */
	__u16 svc_port;	  /* its port */
	__u16 pad;	  /* zero */
	__u32 service_id; /* as in kvs_svc_val */
	__u32 flags;	  /* reserved, zero */
};

/* Original destination of an intercepted connection, as connect4 saw it. */
struct kvs_origdst {
	__u32 ip;   /* the ClusterIP the client connected to */
	__u16 port; /* its port */
	__u16 pad;
	__u32 service_id; /* from the services map */
	__u32 pad2;
	__u64 cookie; /* socket cookie of the client socket (guards deletes on close) */
};

/* Key of the origdst map: the client side of an intercepted connection, which is what the proxy
 * sees as the peer of the accepted socket. */
struct kvs_peer_key {
	__u32 ip;
	__u16 port;
	__u16 pad; /* must be zero */
};

/* Why the programs did what they did: one per-CPU counter per path (the stats map's index). One
 * list gives the enum and the names /metrics prints (bpfctl_stat_name), so they cannot drift. */
#define KVS_STATS(X)                                                                               \
	X(REWRITTEN, "rewritten")	/* connect: Service connect handed to the proxy */         \
	X(NOT_SERVICE, "not_service")	/* connect: destination is not a selected Service */       \
	X(PROXY_ABSENT, "proxy_absent") /* connect: Service, no proxy listener: left to DNAT */    \
	X(OWN_CONNECT, "own_connect")	/* connect: the proxy's own socket (SO_MARK) */            \
	X(NOT_TCP, "not_tcp")		/* connect: not a TCP stream socket */                     \
	X(ORIGDST_FULL, "origdst_full") /* connect: cookie map update failed: left to DNAT */      \
	X(ORIGDST_STORED, "origdst_stored") /* sockops: established, original dst keyed by peer */ \
	X(ORIGDST_LOST, "origdst_lost") /* sockops: established, peer key could not be stored */   \
	X(CLOSED, "closed")		/* sockops: intercepted connection closed, entries gone */ \
	X(PEER_RESTORED, "peer_restored") /* getpeername: ClusterIP shown instead of the proxy */  \
	X(PEER_UNKNOWN, "peer_unknown")	  /* getpeername: peer is the proxy but no record */       \
	X(NOT_IPV4, "not_ipv4")		  /* connect6: a real IPv6 destination: untouched */       \
	X(ENDPOINT, "endpoint") /* connect: a selected Service's endpoint (already translated by   \
				   another program), taken as that Service's: also "rewritten" */
enum kvs_stat {
#define KVS_STAT_ENUM(e, name) KVS_STAT_##e,
	KVS_STATS(KVS_STAT_ENUM)
#undef KVS_STAT_ENUM
	    KVS_STAT_MAX
};

/* Pinned object names under the pin directory. */
#define KVS_PIN_LINK_CONNECT4 "link_connect4"
#define KVS_PIN_LINK_GETPEERNAME4 "link_getpeername4"
#define KVS_PIN_LINK_SOCKOPS "link_sockops"
#define KVS_PIN_LINK_CONNECT6 "link_connect6"
#define KVS_PIN_LINK_GETPEERNAME6 "link_getpeername6"

#endif
