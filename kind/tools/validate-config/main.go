// Command validate-config decodes kind cluster configs with kind's own v1alpha4 types, strictly:
// an unknown or misspelled field, a wrong type or a wrong apiVersion/kind fails with the file
// named. kind itself cannot run on every machine (it needs privileged Docker containers), but
// its config types can be checked anywhere.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

func validate(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cluster v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &cluster); err != nil {
		return err
	}
	if cluster.APIVersion != "kind.x-k8s.io/v1alpha4" || cluster.Kind != "Cluster" {
		return fmt.Errorf("apiVersion/kind is %q/%q, want kind.x-k8s.io/v1alpha4/Cluster",
			cluster.APIVersion, cluster.Kind)
	}
	if len(cluster.Nodes) == 0 {
		return fmt.Errorf("no nodes")
	}
	for i, node := range cluster.Nodes {
		if node.Role != v1alpha4.ControlPlaneRole && node.Role != v1alpha4.WorkerRole {
			return fmt.Errorf("nodes[%d].role %q is neither control-plane nor worker", i, node.Role)
		}
		for j, m := range node.ExtraMounts {
			if m.HostPath == "" || m.ContainerPath == "" {
				return fmt.Errorf("nodes[%d].extraMounts[%d] needs hostPath and containerPath", i, j)
			}
		}
	}
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: validate-config FILE...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := validate(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: ok\n", path)
	}
	if failed {
		os.Exit(1)
	}
}
