// Command localcluster starts and stops the local control plane for
// scripts/cluster.sh. Run it through that script, which builds the binaries
// first and passes their directory.
//
//	localcluster -bin-dir DIR -dir DIR [-metrics-server] up|down|status
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"mykubelet/scripts/testkit/localcluster"
)

func main() {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	binDir := fs.String("bin-dir", "", "directory with the control-plane binaries")
	dir := fs.String("dir", "", "the cluster's state directory")
	grace := fs.Duration("node-monitor-grace-period", 0, "kube-controller-manager --node-monitor-grace-period (0: upstream default, 50s)")
	signing := fs.Duration("cluster-signing-duration", 0, "kube-controller-manager --cluster-signing-duration (0: upstream default, a year)")
	clusterCIDR := fs.String("cluster-cidr", "", "kube-controller-manager --cluster-cidr, where the nodes' podCIDRs come from (\"\": "+localcluster.ClusterCIDR+")")
	metricsServer := fs.Bool("metrics-server", false, "start metrics-server too (BIN_DIR/metrics-server), registered as the APIService "+localcluster.MetricsAPIService)
	resolution := fs.Duration("metric-resolution", 0, "metrics-server --metric-resolution (0: the manifest's, 15s; at least 10s)")
	ports := localcluster.DefaultPorts
	fs.IntVar(&ports.EtcdClient, "etcd-port", ports.EtcdClient, "etcd client port")
	fs.IntVar(&ports.EtcdPeer, "etcd-peer-port", ports.EtcdPeer, "etcd peer port")
	fs.IntVar(&ports.APIServer, "apiserver-port", ports.APIServer, "kube-apiserver secure port")
	fs.IntVar(&ports.ControllerManager, "controller-manager-port", ports.ControllerManager, "kube-controller-manager secure port")
	fs.IntVar(&ports.Scheduler, "scheduler-port", ports.Scheduler, "kube-scheduler secure port")
	fs.IntVar(&ports.MetricsServer, "metrics-server-port", ports.MetricsServer, "metrics-server secure port")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *dir == "" || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: localcluster -dir DIR [-bin-dir DIR] up|down|status")
		os.Exit(2)
	}
	var err error
	switch fs.Arg(0) {
	case "up":
		err = up(localcluster.Config{Dir: *dir, BinDir: *binDir, Ports: ports, NodeMonitorGracePeriod: *grace, ClusterSigningDuration: *signing,
			ClusterCIDR: *clusterCIDR, MetricsServer: *metricsServer, MetricResolution: *resolution, Detach: true,
			Progress: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "  "+format+"\n", args...) }})
	case "down":
		err = down(*dir)
	case "status":
		err = status(*dir)
	default:
		err = fmt.Errorf("unknown command %q (want up, down or status)", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func up(cfg localcluster.Config) error {
	want := map[string]bool{}
	for _, name := range localcluster.Components {
		want[name] = true
	}
	if cfg.MetricsServer {
		want[localcluster.MetricsServerName] = true
	}
	running, runningWanted := 0, 0
	for _, s := range localcluster.Status(cfg.Dir) {
		if s.Running {
			running++
			if want[s.Name] {
				runningWanted++
			}
		}
	}
	switch {
	case running == len(want) && runningWanted == len(want):
		fmt.Fprintln(os.Stderr, "the local cluster is already running")
		return nil
	case running > 0:
		fmt.Fprintln(os.Stderr, "the local cluster is partly running; stopping what is left before starting again")
		if _, err := localcluster.Down(cfg.Dir); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "the local cluster is ready at %s (%.1fs)\n", c.Host, time.Since(start).Seconds())
	if h := c.MetricsServerHost(); h != "" {
		fmt.Fprintf(os.Stderr, "metrics-server serves %s at %s\n", localcluster.MetricsAPIService, h)
	}
	return nil
}

func down(dir string) error {
	stopped, err := localcluster.Down(dir)
	if len(stopped) == 0 && err == nil {
		fmt.Fprintln(os.Stderr, "the local cluster is not running")
		return nil
	}
	if len(stopped) > 0 {
		fmt.Fprintln(os.Stderr, "stopped", strings.Join(stopped, ", "))
	}
	return err
}

func status(dir string) error {
	down := 0
	states := localcluster.Status(dir)
	for _, s := range states {
		state := "stopped"
		if s.Running {
			state = fmt.Sprintf("running (pid %d)", s.Pid)
		} else {
			down++
		}
		fmt.Printf("%-24s %s\n", s.Name, state)
	}
	if down > 0 {
		return fmt.Errorf("%d of %d components are not running", down, len(states))
	}
	return nil
}
