package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MigLayoutEnv names the environment variable with MIG devices that exist from the first
// nvmlInit on, as on a node whose MIG devices were made before any process looks: a comma
// list of <GPU index>:<GPU instance profile id>@<placement start>, e.g. "0:19@0,0:14@2,1:0@0".
// Each GPU named gets MIG mode on and, for each entry in order, a GPU instance with one
// compute instance spanning it. A separate process (nvidia-ctk) sees the same devices.
const MigLayoutEnv = "DRA_NVML_MOCK_MIG"

type migEntry struct {
	gpu, profileID, start int
}

func parseMigLayout(text string) ([]migEntry, error) {
	var out []migEntry
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		gpu, rest, ok1 := strings.Cut(item, ":")
		profile, start, ok2 := strings.Cut(rest, "@")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%q is not <gpu>:<profile id>@<start>", item)
		}
		var e migEntry
		var err error
		for _, f := range []struct {
			s   string
			dst *int
		}{{gpu, &e.gpu}, {profile, &e.profileID}, {start, &e.start}} {
			if *f.dst, err = strconv.Atoi(f.s); err != nil {
				return nil, fmt.Errorf("%q: %v", item, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// fullComputeProfile is the compute instance profile (shared engines) spanning gi.
func fullComputeProfile(gi *server.GpuInstance, slices uint32) (nvml.ComputeInstanceProfileInfo, bool) {
	for index := 0; index < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; index++ {
		info, rc := gi.GetComputeInstanceProfileInfo(index, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if rc == nvml.SUCCESS && info.SliceCount == slices {
			return info, true
		}
	}
	return nvml.ComputeInstanceProfileInfo{}, false
}

// applyMigLayout makes the MIG devices of MigLayoutEnv (called once, by the first init).
func applyMigLayout(s *server.Server) error {
	entries, err := parseMigLayout(os.Getenv(MigLayoutEnv))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.gpu < 0 || e.gpu >= len(s.Devices) {
			return fmt.Errorf("GPU %d: the system has %d", e.gpu, len(s.Devices))
		}
		d, ok := s.Devices[e.gpu].(*server.Device)
		if !ok {
			return fmt.Errorf("GPU %d is not a mock server device", e.gpu)
		}
		if _, rc := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); rc != nvml.SUCCESS {
			return fmt.Errorf("GPU %d: enabling MIG: %v", e.gpu, rc)
		}
		profile, ok := giProfileByID(d, uint32(e.profileID))
		if !ok {
			return fmt.Errorf("GPU %d has no GPU instance profile %d", e.gpu, e.profileID)
		}
		placement := nvml.GpuInstancePlacement{Start: uint32(e.start), Size: profile.SliceCount}
		made, rc := d.CreateGpuInstanceWithPlacement(&profile, &placement)
		if rc != nvml.SUCCESS {
			return fmt.Errorf("GPU %d: GPU instance %d@%d: %v", e.gpu, e.profileID, e.start, rc)
		}
		gi := made.(*server.GpuInstance)
		ciProfile, ok := fullComputeProfile(gi, profile.SliceCount)
		if !ok {
			return fmt.Errorf("GPU %d: no compute instance profile of %d slices", e.gpu, profile.SliceCount)
		}
		if _, rc := gi.CreateComputeInstance(&ciProfile); rc != nvml.SUCCESS {
			return fmt.Errorf("GPU %d: compute instance in GPU instance %d: %v", e.gpu, gi.Info.Id, rc)
		}
	}
	return nil
}
