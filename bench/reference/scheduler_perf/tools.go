//go:build tools

// Package tools pins kube-scheduler's scheduler_perf integration benchmark
// (test packages misc and topology_spreading of k8s.io/kubernetes v1.37.2);
// build.sh compiles them with `go test -c`. Nothing built is committed.
package tools

import (
	_ "k8s.io/kubernetes/test/integration/scheduler_perf"
)
