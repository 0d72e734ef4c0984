// Command kube is a multi-call binary linking the Kubernetes components the
// e2e harness runs, so that the large dependency graph is compiled and linked
// once instead of five times. It dispatches on the name it was invoked as
// (symlinks named kube-apiserver, kubelet, ...) or on its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	_ "time/tzdata" // CronJob time zones (controller-manager)

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-proxy":              proxy.NewProxyCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

func runKubectl() int {
	// Same order as upstream kubectl: verbosity must be known before the
	// command tree (plugins, kuberc) is built.
	_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args))
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

func usage() int {
	names := []string{"kubectl"}
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: kube COMPONENT [ARGS...] (or invoke via a symlink named COMPONENT)\ncomponents: %v\n", names)
	return 2
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := servers[name]; !ok && name != "kubectl" {
		if len(os.Args) < 2 {
			os.Exit(usage())
		}
		// Shift so that os.Args looks exactly like a direct invocation:
		// cobra and kubectl's plugin handling read os.Args themselves.
		os.Args = os.Args[1:]
		name = os.Args[0]
	}
	if name == "kubectl" {
		os.Exit(runKubectl())
	}
	newCommand, ok := servers[name]
	if !ok {
		os.Exit(usage())
	}
	os.Exit(cli.Run(newCommand()))
}
