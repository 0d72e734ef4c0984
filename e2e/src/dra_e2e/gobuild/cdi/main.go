// cdi-validate: CDI spec files through the CDI library a container runtime uses.
//
// Usage: cdi-validate [--inject QUALIFIED-NAME]... SPEC-FILE...
//
// Each file is read with the library's ReadSpec (strict decoding, the spec's
// semantic validation), then all of them are loaded into one spec cache, as
// containerd and CRI-O load /etc/cdi and /var/run/cdi, and every device of the
// cache, and every --inject name, is injected alone into an empty OCI spec.
// Prints {"devices": [...]} (the cache's qualified device names) on success;
// on failure prints each of the library's messages to stderr and exits 1.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

func main() {
	var inject, files []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		if args[i] == "--inject" && i+1 < len(args) {
			inject = append(inject, args[i+1])
			i++
			continue
		}
		files = append(files, args[i])
	}
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "usage: cdi-validate [--inject QUALIFIED-NAME]... SPEC-FILE...")
		os.Exit(2)
	}
	problems, devices := validate(files, inject)
	for _, problem := range problems {
		fmt.Fprintln(os.Stderr, problem)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string][]string{"devices": devices})
	fmt.Println(string(out))
}

func validate(files, inject []string) ([]string, []string) {
	var problems []string
	dir, err := os.MkdirTemp("", "cdi-validate-")
	if err != nil {
		return []string{err.Error()}, nil
	}
	defer os.RemoveAll(dir)
	for _, path := range files {
		if _, err := cdi.ReadSpec(path, 0); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		target := filepath.Join(dir, filepath.Base(path))
		if _, err := os.Stat(target); err == nil {
			problems = append(problems, fmt.Sprintf("%s: a spec file of this name is given twice", path))
			continue
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			problems = append(problems, err.Error())
		}
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return append(problems, fmt.Sprintf("cache: %v", err)), nil
	}
	if err := cache.Refresh(); err != nil {
		problems = append(problems, fmt.Sprintf("cache: %v", err))
	}
	devices := cache.ListDevices()
	sort.Strings(devices)
	for _, device := range union(devices, inject) {
		if _, err := cache.InjectDevices(&oci.Spec{}, device); err != nil {
			problems = append(problems, fmt.Sprintf("inject %s: %v", device, err))
		}
	}
	return problems, devices
}

// union: the names of both lists, each once, in order.
func union(first, second []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range append(append([]string{}, first...), second...) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}
