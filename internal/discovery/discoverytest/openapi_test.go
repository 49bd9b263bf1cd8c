package discoverytest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	discoveryv1 "github.com/fleetnet/fleetnet/api/discovery/v1"
)

// The validator the API tests rely on does catch answers that differ from
// the document.
func TestValidatorCatchesDrift(t *testing.T) {
	v, err := NewValidator(discoveryv1.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	pool := `{"namespace":"demo","name":"echo","revision":3,"clusters":[{"cluster":"east","endpoints":[{"instanceID":"e1","addresses":["10.0.0.1"],"ready":true,"serving":true,"terminating":false}]}]}`
	sse := "event: snapshot\ndata: {\"type\":\"snapshot\",\"revision\":3,\"pool\":" + pool + "}\n\nid: 3\nevent: synced\ndata: {\"type\":\"synced\",\"revision\":3}\n\n"
	tests := []struct {
		name, method, path, contentType string
		status                          int
		body                            string
		wantErr                         string
	}{
		{"a valid pool", "GET", "/v1/pools/demo/echo", "application/json", 200, pool, ""},
		{"an unknown field", "GET", "/v1/pools/demo/echo", "application/json", 200, strings.Replace(pool, `"revision":3`, `"revision":3,"extra":1`, 1), "extra"},
		{"a missing field", "GET", "/v1/pools/demo/echo", "application/json", 200, strings.Replace(pool, `"ready":true,`, ``, 1), "ready"},
		{"an undocumented status", "GET", "/v1/pools/demo/echo", "application/json", 418, `{"message":"teapot"}`, "418"},
		{"an error without a message", "GET", "/v1/pools/demo/echo", "application/json", 404, `{"field":"pool"}`, "message"},
		{"an undocumented route", "GET", "/v1/things", "application/json", 200, `{}`, "not in the OpenAPI document"},
		{"valid newline-delimited events", "GET", "/v1/watch", "application/x-ndjson", 200, `{"type":"synced","revision":3}` + "\n" + `{"type":"upsert","revision":4,"pool":` + pool + "}\n", ""},
		{"an unknown event type", "GET", "/v1/watch", "application/x-ndjson", 200, `{"type":"synced","revision":3}` + "\n" + `{"type":"moved","revision":4}` + "\n", "moved"},
		{"valid server-sent events", "GET", "/v1/watch", "text/event-stream", 200, sse, ""},
		{"an event named unlike its type", "GET", "/v1/watch", "text/event-stream", 200, strings.Replace(sse, "event: synced", "event: upsert", 1), `named "upsert", but its data's type is synced`},
		{"an id that is not the revision", "GET", "/v1/watch", "text/event-stream", 200, strings.Replace(sse, "id: 3", "id: 4", 1), "is not its revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "https://discovery.test"+tt.path, nil)
			err := v.Validate(req, tt.status, http.Header{"Content-Type": {tt.contentType}}, []byte(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("valid answer refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error about %q", err, tt.wantErr)
			}
		})
	}
}
