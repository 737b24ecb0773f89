package secret

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func sec(name, v string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{"pw": []byte(v)}}
}

func TestSecretUpdateSeenAndUnregisterStops(t *testing.T) {
	client := fake.NewClientset(sec("db", "1"))
	m := NewWatchingSecretManager(client, 0)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "creds",
		VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "db"}}}}}}
	m.RegisterPod(pod)
	got, err := m.GetSecret("ns", "db")
	if err != nil || string(got.Data["pw"]) != "1" {
		t.Fatalf("GetSecret = %v, %v", got, err)
	}
	if _, err := client.CoreV1().Secrets("ns").Update(context.Background(), sec("db", "2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // generous: only a broken watch reaches it
	for {
		got, err := m.GetSecret("ns", "db")
		if err == nil && string(got.Data["pw"]) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the update never reached the manager")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.UnregisterPod(pod)
	if _, err := m.GetSecret("ns", "db"); err == nil {
		t.Error("Get after unregister succeeded")
	}
}

func TestMissingSecretIsNotFound(t *testing.T) {
	m := NewWatchingSecretManager(fake.NewClientset(), 0)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{{Name: "regcred"}}}}
	m.RegisterPod(pod)
	defer m.UnregisterPod(pod)
	_, err := m.GetSecret("ns", "regcred")
	if !apierrors.IsNotFound(err) || err.Error() != `secret "regcred" not found` {
		t.Errorf("err = %v, want secret \"regcred\" not found", err)
	}
}

func TestSecretReferences(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
		Volumes: []v1.Volume{
			{VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "vol"}}},
			{VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "proj"}}}}}}},
		},
		Containers: []v1.Container{{
			EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "envfrom"}}}},
			Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "envkey"}, Key: "k"}}}},
		}},
	}}
	got := getSecretNames(pod)
	for _, n := range []string{"pull", "vol", "proj", "envfrom", "envkey"} {
		if !got.Has(n) {
			t.Errorf("%s not referenced (got %v)", n, got.UnsortedList())
		}
	}
	if got.Len() != 5 {
		t.Errorf("got %v", got.UnsortedList())
	}
}
