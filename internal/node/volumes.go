package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Volumes are folders of the pod's folder on the host, bind-mounted by the
// init step at the containers' mount paths. Secret, ConfigMap, downwardAPI
// and projected volumes are written once, when the pod starts; emptyDir is
// an empty folder that lives as long as the pod.

// sources reads the objects volumes and env refer to.
type sources struct {
	secrets    corev1listers.SecretLister
	configMaps corev1listers.ConfigMapLister
	// token returns a service account token for a projected volume.
	token func(*corev1.Pod, *corev1.ServiceAccountTokenProjection) (string, error)
}

// writeVolumes makes every volume of the pod under dir and returns their
// host paths by name. A volume kind the node does not support is an error
// naming it.
func writeVolumes(pod *corev1.Pod, dir string, src sources) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		path := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
		var err error
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			err = writeSecret(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional, path, src)
		case v.ConfigMap != nil:
			err = writeConfigMap(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional, path, src)
		case v.DownwardAPI != nil:
			err = writeDownward(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, path)
		case v.Projected != nil:
			err = writeProjected(pod, v.Projected, path, src)
		default:
			err = fmt.Errorf("the process node supports emptyDir, secret, configMap, downwardAPI and projected volumes")
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		out[v.Name] = path
	}
	return out, nil
}

func mode(m *int32, def int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return os.FileMode(def)
}

func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, defMode *int32, optional *bool, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			if err := writeFile(filepath.Join(dir, k), v, mode(defMode, 0o644)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		m := defMode
		if it.Mode != nil {
			m = it.Mode
		}
		if err := writeFile(filepath.Join(dir, it.Path), v, mode(m, 0o644)); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, data []byte, m os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, m); err != nil {
		return err
	}
	// Exactly the mode asked for, whatever the umask.
	return os.Chmod(path, m)
}

func writeSecret(ns, name string, items []corev1.KeyToPath, defMode *int32, optional *bool, dir string, src sources) error {
	s, err := src.secrets.Secrets(ns).Get(name)
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("reading Secret %s/%s: %w", ns, name, err)
	}
	return writeKeys(dir, s.Data, items, defMode, optional, "Secret "+ns+"/"+name)
}

func writeConfigMap(ns, name string, items []corev1.KeyToPath, defMode *int32, optional *bool, dir string, src sources) error {
	cm, err := src.configMaps.ConfigMaps(ns).Get(name)
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(dir, data, items, defMode, optional, "ConfigMap "+ns+"/"+name)
}

func writeDownward(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defMode *int32, dir string) error {
	for _, it := range items {
		var v string
		switch {
		case it.FieldRef != nil:
			var err error
			if v, err = fieldValue(pod, it.FieldRef.FieldPath); err != nil {
				return err
			}
		case it.ResourceFieldRef != nil:
			v = resourceValue(pod, "", it.ResourceFieldRef)
		}
		m := defMode
		if it.Mode != nil {
			m = it.Mode
		}
		if err := writeFile(filepath.Join(dir, it.Path), []byte(v), mode(m, 0o644)); err != nil {
			return err
		}
	}
	return nil
}

func writeProjected(pod *corev1.Pod, p *corev1.ProjectedVolumeSource, dir string, src sources) error {
	for _, s := range p.Sources {
		var err error
		switch {
		case s.Secret != nil:
			err = writeSecret(pod.Namespace, s.Secret.Name, s.Secret.Items, p.DefaultMode, s.Secret.Optional, dir, src)
		case s.ConfigMap != nil:
			err = writeConfigMap(pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, p.DefaultMode, s.ConfigMap.Optional, dir, src)
		case s.DownwardAPI != nil:
			err = writeDownward(pod, s.DownwardAPI.Items, p.DefaultMode, dir)
		case s.ServiceAccountToken != nil:
			err = writeToken(pod, s.ServiceAccountToken, p.DefaultMode, dir, src)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeToken asks the API server for a token of the pod's service account,
// bound to the pod, as the kubelet does for projected volumes. The node
// writes it once: tokens last their expirationSeconds (an hour by default),
// longer than the local fleet's pods usually live.
func writeToken(pod *corev1.Pod, t *corev1.ServiceAccountTokenProjection, defMode *int32, dir string, src sources) error {
	if src.token == nil {
		return fmt.Errorf("serviceAccountToken: the node has no API client to ask for tokens")
	}
	token, err := src.token(pod, t)
	if err != nil {
		return fmt.Errorf("serviceAccountToken of %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err)
	}
	return writeFile(filepath.Join(dir, t.Path), []byte(token), mode(defMode, 0o644))
}

// fieldValue is the downward API's value of a pod field.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		var ips []string
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if key, ok := strings.CutPrefix(path, prefix); ok {
			key = strings.TrimSuffix(key, "']")
			if prefix == "metadata.labels['" {
				return pod.Labels[key], nil
			}
			return pod.Annotations[key], nil
		}
	}
	return "", fmt.Errorf("fieldPath %q is not supported", path)
}

func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range sets.List(sets.KeySet(m)) {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceValue is a container's resource request or limit as the downward
// API gives it; an unset limit is the node's capacity, as the kubelet says.
func resourceValue(pod *corev1.Pod, container string, ref *corev1.ResourceFieldSelector) string {
	if ref.ContainerName != "" {
		container = ref.ContainerName
	}
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == container {
				c = &list[i]
			}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	var q resource.Quantity
	if c != nil {
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		q = list[corev1.ResourceName(res)]
	}
	if q.IsZero() && kind == "limits" {
		// An unset limit is the node's allocatable, as the kubelet says; an
		// unset request is zero.
		q = nodeCapacity[corev1.ResourceName(res)]
	}
	if res == "cpu" {
		return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10)
	}
	return strconv.FormatInt((q.Value()+divisor.Value()-1)/divisor.Value(), 10)
}
