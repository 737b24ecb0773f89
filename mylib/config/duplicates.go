package config

import v1 "k8s.io/api/core/v1"

// FilterDuplicateNames drops, with a log line, each pod whose
// namespace/name repeats an earlier one from the same source (two manifests
// naming the same pod), as PodConfig does for every source. Upstream does
// this in its pod config's merge (filterInvalidPods).
func FilterDuplicateNames(pods []*v1.Pod, source string) []*v1.Pod {
	return filterDuplicateNames(pods, source)
}
