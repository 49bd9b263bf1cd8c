package discoverytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"
)

// Validator checks responses against an OpenAPI document: status codes the
// document does not list, headers and every body, including watch streams
// (newline-delimited JSON and server-sent events, which the document
// describes as the list of their events).
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// NewValidator loads and checks an OpenAPI document.
func NewValidator(document []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing the OpenAPI document: %w", err)
	}
	return &Validator{doc: doc, router: router}, nil
}

// Doc returns the document.
func (v *Validator) Doc() *openapi3.T { return v.doc }

var registerDecoders sync.Once

// Validate checks one response, whose body is given.
func (v *Validator) Validate(req *http.Request, status int, header http.Header, body []byte) error {
	registerDecoders.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjsonDecoder)
		openapi3filter.RegisterBodyDecoder("text/event-stream", sseDecoder)
	})
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s is not in the OpenAPI document: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, not as the OpenAPI document says: %w\nbody: %.2000s", req.Method, req.URL, status, err, body)
	}
	return nil
}

// ndjsonDecoder reads a newline-delimited JSON stream as the list of its
// values.
func ndjsonDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	out := []any{}
	r := bufio.NewReader(body)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var v any
			if jerr := json.Unmarshal(line, &v); jerr != nil {
				return nil, fmt.Errorf("line %d is not JSON: %w", len(out)+1, jerr)
			}
			out = append(out, v)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// sseDecoder reads server-sent events as the list of their data, checking
// the framing on the way: each event's name is its data's type, and an id,
// where there is one, is its revision.
func sseDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	events, err := ParseSSE(body)
	if err != nil {
		return nil, err
	}
	out := []any{}
	for i, e := range events {
		var v map[string]any
		if err := json.Unmarshal([]byte(e.Data), &v); err != nil {
			return nil, fmt.Errorf("event %d: data is not JSON: %w", i, err)
		}
		if v["type"] != e.Event {
			return nil, fmt.Errorf("event %d: named %q, but its data's type is %v", i, e.Event, v["type"])
		}
		if e.ID != "" {
			if rev, ok := v["revision"].(float64); !ok || strconv.FormatInt(int64(rev), 10) != e.ID {
				return nil, fmt.Errorf("event %d: id %q is not its revision %v", i, e.ID, v["revision"])
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// SSEEvent is one server-sent event.
type SSEEvent struct{ ID, Event, Data string }

// ParseSSE reads complete server-sent events (an event ends at an empty
// line; an unfinished one at the end is ignored). Comments are skipped.
func ParseSSE(r io.Reader) ([]SSEEvent, error) {
	var out []SSEEvent
	var cur SSEEvent
	var fields int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if fields > 0 {
				out = append(out, cur)
			}
			cur, fields = SSEEvent{}, 0
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields++
		switch name {
		case "id":
			cur.ID = value
		case "event":
			cur.Event = value
		case "data":
			if cur.Data != "" {
				cur.Data += "\n"
			}
			cur.Data += value
		default:
			return nil, fmt.Errorf("unexpected server-sent event field %q", name)
		}
	}
	return out, sc.Err()
}

// Transport validates every response that passes through it. A streaming
// body is validated up to where it was read, when it is closed: only
// complete lines (or events) are checked.
type Transport struct {
	T         testing.TB
	Validator *Validator
	Base      http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.Base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/x-ndjson") || strings.HasPrefix(ct, "text/event-stream") {
		resp.Body = &recordingBody{ReadCloser: resp.Body, done: func(read []byte) {
			if i := bytes.LastIndexByte(read, '\n'); i >= 0 {
				read = read[:i+1]
			} else {
				read = nil
			}
			if strings.HasPrefix(ct, "text/event-stream") {
				// Keep whole events only.
				if i := bytes.LastIndex(read, []byte("\n\n")); i >= 0 {
					read = read[:i+2]
				} else {
					read = nil
				}
			}
			if err := tr.Validator.Validate(req, resp.StatusCode, resp.Header, read); err != nil {
				tr.T.Errorf("OpenAPI: %v", err)
			}
		}}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if err := tr.Validator.Validate(req, resp.StatusCode, resp.Header, body); err != nil {
		tr.T.Errorf("OpenAPI: %v", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

type recordingBody struct {
	io.ReadCloser
	mu   sync.Mutex
	read []byte
	once sync.Once
	done func([]byte)
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.read = append(b.read, p[:n]...)
	b.mu.Unlock()
	return n, err
}

func (b *recordingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.done(b.read)
	})
	return err
}
