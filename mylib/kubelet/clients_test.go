package kubelet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestClientsAskForProtobuf: both clients say what upstream's kubelet
// says: protobuf first, JSON as the fallback.
func TestClientsAskForProtobuf(t *testing.T) {
	var mu sync.Mutex
	var accepts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Header.Get("Accept"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	client, eventClient, err := NewClients(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	_, err = client.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	require.Error(t, err)
	_, err = eventClient.CoreV1().Events("default").Get(context.Background(), "e", metav1.GetOptions{})
	require.Error(t, err)
	assert.Equal(t, []string{
		"application/vnd.kubernetes.protobuf,application/json",
		"application/vnd.kubernetes.protobuf,application/json",
	}, accepts)
}
