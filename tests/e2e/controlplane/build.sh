#!/usr/bin/env bash
# Builds the real components the end-to-end suite runs, from their published
# Go modules at the versions pinned by the wrapper modules beside this script:
#
#   k8s/   kube-apiserver, kube-scheduler and kube-controller-manager (k8s.io/kubernetes v1.34.4 with its
#          staging modules replaced by their published v0.34.4 twins)
#   etcd/  etcd server v3.6
#   helm/  helm v3.17.3
#
# into a per-machine cache outside the repository:
#   ${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}/v1.34.4/bin
# A binary is rebuilt only when its wrapper module or this script changes
# (a stamp holds their hash). Nothing built here is ever committed.
set -euo pipefail

K8S_VERSION=v1.34.4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BERTH_E2E_CACHE:-$HOME/.cache/berth-e2e}"
bin="$cache/$K8S_VERSION/bin"
mkdir -p "$bin"

if ! command -v go >/dev/null; then
  echo "build.sh: go is not installed; the end-to-end binaries cannot be built" >&2
  exit 1
fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod

stamp_of() {  # dir
  cat "$1/go.mod" "$1/go.sum" "$1/tools.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1
}

build() {  # name dir package [ldflags]
  local name="$1" dir="$2" pkg="$3" ldflags="${4:-}"
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

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
stampflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stampflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stampflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build kube-apiserver "$here/k8s" k8s.io/kubernetes/cmd/kube-apiserver "$stampflags"
build kube-scheduler "$here/k8s" k8s.io/kubernetes/cmd/kube-scheduler "$stampflags"
build kube-controller-manager "$here/k8s" k8s.io/kubernetes/cmd/kube-controller-manager "$stampflags"
build etcd "$here/etcd" go.etcd.io/etcd/server/v3
build helm "$here/helm" helm.sh/helm/v3/cmd/helm "-X helm.sh/helm/v3/internal/version.version=v3.17.3"
echo "$bin"
