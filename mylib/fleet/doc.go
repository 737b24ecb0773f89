// Package fleet runs many node agents in one process: each is the node half
// of a mylib/kubelet Kubelet (registration, status setters, Lease), with its
// own name and its own identity (system:node:<name>, a client certificate
// obtained with a bootstrap token and one CSR per node, reused on restart).
// It exists to measure what node heartbeats cost the control plane.
//
// It has no counterpart in upstream's pkg/kubelet. The nearest upstream
// tools are kubemark's hollow nodes (cmd/kubemark, pkg/kubemark: one full
// kubelet per process, with fake runtimes) and KWOK (sigs.k8s.io/kwok: one
// process that writes every node's status and lease with one identity).
// This package sits between them: one process, but every agent runs the
// real status and lease logic as itself, so the API server's Node
// authorizer and NodeRestriction hold for each.
//
// What the agents share, and what they cannot:
//   - one clock, one machine description (read once), one request budget
//     (a token-bucket rate limiter shared by every client), one CA pool and
//     one Counter;
//   - not the connection: a TLS client certificate is presented once per
//     connection, so every identity needs a connection of its own. Each
//     agent has one client (built like the kubelet's heartbeat client, with
//     a timeout) holding only the Nodes and Leases clients, asking for
//     protobuf as the kubelet does, over one HTTP/1.1 connection of a
//     transport of the fleet's own (oneConn): each request is written and
//     its answer read in the goroutine that makes it, with buffers from a
//     pool, so an idle connection is a tls.Conn and nothing else. net/http's
//     Transport keeps two goroutines and two 4 KiB buffers per connection,
//     and HTTP/2 its framer, header tables and flow control on top, for one
//     request at a time (Config.Transport selects either, to compare);
//   - not an informer: with the Node authorizer a node may read only its
//     own Node, so a shared watch over the fleet would need an identity the
//     agents do not have. Each agent reads its Node with a GET per sync.
//   - not a goroutine per loop, unlike upstream (wait.JitterUntil in
//     the kubelet and its lease controller): an agent's status sync and
//     Lease renewal run from timers (see beats), so that between two beats
//     an agent holds no goroutine at all. The Kubelet's own RunNode would
//     hold three per agent; the fleet calls the same RegisterWithAPIServer,
//     SyncNodeStatus and nodelease.Controller.Sync instead. At most
//     Config.BeatParallelism beats run at a time; when the API server is
//     slow, the others wait in a queue, not in goroutines.
//
// Wiring:
//
//	f, err := fleet.New(ctx, fleet.Config{
//		Name: "fleet", Nodes: 100, Mode: fleet.ModeLease,
//		BootstrapKubeconfig: bootstrapPath, StateDir: dir,
//		Counter: fleet.NewCounter(),
//	})
//	if err != nil { … }
//	err = f.Run(ctx) // returns when ctx ends, every goroutine stopped
//	fleet.Cleanup(ctx, adminClient, "fleet", os.Stdout) // Nodes, Leases, CSRs
package fleet
