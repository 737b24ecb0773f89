// Package envvars is upstream's pkg/kubelet/envvars: the environment
// variables that tell a container where the Services it may need are, as
// Docker links once did.
//
// For a Service "redis-primary" with cluster IP 10.96.0.11 and a first
// port 6379/TCP named "redis", FromServices gives
//
//	REDIS_PRIMARY_SERVICE_HOST=10.96.0.11
//	REDIS_PRIMARY_SERVICE_PORT=6379
//	REDIS_PRIMARY_SERVICE_PORT_REDIS=6379
//	REDIS_PRIMARY_PORT=tcp://10.96.0.11:6379
//	REDIS_PRIMARY_PORT_6379_TCP=tcp://10.96.0.11:6379
//	REDIS_PRIMARY_PORT_6379_TCP_PROTO=tcp
//	REDIS_PRIMARY_PORT_6379_TCP_PORT=6379
//	REDIS_PRIMARY_PORT_6379_TCP_ADDR=10.96.0.11
//
// Which Services a pod gets is the kubelet's choice (mylib/kubelet's
// getServiceEnvVarMap): the "kubernetes" Service of "default" always, its
// own namespace's when enableServiceLinks is not false.
package envvars

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// IsServiceIPSet: the Service has a cluster IP (not headless, not
// "None"); only those get variables (upstream's v1helper.IsServiceIPSet).
func IsServiceIPSet(service *v1.Service) bool {
	return service.Spec.ClusterIP != v1.ClusterIPNone && service.Spec.ClusterIP != ""
}

// FromServices returns the variables of services, in their order: for
// each one with a cluster IP and a port, <NAME>_SERVICE_HOST and
// <NAME>_SERVICE_PORT (its first port), <NAME>_SERVICE_PORT_<PORT NAME>
// for each named port, and the Docker link variables.
func FromServices(services []*v1.Service) []v1.EnvVar {
	var result []v1.EnvVar
	for _, service := range services {
		// A cluster IP is never without a port (API validation); a
		// hand-made object might be, and gets nothing rather than a panic.
		if !IsServiceIPSet(service) || len(service.Spec.Ports) == 0 {
			continue
		}
		prefix := makeEnvVariableName(service.Name)
		result = append(result, v1.EnvVar{Name: prefix + "_SERVICE_HOST", Value: service.Spec.ClusterIP})
		// The first port has the backwards-compatible name.
		portName := prefix + "_SERVICE_PORT"
		result = append(result, v1.EnvVar{Name: portName, Value: strconv.Itoa(int(service.Spec.Ports[0].Port))})
		for _, sp := range service.Spec.Ports { // only the first may be unnamed
			if sp.Name != "" {
				result = append(result, v1.EnvVar{Name: portName + "_" + makeEnvVariableName(sp.Name), Value: strconv.Itoa(int(sp.Port))})
			}
		}
		result = append(result, makeLinkVariables(service)...)
	}
	return result
}

// makeEnvVariableName: a Service or port name is a DNS label, so
// upper-casing it and turning "-" into "_" makes a variable name.
func makeEnvVariableName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// makeLinkVariables are the Docker link variables: <NAME>_PORT for the
// first port, and <NAME>_PORT_<port>_<PROTOCOL>{,_PROTO,_PORT,_ADDR} for
// each.
func makeLinkVariables(service *v1.Service) []v1.EnvVar {
	prefix := makeEnvVariableName(service.Name)
	var all []v1.EnvVar
	for i, sp := range service.Spec.Ports {
		protocol := string(v1.ProtocolTCP)
		if sp.Protocol != "" {
			protocol = string(sp.Protocol)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(protocol), net.JoinHostPort(service.Spec.ClusterIP, strconv.Itoa(int(sp.Port))))
		if i == 0 { // Docker special-cases the first port
			all = append(all, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		portPrefix := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(protocol))
		all = append(all,
			v1.EnvVar{Name: portPrefix, Value: url},
			v1.EnvVar{Name: portPrefix + "_PROTO", Value: strings.ToLower(protocol)},
			v1.EnvVar{Name: portPrefix + "_PORT", Value: strconv.Itoa(int(sp.Port))},
			v1.EnvVar{Name: portPrefix + "_ADDR", Value: service.Spec.ClusterIP},
		)
	}
	return all
}
