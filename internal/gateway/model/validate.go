package model

import (
	"fmt"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// validator collects the problems of one object's spec, each naming its
// field and value.
type validator struct{ problems []string }

func newValidator() *validator { return &validator{} }

func (v *validator) bad(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// between checks that an integer field is within [lo, hi].
func (v *validator) between(field string, n, lo, hi int32) {
	if n < lo || n > hi {
		v.bad("%s: %d is not from %d to %d", field, n, lo, hi)
	}
}

// duration parses an optional duration field within [lo, hi] (hi 0: no
// upper bound) into milliseconds; def when unset or wrong.
func (v *validator) duration(field string, d gwv1.Duration, lo, hi time.Duration, def int64) int64 {
	if d == "" {
		return def
	}
	t, err := time.ParseDuration(string(d))
	switch {
	case err != nil:
		v.bad("%s: %q is not a duration", field, d)
	case t < lo || (hi > 0 && t > hi):
		if hi > 0 {
			v.bad("%s: %q is not from %s to %s", field, d, lo, hi)
		} else {
			v.bad("%s: %q is shorter than %s", field, d, lo)
		}
	default:
		return t.Milliseconds()
	}
	return def
}
