// Command nvml-gomock is a C-ABI libnvidia-ml.so over NVIDIA's NVML mock systems
// (github.com/NVIDIA/go-nvml/pkg/nvml/mock: dgxa100, dgxh100, dgxh200, dgxb200), built with
// `go build -buildmode=c-shared`. dra-nvlib's tests load it through nvidia-ml-py exactly as
// they would load the driver's library, so the NVML backend meets NVIDIA's own mock data.
//
// DRA_NVML_MOCK_SYSTEM selects the system when nvmlInit first runs (default dgxa100), and
// DRA_NVML_MOCK_MIG the MIG devices it has from the start (layout.go). Every
// call is answered by the mock where the mock implements it; gaps.go holds the few calls the
// mock lacks, each answered from the mock's own state.
package main

/*
#include "nvml_abi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// SystemEnv names the environment variable that selects the mock system.
const SystemEnv = "DRA_NVML_MOCK_SYSTEM"

var systems = map[string]func() *server.Server{
	"dgxa100": dgxa100.New,
	"dgxh100": dgxh100.New,
	"dgxh200": dgxh200.New,
	"dgxb200": dgxb200.New,
}

// state is the one mock system of this process: like the driver, it outlives
// nvmlShutdown, so MIG instances made before a shutdown are there after the next init.
var state struct {
	sync.Mutex
	server *server.Server
	err    string
}

func systemNames() string {
	names := make([]string, 0, len(systems))
	for name := range systems {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// start builds the selected system once; a bad selection is reported on stderr (NVML
// has no way to carry a message) and every later init fails the same way.
func start() nvml.Return {
	state.Lock()
	defer state.Unlock()
	if state.server != nil {
		return nvml.SUCCESS
	}
	if state.err != "" {
		return nvml.ERROR_UNKNOWN
	}
	name := os.Getenv(SystemEnv)
	if name == "" {
		name = "dgxa100"
	}
	build, ok := systems[name]
	if !ok {
		state.err = fmt.Sprintf("%s=%q is not a go-nvml mock system (known: %s)", SystemEnv, name, systemNames())
		fmt.Fprintln(os.Stderr, "nvml-gomock:", state.err)
		return nvml.ERROR_UNKNOWN
	}
	system := build()
	if rc := system.Init(); rc != nvml.SUCCESS {
		return rc
	}
	if err := applyMigLayout(system); err != nil {
		state.err = fmt.Sprintf("%s: %v", MigLayoutEnv, err)
		fmt.Fprintln(os.Stderr, "nvml-gomock:", state.err)
		return nvml.ERROR_UNKNOWN
	}
	state.server = system
	return nvml.SUCCESS
}

func srv() *server.Server {
	state.Lock()
	defer state.Unlock()
	return state.server
}

func main() {}
