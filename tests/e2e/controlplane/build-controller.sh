#!/usr/bin/env bash
# Builds an out-of-tree controller that an e2e test runs beside the bed, from
# its published Go module at the version pinned by the wrapper module <name>/
# beside this script, into the per-machine cache build.sh uses:
#
#   ${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}/shared/<name>/<version>/
#     <binary>                 the controller and its webhooks (<package>)
#     crd/*.yaml               the module's <crd dir>
#     webhook/                 the module's <webhook dir> (manifests.yaml and
#                              the kustomize patches that add objectSelectors:
#                              the webhooks' paths and rules, read by the test)
#
# The CRDs and webhook manifests are copied from the same module so the test
# never guesses a key. Prints that directory. Rebuilt only when the wrapper
# module, this script or its arguments change (a stamp holds their hash).
# Nothing built here is ever committed. Called by build-lws.sh and
# build-jobset.sh:
#
#   build-controller.sh <name> <module> <package> <binary> <crd dir> <webhook dir>
set -euo pipefail

if [[ $# -ne 6 ]]; then
  echo "usage: build-controller.sh <name> <module> <package> <binary> <crd dir> <webhook dir>" >&2
  exit 2
fi
name="$1" module="$2" package="$3" binary="$4" crd_dir="$5" webhook_dir="$6"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}"
mod="$here/$name"
me="build-$name.sh"

if ! command -v go >/dev/null; then
  echo "$me: go is not installed; $binary cannot be built" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod

version="$(cd "$mod" && go list -m -f '{{.Version}}' "$module")"
out="$cache/shared/$name/$version"
stamp="$out/.$binary.stamp"
want="$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "${BASH_SOURCE[0]}"; echo "$*") | sha256sum | cut -d' ' -f1)"
if [[ -x "$out/$binary" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$out"
  exit 0
fi

echo "$me: building $binary ($module $version); once per machine, a few minutes" >&2
src="$(cd "$mod" && go mod download "$module" && go list -m -f '{{.Dir}}' "$module")"
if [[ ! -f "$src/$webhook_dir/manifests.yaml" ]]; then
  echo "$me: $module $version has no $webhook_dir/manifests.yaml in $src" >&2
  exit 1
fi
rm -rf "$out/crd" "$out/webhook"
mkdir -p "$out/crd" "$out/webhook"
# The version stamp as both projects' Makefiles set it (LD_FLAGS, pkg/version).
(cd "$mod" && go build -trimpath \
  -ldflags "-s -w -X $module/pkg/version.GitVersion=$version" \
  -o "$out/$binary.tmp" "$package")
cp "$src/$crd_dir"/*.yaml "$out/crd/"
cp -r "$src/$webhook_dir/." "$out/webhook/"
chmod -R u+w "$out"  # the module cache is read-only; so would be the copies
mv "$out/$binary.tmp" "$out/$binary"
echo "$want" >"$stamp"
echo "$out"
