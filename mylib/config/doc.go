// Package config is where pods come from. Each source sends its complete
// list of pods (a SET) on a channel; PodConfig merges the sources into one
// stream of changes: ADD, UPDATE, DELETE, REMOVE and RECONCILE.
//
//   - SourceFile: static pods, one manifest per file in a
//     directory, given the kubelet's static-pod defaults (applyDefaults).
//   - SourceApiserver: pods the scheduler (or you) bound to this
//     node, from a ListWatch with field selector spec.nodeName=<node>.
//
// Wiring:
//
//	cfg := config.NewPodConfig(clock.RealClock{})
//	src, err := config.NewSourceFile(config.SourceFileConfig{Path: dir, NodeName: nodeName, Updates: cfg.Channel(ctx, kubetypes.FileSource)})
//	if err != nil { … }
//	go src.Run(ctx)
//	go config.NewSourceApiserver(client, nodeName, cfg.Channel(ctx, kubetypes.ApiserverSource)).Run(ctx)
//	for u := range cfg.Updates() { … } // u.Op is ADD, UPDATE, DELETE, REMOVE or RECONCILE
//
// Upstream: pkg/kubelet/config (common.go, file.go, apiserver.go, config.go).
package config
