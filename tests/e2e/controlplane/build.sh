#!/usr/bin/env bash
# Builds the real components the end-to-end suite runs, from their published
# Go modules at the versions pinned by the wrapper modules beside this script:
#
#   k8s/vX.Y.Z/  kube-apiserver, kube-scheduler and kube-controller-manager
#          (k8s.io/kubernetes vX.Y.Z with its staging modules replaced by
#          their published v0.Y.Z twins); one wrapper per supported release:
#          v1.37.2 (the default and the reference), v1.36.3, v1.35.4
#   etcd/  etcd server v3.6
#   helm/  helm v3.17.3
#
# into a per-machine cache outside the repository:
#   ${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}/vX.Y.Z/bin
# etcd and helm are the same for every release and are linked into each.
#
# Usage: build.sh [vX.Y.Z ...]   (default: $BERTH_K8S_VERSION or v1.37.2);
# prints each version's bin directory.
# A binary is rebuilt only when its wrapper module or this script changes
# (a stamp holds their hash). Nothing built here is ever committed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}"
versions=("$@")
if [[ ${#versions[@]} -eq 0 ]]; then versions=("${BERTH_K8S_VERSION:-v1.37.2}"); fi
for v in "${versions[@]}"; do
  if [[ ! -f "$here/k8s/$v/go.mod" ]]; then
    echo "build.sh: no wrapper module for Kubernetes $v (have: $(ls "$here/k8s" | tr '\n' ' '))" >&2
    exit 2
  fi
done

if ! command -v go >/dev/null; then
  echo "build.sh: go is not installed; the end-to-end binaries cannot be built" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod

stamp_of() {  # dir
  cat "$1/go.mod" "$1/go.sum" "$1/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1
}

build() {  # bin name dir package [ldflags]
  local bin="$1" name="$2" dir="$3" pkg="$4" ldflags="${5:-}"
  mkdir -p "$bin"
  local stamp="$bin/.$name.stamp" want
  want="$(stamp_of "$dir")"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  echo "build.sh: building $name ($pkg); once per machine, a few minutes" >&2
  (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$want" >"$stamp"
}

shared="$cache/shared/bin"
build "$shared" etcd "$here/etcd" go.etcd.io/etcd/server/v3
build "$shared" helm "$here/helm" helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=v3.17.3"

for K8S_VERSION in "${versions[@]}"; do
  bin="$cache/$K8S_VERSION/bin"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  stampflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stampflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    stampflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  for cmd in kube-apiserver kube-scheduler kube-controller-manager; do
    build "$bin" "$cmd" "$here/k8s/$K8S_VERSION" "k8s.io/kubernetes/cmd/$cmd" "$stampflags"
  done
  ln -sf "$shared/etcd" "$bin/etcd"
  ln -sf "$shared/helm" "$bin/helm"
  echo "$bin"
done
