//go:build tools

// Package tools pins the LeaderWorkerSet controller (lws-manager), which
// tests/e2e/test_lws.py runs against the bed.
package tools

import _ "sigs.k8s.io/lws/cmd"
