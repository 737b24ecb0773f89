package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/nodestatus"
)

// Mode is how the agents tell the control plane they are alive.
type Mode string

const (
	// ModeLease is today's kubelet: the Lease renewed every 10 s, the
	// status written when it changes or every 5 minutes.
	ModeLease Mode = "lease"
	// ModeStatus is the kubelet before v1.14: no Lease, the whole status
	// patched every 10 s.
	ModeStatus Mode = "status"
)

// LabelFleet marks every Node of a fleet; its value is the fleet's name.
const LabelFleet = "mykubelet.dev/fleet"

// Defaults for Config.
const (
	DefaultQPS             = 500
	DefaultBurst           = 1000
	DefaultCSRParallelism  = 16
	DefaultBeatParallelism = 100
	// DefaultCertificateTimeout bounds the wait for each CSR.
	DefaultCertificateTimeout = 5 * time.Minute
)

// NodeIP is the address every agent reports (tests and tools stay on
// loopback).
var NodeIP = net.ParseIP("127.0.0.1")

// Config describes a fleet.
type Config struct {
	// Name names the fleet: its nodes are <Name>-0001 … and carry the label
	// LabelFleet=<Name>. Required.
	Name string
	// Nodes is how many agents to run. Required.
	Nodes int
	// Mode is ModeLease or ModeStatus. Required.
	Mode Mode
	// BootstrapKubeconfig holds the bootstrap token the agents use to ask
	// for their certificates. Required.
	BootstrapKubeconfig string
	// StateDir keeps each node's key, certificate and kubeconfig under
	// fleet/<Name>/<node>/, reused on the next start. Required.
	StateDir string
	// NodeStatusUpdateFrequency: zero means kubelet.DefaultNodeStatusUpdateFrequency.
	NodeStatusUpdateFrequency time.Duration
	// LeaseDurationSeconds: zero means nodelease.DefaultLeaseDurationSeconds
	// (renewed every quarter of it). Lease mode only.
	LeaseDurationSeconds int32
	// QPS and Burst are the request budget of the whole fleet (one rate
	// limiter shared by every agent); zero means DefaultQPS, DefaultBurst.
	QPS   float32
	Burst int
	// CSRParallelism is how many certificates are requested at a time; zero
	// means DefaultCSRParallelism.
	CSRParallelism int
	// BeatParallelism is how many agents' beats (a status sync, a Lease
	// renewal, a registration) run at a time; those due beyond it wait
	// their turn without a goroutine (see beats). Zero means
	// DefaultBeatParallelism.
	BeatParallelism int
	// CertificateTimeout: zero means DefaultCertificateTimeout.
	CertificateTimeout time.Duration
	// Transport says how each agent's connection is built; the zero value
	// is the fleet's own HTTP/1.1 client, one connection per agent.
	Transport Transport
	// Counter, when set, counts every request of every agent.
	Counter *Counter
	// Clock is shared by every agent; nil means the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Out receives the fleet's progress lines; nil discards them.
	Out io.Writer
}

// Agent is one node of the fleet.
type Agent struct {
	Name string
	// Client and Config authenticate as system:node:<Name>.
	Client  kubernetes.Interface
	Config  *rest.Config
	Kubelet *kubelet.Kubelet
	// Lease renews the node's Lease (nil in ModeStatus). The fleet runs it,
	// not the Kubelet, so that both are driven by the fleet's timers.
	Lease *nodelease.Controller

	conns conns // every connection of Client; closed at the end of Run
}

// Fleet is a set of agents, ready to Run.
type Fleet struct {
	cfg        Config
	agents     []*Agent
	identities Identities
	registered atomic.Int64
	failed     atomic.Int64
	allUp      chan struct{}
}

// NodeName is the name of the i-th node (from 1) of fleet name.
func NodeName(name string, i int) string { return fmt.Sprintf("%s-%04d", name, i) }

// New checks cfg, obtains every node's identity (requesting the missing
// certificates) and builds the agents. Nothing is registered yet.
func New(ctx context.Context, cfg Config) (*Fleet, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = NodeName(cfg.Name, i+1)
	}
	configs, ids, err := loadIdentities(ctx, cfg, names, cfg.Clock)
	if err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, identities: ids, allUp: make(chan struct{})}
	limiter := flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	// The host is measured once for all agents.
	dir := identityDir(cfg.StateDir, cfg.Name, "")
	machine := sync.OnceValues(func() (*cadvisor.MachineInfo, error) { return cadvisor.ReadMachineInfo(dir) })
	for i, name := range names {
		a := &Agent{Name: name, Config: configs[i]}
		a.Config.RateLimiter = limiter
		a.Config.UserAgent = "mykubelet-fleet/" + cfg.Name
		if cfg.Counter != nil {
			a.Config.WrapTransport = cfg.Counter.Wrap
		}
		// The agent's one client (and connection), closed by Run.
		timeout := min(cfg.NodeStatusUpdateFrequency, time.Duration(cfg.LeaseDurationSeconds)*time.Second)
		if a.Client, a.conns, err = newNodeClient(a.Config, cfg.Transport, timeout); err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		if a.Kubelet, err = f.newKubelet(a, machine); err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		f.agents = append(f.agents, a)
	}
	return f, nil
}

