package node

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

const wantDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// newIndexer is an informer's store filled with objs, for the listers.
func newIndexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// testSources are the Secrets and ConfigMaps of namespace shop the tests
// of env and volumes refer to.
func testSources(t *testing.T) sources {
	t.Helper()
	return sources{
		secrets: corev1listers.NewSecretLister(newIndexer(t,
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "creds"},
				Data:       map[string][]byte{"USER": []byte("admin"), "PASSWORD": []byte("s3cret")},
			},
			// Same name, other namespace: never read by a pod of shop.
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"},
				Data:       map[string][]byte{"K": []byte("v")},
			},
		)),
		configMaps: corev1listers.NewConfigMapLister(newIndexer(t,
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cfg"},
				Data:       map[string]string{"MODE": "fast", "LOG_LEVEL": "debug"},
			},
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "overrides"},
				Data: map[string]string{
					"CART_SERVICE_HOST":       "cart.example",
					"MY_DB_SERVICE_PORT":      "6432",
					"KUBERNETES_SERVICE_PORT": "1",
					"RAW":                     "$(MODE)",
					"MODE":                    "from-overrides",
				},
			},
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "assets"},
				Data:       map[string]string{"index.html": "<h1>hi</h1>"},
				BinaryData: map[string][]byte{"logo.bin": {0x00, 0x01, 0xfe, 0xff}},
			},
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "elsewhere"},
				Data:       map[string]string{"K": "v"},
			},
		)),
	}
}

// testServices: two Services of shop (one headless), one of another
// namespace and the API server's.
func testServices(t *testing.T) corev1listers.ServiceLister {
	t.Helper()
	svc := func(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: ports},
		}
	}
	return corev1listers.NewServiceLister(newIndexer(t,
		svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443}),
		svc("shop", "my-db", "10.96.0.20", corev1.ServicePort{Name: "pg", Port: 5432}, corev1.ServicePort{Name: "metrics-http", Port: 9187}),
		svc("shop", "cart", "10.96.0.21", corev1.ServicePort{Port: 80}),
		svc("shop", "peers", corev1.ClusterIPNone, corev1.ServicePort{Port: 7000}),
		svc("other", "far", "10.96.0.30", corev1.ServicePort{Port: 80}),
	))
}

// testPod is pod shop/web-0 with containers web and sidecar.
func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   "shop",
			Name:        "web-0",
			UID:         "0b6a3f4e-uid",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": `say "hi"`},
		},
		Spec: corev1.PodSpec{
			NodeName:           "fleet-a-node",
			ServiceAccountName: "web-sa",
			Containers: []corev1.Container{
				{
					Name: "web",
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
						Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
					},
				},
				{
					Name: "sidecar",
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
					},
				},
			},
		},
		Status: corev1.PodStatus{
			PodIP:   "10.244.0.7",
			PodIPs:  []corev1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}},
			HostIP:  "172.18.0.2",
			HostIPs: []corev1.HostIP{{IP: "172.18.0.2"}, {IP: "fc00::2"}},
		},
	}
}

func refOf[T any](v T) *T { return &v }

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func resourceEnv(name, container, res, divisor string) corev1.EnvVar {
	ref := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		ref.Divisor = resource.MustParse(divisor)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: ref}}
}

func configMapKeyEnv(name, cm, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: key, Optional: optional,
	}}}
}

func secretKeyEnv(name, secret, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: optional,
	}}}
}

func fromConfigMap(name, prefix string, optional *bool) corev1.EnvFromSource {
	return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: optional,
	}}
}

func fromSecret(name, prefix string, optional *bool) corev1.EnvFromSource {
	return corev1.EnvFromSource{Prefix: prefix, SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: optional,
	}}
}

// envMap is the environment as a map; a name given twice fails the test,
// as a process would see only one of the two.
func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, e := range env {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("entry %q has no =", e)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("%s is given twice in %q", k, env)
		}
		m[k] = v
	}
	return m
}

