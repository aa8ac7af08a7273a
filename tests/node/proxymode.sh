# SPDX-License-Identifier: Apache-2.0
# The Service path of the node testbed as kube-proxy builds it in each of its modes, sourced by
# up.sh and the tests after lib.sh. Everything is programmed inside a node namespace (kvs_in);
# nothing here touches the machine's own namespace, so deleting the node namespace (down.sh)
# removes it all: nftables tables, iptables chains, IPVS services, the kube-ipvs0 device, the
# net.ipv4.vs.* sysctls (all per network namespace).
#
#   nftables  table ip kvs_nat: prerouting and output jump to svc_qwen, `numgen random mod N`
#             picks an endpoint chain that DNATs (up.sh writes it, $RUN_DIR/nat.nft)
#   iptables  kube-proxy's iptables mode, loaded with iptables-restore into the nat table:
#             PREROUTING and OUTPUT -> KUBE-SERVICES -> KUBE-SVC-<hash> -> one KUBE-SEP-<hash> per
#             endpoint, endpoint i of N taken with `-m statistic --mode random --probability
#             1/(N-i)` (the last one unconditionally), each KUBE-SEP DNATs; KUBE-MARK-MASQ /
#             KUBE-POSTROUTING masquerade traffic from outside the cluster CIDR and hairpin
#             traffic. $RUN_DIR/nat.iptables. The backend is Debian's `iptables` alternative
#             (iptables-nft by default); KVS_IPTABLES=iptables-legacy takes the legacy one.
#   ipvs      kube-proxy's IPVS mode: the ClusterIP on a dummy device kube-ipvs0 (down, as
#             kube-proxy leaves it: the address is local all the same), an IPVS virtual service
#             with the rr scheduler and every endpoint as a masquerading (-m) real server of
#             weight 1, net.ipv4.vs.conntrack=1, and the nat rules kube-proxy adds in this mode
#             (masquerade from outside the cluster CIDR and of hairpin traffic; kube-proxy matches
#             with the ipsets KUBE-CLUSTER-IP / KUBE-LOOP-BACK, one Service needs plain matches).
#             Needs IPVS in the kernel (CONFIG_IP_VS) and dummy devices (CONFIG_DUMMY).
#
# The names kube-proxy would give: Service default/qwen, port name "http"; chain hashes as
# kube-proxy forms them (base32 of the SHA-256 of the port name, protocol and endpoint, 16
# characters).

KVS_PROXY_MODES="nftables iptables ipvs"
KVS_CLUSTER_CIDR=10.244.0.0/16
KVS_SVC_PORT_NAME=default/qwen:http
# iptables-legacy keeps a lock file; ours lives in the run dir (down.sh removes it), not /run.
export XTABLES_LOCKFILE=$RUN_DIR/xtables.lock

kvs_ipt() { echo "${KVS_IPTABLES:-iptables}"; }

# kvs_proxy_check MODE: can this machine build MODE? Prints why not (one line, stderr) and returns
# 1. Only reads: loading ip_vs is left to ipvsadm (the kernel loads the module on its first use
# when it is one), and /proc/net/ip_vs exists in every namespace once IPVS is in the kernel.
kvs_proxy_check() {
	local ipt
	ipt=$(kvs_ipt)
	case $1 in
	nftables)
		command -v nft >/dev/null || { echo "nft is not installed (tools/deps.sh)" >&2; return 1; }
		;;
	iptables)
		command -v "$ipt-restore" >/dev/null ||
			{ echo "$ipt-restore is not installed (tools/deps.sh)" >&2; return 1; }
		;;
	ipvs)
		command -v ipvsadm >/dev/null || { echo "ipvsadm is not installed (tools/deps.sh)" >&2; return 1; }
		command -v "$ipt-restore" >/dev/null ||
			{ echo "$ipt-restore is not installed (tools/deps.sh)" >&2; return 1; }
		if [ ! -e /proc/net/ip_vs ] && ! ipvsadm -Ln >/dev/null 2>&1; then
			echo "kernel $(uname -r) has no IPVS (CONFIG_IP_VS unset or ip_vs not loadable:" \
				"no /proc/net/ip_vs, ipvsadm: $(ipvsadm -Ln 2>&1 | head -n 1))" >&2
			return 1
		fi
		;;
	*)
		echo "unknown proxy mode '$1' (one of: $KVS_PROXY_MODES)" >&2
		return 1
		;;
	esac
}

