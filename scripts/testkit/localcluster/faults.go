package localcluster

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Kill sends SIGKILL to the component name (e.g. "kube-apiserver") this
// Cluster started, as a crash or the OOM killer would, and waits until it
// has exited. Restart brings it back. Fault tests use them.
func (c *Cluster) Kill(name string) error {
	for i, p := range c.procs {
		if p.name != name {
			continue
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", name, err)
		}
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("kill %s: still running 30 s after SIGKILL", name)
		}
		c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
		if c.cfg.Detach {
			os.Remove(pidFile(c.cfg.Dir, name))
		}
		return nil
	}
	return fmt.Errorf("kill %s: not running in this cluster", name)
}

// Restart starts the component name again, with the same flags and ports,
// after Kill, and waits until it is ready: for kube-apiserver, until
// /readyz answers ok. It appends to the component's log file.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	for _, p := range c.procs {
		if p.name == name {
			return fmt.Errorf("restart %s: it is still running (Kill it first)", name)
		}
	}
	if name != "kube-apiserver" {
		return fmt.Errorf("restart %s: only kube-apiserver can be restarted", name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	if err := c.launch(name); err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-apiserver /readyz after a restart", func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Raw()
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("readyz: %s", body)
		}
		return err
	})
}
