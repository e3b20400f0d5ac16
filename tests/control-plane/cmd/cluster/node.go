package main

// One real node beside the control plane: containerd (its own config, root, state and socket),
// the kubelet, kube-proxy (iptables mode), kube-scheduler and kube-controller-manager, with a
// CNI bridge of its own. Pods reach the API server, and it reaches them, over that bridge only:
// the bridge's address is the node's address and the API server's advertised address, so no
// traffic of the node leaves the machine.
//
// One node per machine: it uses fixed ports (10250, 10248, 10249, 10256, 10257, 10259), one
// bridge and global iptables rules. What the node changes on the machine (sysctls, iptables
// rules, cgroups, mounts, the bridge) is recorded at start and restored by node-down.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

const (
	nodeName   = "gateway-dns-node"
	nodeBridge = "gwdns0"
	// The node's address is the bridge's, in a range of its own; podCIDR is the bridge's subnet.
	nodeIP  = "10.244.0.1"
	podCIDR = "10.244.0.0/24"
	// Pods have a route to Services (through the node) and to each other, and no default route:
	// nothing they send can leave the machine.
	serviceCIDR = "10.96.0.0/16"
	// containerd's sockets need a short path (108 bytes at most); one node per machine.
	nodeRunDir = "/run/gateway-dns-node"

	containerdName = "containerd"
	kubeletName    = "kubelet"
	kubeProxyName  = "kube-proxy"
	schedulerName  = "kube-scheduler"
	kcmName        = "kube-controller-manager"

	// The sandbox image, built by tests/control-plane/images.sh.
	pauseImage = "localhost/gateway-dns-test/pause:1"
)

// nodeSysctls are the kernel settings the kubelet, kube-proxy and the bridge plugin change.
var nodeSysctls = []string{
	"kernel/panic",
	"kernel/panic_on_oops",
	"vm/overcommit_memory",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max",
}

// nodeState is what node-up found on the machine, for node-down to put back.
type nodeState struct {
	Sysctls     map[string]string `json:"sysctls"`
	IPTables    string            `json:"iptables"`
	IP6Tables   string            `json:"ip6tables"`
	Cgroups     []string          `json:"cgroups"`
	VarLibCNI   bool              `json:"varLibCni"`
	BridgeAdded bool              `json:"bridgeAdded"`
}

func nodeDir(dir string) string        { return filepath.Join(dir, "node") }
func nodeStatePath(dir string) string  { return filepath.Join(dir, "run", "node.json") }
func containerdSocket() string         { return filepath.Join(nodeRunDir, "containerd.sock") }
func nodeFile(dir, name string) string { return filepath.Join(nodeDir(dir), name) }

// nodeAPIServerArgs are the API server's flags for a cluster with a node: it listens on the
// node's address (the pods' way in, through the kubernetes Service) and keeps that Service's
// endpoints itself.
func nodeAPIServerArgs(dir string) []string {
	pki := filepath.Join(dir, "pki")
	return []string{
		// kubectl logs and exec reach the kubelet with the admin's certificate.
		"--kubelet-client-certificate=" + filepath.Join(pki, adminCert),
		"--kubelet-client-key=" + filepath.Join(pki, adminKey),
		"--bind-address=" + nodeIP,
		"--advertise-address=" + nodeIP,
		"--endpoint-reconciler-type=lease",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	}
}

// checkNodeMachine refuses to start a second node, or one whose range the machine already uses.
func checkNodeMachine() error {
	if _, err := os.Stat(nodeRunDir); err == nil {
		return fmt.Errorf("%s exists: a node already runs on this machine (or was not stopped: run `down` on its directory)", nodeRunDir)
	}
	_, ours, _ := net.ParseCIDR(podCIDR)
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, iface := range ifaces {
		if iface.Name == nodeBridge {
			return fmt.Errorf("the bridge %s exists already (a node left behind?)", nodeBridge)
		}
		addrs, _ := iface.Addrs()
		for _, addr := range addrs {
			if ip, _, err := net.ParseCIDR(addr.String()); err == nil && ours.Contains(ip) {
				return fmt.Errorf("%s uses %s, inside the node's range %s", iface.Name, ip, podCIDR)
			}
		}
	}
	for _, program := range []string{"containerd", "runc", "iptables", "iptables-save", "iptables-restore", "ip", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap"} {
		if _, err := exec.LookPath(program); err != nil {
			return fmt.Errorf("the node needs %s (Debian packages containerd runc containernetworking-plugins iptables iproute2): %w", program, err)
		}
	}
	return nil
}

