// Command pause is the test node's sandbox image: it holds a pod's namespaces and sleeps until
// it is told to stop. No registry is reachable here, so the node cannot pull the usual one.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
