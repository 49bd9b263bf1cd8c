package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fileEntry is how readTree shows a regular file: its permissions and content.
func fileEntry(mode fs.FileMode, content string) string {
	return fmt.Sprintf("%#o %s", mode, content)
}

const dirEntry = "dir"

// readTree is what lies under root: folders as dirEntry, files as fileEntry shows them,
// by path relative to root.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = dirEntry
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is a %v, want a regular file", rel, info.Mode().Type())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = fileEntry(info.Mode().Perm(), string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keyPaths(items ...corev1.KeyToPath) []corev1.KeyToPath { return items }

func downwardField(path, field string) corev1.DownwardAPIVolumeFile {
	return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: field}}
}

func TestWriteVolumes(t *testing.T) {
	labels := "app=\"web\"\ntier=\"front\""
	for _, tc := range []struct {
		name    string
		volumes []corev1.Volume
		want    map[string]string // readTree of podDir/volumes
	}{
		{
			name:    "no volumes",
			volumes: nil,
			want:    map[string]string{},
		},
		{
			name:    "emptyDir is an empty folder",
			volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			want:    map[string]string{"cache": dirEntry},
		},
		{
			name: "secret: every key, mode 0644",
			volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "creds",
			}}}},
			want: map[string]string{
				"creds":          dirEntry,
				"creds/USER":     fileEntry(0o644, "admin"),
				"creds/PASSWORD": fileEntry(0o644, "s3cret"),
			},
		},
		{
			name: "secret: every key with defaultMode",
			volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "creds", DefaultMode: refOf[int32](0o400),
			}}}},
			want: map[string]string{
				"creds":          dirEntry,
				"creds/USER":     fileEntry(0o400, "admin"),
				"creds/PASSWORD": fileEntry(0o400, "s3cret"),
			},
		},
		{
			name: "secret: items only, at their paths, item mode over defaultMode",
			volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  "creds",
				DefaultMode: refOf[int32](0o440),
				Items: keyPaths(
					corev1.KeyToPath{Key: "USER", Path: "auth/user"},
					corev1.KeyToPath{Key: "PASSWORD", Path: "pw", Mode: refOf[int32](0o400)},
				),
			}}}},
			want: map[string]string{
				"creds":           dirEntry,
				"creds/auth":      dirEntry,
				"creds/auth/user": fileEntry(0o440, "admin"),
				"creds/pw":        fileEntry(0o400, "s3cret"),
			},
		},
		{
			name: "configMap: data and binaryData",
			volumes: []corev1.Volume{{Name: "web", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "assets"},
			}}}},
			want: map[string]string{
				"web":            dirEntry,
				"web/index.html": fileEntry(0o644, "<h1>hi</h1>"),
				"web/logo.bin":   fileEntry(0o644, "\x00\x01\xfe\xff"),
			},
		},
		{
			name: "configMap: an item from binaryData",
			volumes: []corev1.Volume{{Name: "web", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "assets"},
				Items:                keyPaths(corev1.KeyToPath{Key: "logo.bin", Path: "img/logo"}),
			}}}},
			want: map[string]string{
				"web":          dirEntry,
				"web/img":      dirEntry,
				"web/img/logo": fileEntry(0o644, "\x00\x01\xfe\xff"),
			},
		},
		{
			name: "downwardAPI: fields, labels as the kubelet formats them, resources",
			volumes: []corev1.Volume{{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				DefaultMode: refOf[int32](0o444),
				Items: []corev1.DownwardAPIVolumeFile{
					downwardField("name", "metadata.name"),
					downwardField("namespace", "metadata.namespace"),
					downwardField("uid", "metadata.uid"),
					downwardField("labels", "metadata.labels"),
					downwardField("annotations", "metadata.annotations"),
					downwardField("meta/app", "metadata.labels['app']"),
					{Path: "mode", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: refOf[int32](0o400)},
					{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{
						ContainerName: "web", Resource: "limits.cpu", Divisor: resource.MustParse("1m"),
					}},
					{Path: "mem_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{
						ContainerName: "web", Resource: "limits.memory", Divisor: resource.MustParse("1Mi"),
					}},
					{Path: "sidecar_mem", ResourceFieldRef: &corev1.ResourceFieldSelector{
						ContainerName: "sidecar", Resource: "limits.memory",
					}},
				},
			}}}},
			want: map[string]string{
				"info":             dirEntry,
				"info/name":        fileEntry(0o444, "web-0"),
				"info/namespace":   fileEntry(0o444, "shop"),
				"info/uid":         fileEntry(0o444, "0b6a3f4e-uid"),
				"info/labels":      fileEntry(0o444, labels),
				"info/annotations": fileEntry(0o444, `note="say \"hi\""`),
				"info/meta":        dirEntry,
				"info/meta/app":    fileEntry(0o444, "web"),
				"info/mode":        fileEntry(0o400, "web-0"),
				"info/cpu_limit":   fileEntry(0o444, "500"),
				"info/mem_limit":   fileEntry(0o444, "32768"), // unset: the node's 32Gi
				"info/sidecar_mem": fileEntry(0o444, "134217728"),
			},
		},
		{
			name: "projected: secret, configMaps and downwardAPI in one folder",
			volumes: []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: refOf[int32](0o440),
				Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "creds"},
						Items:                keyPaths(corev1.KeyToPath{Key: "USER", Path: "secret/user"}),
					}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
					}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "assets"},
						Items:                keyPaths(corev1.KeyToPath{Key: "index.html", Path: "www/index.html", Mode: refOf[int32](0o400)}),
					}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						downwardField("podinfo/labels", "metadata.labels"),
					}}},
				},
			}}}},
			want: map[string]string{
				"all":                dirEntry,
				"all/secret":         dirEntry,
				"all/secret/user":    fileEntry(0o440, "admin"),
				"all/MODE":           fileEntry(0o440, "fast"),
				"all/LOG_LEVEL":      fileEntry(0o440, "debug"),
				"all/www":            dirEntry,
				"all/www/index.html": fileEntry(0o400, "<h1>hi</h1>"),
				"all/podinfo":        dirEntry,
				"all/podinfo/labels": fileEntry(0o440, labels),
			},
		},
		{
			name: "optional missing Secret and ConfigMap: empty folders",
			volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope", Optional: refOf(true)}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: refOf(true),
				}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: refOf(true)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: refOf(true)}},
				}}}},
				// Another namespace's Secret of that name is not the pod's.
				{Name: "o", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "elsewhere", Optional: refOf(true)}}},
			},
			want: map[string]string{"s": dirEntry, "c": dirEntry, "p": dirEntry, "o": dirEntry},
		},
		{
			name: "several volumes side by side",
			volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
					Items:                keyPaths(corev1.KeyToPath{Key: "MODE", Path: "mode"}),
				}}},
			},
			want: map[string]string{"cache": dirEntry, "cfg": dirEntry, "cfg/mode": fileEntry(0o644, "fast")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			podDir := t.TempDir()
			pod := testPod()
			pod.Spec.Volumes = tc.volumes
			paths, err := writeVolumes(pod, podDir, testSources(t))
			if err != nil {
				t.Fatal(err)
			}
			wantPaths := map[string]string{}
			for _, v := range tc.volumes {
				wantPaths[v.Name] = filepath.Join(podDir, "volumes", v.Name)
			}
			if diff := cmp.Diff(wantPaths, paths); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			got := map[string]string{}
			if _, err := os.Stat(filepath.Join(podDir, "volumes")); err == nil {
				got = readTree(t, filepath.Join(podDir, "volumes"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteVolumesErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		volume corev1.Volume
		want   []string // in the error
	}{
		{
			name:   "unsupported kind",
			volume: corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
			want:   []string{`volume "host"`},
		},
		{
			name:   "no source at all",
			volume: corev1.Volume{Name: "blank"},
			want:   []string{`volume "blank"`},
		},
		{
			name:   "missing Secret",
			volume: corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope"}}},
			want:   []string{`volume "creds"`, "Secret", "shop/nope"},
		},
		{
			name: "missing Secret, optional false",
			volume: corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "nope", Optional: refOf(false),
			}}},
			want: []string{`volume "creds"`, "Secret", "shop/nope"},
		},
		{
			name: "missing ConfigMap",
			volume: corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "nope"},
			}}},
			want: []string{`volume "cfg"`, "ConfigMap", "shop/nope"},
		},
		{
			name: "Secret item with a missing key",
			volume: corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "creds", Items: keyPaths(corev1.KeyToPath{Key: "TOKEN", Path: "token"}),
			}}},
			want: []string{`volume "creds"`, "shop/creds", `"TOKEN"`},
		},
		{
			name: "ConfigMap item with a missing key",
			volume: corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: keyPaths(corev1.KeyToPath{Key: "NOPE", Path: "x"}),
			}}},
			want: []string{`volume "cfg"`, "shop/cfg", `"NOPE"`},
		},
		{
			name: "projected missing Secret",
			volume: corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}},
			}}}},
			want: []string{`volume "all"`, "Secret", "shop/nope"},
		},
		{
			name: "downwardAPI unsupported field",
			volume: corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{downwardField("img", "spec.containers[0].image")},
			}}},
			want: []string{`volume "info"`, `"spec.containers[0].image"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Volumes = []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				tc.volume,
			}
			paths, err := writeVolumes(pod, t.TempDir(), testSources(t))
			if err == nil {
				t.Fatalf("writeVolumes = %v, want an error", paths)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
		})
	}
}