// recordMachine notes what the node will change.
func recordMachine() (nodeState, error) {
	s := nodeState{Sysctls: map[string]string{}}
	for _, key := range nodeSysctls {
		if data, err := os.ReadFile(filepath.Join("/proc/sys", key)); err == nil {
			s.Sysctls[key] = strings.TrimSpace(string(data))
		}
	}
	var err error
	if s.IPTables, err = commandOutput("iptables-save"); err != nil {
		return s, err
	}
	if s.IP6Tables, err = commandOutput("ip6tables-save"); err != nil {
		return s, err
	}
	s.Cgroups = topCgroups()
	_, err = os.Stat("/var/lib/cni")
	s.VarLibCNI = err == nil
	return s, nil
}

func commandOutput(program string, args ...string) (string, error) {
	out, err := exec.Command(program, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", program, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// topCgroups lists the directories at the top of every cgroup hierarchy (v1: one per controller).
func topCgroups() []string {
	var found []string
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		entries, err := os.ReadDir(h)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				found = append(found, filepath.Join(h, e.Name()))
			}
		}
	}
	sort.Strings(found)
	return found
}

// nodePrepare records the machine and makes the bridge before the API server binds its address.
func nodePrepare(dir string) error {
	if err := checkNodeMachine(); err != nil {
		return err
	}
	s, err := recordMachine()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(nodeRunDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(nodeRunDir, "owner"), []byte(dir), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", nodeBridge, "type", "bridge"},
		{"addr", "add", nodeIP + "/24", "dev", nodeBridge},
		{"link", "set", nodeBridge, "up"},
	} {
		if _, err := commandOutput("ip", args...); err != nil {
			_ = writeNodeState(dir, s)
			return err
		}
		s.BridgeAdded = true
	}
	return writeNodeState(dir, s)
}

func writeNodeState(dir string, s nodeState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(nodeStatePath(dir), data, 0o644)
}

