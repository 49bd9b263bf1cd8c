package armerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/fleetnet/fleetnet/api/keys"
)

func response(status int, body string) error {
	return runtime.NewResponseError(&http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(body)), Request: &http.Request{Method: http.MethodPut, URL: &url.URL{Scheme: "https", Host: "management.azure.com", Path: "/subscriptions/s"}}})
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      string
		notFound  bool
		transient bool
	}{
		{"a refusal", response(http.StatusForbidden, `{"error":{"code":"AuthorizationFailed","message":"no write on routes"}}`),
			"403 AuthorizationFailed: no write on routes", false, false},
		{"details", response(http.StatusBadRequest, `{"error":{"code":"InvalidResource","message":"bad origin","details":[{"code":"HostName","message":"empty"}]}}`),
			"400 InvalidResource: bad origin (HostName: empty)", false, false},
		{"a failed operation", response(http.StatusOK, `{"status":"Failed","error":{"code":"Conflict","message":"in use"}}`),
			"the operation ended Failed: Conflict: in use", false, false},
		{"no body", response(http.StatusNotFound, ``), "404 : Not Found", true, false},
		{"throttled", response(http.StatusTooManyRequests, `{"error":{"code":"TooManyRequests","message":"slow down"}}`),
			"429 TooManyRequests: slow down", false, true},
		{"another operation running", response(http.StatusConflict, `{"error":{"code":"Conflict","message":"busy"}}`),
			"409 Conflict: busy", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wrapped := fmt.Errorf("writing route: %w", tt.err)
			got := Describe(wrapped)
			var e *Error
			if !errors.As(got, &e) || got.Error() != tt.want {
				t.Errorf("Describe = %q, want %q as an *Error", got, tt.want)
			}
			if IsNotFound(wrapped) != tt.notFound || Transient(wrapped) != tt.transient {
				t.Errorf("not found %v, transient %v; want %v, %v", IsNotFound(wrapped), Transient(wrapped), tt.notFound, tt.transient)
			}
		})
	}
	if plain := errors.New("dial tcp: refused"); Describe(plain) != plain || Status(plain) != 0 {
		t.Error("an error that is not an ARM response changed")
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"403, described", Describe(response(http.StatusForbidden, `{"error":{"code":"AuthorizationFailed","message":"no"}}`)), keys.ReasonAzureAuthorizationFailed},
		{"401, wrapped", fmt.Errorf("creating: %w", response(http.StatusUnauthorized, ``)), keys.ReasonAzureAuthorizationFailed},
		{"429", response(http.StatusTooManyRequests, ``), keys.ReasonAzureThrottled},
		{"409", response(http.StatusConflict, ``), keys.ReasonAzureConflict},
		{"503", response(http.StatusServiceUnavailable, ``), keys.ReasonAzureUnavailable},
		{"an operation that ended Failed", Describe(response(http.StatusOK, `{"status":"Failed","error":{"code":"Conflict","message":"in use"}}`)), keys.ReasonAzureOperationFailed},
		{"a wait past its bound", fmt.Errorf("waiting for the profile: %w", context.DeadlineExceeded), keys.ReasonAzureTimeout},
		{"400", response(http.StatusBadRequest, ``), keys.ReasonAzureRequestFailed},
		{"no response", errors.New("dial tcp: connection refused"), keys.ReasonAzureRequestFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reason(tt.err); got != tt.want {
				t.Errorf("Reason(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}
