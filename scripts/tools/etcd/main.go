// Command etcd runs a single-member etcd (go.etcd.io/etcd/server/v3/embed) on
// loopback for the local control plane. It exists because Debian's etcd is 3.4,
// and kube-apiserver v1.37 needs 3.5 or newer for RequestWatchProgress.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL, loopback only")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL, loopback only")
	flag.Parse()
	if err := run(*dataDir, *clientURL, *peerURL); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run(dataDir, clientURL, peerURL string) error {
	if dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("--listen-client-url: %w", err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("--listen-peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "mykubelet"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "warn"
	// A tutorial cluster is small: compact often so the data dir stays small.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "5m"
	cfg.QuotaBackendBytes = 2 << 30

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintln(os.Stderr, "etcd: ready on", cu.String())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return fmt.Errorf("not ready after 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintln(os.Stderr, "etcd: stopping on", s)
		return nil
	case err := <-e.Err():
		return err
	}
}