// The kubelet's cases (third_party/forked/golang/expansion/expand_test.go)
// with its variables, and a few of the process node's own.
func TestExpand(t *testing.T) {
	vars := map[string]string{
		"VAR_A":     "A",
		"VAR_B":     "B",
		"VAR_C":     "C",
		"VAR_REF":   "$(VAR_A)",
		"VAR_EMPTY": "",
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"whole string", "$(VAR_A)", "A"},
		{"repeat", "$(VAR_A)-$(VAR_A)", "A-A"},
		{"beginning", "$(VAR_A)-1", "A-1"},
		{"middle", "___$(VAR_B)___", "___B___"},
		{"end", "___$(VAR_C)", "___C"},
		{"compound", "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"},
		{"escape and expand", "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"},
		{"compound escape", "$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"},
		{"mixed in escapes", "f000-$$VAR_A", "f000-$VAR_A"},
		{"backslash escape ignored", `foo\$(VAR_C)bar`, `foo\Cbar`},
		{"double backslash ignored", `foo\\$(VAR_C)bar`, `foo\\Cbar`},
		{"lots of backslashes", `foo\\\\$(VAR_A)bar`, `foo\\\\Abar`},
		{"nested var references", "$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"},
		{"nested var references second type", "$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		{"value is a reference, not expanded again", "$(VAR_REF)", "$(VAR_A)"},
		{"value is a reference x 2", "%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"},
		{"empty var", "foo$(VAR_EMPTY)bar", "foobar"},
		{"unterminated expression", "foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"},
		{"expression without operator", "f00__(VAR_A)__", "f00__(VAR_A)__"},
		{"shell special vars pass through", "$?_boo_$!", "$?_boo_$!"},
		{"bare operators are ignored", "$VAR_A", "$VAR_A"},
		{"undefined vars are passed through", "$(VAR_DNE)", "$(VAR_DNE)"},
		{"multiple (even) operators, var undefined", "$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"},
		{"multiple (even) operators, var defined", "$$$$$$(VAR_A)", "$$$(VAR_A)"},
		{"multiple (odd) operators, var undefined", "$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"},
		{"multiple (odd) operators, var defined", "$$$$$$$(VAR_A)", "$$$A"},
		{"missing open expression", "$VAR_A)", "$VAR_A)"},
		{"shell syntax ignored", "${VAR_A}", "${VAR_A}"},
		{"trailing incomplete expression not consumed", "$(VAR_B)_______$(A", "B_______$(A"},
		{"trailing incomplete expression, no content, is not consumed", "$(VAR_C)_______$(", "C_______$("},
		{"operator at end of input string is preserved", "$(VAR_A)foobarzab$", "Afoobarzab$"},
		{"shell escaped incomplete expr", `foo-\$(VAR_A`, `foo-\$(VAR_A`},
		{"lots of $( in middle", "--$($($($($--", "--$($($($($--"},
		{"lots of $( in beginning", "$($($($($--foo$(", "$($($($($--foo$("},
		{"lots of $( at end", "foo0--$($($($(", "foo0--$($($($("},
		{"escaped operators in variable names are not escaped", "$(foo$$var)", "$(foo$$var)"},
		{"newline not expanded", "\n", "\n"},
		{"dollar sign followed by non-ASCII UTF-8 character", "$£FOO", "$£FOO"},
		{"dollar sign followed by multi-byte UTF-8 character in middle", "prefix-$€-suffix", "prefix-$€-suffix"},
		{"dollar sign followed by Chinese character", "$中文", "$中文"},

		{"no operator at all", "plain text", "plain text"},
		{"empty input", "", ""},
		{"lone operator", "$", "$"},
		{"escaped operator alone", "$$", "$"},
		{"empty name is undefined", "$()", "$()"},
		{"name is taken as written", "$( VAR_A )", "$( VAR_A )"},
		{"escaped reference then reference", "$$$(VAR_A)", "$A"},
		{"undefined, then defined", "$(NOPE)/$(VAR_B)", "$(NOPE)/B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := expand(tc.in, vars); got != tc.want {
				t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExpandArgs(t *testing.T) {
	env := []string{"PORT=8080", "URL=http://x/?a=b", "EMPTY="}
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"no arguments", nil, []string{}},
		{"each argument expanded", []string{"--port=$(PORT)", "$(URL)", "x$(EMPTY)y"}, []string{"--port=8080", "http://x/?a=b", "xy"}},
		{"value with = kept whole", []string{"$(URL)"}, []string{"http://x/?a=b"}},
		{"undefined and escaped left for the shell", []string{"sh", "-c", "echo $(HOME) $$PORT"}, []string{"sh", "-c", "echo $(HOME) $PORT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, expandArgs(tc.in, env)); diff != "" {
				t.Errorf("expandArgs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// The whole environment, in order: envFrom sources in their order (keys
// sorted within one), an env entry overriding an envFrom one in place,
// then env in its order, then the PATH and HOSTNAME defaults.
func TestContainerEnvOrder(t *testing.T) {
	pod := testPod()
	c := pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{fromConfigMap("cfg", "", nil), fromSecret("creds", "DB_", nil)}
	c.Env = []corev1.EnvVar{
		{Name: "ZED", Value: "last"},
		{Name: "MODE", Value: "slow"},
		{Name: "URL", Value: "pg://$(DB_USER)@db/$(MODE)"},
	}
	got, err := containerEnv(pod, &c, testSources(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"LOG_LEVEL=debug",
		"MODE=slow",
		"DB_PASSWORD=s3cret",
		"DB_USER=admin",
		"ZED=last",
		"URL=pg://admin@db/slow",
		"PATH=" + wantDefaultPath,
		"HOSTNAME=web-0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containerEnv (-want +got):\n%s", diff)
	}
}

func TestContainerEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      func(*corev1.Pod) // changes to testPod, if any
		services bool              // with testServices, else none
		envFrom  []corev1.EnvFromSource
		env      []corev1.EnvVar
		want     map[string]string // variables and their values
		absent   []string          // variables that must not be set
	}{
		{
			name:   "defaults only",
			want:   map[string]string{"PATH": wantDefaultPath, "HOSTNAME": "web-0"},
			absent: []string{"KUBERNETES_SERVICE_HOST"},
		},
		{
			name: "PATH and HOSTNAME given win over the defaults",
			env:  []corev1.EnvVar{{Name: "PATH", Value: "/opt/bin"}, {Name: "HOSTNAME", Value: "custom"}},
			want: map[string]string{"PATH": "/opt/bin", "HOSTNAME": "custom"},
		},
		{
			name: "HOSTNAME is spec.hostname",
			pod:  func(p *corev1.Pod) { p.Spec.Hostname = "front" },
			want: map[string]string{"HOSTNAME": "front"},
		},
		{
			name:     "service variables of the pod's namespace and the API server's",
			services: true,
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST":         "10.96.0.1",
				"KUBERNETES_SERVICE_PORT":         "443",
				"KUBERNETES_SERVICE_PORT_HTTPS":   "443",
				"MY_DB_SERVICE_HOST":              "10.96.0.20",
				"MY_DB_SERVICE_PORT":              "5432",
				"MY_DB_SERVICE_PORT_PG":           "5432",
				"MY_DB_SERVICE_PORT_METRICS_HTTP": "9187",
				"CART_SERVICE_HOST":               "10.96.0.21",
				"CART_SERVICE_PORT":               "80",
			},
			// Headless Services have no variables; other namespaces' are not seen.
			absent: []string{"PEERS_SERVICE_HOST", "PEERS_SERVICE_PORT", "FAR_SERVICE_HOST"},
		},
		{
			name:     "enableServiceLinks false keeps the API server's only",
			pod:      func(p *corev1.Pod) { p.Spec.EnableServiceLinks = refOf(false) },
			services: true,
			want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
			absent:   []string{"MY_DB_SERVICE_HOST", "CART_SERVICE_HOST"},
		},
		{
			name:     "service < envFrom < env",
			services: true,
			envFrom:  []corev1.EnvFromSource{fromConfigMap("overrides", "", nil)},
			env:      []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}},
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.96.0.1",
				"KUBERNETES_SERVICE_PORT": "6443",
				"CART_SERVICE_HOST":       "cart.example",
				"CART_SERVICE_PORT":       "80",
				"MY_DB_SERVICE_PORT":      "6432",
			},
		},
		{
			name:    "envFrom overrides an earlier envFrom",
			envFrom: []corev1.EnvFromSource{fromConfigMap("cfg", "", nil), fromConfigMap("overrides", "", nil)},
			want:    map[string]string{"MODE": "from-overrides", "LOG_LEVEL": "debug", "RAW": "$(MODE)"},
		},
		{
			name:    "envFrom prefix",
			envFrom: []corev1.EnvFromSource{fromConfigMap("cfg", "APP_", nil), fromSecret("creds", "DB_", nil)},
			want:    map[string]string{"APP_MODE": "fast", "APP_LOG_LEVEL": "debug", "DB_USER": "admin", "DB_PASSWORD": "s3cret"},
			absent:  []string{"MODE", "USER"},
		},
		{
			name:    "optional missing envFrom sources are skipped",
			envFrom: []corev1.EnvFromSource{fromConfigMap("nope", "", refOf(true)), fromSecret("nope", "", refOf(true)), fromConfigMap("cfg", "", refOf(true))},
			want:    map[string]string{"MODE": "fast"},
		},
		{
			name:    "envFrom reads the pod's namespace only",
			envFrom: []corev1.EnvFromSource{fromConfigMap("elsewhere", "", refOf(true)), fromSecret("elsewhere", "", refOf(true))},
			absent:  []string{"K"},
		},
		{
			name: "key references",
			env: []corev1.EnvVar{
				configMapKeyEnv("LEVEL", "cfg", "LOG_LEVEL", nil),
				secretKeyEnv("PW", "creds", "PASSWORD", nil),
				configMapKeyEnv("OPT_LEVEL", "cfg", "LOG_LEVEL", refOf(true)),
			},
			want: map[string]string{"LEVEL": "debug", "PW": "s3cret", "OPT_LEVEL": "debug"},
		},
		{
			name: "fieldRef",
			env: []corev1.EnvVar{
				fieldEnv("POD_NAME", "metadata.name"),
				fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("POD_UID", "metadata.uid"),
				fieldEnv("POD_IP", "status.podIP"),
				fieldEnv("POD_IPS", "status.podIPs"),
				fieldEnv("HOST_IP", "status.hostIP"),
				fieldEnv("NODE", "spec.nodeName"),
				fieldEnv("SA", "spec.serviceAccountName"),
				fieldEnv("APP", "metadata.labels['app']"),
				fieldEnv("NOTE", "metadata.annotations['note']"),
				fieldEnv("MISSING_LABEL", "metadata.labels['nope']"),
			},
			want: map[string]string{
				"POD_NAME":      "web-0",
				"POD_NAMESPACE": "shop",
				"POD_UID":       "0b6a3f4e-uid",
				"POD_IP":        "10.244.0.7",
				"POD_IPS":       "10.244.0.7,fd00::7",
				"HOST_IP":       "172.18.0.2",
				"NODE":          "fleet-a-node",
				"SA":            "web-sa",
				"APP":           "web",
				"NOTE":          `say "hi"`,
				"MISSING_LABEL": "",
			},
		},
		{
			name: "resourceFieldRef: a set limit, rounded up to the divisor",
			env: []corev1.EnvVar{
				resourceEnv("CPU_M", "", "limits.cpu", "1m"),
				resourceEnv("CPU", "", "limits.cpu", ""),
				resourceEnv("MEM_REQ_MI", "", "requests.memory", "1Mi"),
				resourceEnv("MEM_REQ", "", "requests.memory", ""),
			},
			want: map[string]string{"CPU_M": "500", "CPU": "1", "MEM_REQ_MI": "64", "MEM_REQ": "67108864"},
		},
		{
			name: "resourceFieldRef: an unset limit is the node's capacity",
			env: []corev1.EnvVar{
				resourceEnv("MEM", "", "limits.memory", ""),
				resourceEnv("MEM_GI", "", "limits.memory", "1Gi"),
				resourceEnv("EPHEMERAL_GI", "", "limits.ephemeral-storage", "1Gi"),
			},
			want: map[string]string{"MEM": "34359738368", "MEM_GI": "32", "EPHEMERAL_GI": "100"},
		},
		{
			name: "resourceFieldRef: another container's",
			env: []corev1.EnvVar{
				resourceEnv("SIDECAR_MEM_MI", "sidecar", "limits.memory", "1Mi"),
				resourceEnv("SIDECAR_CPU", "sidecar", "limits.cpu", ""),
			},
			want: map[string]string{"SIDECAR_MEM_MI": "128", "SIDECAR_CPU": "16"},
		},
		{
			// The kubelet's TestMapReference.
			name: "expansion against earlier variables",
			env: []corev1.EnvVar{
				{Name: "FOO", Value: "bar"},
				{Name: "ZOO", Value: "$(FOO)-1"},
				{Name: "BLU", Value: "$(ZOO)-2"},
			},
			want: map[string]string{"FOO": "bar", "ZOO": "bar-1", "BLU": "bar-1-2"},
		},
		{
			name: "a later variable is not expanded",
			env: []corev1.EnvVar{
				{Name: "EARLY", Value: "$(LATE)/x"},
				{Name: "LATE", Value: "y"},
			},
			want: map[string]string{"EARLY": "$(LATE)/x", "LATE": "y"},
		},
		{
			name:     "expansion against service, envFrom and valueFrom variables",
			services: true,
			envFrom:  []corev1.EnvFromSource{fromSecret("creds", "", nil)},
			env: []corev1.EnvVar{
				fieldEnv("MY_IP", "status.podIP"),
				{Name: "DSN", Value: "postgres://$(USER):$(PASSWORD)@$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT)/?from=$(MY_IP)"},
				{Name: "LITERAL", Value: "$$(USER) $(UNDEFINED)"},
			},
			want: map[string]string{
				"DSN":     "postgres://admin:s3cret@10.96.0.20:5432/?from=10.244.0.7",
				"LITERAL": "$(USER) $(UNDEFINED)",
			},
		},
		{
			name:    "envFrom and valueFrom values are not expanded",
			envFrom: []corev1.EnvFromSource{fromConfigMap("cfg", "", nil), fromConfigMap("overrides", "", nil)},
			env:     []corev1.EnvVar{{Name: "A", Value: "$(MODE)"}, fieldEnv("B", "metadata.labels['app']")},
			pod: func(p *corev1.Pod) {
				p.Labels["app"] = "$(A)"
			},
			want: map[string]string{"RAW": "$(MODE)", "A": "from-overrides", "B": "$(A)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			c := pod.Spec.Containers[0]
			c.EnvFrom, c.Env = tc.envFrom, tc.env
			var services corev1listers.ServiceLister
			if tc.services {
				services = testServices(t)
			}
			env, err := containerEnv(pod, &c, testSources(t), services)
			if err != nil {
				t.Fatal(err)
			}
			got := envMap(t, env)
			for k, want := range tc.want {
				if v, ok := got[k]; !ok || v != want {
					t.Errorf("%s = %q (set: %t), want %q", k, v, ok, want)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %q, want it unset", k, v)
				}
			}
		})
	}
}

func TestContainerEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		envFrom []corev1.EnvFromSource
		env     []corev1.EnvVar
		want    []string // in the error
	}{
		{
			name:    "required envFrom ConfigMap missing",
			envFrom: []corev1.EnvFromSource{fromConfigMap("nope", "", nil)},
			want:    []string{"ConfigMap", "shop/nope"},
		},
		{
			name:    "envFrom ConfigMap with optional false missing",
			envFrom: []corev1.EnvFromSource{fromConfigMap("nope", "", refOf(false))},
			want:    []string{"ConfigMap", "shop/nope"},
		},
		{
			name:    "required envFrom Secret missing",
			envFrom: []corev1.EnvFromSource{fromSecret("nope", "", nil)},
			want:    []string{"Secret", "shop/nope"},
		},
		{
			name: "required ConfigMap key missing",
			env:  []corev1.EnvVar{configMapKeyEnv("X", "cfg", "NO_SUCH_KEY", nil)},
			want: []string{"env X", "shop/cfg", `"NO_SUCH_KEY"`},
		},
		{
			name: "required Secret key missing",
			env:  []corev1.EnvVar{secretKeyEnv("X", "creds", "NO_SUCH_KEY", nil)},
			want: []string{"env X", "shop/creds", `"NO_SUCH_KEY"`},
		},
		{
			name: "required ConfigMap of a key reference missing",
			env:  []corev1.EnvVar{configMapKeyEnv("X", "nope", "K", nil)},
			want: []string{"env X", "shop/nope"},
		},
		{
			name: "required Secret of a key reference missing",
			env:  []corev1.EnvVar{secretKeyEnv("X", "nope", "K", nil)},
			want: []string{"env X", "shop/nope"},
		},
		{
			name: "unsupported fieldPath",
			env:  []corev1.EnvVar{fieldEnv("X", "spec.containers[0].image")},
			want: []string{"env X", `"spec.containers[0].image"`},
		},
		{
			name: "valueFrom without a source",
			env:  []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{}}},
			want: []string{"env X"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			c := pod.Spec.Containers[0]
			c.EnvFrom, c.Env = tc.envFrom, tc.env
			env, err := containerEnv(pod, &c, testSources(t), testServices(t))
			if err == nil {
				t.Fatalf("containerEnv = %q, want an error", env)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
		})
	}
}

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, tc := range []struct {
		name, podName, hostname, want string
	}{
		{"pod name", "web-0", "", "web-0"},
		{"spec.hostname wins", "web-0", "front", "front"},
		{"63 bytes kept", strings.Repeat("b", 63), "", strings.Repeat("b", 63)},
		{"long name truncated to 63", long, "", long[:63]},
		{"long hostname truncated to 63", "web-0", long, long[:63]},
		{"trailing - after truncation trimmed", strings.Repeat("c", 62) + "-tail", "", strings.Repeat("c", 62)},
		{"trailing -. run after truncation trimmed", strings.Repeat("d", 60) + ".-.-x", "", strings.Repeat("d", 60)},
		{"- before 63 kept", strings.Repeat("e", 61) + "-f", "", strings.Repeat("e", 61) + "-f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.podName}, Spec: corev1.PodSpec{Hostname: tc.hostname}}
			if got := podHostname(pod); got != tc.want {
				t.Errorf("podHostname = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFieldValue(t *testing.T) {
	pod := testPod()
	for _, tc := range []struct {
		path, want string
	}{
		{"metadata.name", "web-0"},
		{"metadata.namespace", "shop"},
		{"metadata.uid", "0b6a3f4e-uid"},
		{"spec.nodeName", "fleet-a-node"},
		{"spec.serviceAccountName", "web-sa"},
		{"status.podIP", "10.244.0.7"},
		{"status.podIPs", "10.244.0.7,fd00::7"},
		{"status.hostIP", "172.18.0.2"},
		{"status.hostIPs", "172.18.0.2,fc00::2"},
		// The kubelet's fieldpath.FormatMap: key="quoted value" lines,
		// sorted by key, no final newline.
		{"metadata.labels", "app=\"web\"\ntier=\"front\""},
		{"metadata.annotations", `note="say \"hi\""`},
		{"metadata.labels['tier']", "front"},
		{"metadata.labels['nope']", ""},
		{"metadata.annotations['note']", `say "hi"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, err := fieldValue(pod, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("fieldValue(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestFieldValueEmptyMaps(t *testing.T) {
	pod := &corev1.Pod{}
	for _, path := range []string{"metadata.labels", "metadata.annotations", "status.podIPs", "metadata.labels['app']"} {
		if got, err := fieldValue(pod, path); err != nil || got != "" {
			t.Errorf("fieldValue(%q) = %q, %v; want empty", path, got, err)
		}
	}
}

func TestFieldValueUnsupported(t *testing.T) {
	for _, path := range []string{
		"spec.containers[0].image",
		"metadata.generateName",
		"status.phase",
		"spec.nodeName['x']",
		"",
	} {
		t.Run(path, func(t *testing.T) {
			got, err := fieldValue(testPod(), path)
			if err == nil {
				t.Fatalf("fieldValue(%q) = %q, want an error", path, got)
			}
			if !strings.Contains(err.Error(), `"`+path+`"`) {
				t.Errorf("error %q does not name %q", err, path)
			}
		})
	}
}
