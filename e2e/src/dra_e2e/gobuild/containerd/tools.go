//go:build tools

// Package tools pins the containerd main packages the harness builds by
// import path: the daemon (with the CRI plugin), the runc shim and ctr.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
