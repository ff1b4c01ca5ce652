#!/usr/bin/env bash
# Builds the LeaderWorkerSet controller (lws-manager, sigs.k8s.io/lws/cmd) that
# tests/e2e/test_lws.py runs against the bed, from its published Go module at
# the version pinned by the wrapper module lws/ beside this script, into the
# per-machine cache build.sh uses:
#
#   ${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}/shared/lws/<version>/
#     lws-manager              the controller and its webhooks (cmd/main.go)
#     crd/*.yaml               the module's config/crd/bases
#     webhook/*.yaml           the module's config/webhook (manifests.yaml and
#                              the kustomize patches that add objectSelectors:
#                              the webhooks' paths and rules, read by the test)
#
# The CRDs and webhook manifests are copied from the same module so the test
# never guesses a key. Prints that directory. Rebuilt only when the wrapper
# module or this script changes (a stamp holds their hash). Nothing built here
# is ever committed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}"
mod="$here/lws"

if ! command -v go >/dev/null; then
  echo "build-lws.sh: go is not installed; lws-manager cannot be built" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod

version="$(cd "$mod" && go list -m -f '{{.Version}}' sigs.k8s.io/lws)"
out="$cache/shared/lws/$version"
stamp="$out/.lws-manager.stamp"
want="$(cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -x "$out/lws-manager" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$out"
  exit 0
fi

echo "build-lws.sh: building lws-manager (sigs.k8s.io/lws $version); once per machine, a few minutes" >&2
src="$(cd "$mod" && go mod download sigs.k8s.io/lws && go list -m -f '{{.Dir}}' sigs.k8s.io/lws)"
if [[ ! -f "$src/config/webhook/manifests.yaml" ]]; then
  echo "build-lws.sh: sigs.k8s.io/lws $version has no config/webhook/manifests.yaml in $src" >&2
  exit 1
fi
rm -rf "$out/crd" "$out/webhook"
mkdir -p "$out/crd" "$out/webhook"
# The version stamp as LWS's own Makefile sets it (LD_FLAGS, pkg/version).
(cd "$mod" && go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$version" \
  -o "$out/lws-manager.tmp" sigs.k8s.io/lws/cmd)
cp "$src"/config/crd/bases/*.yaml "$out/crd/"
cp "$src"/config/webhook/*.yaml "$out/webhook/"
chmod -R u+w "$out"  # the module cache is read-only; so would be the copies
mv "$out/lws-manager.tmp" "$out/lws-manager"
echo "$want" >"$stamp"
echo "$out"
