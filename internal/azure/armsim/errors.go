package armsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Error is an ARM error response: the HTTP status, the error envelope
// ARM writes ({"error":{"code","message","details"}}) and, for throttling,
// the Retry-After it sends. The simulation's fake servers return it, and
// its transport turns it into that HTTP response, so that what a client
// sees (azcore's retry policy, runtime.NewResponseError) is what ARM
// would send.
type Error struct {
	Status  int
	Code    string
	Message string
	Details []ErrorDetail
	// RetryAfter, when set, is sent as Retry-After (whole seconds, as ARM
	// does) or, below a second, as retry-after-ms (which azcore honours
	// first), so that tests need not wait seconds.
	RetryAfter time.Duration
}

// ErrorDetail is one entry of an ARM error's details.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// body is the error envelope.
func (e *Error) body() []byte {
	type inner struct {
		Code    string        `json:"code"`
		Message string        `json:"message"`
		Details []ErrorDetail `json:"details"`
	}
	details := e.Details
	if details == nil {
		details = []ErrorDetail{}
	}
	b, _ := json.Marshal(struct {
		Error inner `json:"error"`
	}{inner{e.Code, e.Message, details}})
	return b
}

// response is the HTTP response ARM sends for e.
func (e *Error) response(req *http.Request) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	if e.RetryAfter > 0 {
		if e.RetryAfter%time.Second == 0 {
			h.Set("Retry-After", strconv.Itoa(int(e.RetryAfter/time.Second)))
		} else {
			h.Set("retry-after-ms", strconv.FormatInt(e.RetryAfter.Milliseconds(), 10))
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
		}
	}
	return jsonResponse(req, e.Status, h, e.body())
}

func jsonResponse(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	if body != nil {
		h.Set("Content-Type", "application/json; charset=utf-8")
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// Errors ARM returns, with the codes and messages the service uses.

// NotFound is the 404 of a GET or DELETE of a resource that does not
// exist.
func NotFound(id ID) *Error {
	return &Error{Status: http.StatusNotFound, Code: "ResourceNotFound",
		Message: fmt.Sprintf("The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
			id.Type(), id.Name(), id.ResourceGroup)}
}

// InvalidResourceName refuses a name outside the network resource
// provider's rules.
func InvalidResourceName(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "InvalidResourceName",
		Message: fmt.Sprintf("Resource name %s is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'.", name)}
}

// InvalidResourceReference refuses a reference to a resource that does
// not exist.
func InvalidResourceReference(ref, by string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "InvalidResourceReference",
		Message: fmt.Sprintf("Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.", ref, by)}
}

// AnotherOperationInProgress is the 409 of a write to a resource while an
// operation on it runs.
func AnotherOperationInProgress(id ID) *Error {
	return &Error{Status: http.StatusConflict, Code: "AnotherOperationInProgress",
		Message: fmt.Sprintf("Another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: https://management.azure.com%s/operations/pending", id)}
}

// ReferencedResourceNotProvisioned is the 429 RetryableError the network
// resource provider returns when a resource refers to one that is not in
// provisioningState Succeeded.
func ReferencedResourceNotProvisioned(ref ID, state string, by ID) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "RetryableError", Message: "A retryable error occurred.",
		Details: []ErrorDetail{{Code: "ReferencedResourceNotProvisioned",
			Message: fmt.Sprintf("Cannot proceed with operation because resource %s used by resource %s is not in Succeeded state. Resource is in %s state.", ref, by, state)}}}
}

// InvalidTagNameCharacters refuses tag names with characters ARM reserves.
func InvalidTagNameCharacters(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "InvalidTagNameCharacters",
		Message: fmt.Sprintf("The tag names '%s' have reserved characters '<,>,%%,&,\\,?,/' or control characters.", name)}
}

// Throttled is a 429 with the Retry-After ARM sends.
func Throttled(retryAfter time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "TooManyRequests", RetryAfter: retryAfter,
		Message: "The request is being throttled as the limit has been reached for operation type - Write_ObservationWindow_00:05:00. For more information, see - https://aka.ms/srpthrottlinglimits"}
}

// InternalServerError is ARM's 500.
func InternalServerError() *Error {
	return &Error{Status: http.StatusInternalServerError, Code: "InternalServerError", Message: "An error occurred."}
}
