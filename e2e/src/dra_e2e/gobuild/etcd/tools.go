//go:build tools

// Package tools pins the etcd server main package, which the harness builds
// by import path ("go build go.etcd.io/etcd/server/v3").
package tools

import _ "go.etcd.io/etcd/server/v3"
