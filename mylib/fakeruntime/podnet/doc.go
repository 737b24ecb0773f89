// Package podnet is the mock runtime's pod network: it makes the
// sandboxes' IPs real, so that the kubelet's httpGet, tcpSocket and grpc
// probes (and curl) reach the servers the images run, as a CNI bridge
// plugin with host-local IPAM would make them reachable — but in one
// network namespace of the runtime's own rather than one per sandbox,
// since the containers are goroutines of one process, not processes of
// their own:
//
//	host namespace                          namespace mykubelet-<pid>-<n>
//	mkl<pid>-<n>  10.88.0.1/16  <== veth ==>  eth0  10.88.0.2/16, 10.88.0.3/16, … (one per sandbox)
//
// IPAllocator (ipam.go) hands out the sandboxes' addresses, as host-local
// does. Network (netns.go) is the namespace and the veth pair: the host
// end holds the range's first address (the gateway, which the allocator
// never hands out), so the host has a route to the range through the veth
// and nowhere else; each sandbox's IP is added to eth0 when it runs
// (AddIP) and removed when it stops (DelIP). A server command listens on
// its sandbox's IP, in the namespace (Listen: a goroutine locked to an OS
// thread that joins the namespace with setns, makes the listening socket
// and ends, so no other goroutine ever runs there); the socket keeps the
// namespace. Nothing in it routes anywhere else.
//
// The range is the node's pod CIDR once the kubelet hands it over (CRI
// UpdateRuntimeConfig; before that, the runtime's default): SwitchRange
// puts the new range's gateway on the host end beside the old one, new
// sandboxes' addresses come from the new range, and the old range's
// gateway (and with it the host's route) goes when the last sandbox
// address in it leaves eth0 — at once when none is left. A range that
// overlaps a route of someone else's is refused, as New refuses it
// (RangeTakenError). A runtime whose first range is taken (a second node
// on the machine) makes its network with no range at all (New with the
// zero Prefix) and waits: SwitchRange gives it the node's pod CIDR.
//
// It needs root. It talks to the kernel itself, as CNI plugins do: netlink
// messages (github.com/vishvananda/netlink) make the veth pair, the
// addresses and the links, and list the routes; the namespace is made as
// `ip netns add` makes it (unshare, and a bind mount on /run/netns/<name>),
// so a learner's `ip netns exec mykubelet-<pid>-<n> …` finds it. Nothing
// is run: no ip command looked up in a root PATH, no process per sandbox.
// The namespace goes with Close; one left by a runtime that crashed (its
// process is gone) is removed when the next runtime makes its own
// (RemoveStaleNetworks).
//
// Upstream: none in the kubelet (containerd calls CNI plugins:
// containernetworking/plugins, plugins/main/bridge and
// plugins/ipam/host-local).
package podnet
