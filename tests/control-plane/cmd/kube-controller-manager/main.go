// Command kube-controller-manager is the real Kubernetes controller manager (ReplicaSets, the
// default ServiceAccount, kube-root-ca.crt), built from the k8s.io/kubernetes module at the
// release pinned in go.mod, for the test node (cluster node-up).
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
