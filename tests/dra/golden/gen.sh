#!/bin/sh
# Regenerates allocator-v<minor>.json: every case of the shared allocator test
# table of k8s.io/dynamic-resource-allocation (structured/internal/
# allocatortesting/allocator_testing.go, TestAllocator) for the release
# kube-scheduler 1.<minor> uses, with the outcome of that release's
# "incubating" allocator (the one kube-scheduler picks for its default gates).
# The upstream test still runs and must pass: the outcome recorded is the one
# the table expects. Cases whose features the incubating allocator does not
# support are skipped by upstream, and so not recorded.
#
# Needs Go and the module in the module cache
# (cd /tmp && GOFLAGS=-mod=mod go mod download k8s.io/dynamic-resource-allocation@v0.37.2).
# Usage: tests/dra/golden/gen.sh 0.37.2 [0.36.3 0.35.4]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=$(go env GOMODCACHE)
for version in "$@"; do
    minor=$(echo "$version" | cut -d. -f2)
    work=$(mktemp -d)
    cp -r "$cache/k8s.io/dynamic-resource-allocation@v$version" "$work/dra"
    chmod -R u+w "$work/dra"
    testing="$work/dra/structured/internal/allocatortesting"
    cp "$here/dump.go.txt" "$testing/dump.go"
    # Record each case right after upstream's Allocate (share ids already fixed).
    sed -i 's|^\(\t\t\tg.Expect(results).To(gomega.ConsistOf(tc.expectResults...))\)|\t\t\trecordCase(name, tc.features, unwrap(tc.claimsToAllocate...), tc.allocatedDevices, tc.allocatedSharedDeviceIDs, tc.allocatedCapacityDevices, tc.classes, tc.slices, tc.node, results, err, tc.expectNumAllocateOneInvocations)\n\1|' "$testing/allocator_testing.go"
    grep -q 'recordCase(name' "$testing/allocator_testing.go"
    cat > "$work/dra/structured/internal/incubating/dump_test.go" <<'GO'
package incubating

import (
	"os"
	"testing"

	"k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := allocatortesting.WriteDump(os.Getenv("BERTH_DUMP")); err != nil {
		panic(err)
	}
	os.Exit(code)
}
GO
    (cd "$work/dra" && BERTH_DUMP="$here/allocator-v$minor.json" GOFLAGS=-mod=mod GOPROXY=off \
        go test ./structured/internal/incubating/ -run '^TestAllocator$' -count=1)
    rm -rf "$work"
done