func (cfg *Config) complete() error {
	if errs := validation.IsDNS1123Label(cfg.Name); len(errs) > 0 {
		return fmt.Errorf("fleet name %q: %v", cfg.Name, errs[0])
	}
	if cfg.Nodes < 1 || cfg.Nodes > 9999 {
		return fmt.Errorf("fleet size %d: want 1 to 9999 nodes", cfg.Nodes)
	}
	if cfg.Mode != ModeLease && cfg.Mode != ModeStatus {
		return fmt.Errorf("heartbeat mode %q: want %q or %q", cfg.Mode, ModeLease, ModeStatus)
	}
	if cfg.BootstrapKubeconfig == "" || cfg.StateDir == "" {
		return errors.New("fleet: Config.BootstrapKubeconfig and Config.StateDir are required")
	}
	if cfg.NodeStatusUpdateFrequency == 0 {
		cfg.NodeStatusUpdateFrequency = kubelet.DefaultNodeStatusUpdateFrequency
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = nodelease.DefaultLeaseDurationSeconds
	}
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.CSRParallelism == 0 {
		cfg.CSRParallelism = DefaultCSRParallelism
	}
	if cfg.BeatParallelism == 0 {
		cfg.BeatParallelism = DefaultBeatParallelism
	}
	if cfg.CertificateTimeout == 0 {
		cfg.CertificateTimeout = DefaultCertificateTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	return nil
}

// newKubelet is the node half of one Kubelet, wired like the single node
// agent, in the fleet's mode.
func (f *Fleet) newKubelet(a *Agent, machine func() (*cadvisor.MachineInfo, error)) (*kubelet.Kubelet, error) {
	c, now := f.cfg, f.cfg.Clock.Now
	// The agent's client is its heartbeat client (see newNodeClient). Unlike
	// upstream's it keeps the fleet's shared rate limiter: a thousand agents
	// in one process must not all burst at once.
	node := &kubelet.NodeConfig{
		OnHeartbeatFailure:        a.conns.CloseAll,
		Labels:                    map[string]string{LabelFleet: c.Name},
		NodeStatusUpdateFrequency: c.NodeStatusUpdateFrequency,
		LeaseDurationSeconds:      c.LeaseDurationSeconds,
		Setters: []nodestatus.Setter{
			nodestatus.NodeAddress(NodeIP, a.Name, utilnet.ResolveBindAddress),
			nodestatus.MachineInfo(nodestatus.DefaultMaxPods, machine, nil, nodestatus.NodeAllocatableReservation(nil, nil)),
			nodestatus.VersionInfo(machine, func(context.Context) (string, error) { return "mock://0.1.0", nil }, kubelet.KubeletVersion),
			nodestatus.DaemonEndpoints(nodestatus.DefaultKubeletPort),
			nodestatus.GoRuntime(),
			nodestatus.MemoryPressureCondition(now, nodestatus.NoPressure),
			nodestatus.DiskPressureCondition(now, nodestatus.NoPressure),
			nodestatus.PIDPressureCondition(now, nodestatus.NoPressure),
			nodestatus.ReadyCondition(now, nil, nodestatus.RequiredCapacities),
		},
		OnRegistered: func(*v1.Node, bool) {
			if int(f.registered.Add(1)) == c.Nodes {
				close(f.allUp)
			}
		},
	}
	// The Kubelet runs no lease controller of its own: in ModeLease the
	// fleet runs the same nodelease.Controller the Kubelet would build,
	// with the same settings, from its timers (see beats).
	node.DisableNodeLease = true
	if c.Mode == ModeStatus {
		// Before v1.14: the status, whole, at every sync, and no Lease.
		node.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
	} else {
		var err error
		a.Lease, err = nodelease.NewController(nodelease.Config{
			Client:                     a.Client,
			NodeName:                   a.Name,
			LeaseDurationSeconds:       c.LeaseDurationSeconds,
			Clock:                      c.Clock,
			OnRepeatedHeartbeatFailure: a.conns.CloseAll,
		})
		if err != nil {
			return nil, err
		}
	}
	return kubelet.New(kubelet.Config{Client: a.Client, NodeName: a.Name, Clock: c.Clock, Node: node})
}

// Agents returns the fleet's agents, in order.
func (f *Fleet) Agents() []*Agent { return f.agents }

// Identities says how the certificates were obtained.
func (f *Fleet) Identities() Identities { return f.identities }

// AllRegistered is closed once every agent has registered its node.
func (f *Fleet) AllRegistered() <-chan struct{} { return f.allUp }

// Registered and Failed count the agents registered so far, and those whose
// node half stopped with an error.
func (f *Fleet) Registered() int { return int(f.registered.Load()) }
func (f *Fleet) Failed() int     { return int(f.failed.Load()) }

// Run runs every agent until ctx ends: it registers each node, then syncs
// its status every NodeStatusUpdateFrequency and renews its Lease every
// quarter of its duration, as the Kubelet's RunNode does, but from timers
// (see beats) rather than from goroutines that wait. An agent that fails
// (it cannot register, say) is logged and counted; the others go on. Run
// returns when every agent has stopped and their connections are closed.
func (f *Fleet) Run(ctx context.Context) error {
	b := &beats{clock: f.cfg.Clock, limit: f.cfg.BeatParallelism}
	for _, a := range f.agents {
		b.spawn(func() {
			if err := a.Kubelet.RegisterWithAPIServer(ctx); err != nil {
				if ctx.Err() == nil {
					f.failed.Add(1)
					klog.FromContext(ctx).Error(err, "Node agent stopped", "node", a.Name)
					fmt.Fprintf(f.cfg.Out, "node %s: stopped: %v\n", a.Name, err)
				}
				return
			}
			if a.Lease != nil {
				b.every(ctx, a.Lease.RenewInterval(), a.Lease.Sync)
			}
			b.every(ctx, f.cfg.NodeStatusUpdateFrequency, a.Kubelet.SyncNodeStatus)
		})
	}
	<-ctx.Done()
	b.stop()
	for _, a := range f.agents {
		a.conns.CloseAll()
	}
	return nil
}
