// Command etcd runs a single-member etcd in-process (go.etcd.io/etcd/server/v3/embed) on
// loopback for the test control plane, and compacts it on request so tests can force
// "410 Gone" on watches that resume from an old resourceVersion.
//
//	etcd serve --data-dir DIR --client-url http://127.0.0.1:PORT --peer-url http://127.0.0.1:PORT
//	etcd compact --endpoint http://127.0.0.1:PORT [--bump N]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: etcd serve|compact [flags]")
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "compact":
		err = compact(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want serve or compact)", os.Args[1])
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "etcd:", msg)
	os.Exit(1)
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	clientURL := fs.String("client-url", "", "client URL on loopback (required)")
	peerURL := fs.String("peer-url", "", "peer URL on loopback (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dataDir == "" || *clientURL == "" || *peerURL == "" {
		return fmt.Errorf("serve needs --data-dir, --client-url and --peer-url")
	}
	client, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("--client-url: %w", err)
	}
	peer, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("--peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// Test data is disposable: skipping fsync keeps a 2-core machine's disk out of the way.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return fmt.Errorf("not ready within 60s")
	}
	fmt.Println("etcd ready on", client.String())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
		return nil
	case err := <-e.Err():
		return err
	}
}

// compact writes --bump throwaway revisions (so a watcher's last resourceVersion falls behind
// even when nothing else changed) and compacts everything before the newest revision.
func compact(args []string) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "client URL (required)")
	bump := fs.Int("bump", 1, "throwaway writes before compacting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoint == "" {
		return fmt.Errorf("compact needs --endpoint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	var revision int64
	for i := 0; i < *bump; i++ {
		resp, err := cli.Put(ctx, "/gateway-dns-tests/compaction-bump", fmt.Sprint(i))
		if err != nil {
			return err
		}
		revision = resp.Header.Revision
	}
	if revision == 0 {
		resp, err := cli.Get(ctx, "/", clientv3.WithLimit(1))
		if err != nil {
			return err
		}
		revision = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, revision, clientv3.WithCompactPhysical()); err != nil {
		return err
	}
	fmt.Println("compacted at revision", revision)
	return nil
}