# kvs_kp_hash STRING: 16 characters of base32(sha256(STRING)), as kube-proxy names its chains.
kvs_kp_hash() {
	printf '%s' "$1" | sha256sum | head -c 64 | tr a-f A-F | basenc --base16 -d | base32 | head -c 16
}
kvs_svc_chain() { echo "KUBE-SVC-$(kvs_kp_hash "${KVS_SVC_PORT_NAME}tcp")"; }
kvs_sep_chain() { # endpoint I
	echo "KUBE-SEP-$(kvs_kp_hash "${KVS_SVC_PORT_NAME}tcp$(worker_ip "$1"):$SVC_PORT")"
}

# kvs_iptables_rules MODE WORKERS: the nat table kube-proxy programs in MODE (iptables or ipvs),
# as iptables-restore input (kube-proxy loads its rules the same way, with --noflush).
kvs_iptables_rules() {
	local mode=$1 n=$2 i svc sep p c=$KVS_SVC_PORT_NAME
	echo "*nat"
	echo ":KUBE-SERVICES - [0:0]"
	echo ":KUBE-MARK-MASQ - [0:0]"
	echo ":KUBE-POSTROUTING - [0:0]"
	if [ "$mode" = iptables ]; then
		svc=$(kvs_svc_chain)
		echo ":$svc - [0:0]"
		for i in $(seq "$n"); do echo ":$(kvs_sep_chain "$i") - [0:0]"; done
	fi
	echo "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"
	echo "-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"
	echo "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING"
	echo "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"
	if [ "$mode" = ipvs ]; then
		# Hairpin: an endpoint reaching itself through the ClusterIP (IPVS has already rewritten
		# the destination when POSTROUTING sees the packet, net.ipv4.vs.conntrack=1).
		for i in $(seq "$n"); do
			echo "-A KUBE-POSTROUTING -s $(worker_ip "$i")/32 -d $(worker_ip "$i")/32 -p tcp -m tcp" \
				"--dport $SVC_PORT -m comment --comment \"Kubernetes endpoints dst ip:port, source ip" \
				"for solving hairpin purpose\" -j MASQUERADE"
		done
	fi
	echo "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN"
	echo "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0"
	echo "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\"" \
		"-j MASQUERADE --random-fully"
	if [ "$mode" = ipvs ]; then
		# IPVS itself does the DNAT (the ClusterIP is local, on kube-ipvs0); iptables only marks
		# what needs SNAT: a source outside the cluster CIDR (a node process: its source is then
		# the ClusterIP itself), and lets the rest through.
		echo "-A KUBE-SERVICES ! -s $KVS_CLUSTER_CIDR -d $SVC_IP/32 -p tcp -m tcp --dport $SVC_PORT" \
			"-m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\"" \
			"-j KUBE-MARK-MASQ"
		echo "-A KUBE-SERVICES -d $SVC_IP/32 -p tcp -m tcp --dport $SVC_PORT -j ACCEPT"
	else
		echo "-A KUBE-SERVICES -d $SVC_IP/32 -p tcp -m comment --comment \"$c cluster IP\"" \
			"-m tcp --dport $SVC_PORT -j $svc"
		echo "-A $svc ! -s $KVS_CLUSTER_CIDR -d $SVC_IP/32 -p tcp -m comment --comment" \
			"\"$c cluster IP\" -m tcp --dport $SVC_PORT -j KUBE-MARK-MASQ"
		for i in $(seq "$n"); do
			sep=$(kvs_sep_chain "$i")
			p=""
			# Endpoint i of n (1-based) is taken with probability 1/(n-i+1) of what is left:
			# each one 1/n overall; the last one takes whatever is left.
			[ "$i" = "$n" ] ||
				p="-m statistic --mode random --probability $(awk -v r=$((n - i + 1)) 'BEGIN { printf "%.10f", 1 / r }') "
			echo "-A $svc -m comment --comment \"$c -> $(worker_ip "$i"):$SVC_PORT\" ${p}-j $sep"
			echo "-A $sep -s $(worker_ip "$i")/32 -m comment --comment \"$c\" -j KUBE-MARK-MASQ"
			echo "-A $sep -p tcp -m comment --comment \"$c\" -m tcp -j DNAT" \
				"--to-destination $(worker_ip "$i"):$SVC_PORT"
		done
	fi
	echo "COMMIT"
}

