package registryv1

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// traceParentField is the name of the trace_parent field of Export,
// EndpointChunk and Import.
const traceParentField protoreflect.Name = "trace_parent"

// EqualIgnoringTrace reports whether a and b are equal apart from their
// trace_parent: a record written again only because it carries another
// trace is the same record, so the registry and the agents never count it
// as a change. Messages without the field compare as proto.Equal.
func EqualIgnoringTrace(a, b proto.Message) bool {
	return proto.Equal(withoutTrace(a), withoutTrace(b))
}

// withoutTrace returns m, or a shallow copy of it without trace_parent
// when m has one set. The copy shares every other field with m (no deep
// copy: comparing a large chunk costs what proto.Equal costs).
func withoutTrace(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return m
	}
	fd := r.Descriptor().Fields().ByName(traceParentField)
	if fd == nil || !r.Has(fd) {
		return m
	}
	out := r.New()
	r.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f != fd {
			out.Set(f, v)
		}
		return true
	})
	return out.Interface()
}

// WithTraceParent returns a shallow copy of m whose trace_parent is
// traceParent, or m itself when it already carries it. The copy shares
// every other field with m, which neither side may then modify; m is left
// as it is, so that a record the caller holds (and compares) is never
// changed under it.
func WithTraceParent[M interface {
	proto.Message
	GetTraceParent() string
}](m M, traceParent string) M {
	if m.GetTraceParent() == traceParent {
		return m
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(traceParentField)
	out := r.New()
	r.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f != fd {
			out.Set(f, v)
		}
		return true
	})
	if traceParent != "" {
		out.Set(fd, protoreflect.ValueOfString(traceParent))
	}
	return out.Interface().(M)
}
