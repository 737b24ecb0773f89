# The fields of `kubectl get pod pod-level-resize-demo -o yaml` that a
# pod-level resize changes, a line each: what the spec asks for the whole
# pod, what the kubelet granted it (status.allocatedResources, its
# requests), what is applied to it (status.resources), each container's
# restarts (by name: the status lists them by name, not in the spec's
# order), and the generations.
"spec.resources.limits:    \(.spec.resources.limits | tojson)",
"status.allocatedResources: \(.status.allocatedResources | tojson)",
"status.resources.limits:  \(.status.resources.limits | tojson)",
([.status.containerStatuses[] | "\(.name) restartCount \(.restartCount)"] | join(", ")),
"generation \(.metadata.generation), observedGeneration \(.status.observedGeneration)",
(.status.conditions[] | select(.type | startswith("PodResize")) | "\(.type) \(.reason): \(.message)")
