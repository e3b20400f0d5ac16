package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// cmdGatewayAddress does what a Gateway controller would: it writes status.addresses and the
// Accepted/Programmed conditions through the status subresource. No address means the
// controller lost it (Programmed=False, AddressNotAssigned).
func cmdGatewayAddress(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: gateway-address DIR NAMESPACE/NAME [ADDRESS...]")
	}
	dir := args[0]
	namespace, name, ok := strings.Cut(args[1], "/")
	if !ok || namespace == "" || name == "" {
		return fmt.Errorf("%q is not NAMESPACE/NAME", args[1])
	}
	out, err := kubectlOutput(dir, "get", "gateways.gateway.networking.k8s.io", name, "-n", namespace, "-o", "jsonpath={.metadata.generation}")
	if err != nil {
		return err
	}
	generation, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return fmt.Errorf("generation of %s/%s: %w", namespace, name, err)
	}
	addresses := []map[string]string{}
	for _, value := range args[2:] {
		kind := "Hostname"
		if net.ParseIP(value) != nil {
			kind = "IPAddress"
		}
		addresses = append(addresses, map[string]string{"type": kind, "value": value})
	}
	now := time.Now().UTC().Format(time.RFC3339)
	condition := func(kind, status, reason, message string) map[string]any {
		return map[string]any{"type": kind, "status": status, "reason": reason, "message": message,
			"observedGeneration": generation, "lastTransitionTime": now}
	}
	programmed := condition("Programmed", "True", "Programmed", "addresses assigned by the test controller")
	if len(addresses) == 0 {
		programmed = condition("Programmed", "False", "AddressNotAssigned", "no address assigned")
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses":  addresses,
		"conditions": []map[string]any{condition("Accepted", "True", "Accepted", "accepted by the test controller"), programmed},
	}})
	if err != nil {
		return err
	}
	return kubectl(dir, "patch", "gateways.gateway.networking.k8s.io", name, "-n", namespace,
		"--subresource=status", "--type=merge", "-p", string(patch))
}

// cmdWebhookConfig prints the project's ValidatingWebhookConfiguration with a url clientConfig
// and a caBundle instead of the in-cluster Service, everything else (rules, failurePolicy,
// matchPolicy, sideEffects, timeoutSeconds, selectors) as the manifest says.
func cmdWebhookConfig(args []string) error {
	fs := flag.NewFlagSet("webhook-config", flag.ContinueOnError)
	manifest := fs.String("manifest", "", "the ValidatingWebhookConfiguration YAML (required)")
	url := fs.String("url", "", "the webhook's URL, e.g. https://127.0.0.1:8443/validate (required)")
	caFile := fs.String("ca-file", "", "PEM CA that signed the webhook's serving certificate (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *manifest == "" || *url == "" || *caFile == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: webhook-config --manifest FILE --url URL --ca-file FILE")
	}
	data, err := os.ReadFile(*manifest)
	if err != nil {
		return err
	}
	var config admissionv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &config); err != nil {
		return fmt.Errorf("%s: %w", *manifest, err)
	}
	if config.Kind != "ValidatingWebhookConfiguration" || len(config.Webhooks) == 0 {
		return fmt.Errorf("%s holds no ValidatingWebhookConfiguration with webhooks", *manifest)
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	for i := range config.Webhooks {
		config.Webhooks[i].ClientConfig = admissionv1.WebhookClientConfig{URL: url, CABundle: ca}
	}
	out, err := yaml.Marshal(&config)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}
