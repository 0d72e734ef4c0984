// Command kwok-stages prints the Stage objects kwokctl gives its kwok controller by default
// (node-fast with a lease heartbeat, pod-fast), as embedded in the pinned kwok release, so
// the harness runs kwok with exactly its own stage lifecycle and no copied YAML.
//
// It also blank-imports the packages of kwok's own main (cmd/kwok), so this module's
// go.sum covers "go build sigs.k8s.io/kwok/cmd/kwok", which the harness builds next to it.
package main

import (
	"fmt"
	"strings"

	_ "github.com/spf13/pflag"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeatwithlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	_ "sigs.k8s.io/kwok/pkg/config"
	_ "sigs.k8s.io/kwok/pkg/kwok/cmd"
	_ "sigs.k8s.io/kwok/pkg/log"
	_ "sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeatwithlease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, stage := range stages {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Print(strings.TrimRight(stage, "\n") + "\n")
	}
}
