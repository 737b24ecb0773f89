# The fields of `kubectl get pod resize-demo -o yaml` that an in-place
# resize changes, a line each: what the spec asks, what the kubelet
# granted (allocatedResources), what the runtime applies (resources), the
# restarts, the generations, and the resize conditions.
.status.containerStatuses[0] as $c
| "spec.containers[0].resources.requests:   \(.spec.containers[0].resources.requests | tojson)",
  "containerStatuses[0].allocatedResources: \($c.allocatedResources | tojson)",
  "containerStatuses[0].resources.requests: \($c.resources.requests | tojson)",
  "restartCount \($c.restartCount), generation \(.metadata.generation), observedGeneration \(.status.observedGeneration)",
  (.status.conditions[] | select(.type | startswith("PodResize")) | "\(.type) \(.reason): \(.message)")
