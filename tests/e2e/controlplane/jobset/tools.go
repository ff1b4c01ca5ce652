//go:build tools

// Package tools pins the JobSet controller manager (sigs.k8s.io/jobset, its
// main package), which tests/e2e/test_jobset.py runs against the bed.
package tools

import _ "sigs.k8s.io/jobset"
