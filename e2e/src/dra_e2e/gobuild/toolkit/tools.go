//go:build tools

// Package tools pins the nvidia-container-toolkit main packages the CDI parity
// tests build by import path: nvidia-ctk (cdi generate) and nvidia-cdi-hook (the
// OCI hooks named in CDI specs).
package tools

import (
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk"
)
