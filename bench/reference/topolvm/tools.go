//go:build tools

// Package tools pins the real Go extender Berth's benchmark compares against:
// TopoLVM's scheduler extender, which decodes full NodeLists.
package tools

import _ "github.com/topolvm/topolvm/cmd/topolvm-scheduler"
