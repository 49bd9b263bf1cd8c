package server

import (
	"fmt"

	registryv1 "github.com/fleetnet/fleetnet/api/registry/v1"
	"github.com/fleetnet/fleetnet/internal/registry/view"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// encoded is a watch event marshaled once for every watcher: the hub keeps
// and fans out encodings, not messages, so that a change sent to a hundred
// watchers is marshaled once, and the history of past events holds a few
// hundred bytes per event rather than the decoded chunks it replaced.
type encoded struct {
	revision int64
	// status is set for export status events: statusCluster is the
	// cluster they concern.
	status        bool
	statusCluster string
	// audience is who may receive the event (see view.Event).
	audience view.Audience
	// namespace is the import's or chunk's, for watchers that asked for
	// some namespaces only; empty for other events.
	namespace string
	// head and body are the encoding, in two parts so that a snapshot can
	// put a revision in front of an import's or a chunk's encoding shared
	// with other snapshots (see snapshotEncoder).
	head, body []byte
}

// size is the event's encoded bytes, what a watcher's queue counts.
func (e *encoded) size() int { return len(e.head) + len(e.body) }

// encodeEvent marshals one event of the view, with its audience.
func encodeEvent(e view.Event) *encoded {
	out := encode(e.WatchEvent)
	out.audience = e.Audience
	return out
}

// eventNamespace is the namespace of an import or endpoints event, ""
// for other events.
func eventNamespace(e *registryv1.WatchEvent) string {
	switch ev := e.GetEvent().(type) {
	case *registryv1.WatchEvent_ImportUpsert:
		return ev.ImportUpsert.GetKey().GetNamespace()
	case *registryv1.WatchEvent_ImportDelete:
		return ev.ImportDelete.GetNamespace()
	case *registryv1.WatchEvent_EndpointsUpsert:
		return ev.EndpointsUpsert.GetKey().GetNamespace()
	case *registryv1.WatchEvent_EndpointsDelete:
		return ev.EndpointsDelete.GetNamespace()
	}
	return ""
}

// encode marshals one event.
func encode(e *registryv1.WatchEvent) *encoded {
	b, err := proto.Marshal(e)
	if err != nil {
		// Messages the registry built itself always marshal; failing here
		// would be a bug, not a condition to serve around.
		panic(fmt.Sprintf("marshaling a watch event: %v", err))
	}
	out := &encoded{revision: e.GetRevision(), body: b, namespace: eventNamespace(e)}
	switch ev := e.GetEvent().(type) {
	case *registryv1.WatchEvent_ExportStatus:
		out.status, out.statusCluster = true, ev.ExportStatus.GetKey().GetClusterId()
	case *registryv1.WatchEvent_ExportStatusDelete:
		out.status, out.statusCluster = true, ev.ExportStatusDelete.GetClusterId()
	}
	return out
}

// snapshotEncoder encodes snapshots, keeping the encoding of each import,
// canonical chunk and status it encoded, by message: the view replaces
// these messages on change and never mutates them, so an encoding stays
// valid as long as its message is in the view. Each snapshot keeps only
// the encodings it used, so replaced messages drop out. Not safe for
// concurrent use (the registry's lock guards it).
type snapshotEncoder struct {
	bodies map[proto.Message][]byte
	// last is the last snapshot encoded, for statusCluster at revision:
	// watchers that connect together (after a registry restart, say) get
	// the same one.
	last struct {
		revision      int64
		statusCluster string
		events        []*encoded
	}
}

// snapshot returns the encoded snapshot of v for statusCluster, reusing
// the last one when the view has not moved since.
func (s *snapshotEncoder) snapshot(v interface {
	Revision() int64
	Snapshot(string) []view.Event
}, statusCluster string) []*encoded {
	if s.last.events != nil && s.last.revision == v.Revision() && s.last.statusCluster == statusCluster {
		return s.last.events
	}
	out := s.encode(v.Snapshot(statusCluster))
	s.last.revision, s.last.statusCluster, s.last.events = v.Revision(), statusCluster, out
	return out
}

// encode encodes a snapshot's events.
func (s *snapshotEncoder) encode(events []view.Event) []*encoded {
	next := make(map[proto.Message][]byte, len(events))
	out := make([]*encoded, len(events))
	for i, e := range events {
		var msg proto.Message
		var field protowire.Number
		switch ev := e.GetEvent().(type) {
		case *registryv1.WatchEvent_ImportUpsert:
			msg, field = ev.ImportUpsert, 4
		case *registryv1.WatchEvent_EndpointsUpsert:
			msg, field = ev.EndpointsUpsert, 6
		case *registryv1.WatchEvent_ExportStatus:
			msg, field = ev.ExportStatus, 8
		}
		if msg == nil {
			out[i] = encodeEvent(e)
			continue
		}
		body, ok := s.bodies[msg]
		if !ok {
			var err error
			if body, err = proto.Marshal(msg); err != nil {
				panic(fmt.Sprintf("marshaling a snapshot event: %v", err))
			}
		}
		next[msg] = body
		head := protowire.AppendTag(nil, 1, protowire.VarintType)
		head = protowire.AppendVarint(head, uint64(e.GetRevision()))
		head = protowire.AppendTag(head, field, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(len(body)))
		out[i] = &encoded{revision: e.GetRevision(), head: head, body: body, audience: e.Audience, namespace: eventNamespace(e.WatchEvent)}
		if st, ok := msg.(*registryv1.ExportStatus); ok {
			out[i].status, out[i].statusCluster = true, st.GetKey().GetClusterId()
		}
	}
	s.bodies = next
	return out
}

// continued is an encoded event sent with more set: another event of its
// revision follows on the stream. The field is appended to the shared
// encoding (a protobuf message may carry its fields in any order), so
// that marking it costs two bytes on the wire and no encoding per watcher.
type continued struct{ *encoded }

// moreTrue is WatchEvent's field more (10, varint) set to true.
var moreTrue = protowire.AppendVarint(protowire.AppendTag(nil, 10, protowire.VarintType), 1)

// sendable is e as it goes to a watcher: continued when next, the event
// after it on the same stream, has the same revision.
func sendable(e, next *encoded) any {
	if next != nil && next.revision == e.revision && e.revision != 0 {
		return continued{e}
	}
	return e
}

// codec is gRPC's protobuf codec that also sends encoded events as they
// are, without marshaling them again.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(continued); ok {
		if len(e.head) == 0 {
			return mem.BufferSlice{mem.SliceBuffer(e.body), mem.SliceBuffer(moreTrue)}, nil
		}
		return mem.BufferSlice{mem.SliceBuffer(e.head), mem.SliceBuffer(e.body), mem.SliceBuffer(moreTrue)}, nil
	}
	if e, ok := v.(*encoded); ok {
		if len(e.head) == 0 {
			return mem.BufferSlice{mem.SliceBuffer(e.body)}, nil
		}
		return mem.BufferSlice{mem.SliceBuffer(e.head), mem.SliceBuffer(e.body)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }
