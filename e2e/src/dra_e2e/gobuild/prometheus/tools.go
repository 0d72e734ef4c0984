//go:build tools

// Package tools pins the Prometheus server and promtool main packages, which the
// harness builds by import path.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
