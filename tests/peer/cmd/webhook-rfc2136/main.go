// Command webhook-rfc2136 serves external-dns's webhook-provider protocol (the server code of
// sigs.k8s.io/external-dns/provider/webhook/api, unchanged) around external-dns's own RFC 2136
// provider, so a webhook client — gateway-dns's `--provider webhook`, or plain HTTP in a test —
// writes into a real DNS server through the code external-dns users run.
//
// Usage:
//
//	webhook-rfc2136 --listen 127.0.0.1:PORT --zone example.com --host 127.0.0.1 --port 53 \
//	    --tsig-keyname KEY --tsig-secret-alg hmac-sha256 [--domain-filter example.com]...
//
// The TSIG secret comes from --tsig-secret or, to keep it off the command line,
// WEBHOOK_RFC2136_TSIG_SECRET. Once the socket is bound it prints "listening on ADDR" on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/external-dns/endpoint"
	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/provider"
	"sigs.k8s.io/external-dns/provider/rfc2136"
	webhookapi "sigs.k8s.io/external-dns/provider/webhook/api"
)

// repeated collects a flag given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-rfc2136:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var zones, domainFilters repeated
	fs := flag.NewFlagSet("webhook-rfc2136", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8888", "address of the webhook's HTTP server")
	host := fs.String("host", "127.0.0.1", "the DNS server receiving the updates")
	port := fs.Int("port", 53, "its port")
	keyName := fs.String("tsig-keyname", "", "TSIG key name (none: unsigned updates)")
	secret := fs.String("tsig-secret", os.Getenv("WEBHOOK_RFC2136_TSIG_SECRET"), "TSIG secret, base64 (default $WEBHOOK_RFC2136_TSIG_SECRET)")
	algorithm := fs.String("tsig-secret-alg", "hmac-sha256", "TSIG algorithm")
	minTTL := fs.Duration("min-ttl", 0, "lowest TTL written")
	fs.Var(&zones, "zone", "a zone the provider manages (repeatable)")
	fs.Var(&domainFilters, "domain-filter", "limit to names under this domain (repeatable; default: the zones)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(zones) == 0 || fs.NArg() != 0 {
		return fmt.Errorf("usage: webhook-rfc2136 --zone ZONE [--zone ZONE]... [flags]")
	}
	if len(domainFilters) == 0 {
		domainFilters = zones
	}

	// Parsed by external-dns's own flag parser, so every other setting (batch size, timeouts,
	// load balancing) has the default external-dns runs with. The source is required by the
	// parser and unused here.
	flags := []string{
		"--source=fake",
		"--provider=rfc2136",
		"--rfc2136-host=" + *host,
		fmt.Sprintf("--rfc2136-port=%d", *port),
		"--rfc2136-tsig-secret-alg=" + *algorithm,
		"--rfc2136-min-ttl=" + minTTL.String(),
		// Without zone transfers GET /records would always be empty.
		"--rfc2136-axfr",
	}
	if *keyName == "" {
		flags = append(flags, "--rfc2136-insecure")
	} else {
		flags = append(flags, "--rfc2136-tsig-keyname="+*keyName, "--rfc2136-tsig-secret="+*secret)
	}
	for _, zone := range zones {
		flags = append(flags, "--rfc2136-zone="+zone)
	}
	for _, domain := range domainFilters {
		flags = append(flags, "--domain-filter="+domain)
	}
	cfg := externaldns.NewConfig()
	if err := cfg.ParseFlags(flags); err != nil {
		return err
	}
	filter := endpoint.NewDomainFilter(cfg.DomainFilter)
	rfc, err := rfc2136.New(context.Background(), cfg, filter)
	if err != nil {
		return err
	}

	started := make(chan struct{})
	// StartHTTPApi exits the process itself if the socket cannot be bound or the server fails.
	go webhookapi.StartHTTPApi(withDomainFilter{rfc, filter}, started, 10*time.Second, 30*time.Second, *listen)
	<-started
	fmt.Printf("listening on %s\n", *listen)
	select {}
}

// withDomainFilter answers the negotiation with the domain filter the provider was given, as
// webhook providers do: external-dns's RFC 2136 provider filters by it but reports none.
type withDomainFilter struct {
	provider.Provider
	filter *endpoint.DomainFilter
}

func (p withDomainFilter) GetDomainFilter() endpoint.DomainFilterInterface { return p.filter }
