package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	etcdName      = "etcd"
	apiserverName = "kube-apiserver"
	watchdogName  = "watchdog"
)

// state is what `up` decided, kept in DIR/run/state.json so later subcommands (restarts,
// compaction) use the same ports and arguments.
type state struct {
	EtcdClientPort int      `json:"etcdClientPort"`
	EtcdPeerPort   int      `json:"etcdPeerPort"`
	APIServerPort  int      `json:"apiServerPort"`
	APIServerArgs  []string `json:"apiServerArgs"`
	// APIServerHost is the address the API server listens on: loopback, or the node's address
	// when the cluster has a node.
	APIServerHost string `json:"apiServerHost,omitempty"`
}

func (s state) host() string {
	if s.APIServerHost == "" {
		return "127.0.0.1"
	}
	return s.APIServerHost
}

func statePath(dir string) string { return filepath.Join(dir, "run", "state.json") }

func readState(dir string) (state, error) {
	var s state
	data, err := os.ReadFile(statePath(dir))
	if err != nil {
		return s, fmt.Errorf("no cluster under %s (run `up` first): %w", dir, err)
	}
	return s, json.Unmarshal(data, &s)
}

func writeState(dir string, s state) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(statePath(dir), data, 0o644)
}

// freePort is an unused loopback port for a server this tool starts (etcd, kube-apiserver).
func freePort() (int, error) {
	return pickPort(false)
}

// freeDualPort is a loopback port free for both TCP and UDP (a DNS server needs both).
func freeDualPort() (int, error) {
	return pickPort(true)
}

// pickPort picks a free loopback port below the kernel's ephemeral range
// (ip_local_port_range): a port the kernel picks lies in that range, where any outgoing
// connection may take it between the pick and the server's bind (etcd once failed to start
// so on a busy machine). Below the range only a listener takes a port.
func pickPort(udpToo bool) (int, error) {
	start := ephemeralStart()
	if start <= 11000 {
		return kernelPort(udpToo)
	}
	for i := 0; i < 1000; i++ {
		port := 10000 + rand.IntN(start-10000)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		tcp, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if udpToo {
			udp, err := net.ListenPacket("udp", addr)
			if err != nil {
				tcp.Close()
				continue
			}
			udp.Close()
		}
		tcp.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port below %d after 1000 tries", start)
}

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if fields := strings.Fields(string(data)); len(fields) > 0 {
			if n, err := strconv.Atoi(fields[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}

// kernelPort is the kernel's pick, for a range that leaves no room below it.
func kernelPort(udpToo bool) (int, error) {
	for i := 0; i < 100; i++ {
		if !udpToo {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, err
			}
			defer l.Close()
			return l.Addr().(*net.TCPAddr).Port, nil
		}
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := udp.LocalAddr().(*net.UDPAddr).Port
		tcp, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		udp.Close()
		if err == nil {
			tcp.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no loopback port free for both TCP and UDP after 100 tries")
}

func cmdFreePorts(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: free-ports N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 100 {
		return fmt.Errorf("free-ports wants a count from 1 to 100, got %q", args[0])
	}
	seen := map[int]bool{}
	for len(seen) < n {
		port, err := freeDualPort()
		if err != nil {
			return err
		}
		if !seen[port] {
			seen[port] = true
			fmt.Println(port)
		}
	}
	return nil
}

// binary is a program built beside this one.
func binary(name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not built beside %s: %w", name, self, err)
	}
	return path, nil
}

// started is a process running in its own session (it outlives this command), with a channel
// that closes if it exits while this command still waits for it.
type started struct {
	name   string
	pid    int
	exited chan struct{}
}

func startProcess(dir, name, program string, args ...string) (*started, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(program, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(pidPath(dir, name), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return &started{name: name, pid: pid, exited: exited}, nil
}

func pidPath(dir, name string) string { return filepath.Join(dir, "run", name+".pid") }

// waitFor polls ready every 100 ms until it holds, the process exits, or the limit passes.
func (p *started) waitFor(dir string, limit time.Duration, ready func() bool) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if ready() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, logTail(dir, p.name))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %s:\n%s", p.name, limit, logTail(dir, p.name))
}

func logTail(dir, name string) string {
	data, err := os.ReadFile(filepath.Join(dir, "logs", name+".log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// alive tells whether pid is a running process started for dir: its command line names the
// directory, so a pid reused by an unrelated process is never signalled. Zombies count as gone.
func alive(dir string, pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// stopProcess sends SIGTERM, waits up to 20 s, then SIGKILL. A missing pid file or a process
// already gone is not an error.
func stopProcess(dir, name string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pidPath(dir, name))
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: bad pid file: %w", name, err)
	}
	if alive(dir, pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(20 * time.Second)
		for alive(dir, pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(dir, pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; i < 100 && alive(dir, pid); i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return os.Remove(pidPath(dir, name))
}

// running tells whether any process with a pid file under DIR/run is alive.
func running(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && alive(dir, pid) {
			return true
		}
	}
	return false
}

// down stops every process with a pid file under DIR/run (the API server before etcd, anything
// else a script added there, such as gateway-dns, first of all).
func down(dir string) error { return stopAll(dir, true) }

func stopAll(dir string, withWatchdog bool) error {
	// The node first, while the API server still runs: its pods are deleted through it. The
	// rest is stopped even when the node could not put everything back.
	nodeErr := nodeDown(dir)
	entries, err := os.ReadDir(filepath.Join(dir, "run"))
	if os.IsNotExist(err) {
		return nodeErr
	} else if err != nil {
		return err
	}
	var others []string
	for _, entry := range entries {
		name, ok := strings.CutSuffix(entry.Name(), ".pid")
		if ok && name != apiserverName && name != etcdName && name != watchdogName {
			others = append(others, name)
		}
	}
	names := append(others, apiserverName, etcdName)
	if withWatchdog {
		names = append(names, watchdogName)
	}
	for _, name := range names {
		if err := stopProcess(dir, name); err != nil {
			return err
		}
	}
	return nodeErr
}

// httpReady reports whether GET url answers 200 within a second.
func httpReady(client *http.Client, url string) bool {
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// adminClient is an HTTPS client that trusts the cluster CA and presents the admin certificate.
func adminClient(dir string) (*http.Client, error) {
	pki := filepath.Join(dir, "pki")
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, adminCert), filepath.Join(pki, adminKey))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, caCert))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{
		Timeout: time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{pair},
		}},
	}, nil
}
