#!/bin/sh
# Build Berth's container image from the Dockerfile with whichever builder
# this machine can run (`make image`; IMAGE=name:tag to choose the name).
#
#   1. docker, when its daemon answers (`docker info`; BuildKit or the
#      classic builder: the Dockerfile needs neither's extras), else
#      podman, else buildah (run with chroot isolation: no daemon, no
#      cgroup or network setup needed, so it works in a VM or CI runner
#      where podman's and docker's runtimes do not). With none, and as root
#      with apt-get, Debian's buildah is installed; otherwise it says what
#      to install.
#   2. The base image (PYTHON_IMAGE, python:3.11-slim-bookworm) is pulled;
#      where no container registry can be reached (this project's machines
#      reach Debian's archive but not Docker Hub) an equivalent base is made
#      from Debian bookworm's own packages with debootstrap (Debian's
#      python3 is 3.11 there too) and named BASE_IMAGE
#      (localhost/berth-python:3.11-bookworm); it is made once and reused.
#   3. With CHECK=1, `berth version` runs inside the built image.
set -eu

IMAGE=${IMAGE:-berth:latest}
PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim-bookworm}
BASE_IMAGE=${BASE_IMAGE:-localhost/berth-python:3.11-bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PULL_TIMEOUT=${PULL_TIMEOUT:-60}

say() { echo "make image: $*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
	else return 1; fi
}

apt_install() {
	command -v apt-get >/dev/null || return 1
	say "installing Debian's $*"
	as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pick_tool() {
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker; return; fi
	if command -v podman >/dev/null 2>&1; then echo podman; return; fi
	if command -v buildah >/dev/null 2>&1; then echo buildah; return; fi
	if apt_install buildah >&2 && command -v buildah >/dev/null 2>&1; then echo buildah; return; fi
	say "no container build tool can run here; install one of: docker (with its daemon running,"
	say "  https://docs.docker.com/engine/install/), podman (apt-get install podman) or buildah (apt-get install buildah)"
	exit 1
}

have_image() {
	case $tool in
		docker) docker image inspect "$1" >/dev/null 2>&1 ;;
		*) $tool inspect --type image "$1" >/dev/null 2>&1 ;;
	esac
}

pull() {
	have_image "$1" && return 0
	say "pulling $1"
	timeout "$PULL_TIMEOUT" $tool pull "$1" >/dev/null 2>&1
}

# A python:3.11-slim-bookworm stand-in from Debian's packages: python3 (3.11),
# its venv module and pip (the build stage's), `python` on PATH.
debian_base() {
	command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap || {
		say "cannot pull $PYTHON_IMAGE and no debootstrap to make a base from Debian's packages: apt-get install debootstrap"
		exit 1
	}
	root=$(mktemp -d "${TMPDIR:-/tmp}/berth-base.XXXXXX")
	trap 'rm -rf "$root"' EXIT
	say "no registry has $PYTHON_IMAGE for us: making $BASE_IMAGE from Debian bookworm's packages (debootstrap)"
	as_root debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
		bookworm "$root/rootfs" "$DEBIAN_MIRROR" >"$root/debootstrap.log" 2>&1 || {
		tail -20 "$root/debootstrap.log" >&2
		exit 1
	}
	as_root rm -rf "$root/rootfs/var/cache/apt/archives"/*.deb "$root/rootfs/var/lib/apt/lists"/*
	case $tool in
		buildah)
			ctr=$(buildah from scratch)
			mnt=$(buildah mount "$ctr")
			cp -a "$root/rootfs/." "$mnt/"
			buildah umount "$ctr" >/dev/null
			buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd python3 "$ctr"
			buildah commit --rm "$ctr" "$BASE_IMAGE" >/dev/null
			;;
		*)
			tar -C "$root/rootfs" -c . | $tool import --change 'CMD ["python3"]' - "$BASE_IMAGE" >/dev/null
			;;
	esac
	rm -rf "$root"
	trap - EXIT
}

tool=$(pick_tool)
base=$PYTHON_IMAGE
if ! pull "$PYTHON_IMAGE"; then
	have_image "$BASE_IMAGE" || debian_base
	base=$BASE_IMAGE
fi
# This machine's own CAs (Debian's local ones: a TLS-intercepting proxy's)
# for the build stage's pip only.
extra_ca=""
for f in /usr/local/share/ca-certificates/*.crt; do
	[ -f "$f" ] && extra_ca="$extra_ca$(cat "$f")
"
done
say "building $IMAGE with $tool from $base"
case $tool in
	# Chroot isolation: RUN steps share the host's network (pip reaches PyPI)
	# and need no OCI runtime.
	buildah) set -- build --isolation chroot --layers ;;
	*) set -- build ;;
esac
$tool "$@" --build-arg "PYTHON_IMAGE=$base" --build-arg "PIP_EXTRA_CA=$extra_ca" -t "$IMAGE" .
if [ "${CHECK:-0}" = 1 ]; then
	case $tool in
		buildah)
			ctr=$(buildah from "$IMAGE")
			buildah run --isolation chroot "$ctr" -- berth version
			buildah rm "$ctr" >/dev/null
			;;
		*) $tool run --rm "$IMAGE" version ;;
	esac
fi
