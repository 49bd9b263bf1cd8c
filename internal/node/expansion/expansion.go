// Package expansion is the kubelet's $(VAR) expansion of container
// commands, arguments, env values and exec probes, shared by the process
// node and its probes.
package expansion

import "strings"

// Expand applies the Kubernetes $(VAR) expansion rules to s: a defined
// reference is replaced by its value, an undefined or unclosed one is kept
// as written, and $$ is a literal $ (k8s.io/kubernetes
// third_party/forked/golang/expansion).
func Expand(s string, vars map[string]string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		switch s[0] {
		case '$':
			b.WriteByte('$')
			s = s[1:]
		case '(':
			end := strings.IndexByte(s, ')')
			if end < 0 {
				// An unclosed reference is kept as written.
				b.WriteString("$(")
				s = s[1:]
				continue
			}
			name := s[1:end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			s = s[end+1:]
		default:
			// A $ before anything else is kept.
			b.WriteByte('$')
		}
	}
}