// nodeUp starts containerd, imports the images under imagesDir (OCI archives), then the kubelet,
// kube-proxy and the two controllers, and waits until the node is Ready.
func nodeUp(dir, imagesDir string) error {
	s, err := readState(dir)
	if err != nil {
		return err
	}
	for _, sub := range []string{"containerd", "cni", "cni-ipam", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(nodeFile(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := writeNodeConfigs(dir, s); err != nil {
		return err
	}
	program, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	p, err := startProcess(dir, containerdName, program, "--config", nodeFile(dir, "containerd/config.toml"))
	if err != nil {
		return err
	}
	if err := p.waitFor(dir, 30*time.Second, func() bool {
		return exec.Command("ctr", "--address", containerdSocket(), "version").Run() == nil
	}); err != nil {
		return err
	}
	archives, _ := filepath.Glob(filepath.Join(imagesDir, "*.tar"))
	for _, archive := range archives {
		if _, err := commandOutput("ctr", "--address", containerdSocket(), "-n", "k8s.io", "images", "import", "--all-platforms", archive); err != nil {
			return err
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	pki := filepath.Join(dir, "pki")
	steps := []struct {
		name string
		args []string
	}{
		{kubeletName, []string{
			"--config=" + nodeFile(dir, "kubelet.yaml"),
			"--kubeconfig=" + kubeconfig,
			"--hostname-override=" + nodeName,
			"--node-ip=" + nodeIP,
			"--root-dir=" + nodeFile(dir, "kubelet"),
			"--cert-dir=" + nodeFile(dir, "kubelet/pki"),
		}},
		{kubeProxyName, []string{"--config=" + nodeFile(dir, "kube-proxy.yaml"), "--hostname-override=" + nodeName}},
		{schedulerName, []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=10259",
		}},
		{kcmName, []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=10257",
			"--controllers=*",
			"--use-service-account-credentials",
			"--service-account-private-key-file=" + filepath.Join(pki, saKey),
			"--root-ca-file=" + filepath.Join(pki, caCert),
			"--cluster-cidr=" + podCIDR,
			"--service-cluster-ip-range=" + serviceCIDR,
		}},
	}
	for _, step := range steps {
		program, err := binary(step.name)
		if err != nil {
			return err
		}
		if _, err := startProcess(dir, step.name, program, step.args...); err != nil {
			return err
		}
	}
	// Ready, with the default ServiceAccount that pods need.
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		out, err := kubectlOutput(dir, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && strings.TrimSpace(string(out)) == "True" {
			if _, err := kubectlOutput(dir, "get", "serviceaccount", "default", "-n", "default"); err == nil {
				return nil
			}
		}
		for _, name := range []string{containerdName, kubeletName, kubeProxyName, schedulerName, kcmName} {
			if !processRunning(dir, name) {
				return fmt.Errorf("%s exited during start-up:\n%s", name, logTail(dir, name))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready within 120s:\n%s", nodeName, logTail(dir, kubeletName))
}

func processRunning(dir, name string) bool {
	data, err := os.ReadFile(pidPath(dir, name))
	if err != nil {
		return false
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		return false
	}
	return alive(dir, pid)
}

func writeNodeConfigs(dir string, s state) error {
	containerd := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, nodeFile(dir, "containerd/root"), filepath.Join(nodeRunDir, "state"), containerdSocket(),
		containerdSocket()+".ttrpc", nodeFile(dir, "containerd/opt"), pauseImage, nodeFile(dir, "cni"))
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "gateway-dns-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, nodeBridge, podCIDR, nodeIP, serviceCIDR, nodeFile(dir, "cni-ipam"))
	// Pods resolve through the node's address, where nothing answers: no lookup leaves the
	// machine (there is no cluster DNS; gateway-dns needs none).
	resolv := fmt.Sprintf("nameserver %s\n", nodeIP)
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
# The machine has cgroup v1 and swap may be on.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
podCIDR: %s
hairpinMode: hairpin-veth
resolvConf: %q
podLogsDir: %q
registerNode: true
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: "2%%"
  imagefs.available: "2%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
`, nodeIP, filepath.Join(dir, "pki", caCert), containerdSocket(), containerdSocket(), podCIDR,
		nodeFile(dir, "resolv.conf"), nodeFile(dir, "pod-logs"))
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
clusterCIDR: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts on the node's address and on loopback, nowhere else.
nodePortAddresses: ["%s/32", "127.0.0.1/32"]
# Leave the machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, filepath.Join(dir, "kubeconfig"), podCIDR, nodeIP)
	files := map[string]string{
		"containerd/config.toml":      containerd,
		"cni/10-gateway-dns.conflist": cni,
		"resolv.conf":                 resolv,
		"kubelet.yaml":                kubelet,
		"kube-proxy.yaml":             proxy,
	}
	for name, content := range files {
		if err := os.WriteFile(nodeFile(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// nodeDown stops the node and puts back what it changed, in the order that lets each part
// clean up after itself: the controllers (nothing recreates pods), the pods (the kubelet runs
// CNI DEL and unmounts their volumes), the kubelet and kube-proxy, containerd and its shims;
// then mounts, the bridge, iptables, sysctls and cgroups. Idempotent; without a node it does
// nothing.
func nodeDown(dir string) error {
	data, err := os.ReadFile(nodeStatePath(dir))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var s nodeState
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s: %w", nodeStatePath(dir), err)
	}
	var problems []string
	note := func(err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	note(stopProcess(dir, kcmName))
	note(stopProcess(dir, schedulerName))
	if processRunning(dir, kubeletName) && processRunning(dir, apiserverName) {
		_, _ = kubectlOutput(dir, "delete", "pods", "--all", "--all-namespaces", "--force", "--grace-period=0", "--wait=false")
		// The kubelet stops the sandboxes (CNI DEL) once it sees the pods gone.
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && len(sandboxes()) > 0 {
			time.Sleep(250 * time.Millisecond)
		}
	}
	note(stopProcess(dir, kubeletName))
	note(stopProcess(dir, kubeProxyName))
	if program, err := binary(kubeProxyName); err == nil {
		_, _ = commandOutput(program, "--cleanup", "--config="+nodeFile(dir, "kube-proxy.yaml"))
	}
	// Whatever sandbox is left is stopped through containerd directly.
	for _, id := range sandboxes() {
		_, _ = commandOutput("ctr", "--address", containerdSocket(), "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
	}
	note(stopProcess(dir, containerdName))
	killShims()
	note(unmountUnder(dir, nodeDir(dir), nodeRunDir))
	if s.BridgeAdded {
		if _, err := os.Stat("/sys/class/net/" + nodeBridge); err == nil {
			_, err := commandOutput("ip", "link", "delete", nodeBridge)
			note(err)
		}
	}
	// Veths the bridge plugin made go with their network namespaces; any left are removed.
	if links, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, l := range links {
			if master, err := os.Readlink(filepath.Join("/sys/class/net", l.Name(), "master")); err == nil && filepath.Base(master) == nodeBridge {
				_, _ = commandOutput("ip", "link", "delete", l.Name())
			}
		}
	}
	note(restoreRules("iptables", s.IPTables))
	note(restoreRules("ip6tables", s.IP6Tables))
	for key, value := range s.Sysctls {
		path := filepath.Join("/proc/sys", key)
		if current, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(current)) != value {
			note(os.WriteFile(path, []byte(value+"\n"), 0o644))
		}
	}
	before := map[string]bool{}
	for _, c := range s.Cgroups {
		before[c] = true
	}
	for _, c := range topCgroups() {
		if !before[c] {
			note(removeCgroup(c))
		}
	}
	if !s.VarLibCNI {
		note(os.RemoveAll("/var/lib/cni"))
	}
	note(os.RemoveAll(nodeRunDir))
	if len(problems) > 0 {
		return fmt.Errorf("node-down: %s", strings.Join(problems, "; "))
	}
	return os.Remove(nodeStatePath(dir))
}

// sandboxes lists the pod sandboxes containerd still runs.
func sandboxes() []string {
	out, err := exec.Command("ctr", "--address", containerdSocket(), "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// killShims stops containerd's runc shims for this node's socket (they outlive containerd).
func killShims() {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range procs {
		cmdline, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(cmdline), "containerd-shim") || !strings.Contains(string(cmdline), nodeRunDir) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(path, "/proc/%d/cmdline", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount point below the given directories, deepest first. A point
// mounted twice (the kubelet bind-mounts its root onto itself) takes more than one pass.
func unmountUnder(dirs ...string) error {
	var failed []string
	for pass := 0; pass < 5; pass++ {
		points, err := mountsUnder(dirs)
		if err != nil || len(points) == 0 {
			return err
		}
		failed = failed[:0]
		for _, point := range points {
			if err := syscall.Unmount(point, 0); err != nil && err != syscall.EINVAL {
				if err := syscall.Unmount(point, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
					failed = append(failed, fmt.Sprintf("%s: %v", point, err))
				}
			}
		}
	}
	if points, err := mountsUnder(dirs); err != nil || len(points) > 0 {
		return fmt.Errorf("still mounted: %s (%v)", strings.Join(append(points, failed...), ", "), err)
	}
	return nil
}

// mountsUnder lists the mount points below dirs, deepest first.
func mountsUnder(dirs []string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		point := strings.ReplaceAll(fields[4], `\040`, " ")
		for _, d := range dirs {
			if strings.HasPrefix(point, d+"/") || point == d {
				points = append(points, point)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points, scanner.Err()
}

// restoreRules puts back the rules saved before the node started: every table is emptied (the
// kubelet's and kube-proxy's chains go), then the saved rules are loaded.
func restoreRules(family, saved string) error {
	for _, table := range []string{"filter", "nat", "mangle", "raw", "security"} {
		for _, op := range []string{"-F", "-X"} {
			// A table the kernel does not have is not an error.
			_ = exec.Command(family, "-t", table, op).Run()
		}
	}
	if strings.TrimSpace(saved) == "" {
		return nil
	}
	cmd := exec.Command(family + "-restore")
	cmd.Stdin = strings.NewReader(saved)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w\n%s", family, err, out)
	}
	return nil
}

// removeCgroup removes a cgroup directory and the ones below it, deepest first (a cgroup
// directory is removed with rmdir, never by deleting its files).
func removeCgroup(path string) error {
	var dirs []string
	_ = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("rmdir %s: %w", d, err)
		}
	}
	return nil
}
