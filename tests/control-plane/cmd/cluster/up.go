package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// repeated collects a flag given several times.
type repeated []string

func (r *repeated) String() string     { return fmt.Sprint(*r) }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func cmdUp(args []string) error {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	channel := fs.String("gateway-api", "experimental", "Gateway API CRD channel to install: experimental, standard or none")
	var skip, extra repeated
	fs.Var(&skip, "skip-crd", "a Gateway API resource (plural) not to install; repeatable")
	fs.Var(&extra, "apiserver-arg", "an extra kube-apiserver argument, e.g. --watch-cache=false; repeatable")
	watchPid := fs.Int("watch-pid", 0, "stop everything when this process exits (for tests)")
	node := fs.Bool("node", false, "also start a node (containerd, kubelet, kube-proxy, scheduler, controller manager); one per machine")
	images := fs.String("images", "", "with --node: a directory of OCI archives (*.tar) to import into the node's containerd, the sandbox image among them")
	dir, err := parseWithDir(fs, args)
	if err != nil {
		return err
	}
	if running(dir) {
		return fmt.Errorf("a cluster already runs under %s (run `down` first)", dir)
	}
	if *node && *images == "" {
		return fmt.Errorf("--node needs --images DIR (tests/control-plane/images.sh makes it)")
	}
	if err := up(dir, extra, *watchPid, *node); err != nil {
		// Leave nothing half-started behind.
		_ = down(dir)
		return err
	}
	if *channel != "none" {
		if err := installCRDs(dir, *channel, skip); err != nil {
			return err
		}
	}
	if *node {
		if err := nodeUp(dir, *images); err != nil {
			_ = down(dir)
			return err
		}
	}
	s, err := readState(dir)
	if err != nil {
		return err
	}
	fmt.Printf("kube-apiserver ready at https://%s:%d\nexport KUBECONFIG=%s\n", s.host(), s.APIServerPort, filepath.Join(dir, "kubeconfig"))
	return nil
}

// parseWithDir parses flags that may stand before or after the one positional DIR, and returns
// DIR as an absolute path.
func parseWithDir(fs *flag.FlagSet, args []string) (string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		return "", fmt.Errorf("want exactly one directory argument, got %q", positional)
	}
	return filepath.Abs(positional[0])
}

// up starts etcd and kube-apiserver under dir, where nothing runs. A directory whose cluster
// was stopped starts afresh: its etcd data and logs go, its certificates stay.
func up(dir string, extraArgs []string, watchPid int, node bool) error {
	for _, sub := range []string{"etcd", "logs", "run"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	for _, sub := range []string{"logs", "run", "etcd", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := ensurePKI(dir); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	var s state
	var err error
	for _, port := range []*int{&s.EtcdClientPort, &s.EtcdPeerPort, &s.APIServerPort} {
		if *port, err = freePort(); err != nil {
			return err
		}
	}
	pki := filepath.Join(dir, "pki")
	var nodeArgs []string
	if node {
		if err := nodePrepare(dir); err != nil {
			return err
		}
		s.APIServerHost = nodeIP
		nodeArgs = nodeAPIServerArgs(dir)
	}
	s.APIServerArgs = append([]string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", s.EtcdClientPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", s.APIServerPort),
		"--cert-dir=" + filepath.Join(dir, "run", "apiserver-certs"),
		"--tls-cert-file=" + filepath.Join(pki, apiserverCert),
		"--tls-private-key-file=" + filepath.Join(pki, apiserverKey),
		"--client-ca-file=" + filepath.Join(pki, caCert),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, saPub),
		"--service-account-signing-key-file=" + filepath.Join(pki, saKey),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		// The kubernetes Service cannot point at a loopback address; nothing here needs it.
		"--endpoint-reconciler-type=none",
	}, append(nodeArgs, extraArgs...)...)
	if err := writeState(dir, s); err != nil {
		return err
	}
	if err := writeKubeconfig(dir, s.host(), s.APIServerPort); err != nil {
		return err
	}
	if kubectl, err := binary("kubectl"); err == nil {
		link := filepath.Join(dir, "bin", "kubectl")
		_ = os.Remove(link)
		if err := os.Symlink(kubectl, link); err != nil {
			return err
		}
	}
	if watchPid > 0 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if _, err := startProcess(dir, watchdogName, self, "watchdog", dir, strconv.Itoa(watchPid)); err != nil {
			return err
		}
	}
	if err := startEtcd(dir, s); err != nil {
		return err
	}
	return startAPIServer(dir)
}

func startEtcd(dir string, s state) error {
	program, err := binary("etcd")
	if err != nil {
		return err
	}
	p, err := startProcess(dir, etcdName, program, "serve",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--client-url", fmt.Sprintf("http://127.0.0.1:%d", s.EtcdClientPort),
		"--peer-url", fmt.Sprintf("http://127.0.0.1:%d", s.EtcdPeerPort))
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Second}
	health := fmt.Sprintf("http://127.0.0.1:%d/health", s.EtcdClientPort)
	return p.waitFor(dir, 60*time.Second, func() bool { return httpReady(client, health) })
}

func startAPIServer(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	s, err := readState(dir)
	if err != nil {
		return err
	}
	program, err := binary("kube-apiserver")
	if err != nil {
		return err
	}
	p, err := startProcess(dir, apiserverName, program, s.APIServerArgs...)
	if err != nil {
		return err
	}
	client, err := adminClient(dir)
	if err != nil {
		return err
	}
	readyz := fmt.Sprintf("https://%s:%d/readyz", s.host(), s.APIServerPort)
	return p.waitFor(dir, 180*time.Second, func() bool { return httpReady(client, readyz) })
}

// compact makes etcd's history start after every revision anyone has seen so far: a watcher
// that resumes from an older resourceVersion gets 410 Gone and must relist.
func compact(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	s, err := readState(dir)
	if err != nil {
		return err
	}
	program, err := binary("etcd")
	if err != nil {
		return err
	}
	cmd := exec.Command(program, "compact", "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", s.EtcdClientPort), "--bump", "3")
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

// cmdWatchdog stops the cluster under DIR once process PID is gone, so a test binary that
// dies without cleaning up leaves nothing running. It ends by itself when `down` removed the
// cluster's pid files.
func cmdWatchdog(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: watchdog DIR PID")
	}
	dir := args[0]
	pid, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	for {
		time.Sleep(500 * time.Millisecond)
		if _, err := os.Stat(pidPath(dir, etcdName)); os.IsNotExist(err) {
			if _, err := os.Stat(pidPath(dir, apiserverName)); os.IsNotExist(err) {
				return nil
			}
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			fmt.Printf("process %d is gone; stopping the cluster\n", pid)
			// Everything but this watchdog, which removes its own pid file last.
			err := stopAll(dir, false)
			_ = os.Remove(pidPath(dir, watchdogName))
			return err
		}
	}
}
