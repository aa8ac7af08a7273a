// SPDX-License-Identifier: Apache-2.0
/* Kernel relay paths between sockets, measured by bench/bpfrelay against the proxy's userspace
 * relays (copy loop, splice(2)). Not used by the daemon: measured, the sk_skb splice is slower
 * than userspace and lossy on half-close, and neither path has backpressure; the bench keeps that
 * finding reproducible on the machine at hand.
 *   sk_skb/stream_verdict  bytes arriving on a socket of skb_src are sent out of skb_dst[0]
 *                          (the proxy's upstream socket spliced to its client socket in-kernel)
 *   sk_msg                 bytes sent on a socket of msg_src go straight into the receive queue
 *                          of msg_dst[0] (the local proxy->client hop without the TCP stack) */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

/* Sockets whose received bytes are redirected (stream verdict attached here). */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} skb_src SEC(".maps");

/* Where they go: slot 0, out of its send side. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} skb_dst SEC(".maps");

/* Sockets whose sent bytes are redirected (sk_msg verdict attached here). */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} msg_src SEC(".maps");

/* Where they go: slot 0, into its receive queue. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} msg_dst SEC(".maps");

SEC("sk_skb/stream_verdict")
int relay_skb_verdict(struct __sk_buff *skb)
{
	return bpf_sk_redirect_map(skb, &skb_dst, 0, 0);
}

SEC("sk_msg")
int relay_msg_verdict(struct sk_msg_md *msg)
{
	return bpf_msg_redirect_map(msg, &msg_dst, 0, BPF_F_INGRESS);
}

char LICENSE[] SEC("license") = "Apache-2.0";
