#!/usr/bin/env bash
# Builds the real Go extenders Berth's benchmarks compare against, from their
# published Go modules (pinned in the go.mod beside each tools.go), into a
# per-machine cache outside the repository. Nothing built here is committed.
#
#   bench/reference/build.sh                 # prints the bin directory
#   bench/reference/build.sh scheduler_perf  # kube-scheduler's scheduler_perf test binaries instead
#
# A stamp of the pinning files' hash skips the build when nothing changed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BERTH_BENCH_CACHE:-$HOME/.cache/berth-bench}"
bin="$cache/bin"
mkdir -p "$bin"

build() {  # name dir package
  local name="$1" dir="$2" pkg="$3"
  local stamp="$bin/.$name.stamp"
  local want
  want="$(cat "$dir/go.mod" "$dir/go.sum" "$dir/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  echo "building $name from $pkg (once per machine)..." >&2
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$stamp"
}

if ! command -v go >/dev/null; then
  echo "go is not installed: the Go reference extenders cannot be built" >&2
  exit 1
fi

# kube-scheduler's own benchmark: the scheduler_perf test packages of
# k8s.io/kubernetes v1.37.2 (with the 33 staging modules replaced by their
# published v0.37.2 twins, as the e2e bed's wrapper does), as test binaries.
# They start an in-process kube-apiserver and need `etcd` on PATH.
build_test() {  # name dir package
  local name="$1" dir="$2" pkg="$3"
  local stamp="$bin/.$name.stamp" want
  want="$(cat "$dir/go.mod" "$dir/go.sum" "$dir/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  echo "building $name from $pkg (once per machine, a few minutes)..." >&2
  # no -trimpath: the in-process apiserver finds its test certificates through runtime.Caller paths
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod go test -c -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$stamp"
}
if [[ "${1:-}" == "scheduler_perf" ]]; then
  for pkg in misc topology_spreading; do
    build_test "scheduler_perf_$pkg.test" "$here/scheduler_perf" "k8s.io/kubernetes/test/integration/scheduler_perf/$pkg"
  done
else
  build topolvm-scheduler "$here/topolvm" github.com/topolvm/topolvm/cmd/topolvm-scheduler
fi
echo "$bin"
