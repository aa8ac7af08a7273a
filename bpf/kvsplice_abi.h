/* SPDX-License-Identifier: Apache-2.0 */
/* kvsplice_abi: the structs and enums shared by bpf/kvsplice.bpf.c and userspace/bpfctl.c.
 * Everything here is part of the pinned state a new daemon takes over: change a layout and the
 * pinned maps no longer match (bpfctl then recreates them). Addresses and ports are in network
 * byte order unless a field says otherwise. */
#ifndef KVS_KVSPLICE_ABI_H
#define KVS_KVSPLICE_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

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

/* Why the programs did what they did: one per-CPU counter per path (the stats map's index).
 * Keep bpfctl_stat_name() in step. */
enum kvs_stat {
	KVS_STAT_REWRITTEN = 0,	 /* connect: Service connect handed to the proxy */
	KVS_STAT_NOT_SERVICE,	 /* connect: destination is not a selected Service */
	KVS_STAT_PROXY_ABSENT,	 /* connect: Service, but no proxy listener: left to DNAT */
	KVS_STAT_OWN_CONNECT,	 /* connect: the proxy's own socket (SO_MARK): never rewritten */
	KVS_STAT_NOT_TCP,	 /* connect: not a TCP stream socket */
	KVS_STAT_ORIGDST_FULL,	 /* connect: cookie map update failed: left to DNAT */
	KVS_STAT_ORIGDST_STORED, /* sockops: established, original destination keyed by peer */
	KVS_STAT_ORIGDST_LOST,	 /* sockops: established, but peer key could not be stored */
	KVS_STAT_CLOSED,	 /* sockops: intercepted connection closed, its entries removed */
	KVS_STAT_PEER_RESTORED,	 /* getpeername: ClusterIP shown instead of the proxy */
	KVS_STAT_PEER_UNKNOWN,	 /* getpeername: peer is the proxy but no record (evicted) */
	KVS_STAT_NOT_IPV4,	 /* connect6: a real IPv6 destination (not v4-mapped): untouched */
	KVS_STAT_MAX
};

/* Pinned object names under the pin directory. */
#define KVS_PIN_LINK_CONNECT4 "link_connect4"
#define KVS_PIN_LINK_GETPEERNAME4 "link_getpeername4"
#define KVS_PIN_LINK_SOCKOPS "link_sockops"
#define KVS_PIN_LINK_CONNECT6 "link_connect6"
#define KVS_PIN_LINK_GETPEERNAME6 "link_getpeername6"

#endif
