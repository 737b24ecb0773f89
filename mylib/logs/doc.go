// Package logs rotates containers' log files, as upstream's
// pkg/kubelet/logs (container_log_manager.go): the runtime writes a
// container's stdout and stderr to its LogPath and never stops, so the
// kubelet watches the size. Every containerLogMonitorInterval (10 s) the
// ContainerLogManager lists the running containers over the CRI; a
// container whose log has reached containerLogMaxSize (10Mi) has its live
// file renamed to <path>.<20060102-150405> and the runtime is asked to
// ReopenContainerLog, so the container goes on writing to a new, empty
// file at the same path. Older rotated files are gzipped, and the oldest
// removed so that at most containerLogMaxFiles (5) files remain, the live
// one included. If the reopen fails, the rename is undone, as upstream.
//
// Wiring (mylib/kubelet does this with PodsConfig.ContainerLogs):
//
//	m, err := logs.NewContainerLogManager(logs.Config{Runtime: rs, // a runtimeapi.RuntimeServiceClient
//		MaxSize: "10Mi", MaxFiles: 5, MonitorInterval: 10 * time.Second, MaxWorkers: 1})
//	if err != nil { … }
//	go m.Run(ctx) // returns when ctx ends
//
// Where it departs from upstream, and why (one line each):
//   - a pass rotates its containers with up to MaxWorkers goroutines and
//     waits for them, instead of feeding a rate-limited work queue: one
//     pass at a time is simpler to read and to test;
//   - a rotation that would reuse the name of an earlier one (two rotations
//     within the same second) waits for the next pass, where upstream's
//     clean-up could later delete the second file's lines;
//   - when ReopenContainerLog fails but a new file is at the path all the
//     same (the runtime reopened; the answer was lost), the rotation is
//     kept, where upstream renames over the file the container writes to;
//   - no Clean: the container GC (mylib/kuberuntime) removes a container's
//     log files itself, GetAllLogs naming them.
package logs
