package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/gateway-api/pkg/consts"
)

func cmdInstallCRDs(args []string) error {
	fs := flag.NewFlagSet("install-crds", flag.ContinueOnError)
	channel := fs.String("gateway-api", "experimental", "CRD channel: experimental or standard")
	var skip repeated
	fs.Var(&skip, "skip-crd", "a resource (plural) not to install; repeatable")
	dir, err := parseWithDir(fs, args)
	if err != nil {
		return err
	}
	return installCRDs(dir, *channel, skip)
}

// crdDir is where the build put the Gateway API module's config/crd (see build.sh): beside bin/.
func crdDir(channel string) (string, error) {
	if channel != "standard" && channel != "experimental" {
		return "", fmt.Errorf("unknown Gateway API channel %q (want standard or experimental)", channel)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(self), "..", "crds", channel), nil
}

// installCRDs applies the channel's CRDs (server-side: the experimental HTTPRoute CRD is too
// large for client-side apply's annotation) and waits until each is Established.
func installCRDs(dir, channel string, skip []string) error {
	from, err := crdDir(channel)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var apply []string
	var crds []string
	for _, file := range files {
		base := filepath.Base(file)
		if base == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !bytes.Contains(data, []byte(consts.BundleVersionAnnotation+": "+consts.BundleVersion)) &&
			strings.HasPrefix(base, "gateway.networking") && !strings.Contains(base, "_vap_") {
			return fmt.Errorf("%s is not Gateway API %s", file, consts.BundleVersion)
		}
		// gateway.networking.k8s.io_httproutes.yaml -> httproutes.gateway.networking.k8s.io
		group, plural, ok := strings.Cut(strings.TrimSuffix(base, ".yaml"), "_")
		if ok && contains(skip, plural) {
			continue
		}
		apply = append(apply, "-f", file)
		if ok && !strings.HasPrefix(plural, "vap_") {
			crds = append(crds, "crd/"+plural+"."+group)
		}
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRDs found in %s (was the control plane built with build.sh?)", from)
	}
	if err := kubectl(dir, append([]string{"apply", "--server-side", "--force-conflicts"}, apply...)...); err != nil {
		return err
	}
	return kubectl(dir, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, crds...)...)
}

func contains(list []string, value string) bool {
	for _, item := range list {
		if item == value {
			return true
		}
	}
	return false
}

// kubectl runs the kubectl built beside this program as the cluster admin; its output is
// passed through only on failure.
func kubectl(dir string, args ...string) error {
	_, err := kubectlOutput(dir, args...)
	return err
}

func kubectlOutput(dir string, args ...string) ([]byte, error) {
	program, err := binary("kubectl")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(program, append([]string{"--kubeconfig", filepath.Join(dir, "kubeconfig")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}
