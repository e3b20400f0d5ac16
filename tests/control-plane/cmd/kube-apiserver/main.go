// Command kube-apiserver is the real Kubernetes API server, built from the k8s.io/kubernetes
// module at the release pinned in go.mod, for gateway-dns's tests and dev cluster.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
