package load

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// wireCodec sends requests as protobuf and hands responses over as their
// encoded bytes (into a *[]byte), for decodeEvent.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("wire codec: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("wire codec: cannot unmarshal into %T", v)
	}
	*p = data.Materialize()
	return nil
}

type eventKind int

const (
	kindOther eventKind = iota
	kindReset
	kindSynced
	kindImportUpsert
	kindImportDelete
	kindChunkUpsert
	kindChunkDelete
)

// event is what a watcher needs of a registryv1.WatchEvent.
type event struct {
	revision int64
	kind     eventKind
	// key is namespace/name of an import, namespace/name/cluster/chunk of
	// a chunk (as ChunkKey).
	key string
	// endpoints and version (from the first endpoint's hostname) of an
	// upserted chunk.
	endpoints int
	version   int64
}

// Field numbers of fleetnet.registry.v1 messages (api/registry/v1).
const (
	fieldEventRevision        = 1
	fieldEventReset           = 2
	fieldEventSynced          = 3
	fieldEventImportUpsert    = 4
	fieldEventImportDelete    = 5
	fieldEventEndpointsUpsert = 6
	fieldEventEndpointsDelete = 7
	fieldImportKey            = 1 // Import.key, EndpointChunk.key
	fieldChunkEndpoints       = 4 // EndpointChunk.endpoints
	fieldEndpointHostname     = 2 // Endpoint.hostname
)

var errMalformed = errors.New("malformed watch event")

// fields calls fn with each field of an encoded message; fn gets the
// value's bytes for length-delimited fields and the varint otherwise.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64)) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return errMalformed
		}
		b = b[l:]
		switch typ {
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return errMalformed
			}
			fn(num, typ, v, 0)
			b = b[l:]
		case protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return errMalformed
			}
			fn(num, typ, nil, v)
			b = b[l:]
		default:
			l := protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				return errMalformed
			}
			b = b[l:]
		}
	}
	return nil
}

// keyOf returns the string fields 1..n of a key message (ImportKey,
// ChunkKey), joined by "/".
func keyOf(b []byte, n int) (string, error) {
	parts := make([]string, n)
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
		if typ == protowire.BytesType && int(num) >= 1 && int(num) <= n {
			parts[num-1] = string(v)
		}
	})
	return strings.Join(parts, "/"), err
}

// decodeEvent reads the revision, the kind, the key and, of a chunk, its
// endpoint count and version, skipping everything else.
func decodeEvent(b []byte) (event, error) {
	var ev event
	var inner []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		switch {
		case num == fieldEventRevision && typ == protowire.VarintType:
			ev.revision = int64(n)
		case typ != protowire.BytesType:
		case num == fieldEventReset:
			ev.kind = kindReset
		case num == fieldEventSynced:
			ev.kind = kindSynced
		case num == fieldEventImportUpsert:
			ev.kind, inner = kindImportUpsert, v
		case num == fieldEventImportDelete:
			ev.kind, inner = kindImportDelete, v
		case num == fieldEventEndpointsUpsert:
			ev.kind, inner = kindChunkUpsert, v
		case num == fieldEventEndpointsDelete:
			ev.kind, inner = kindChunkDelete, v
		}
	})
	if err != nil {
		return ev, err
	}
	switch ev.kind {
	case kindImportDelete:
		ev.key, err = keyOf(inner, 2)
	case kindChunkDelete:
		ev.key, err = keyOf(inner, 4)
	case kindImportUpsert, kindChunkUpsert:
		n := 2
		if ev.kind == kindChunkUpsert {
			n = 4
		}
		err = fields(inner, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
			if typ != protowire.BytesType {
				return
			}
			switch {
			case num == fieldImportKey:
				ev.key, _ = keyOf(v, n)
			case num == fieldChunkEndpoints && ev.kind == kindChunkUpsert:
				if ev.endpoints == 0 {
					ev.version = versionOf(v)
				}
				ev.endpoints++
			}
		})
	}
	return ev, err
}

// versionOf reads the version from an encoded endpoint's hostname.
func versionOf(endpoint []byte) int64 {
	var version int64
	_ = fields(endpoint, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
		if num != fieldEndpointHostname || typ != protowire.BytesType {
			return
		}
		h := string(v)
		if !strings.HasPrefix(h, versionPrefix) {
			return
		}
		version, _ = strconv.ParseInt(h[len(versionPrefix):], 10, 64)
	})
	return version
}
