package envvars

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func service(name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestFromServices(t *testing.T) {
	got := FromServices([]*v1.Service{
		service("kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("redis-primary", "10.96.0.11", v1.ServicePort{Port: 6379}, v1.ServicePort{Name: "metrics", Port: 9121, Protocol: v1.ProtocolUDP}),
		service("headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		service("no-ip", "", v1.ServicePort{Port: 80}),
		service("v6", "fd00::10", v1.ServicePort{Port: 80, Protocol: v1.ProtocolSCTP}),
	})
	assert.Equal(t, []v1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "10.96.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
		{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: "443"},
		{Name: "KUBERNETES_PORT", Value: "tcp://10.96.0.1:443"},
		{Name: "KUBERNETES_PORT_443_TCP", Value: "tcp://10.96.0.1:443"},
		{Name: "KUBERNETES_PORT_443_TCP_PROTO", Value: "tcp"},
		{Name: "KUBERNETES_PORT_443_TCP_PORT", Value: "443"},
		{Name: "KUBERNETES_PORT_443_TCP_ADDR", Value: "10.96.0.1"},

		{Name: "REDIS_PRIMARY_SERVICE_HOST", Value: "10.96.0.11"},
		{Name: "REDIS_PRIMARY_SERVICE_PORT", Value: "6379"},
		{Name: "REDIS_PRIMARY_SERVICE_PORT_METRICS", Value: "9121"},
		{Name: "REDIS_PRIMARY_PORT", Value: "tcp://10.96.0.11:6379"}, // no protocol: TCP
		{Name: "REDIS_PRIMARY_PORT_6379_TCP", Value: "tcp://10.96.0.11:6379"},
		{Name: "REDIS_PRIMARY_PORT_6379_TCP_PROTO", Value: "tcp"},
		{Name: "REDIS_PRIMARY_PORT_6379_TCP_PORT", Value: "6379"},
		{Name: "REDIS_PRIMARY_PORT_6379_TCP_ADDR", Value: "10.96.0.11"},
		{Name: "REDIS_PRIMARY_PORT_9121_UDP", Value: "udp://10.96.0.11:9121"},
		{Name: "REDIS_PRIMARY_PORT_9121_UDP_PROTO", Value: "udp"},
		{Name: "REDIS_PRIMARY_PORT_9121_UDP_PORT", Value: "9121"},
		{Name: "REDIS_PRIMARY_PORT_9121_UDP_ADDR", Value: "10.96.0.11"},

		{Name: "V6_SERVICE_HOST", Value: "fd00::10"},
		{Name: "V6_SERVICE_PORT", Value: "80"},
		{Name: "V6_PORT", Value: "sctp://[fd00::10]:80"},
		{Name: "V6_PORT_80_SCTP", Value: "sctp://[fd00::10]:80"},
		{Name: "V6_PORT_80_SCTP_PROTO", Value: "sctp"},
		{Name: "V6_PORT_80_SCTP_PORT", Value: "80"},
		{Name: "V6_PORT_80_SCTP_ADDR", Value: "fd00::10"},
	}, got)
}

func TestFromServicesSkipsAServiceWithoutPorts(t *testing.T) {
	assert.Empty(t, FromServices([]*v1.Service{service("odd", "10.96.0.5")}))
}
