// Command cluster starts and stops a real Kubernetes control plane (embedded etcd and
// kube-apiserver, built beside it from the Kubernetes Go modules) on loopback, for gateway-dns's
// tests and for scripts/dev-cluster. Everything it starts lives under one directory:
//
//	DIR/pki         certificates and the service-account signing key
//	DIR/etcd        etcd's data
//	DIR/logs        one log per process
//	DIR/run         pid files and state.json (ports, the apiserver's arguments)
//	DIR/kubeconfig  admin (system:masters, by client certificate)
//	DIR/bin/kubectl the kubectl of the same release
//
// Subcommands:
//
//	up DIR [--gateway-api experimental|standard|none] [--skip-crd PLURAL]... [--watch-pid PID]
//	       [--apiserver-arg ARG]...
//	down DIR                    stop everything started under DIR (by pid; idempotent)
//	stop-apiserver DIR          stop kube-apiserver only (etcd keeps the state)
//	start-apiserver DIR         start it again with the same arguments and port
//	compact DIR                 bump and compact etcd's history (watchers behind it get 410)
//	install-crds DIR [--gateway-api CHANNEL] [--skip-crd PLURAL]...
//	gateway-address DIR NS/NAME ADDRESS...
//	webhook-config --manifest FILE --url URL --ca-file FILE
//	free-ports N                loopback ports free for both TCP and UDP right now
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fatal(fmt.Errorf("usage: cluster up|down|stop-apiserver|start-apiserver|compact|install-crds|gateway-address|webhook-config|free-ports ..."))
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "up":
		err = cmdUp(args)
	case "down":
		err = withDir(args, down)
	case "stop-apiserver":
		err = withDir(args, func(dir string) error { return stopProcess(dir, apiserverName) })
	case "start-apiserver":
		err = withDir(args, startAPIServer)
	case "compact":
		err = withDir(args, compact)
	case "install-crds":
		err = cmdInstallCRDs(args)
	case "gateway-address":
		err = cmdGatewayAddress(args)
	case "webhook-config":
		err = cmdWebhookConfig(args)
	case "free-ports":
		err = cmdFreePorts(args)
	case "watchdog":
		err = cmdWatchdog(args)
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cluster:", err)
	os.Exit(1)
}

func withDir(args []string, run func(dir string) error) error {
	if len(args) != 1 {
		return fmt.Errorf("want exactly one argument: the cluster directory")
	}
	return run(args[0])
}
