module dra.local/nvml-gomock

go 1.24

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/google/uuid v1.6.0
)