# kvs_proxy_apply MODE NS WORKERS: programs the Service in node namespace NS (nftables: the rules
# up.sh wrote to $RUN_DIR/nat.nft).
kvs_proxy_apply() {
	local mode=$1 ns=$2 n=$3 i ipt
	ipt=$(kvs_ipt)
	case $mode in
	nftables)
		kvs_in "$ns" nft -f "$RUN_DIR/nat.nft"
		;;
	iptables)
		kvs_iptables_rules iptables "$n" >"$RUN_DIR/nat.iptables"
		kvs_in "$ns" "$ipt-restore" -w 5 --noflush <"$RUN_DIR/nat.iptables"
		;;
	ipvs)
		kvs_in "$ns" ip link add kube-ipvs0 type dummy || {
			echo "kernel $(uname -r) has no dummy devices (CONFIG_DUMMY) for kube-ipvs0" >&2
			return 1
		}
		kvs_in "$ns" ip addr add "$SVC_IP/32" dev kube-ipvs0
		kvs_in "$ns" sysctl -qw net.ipv4.vs.conntrack=1 net.ipv4.vs.expire_nodest_conn=1 \
			net.ipv4.vs.expire_quiescent_template=1
		kvs_in "$ns" ipvsadm -A -t "$SVC_IP:$SVC_PORT" -s rr
		for i in $(seq "$n"); do
			kvs_in "$ns" ipvsadm -a -t "$SVC_IP:$SVC_PORT" -r "$(worker_ip "$i"):$SVC_PORT" -m -w 1
		done
		kvs_iptables_rules ipvs "$n" >"$RUN_DIR/nat.iptables"
		kvs_in "$ns" "$ipt-restore" -w 5 --noflush <"$RUN_DIR/nat.iptables"
		;;
	*)
		kvs_proxy_check "$mode"
		;;
	esac
}

# kvs_proxy_backend MODE: what builds the Service in MODE, for logs: "nftables", "iptables
# v1.8.9 (nf_tables)", "ipvs rr, ipvsadm v1.31 + iptables v1.8.9 (nf_tables)".
kvs_proxy_backend() {
	case $1 in
	nftables) nft --version 2>/dev/null ;;
	iptables) "$(kvs_ipt)" -V 2>/dev/null ;;
	ipvs) echo "ipvs rr, $(ipvsadm -v 2>/dev/null | head -n 1 | awk '{ print $1, $2 }') + $("$(kvs_ipt)" -V 2>/dev/null)" ;;
	esac
}

# kvs_proxy_counters_on MODE [NODE]: makes the Service path count its connections per endpoint.
# iptables rules and IPVS real servers always count; the nftables rules get a counter in front of
# each endpoint chain's DNAT (nothing else changes).
kvs_proxy_counters_on() {
	local i
	[ "$1" = nftables ] || return 0
	for i in $(seq "$(kvs_workers)"); do
		kvs_in --node "${2:-${KVS_NODE:-1}}" nft insert rule ip kvs_nat "ep_w$i" counter || return 1
	done
}

# kvs_proxy_conns MODE [NODE]: connections the Service path sent to each endpoint so far, one line
# "w<i> <count>" per worker: the DNAT rule's packets (only a connection's first packet traverses
# the nat table), or IPVS's per-real-server connection count. nftables: after kvs_proxy_counters_on.
kvs_proxy_conns() {
	local mode=$1 node=${2:-${KVS_NODE:-1}} i n out
	n=$(kvs_workers)
	case $mode in
	nftables)
		for i in $(seq "$n"); do
			out=$(kvs_in --node "$node" nft list chain ip kvs_nat "ep_w$i" 2>/dev/null)
			echo "w$i $(awk '/counter packets/ { for (f = 1; f < NF; f++) if ($f == "packets") { print $(f + 1); exit } }' <<<"$out")"
		done
		;;
	iptables)
		out=$(kvs_in --node "$node" "$(kvs_ipt)-save" -c -t nat 2>/dev/null)
		for i in $(seq "$n"); do
			echo "w$i $(awk -v c="$(kvs_sep_chain "$i")" '$2 == "-A" && $3 == c && / -j DNAT / {
				gsub(/[][]/, "", $1); split($1, a, ":"); print a[1] }' <<<"$out")"
		done
		;;
	ipvs)
		out=$(kvs_in --node "$node" ipvsadm -Ln --stats -t "$SVC_IP:$SVC_PORT" 2>/dev/null)
		for i in $(seq "$n"); do
			echo "w$i $(awk -v r="$(worker_ip "$i"):$SVC_PORT" '$1 == "->" && $2 == r { print $3 }' <<<"$out")"
		done
		;;
	esac
}
