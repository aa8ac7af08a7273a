#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the kvsplice image from deploy/Dockerfile with podman, on a machine with no Docker
# engine and no registry: `make image` (`make image-clean` removes what it made).
#   tools/image.sh [build]   podman, runc and mmdebstrap from apt when missing; the base images
#                            debian:bookworm and debian:bookworm-slim made locally from Debian's
#                            mirror (mmdebstrap --variant=minbase, podman import) unless present;
#                            make deps (the Dockerfile copies models/qwen3/); then podman build
#                            --pull=never -t ghcr.io/kvsplice/kvsplice:VERSION (VERSION: the image
#                            deploy/daemonset.yaml runs)
#   tools/image.sh deps      only installs podman, runc and mmdebstrap (when missing)
#   tools/image.sh clean     removes the kvsplice image, the two base images this script made and
#                            dangling images (the build stage, cached for the next build)
#   tools/image.sh name      prints the image's name
#   tools/image.sh podman ARGS...   podman with the options the build used (runtime, cgroup
#                            manager, events backend, storage driver)
#   tools/image.sh opts      prints those options, one a line (tests/node/test_image.sh)
# Env: KVS_PODMAN_RUNTIME (runc), KVS_PODMAN_STORAGE (podman's default, overlay here; vfs when
# podman cannot use it), KVS_DEBIAN_MIRROR (http://deb.debian.org/debian),
# KVS_DEBIAN_SECURITY (http://deb.debian.org/debian-security), KVS_IMAGE (the image's name).
# The first build downloads a few hundred MB (the base images' and the build stage's packages):
# tools/deps.sh (make deps, which CI runs) installs none of this; `tools/image.sh deps` installs
# the tools only.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(awk '$1 == "image:" && $2 ~ /kvsplice\/kvsplice:/ { sub(/.*:/, "", $2); print $2 }' \
	deploy/daemonset.yaml | head -n 1)
IMAGE=${KVS_IMAGE:-ghcr.io/kvsplice/kvsplice:${version:?no kvsplice image in deploy/daemonset.yaml}}
RUNTIME=${KVS_PODMAN_RUNTIME:-runc}
MIRROR=${KVS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${KVS_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
# What the base images carry to say this script made them (clean removes only those).
LABEL=io.kvsplice.base=mmdebstrap

# The tools: podman (with conmon and the CNI plugins it depends on), the OCI runtime, mmdebstrap.
image_deps() {
	local missing=() p
	for p in podman "$RUNTIME" mmdebstrap; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "image: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# kvs_podman ARGS...: podman as root with cgroupfs (no systemd needed), the chosen runtime, events
# to a file, and the storage driver: $KVS_PODMAN_STORAGE, else podman's default when it works
# here (overlay on this machine; no option then: podman refuses an explicit driver that its
# database did not record), else vfs (slower, no kernel overlay needed).
podman_opts=(--runtime "$RUNTIME" --cgroup-manager cgroupfs --events-backend file)
pick_storage() {
	local s=${KVS_PODMAN_STORAGE:-}
	if [ -z "$s" ]; then
		podman "${podman_opts[@]}" info >/dev/null 2>&1 && return 0
		s=vfs
		echo "image: podman's default storage driver does not work here; using vfs" >&2
	fi
	podman_opts+=(--storage-driver "$s")
}
kvs_podman() { podman "${podman_opts[@]}" "$@"; }

# base_image TAG [slim]: TAG from Debian's mirror unless it exists. The slim one leaves out what
# Docker's debian:*-slim leaves out (documentation but the copyright files, man pages, locales).
base_image() {
	local tag=$1 opts=()
	kvs_podman image exists "$tag" && return 0
	if [ "${2:-}" = slim ]; then
		opts=(--dpkgopt='path-exclude=/usr/share/doc/*'
			--dpkgopt='path-include=/usr/share/doc/*/copyright'
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
			--dpkgopt='path-exclude=/usr/share/locale/*'
			--dpkgopt='path-include=/usr/share/locale/locale.alias'
			--dpkgopt='path-exclude=/usr/share/lintian/*')
	fi
	echo "image: making $tag from $MIRROR (mmdebstrap --variant=minbase bookworm)"
	# merged-usr hook: /usr merged as debootstrap does it, so init-system-helpers gets
	# usr-is-merged, not usrmerge and perl.
	if ! mmdebstrap --variant=minbase --quiet --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
		--aptopt='Acquire::Retries "3"' "${opts[@]}" bookworm - \
		"deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
		"deb $SECURITY bookworm-security main" 2>>"$LOG" |
		kvs_podman import --change 'CMD ["bash"]' --change "LABEL $LABEL" - "$tag" >>"$LOG" 2>&1; then
		tail -n 30 "$LOG" >&2
		echo "image: making $tag failed (log: $LOG)" >&2
		exit 1
	fi
}

# What mmdebstrap and podman build print goes to build/image.log.
LOG=build/image.log
build() {
	local t0=$SECONDS
	[ "$(id -u)" -eq 0 ] || { echo "image: needs root (apt, mmdebstrap, podman)" >&2; exit 1; }
	mkdir -p "$(dirname "$LOG")"
	: >"$LOG"
	image_deps
	pick_storage
	base_image docker.io/library/debian:bookworm
	base_image docker.io/library/debian:bookworm-slim slim
	# The runtime stage copies models/qwen3/ (the default --tokenizer): make deps puts it there.
	[ -f models/qwen3/tokenizer.json ] || bash tools/deps.sh
	echo "image: podman build -f deploy/Dockerfile -t $IMAGE (log: $LOG)"
	if ! kvs_podman build --pull=never --network host --layers -f deploy/Dockerfile -t "$IMAGE" . \
		>>"$LOG" 2>&1; then
		tail -n 40 "$LOG" >&2
		echo "image: the build failed (log: $LOG)" >&2
		exit 1
	fi
	echo "image: $IMAGE, $(kvs_podman image inspect --format '{{.Size}}' "$IMAGE" |
		awk '{ printf "%.1f MB", $1 / 1e6 }') (built in $((SECONDS - t0)) s)"
}

clean() {
	local tag label
	command -v podman >/dev/null || return 0
	pick_storage
	kvs_podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
	for tag in docker.io/library/debian:bookworm-slim docker.io/library/debian:bookworm; do
		label=$(kvs_podman image inspect --format '{{index .Labels "io.kvsplice.base"}}' "$tag" \
			2>/dev/null || true)
		[ "$label" != mmdebstrap ] || kvs_podman rmi -f "$tag" >/dev/null
	done
	# the build stage's image, kept by --layers as the cache of the next build (prune removes every
	# dangling image of this podman)
	kvs_podman image prune -f >/dev/null 2>&1 || true
	echo "image: removed $IMAGE and the base images made here"
}

case ${1:-build} in
build) build ;;
deps) image_deps ;;
clean) clean ;;
name) echo "$IMAGE" ;;
opts)
	pick_storage
	printf '%s\n' "${podman_opts[@]}"
	;;
podman)
	shift
	pick_storage
	kvs_podman "$@"
	;;
-h | --help) awk 'NR > 2 && /^set -euo/ { exit } NR > 2' "$0" | sed 's/^# \{0,1\}//' ;;
*)
	echo "usage: tools/image.sh [build|deps|clean|name|opts|podman ARGS...]" >&2
	exit 2
	;;
esac
