//go:build !linux && !darwin

package cadvisor

// filesystemSize is not measured on this system; the node reports 0 and the
// learner can pass --capacity ephemeral-storage=<size>.
func filesystemSize(dir string) (int64, error) { return 0, nil }
