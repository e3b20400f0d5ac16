// Command kubectl is the real kubectl of the release pinned in go.mod.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// Verbosity is parsed before the command is built, as upstream's main does, so that
	// klog honours -v during construction too.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
