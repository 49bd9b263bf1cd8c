package node

import (
	"errors"
	"fmt"
	"github.com/fleetnet/fleetnet/internal/node/expansion"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// containerEnv is the container's environment as the kubelet makes it:
// Service variables of the pod's namespace (unless enableServiceLinks is
// false; KUBERNETES_SERVICE_* always), envFrom, then env with $(VAR)
// expanded against what came before. It is resolved when the container
// starts, so that status.podIP is known.
func containerEnv(pod *corev1.Pod, c *corev1.Container, src sources, services corev1listers.ServiceLister) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	if services != nil {
		for k, v := range serviceEnv(pod, services) {
			set(k, v)
		}
		sort.Strings(order)
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := src.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom ConfigMap %s/%s: %w", pod.Namespace, from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := src.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, fmt.Errorf("envFrom Secret %s/%s: %w", pod.Namespace, from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom == nil {
			v = expand(v, vars)
		} else {
			var err error
			if v, err = envValueFrom(pod, c, e, src); errors.Is(err, errOptionalMissing) {
				continue // the kubelet leaves the variable unset
			} else if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		set(e.Name, v)
	}
	if _, ok := vars["PATH"]; !ok {
		set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if _, ok := vars["HOSTNAME"]; !ok {
		set("HOSTNAME", podHostname(pod))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// errOptionalMissing is an optional reference whose object or key is missing.
var errOptionalMissing = errors.New("optional reference missing")

func envValueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, src sources) (string, error) {
	f := e.ValueFrom
	switch {
	case f.FieldRef != nil:
		return fieldValue(pod, f.FieldRef.FieldPath)
	case f.ResourceFieldRef != nil:
		return resourceValue(pod, c.Name, f.ResourceFieldRef), nil
	case f.ConfigMapKeyRef != nil:
		r := f.ConfigMapKeyRef
		cm, err := src.configMaps.ConfigMaps(pod.Namespace).Get(r.Name)
		if err != nil {
			if r.Optional != nil && *r.Optional {
				return "", errOptionalMissing
			}
			return "", fmt.Errorf("reading ConfigMap %s/%s: %w", pod.Namespace, r.Name, err)
		}
		v, ok := cm.Data[r.Key]
		if !ok {
			if r.Optional != nil && *r.Optional {
				return "", errOptionalMissing
			}
			return "", fmt.Errorf("key %q is not in ConfigMap %s/%s", r.Key, pod.Namespace, r.Name)
		}
		return v, nil
	case f.SecretKeyRef != nil:
		r := f.SecretKeyRef
		s, err := src.secrets.Secrets(pod.Namespace).Get(r.Name)
		if err != nil {
			if r.Optional != nil && *r.Optional {
				return "", errOptionalMissing
			}
			return "", fmt.Errorf("reading Secret %s/%s: %w", pod.Namespace, r.Name, err)
		}
		v, ok := s.Data[r.Key]
		if !ok {
			if r.Optional != nil && *r.Optional {
				return "", errOptionalMissing
			}
			return "", fmt.Errorf("key %q is not in Secret %s/%s", r.Key, pod.Namespace, r.Name)
		}
		return string(v), nil
	}
	return "", fmt.Errorf("valueFrom names no source")
}

// expand replaces $(VAR) with the variable's value when it is defined, and
// $$ with $, leaving undefined references as written (the kubelet's rules).
func expand(s string, vars map[string]string) string { return expansion.Expand(s, vars) }

// expandArgs expands $(VAR) in a command or args against the container's
// environment.
func expandArgs(args []string, env []string) []string {
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vars)
	}
	return out
}

// serviceEnv are the variables of the Services in the pod's namespace
// (docker-link style, as the kubelet makes them) and the API server's in
// default; a Service of the pod's namespace wins over default's.
func serviceEnv(pod *corev1.Pod, services corev1listers.ServiceLister) map[string]string {
	out := map[string]string{}
	add := func(s *corev1.Service) {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
			return
		}
		name := envName(s.Name)
		ip := s.Spec.ClusterIP
		first := s.Spec.Ports[0]
		out[name+"_SERVICE_HOST"] = ip
		out[name+"_SERVICE_PORT"] = strconv.Itoa(int(first.Port))
		out[name+"_PORT"] = fmt.Sprintf("%s://%s", strings.ToLower(string(first.Protocol)), net.JoinHostPort(ip, strconv.Itoa(int(first.Port))))
		for _, p := range s.Spec.Ports {
			if p.Name != "" {
				out[name+"_SERVICE_PORT_"+envName(p.Name)] = strconv.Itoa(int(p.Port))
			}
			port := strconv.Itoa(int(p.Port))
			prefix := fmt.Sprintf("%s_PORT_%s_%s", name, port, strings.ToUpper(string(p.Protocol)))
			out[prefix] = fmt.Sprintf("%s://%s", strings.ToLower(string(p.Protocol)), net.JoinHostPort(ip, port))
			out[prefix+"_PROTO"] = strings.ToLower(string(p.Protocol))
			out[prefix+"_PORT"] = port
			out[prefix+"_ADDR"] = ip
		}
	}
	if k, err := services.Services(corev1.NamespaceDefault).Get("kubernetes"); err == nil {
		add(k)
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		if list, err := services.Services(pod.Namespace).List(labels.Everything()); err == nil {
			for _, s := range list {
				if pod.Namespace != corev1.NamespaceDefault || s.Name != "kubernetes" {
					add(s)
				}
			}
		}
	}
	return out
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// podHostname is the pod's hostname: spec.hostname or its name, at most 63
// bytes as the kubelet truncates it.
func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		return *o
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}
