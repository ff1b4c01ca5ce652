#!/usr/bin/env bash
# Builds the real Go extenders Berth's benchmarks compare against, from their
# published Go modules (pinned in the go.mod beside each tools.go), into a
# per-machine cache outside the repository. Nothing built here is committed.
#
#   bench/reference/build.sh            # prints the bin directory
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
build topolvm-scheduler "$here/topolvm" github.com/topolvm/topolvm/cmd/topolvm-scheduler
echo "$bin"
