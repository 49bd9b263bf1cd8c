// Package armerr turns Azure Resource Manager error responses into what
// fleetnet's Azure providers report and decide on: one line with the
// status, the ARM error code and message (for Programmed messages and
// Warning events), and the statuses that are waited for.
package armerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/fleetnet/fleetnet/api/keys"
)

// Error is an ARM error response in one line: status, code and message
// (azcore's ResponseError prints the whole response).
type Error struct {
	// Status is the HTTP status; 0 for an operation that ended Failed.
	Status  int
	Code    string
	Message string
	Err     *azcore.ResponseError
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("the operation ended Failed: %s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Describe turns an *azcore.ResponseError into an *Error, with the
// details ARM gives appended to the message; other errors stay.
func Describe(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	e := &Error{Status: re.StatusCode, Code: re.ErrorCode, Err: re}
	if re.RawResponse != nil {
		if body, rerr := runtime.Payload(re.RawResponse); rerr == nil {
			var env struct {
				Status string `json:"status"`
				Error  struct {
					Code    string `json:"code"`
					Message string `json:"message"`
					Details []struct {
						Code    string `json:"code"`
						Message string `json:"message"`
					} `json:"details"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &env) == nil {
				e.Message = env.Error.Message
				for _, d := range env.Error.Details {
					e.Message += " (" + d.Code + ": " + d.Message + ")"
				}
				if e.Code == "" {
					e.Code = env.Error.Code
				}
				if env.Status == "Failed" {
					e.Status = 0
				}
			}
		}
	}
	if e.Message == "" {
		e.Message = http.StatusText(re.StatusCode)
	}
	if e.Status == http.StatusOK {
		e.Status = 0 // a long-running operation that ended Failed
	}
	return e
}

// Status is the HTTP status of an ARM error response, 0 for other errors.
func Status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return Status(err) == http.StatusNotFound }

// IsConflict reports a 409: another operation on the resource, or on one
// it depends on, is in progress.
func IsConflict(err error) bool { return Status(err) == http.StatusConflict }

// Transient reports the errors that are waited for rather than reported:
// 409 (see IsConflict) and 429 (throttled, once azcore's own retries
// honouring Retry-After are spent).
func Transient(err error) bool {
	s := Status(err)
	return s == http.StatusConflict || s == http.StatusTooManyRequests
}

// Reason names the kind of an Azure provider's failure (keys.ReasonAzure*),
// for Programmed=False and Warning events.
func Reason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return keys.ReasonAzureTimeout
	}
	status := Status(err)
	var e *Error
	if errors.As(err, &e) {
		if e.Status == 0 {
			return keys.ReasonAzureOperationFailed
		}
		status = e.Status
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return keys.ReasonAzureAuthorizationFailed
	case status == http.StatusTooManyRequests:
		return keys.ReasonAzureThrottled
	case status == http.StatusConflict:
		return keys.ReasonAzureConflict
	case status >= 500:
		return keys.ReasonAzureUnavailable
	}
	return keys.ReasonAzureRequestFailed
}
