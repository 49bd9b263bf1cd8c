// Package lastaccepted keeps, per Gateway and MultiClusterLoadBalancer,
// the spec of its last accepted generation (model.LastAccepted) where
// fleetnet-gateway finds it again after a restart or a change of leader:
// a refused edit then keeps that generation serving (model.Build), as it
// does while the process lives.
//
// The store is written only when an object's accepted generation changes,
// it is deleted or leaves fleetnet's classes: not per endpoint change. It
// lives in fleetnet-gateway's own namespace, as Secrets only it writes;
// the objects' owners cannot forge what is served on their behalf after a
// restart, as they could through an annotation of their own objects.
package lastaccepted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/fleetnet/fleetnet/internal/gateway/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store keeps model.LastAccepted by object (model.LastAcceptedKey).
type Store interface {
	// Load returns everything kept.
	Load(ctx context.Context) (map[string]model.LastAccepted, error)
	// Put keeps la for the object key.
	Put(ctx context.Context, key string, la model.LastAccepted) error
	// Delete forgets the object key; forgetting what is not kept is no
	// error.
	Delete(ctx context.Context, key string) error
}

var (
	_ Store = (*Secrets)(nil)
	_ Store = (*Memory)(nil)
)

// Secrets keeps one Secret per object in Namespace.
type Secrets struct {
	Namespace string
	// Client writes the Secrets; Reader lists them (uncached: the
	// manager's cache holds TLS Secrets only).
	Client client.Client
	Reader client.Reader
}

// SecretName is the Secret that keeps an object's spec: a hash of its key,
// since namespace and name together may be longer than a name allows.
func SecretName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "fleetnet-last-accepted-" + hex.EncodeToString(sum[:10])
}

// Load lists the Secrets of Namespace labelled keys.LabelLastAccepted; one
// whose content does not decode is skipped and reported in the error
// with the others kept.
func (s *Secrets) Load(ctx context.Context) (map[string]model.LastAccepted, error) {
	var list corev1.SecretList
	if err := s.Reader.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{keys.LabelLastAccepted: "true"}); err != nil {
		return nil, fmt.Errorf("listing the Secrets of %s that keep the last accepted specs: %w", s.Namespace, err)
	}
	out := map[string]model.LastAccepted{}
	var bad []string
	for _, sec := range list.Items {
		k := sec.Annotations[keys.AnnotationLastAcceptedObject]
		var la model.LastAccepted
		if err := json.Unmarshal(sec.Data[keys.LastAcceptedSpecKey], &la); err != nil || k == "" || SecretName(k) != sec.Name || sec.Type != keys.SecretTypeLastAccepted {
			bad = append(bad, sec.Name)
			continue
		}
		out[k] = la
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("Secrets of %s not read (not written by fleetnet-gateway): %v", s.Namespace, bad)
	}
	return out, nil
}

// Put applies the object's Secret.
func (s *Secrets) Put(ctx context.Context, key string, la model.LastAccepted) error {
	data, err := json.Marshal(la)
	if err != nil {
		return err
	}
	ac := corev1ac.Secret(SecretName(key), s.Namespace).
		WithType(corev1.SecretType(keys.SecretTypeLastAccepted)).
		WithLabels(map[string]string{keys.LabelLastAccepted: "true", keys.LabelManagedBy: keys.FieldManagerGateway}).
		WithAnnotations(map[string]string{keys.AnnotationLastAcceptedObject: key}).
		WithData(map[string][]byte{keys.LastAcceptedSpecKey: data})
	if err := s.Client.Apply(ctx, ac, client.FieldOwner(keys.FieldManagerGateway), client.ForceOwnership); err != nil {
		return fmt.Errorf("keeping the last accepted spec of %s in Secret %s/%s: %w", key, s.Namespace, SecretName(key), err)
	}
	return nil
}

// Delete deletes the object's Secret.
func (s *Secrets) Delete(ctx context.Context, key string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: SecretName(key)}}
	if err := s.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("forgetting the last accepted spec of %s (Secret %s/%s): %w", key, s.Namespace, sec.Name, err)
	}
	return nil
}

// Memory keeps everything in memory: the reference implementation, for
// tests, and what a controller without a namespace of its own has.
type Memory struct {
	mu   sync.Mutex
	kept map[string]model.LastAccepted
}

// Load implements Store.
func (m *Memory) Load(context.Context) (map[string]model.LastAccepted, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := maps.Clone(m.kept)
	if out == nil {
		out = map[string]model.LastAccepted{}
	}
	return out, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, key string, la model.LastAccepted) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kept == nil {
		m.kept = map[string]model.LastAccepted{}
	}
	m.kept[key] = la
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kept, key)
	return nil
}
