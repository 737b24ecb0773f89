package events

// Node event reasons: what the kubelet records on its own Node object
// (upstream's pkg/kubelet/events names; the pressure reasons are written
// as literals in upstream's nodestatus setters and named here). Each is
// recorded on a reference to the Node whose UID is the node's name, as
// upstream's kubelet does; `kubectl describe node` looks them up by it.
const (
	// StartingKubelet: the kubelet starts (upstream's BirthCry), message
	// "Starting kubelet.".
	StartingKubelet = "Starting"
	// NodeReady and NodeNotReady: the Ready condition changed.
	NodeReady    = "NodeReady"
	NodeNotReady = "NodeNotReady"
	// NodeRebooted: the boot ID changed since the last status (Warning).
	NodeRebooted = "Rebooted"

	// The pressure conditions' transitions (and their first value).
	NodeHasSufficientMemory   = "NodeHasSufficientMemory"
	NodeHasInsufficientMemory = "NodeHasInsufficientMemory"
	NodeHasNoDiskPressure     = "NodeHasNoDiskPressure"
	NodeHasDiskPressure       = "NodeHasDiskPressure"
	NodeHasSufficientPID      = "NodeHasSufficientPID"
	NodeHasInsufficientPID    = "NodeHasInsufficientPID"
)
