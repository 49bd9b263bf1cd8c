package importer

import (
	"github.com/fleetnet/fleetnet/api/keys"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// notOwnWrite drops update events whose newest change was made by the
// agent itself, so the agent's own writes do not trigger work. When another
// manager wrote at the same second, or later, the event passes: drift by
// anyone else is always seen (and the periodic resync bounds the rest).
var notOwnWrite = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool { return !lastWriteIsOurs(e.ObjectNew) },
}

func lastWriteIsOurs(o client.Object) bool {
	var ours, theirs int64
	for _, m := range o.GetManagedFields() {
		if m.Time == nil {
			continue
		}
		t := m.Time.Unix()
		if m.Manager == keys.FieldManagerAgent || m.Manager == keys.FieldManagerAgentStatus {
			ours = max(ours, t)
		} else {
			theirs = max(theirs, t)
		}
	}
	return ours > theirs
}
