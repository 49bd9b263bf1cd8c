package model

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetnet/fleetnet/api/keys"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output and remove stale ones")

// loadInput reads a multi-document YAML file of API objects into an Input
// for the hub cluster "hub" in region "eu-west".
func loadInput(t *testing.T, path string) Input {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{
		ControllerName:      keys.GatewayControllerName,
		LocalCluster:        "hub",
		LocalRegion:         "eu-west",
		CRDBundleVersions:   []string{SupportedBundleVersion},
		LoadBalancerClasses: []string{"edge"},
	}
	for i, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		var target any
		switch tm.Kind {
		case "GatewayClass":
			in.GatewayClasses = append(in.GatewayClasses, zero(&in.GatewayClasses))
			target = &in.GatewayClasses[len(in.GatewayClasses)-1]
		case "Gateway":
			in.Gateways = append(in.Gateways, zero(&in.Gateways))
			target = &in.Gateways[len(in.Gateways)-1]
		case "HTTPRoute":
			in.HTTPRoutes = append(in.HTTPRoutes, zero(&in.HTTPRoutes))
			target = &in.HTTPRoutes[len(in.HTTPRoutes)-1]
		case "ReferenceGrant":
			in.ReferenceGrants = append(in.ReferenceGrants, zero(&in.ReferenceGrants))
			target = &in.ReferenceGrants[len(in.ReferenceGrants)-1]
		case "Namespace":
			in.Namespaces = append(in.Namespaces, zero(&in.Namespaces))
			target = &in.Namespaces[len(in.Namespaces)-1]
		case "Service":
			in.Services = append(in.Services, zero(&in.Services))
			target = &in.Services[len(in.Services)-1]
		case "ServiceImport":
			in.ServiceImports = append(in.ServiceImports, zero(&in.ServiceImports))
			target = &in.ServiceImports[len(in.ServiceImports)-1]
		case "Secret":
			in.Secrets = append(in.Secrets, zero(&in.Secrets))
			target = &in.Secrets[len(in.Secrets)-1]
		case "EndpointSlice":
			in.EndpointSlices = append(in.EndpointSlices, zero(&in.EndpointSlices))
			target = &in.EndpointSlices[len(in.EndpointSlices)-1]
		case "BackendTrafficPolicy":
			in.BackendTrafficPolicies = append(in.BackendTrafficPolicies, zero(&in.BackendTrafficPolicies))
			target = &in.BackendTrafficPolicies[len(in.BackendTrafficPolicies)-1]
		case "MultiClusterLoadBalancer":
			in.MultiClusterLoadBalancers = append(in.MultiClusterLoadBalancers, zero(&in.MultiClusterLoadBalancers))
			target = &in.MultiClusterLoadBalancers[len(in.MultiClusterLoadBalancers)-1]
		default:
			t.Fatalf("%s document %d: unknown kind %q", path, i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
			t.Fatalf("%s document %d (%s): %v", path, i, tm.Kind, err)
		}
	}
	return in
}

func zero[T any](*[]T) T { var z T; return z }

func render(t *testing.T, r Result) []byte {
	t.Helper()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// shuffle returns in with every list in a random order.
func shuffle(in Input, rng *rand.Rand) Input {
	s := func(n int, swap func(i, j int)) { rng.Shuffle(n, swap) }
	out := in
	out.GatewayClasses = append(out.GatewayClasses[:0:0], in.GatewayClasses...)
	s(len(out.GatewayClasses), func(i, j int) {
		out.GatewayClasses[i], out.GatewayClasses[j] = out.GatewayClasses[j], out.GatewayClasses[i]
	})
	out.Gateways = append(out.Gateways[:0:0], in.Gateways...)
	s(len(out.Gateways), func(i, j int) { out.Gateways[i], out.Gateways[j] = out.Gateways[j], out.Gateways[i] })
	out.HTTPRoutes = append(out.HTTPRoutes[:0:0], in.HTTPRoutes...)
	s(len(out.HTTPRoutes), func(i, j int) { out.HTTPRoutes[i], out.HTTPRoutes[j] = out.HTTPRoutes[j], out.HTTPRoutes[i] })
	out.ReferenceGrants = append(out.ReferenceGrants[:0:0], in.ReferenceGrants...)
	s(len(out.ReferenceGrants), func(i, j int) {
		out.ReferenceGrants[i], out.ReferenceGrants[j] = out.ReferenceGrants[j], out.ReferenceGrants[i]
	})
	out.Services = append(out.Services[:0:0], in.Services...)
	s(len(out.Services), func(i, j int) { out.Services[i], out.Services[j] = out.Services[j], out.Services[i] })
	out.ServiceImports = append(out.ServiceImports[:0:0], in.ServiceImports...)
	s(len(out.ServiceImports), func(i, j int) {
		out.ServiceImports[i], out.ServiceImports[j] = out.ServiceImports[j], out.ServiceImports[i]
	})
	out.Secrets = append(out.Secrets[:0:0], in.Secrets...)
	s(len(out.Secrets), func(i, j int) { out.Secrets[i], out.Secrets[j] = out.Secrets[j], out.Secrets[i] })
	out.EndpointSlices = append(out.EndpointSlices[:0:0], in.EndpointSlices...)
	s(len(out.EndpointSlices), func(i, j int) {
		out.EndpointSlices[i], out.EndpointSlices[j] = out.EndpointSlices[j], out.EndpointSlices[i]
	})
	out.BackendTrafficPolicies = append(out.BackendTrafficPolicies[:0:0], in.BackendTrafficPolicies...)
	s(len(out.BackendTrafficPolicies), func(i, j int) {
		out.BackendTrafficPolicies[i], out.BackendTrafficPolicies[j] = out.BackendTrafficPolicies[j], out.BackendTrafficPolicies[i]
	})
	out.MultiClusterLoadBalancers = append(out.MultiClusterLoadBalancers[:0:0], in.MultiClusterLoadBalancers...)
	s(len(out.MultiClusterLoadBalancers), func(i, j int) {
		out.MultiClusterLoadBalancers[i], out.MultiClusterLoadBalancers[j] = out.MultiClusterLoadBalancers[j], out.MultiClusterLoadBalancers[i]
	})
	// Endpoints inside a slice are unordered too.
	for i := range out.EndpointSlices {
		eps := append(out.EndpointSlices[i].Endpoints[:0:0], out.EndpointSlices[i].Endpoints...)
		s(len(eps), func(a, b int) { eps[a], eps[b] = eps[b], eps[a] })
		out.EndpointSlices[i].Endpoints = eps
	}
	return out
}

// TestGolden builds the model and status of every testdata/*.yaml and
// compares them with testdata/*.golden.json; -update rewrites those.
// Every input is also built shuffled, and must give the same bytes.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.yaml")
	}
	want := map[string]bool{}
	for _, path := range inputs {
		golden := strings.TrimSuffix(path, ".yaml") + ".golden.json"
		want[golden] = true
		t.Run(filepath.Base(path), func(t *testing.T) {
			in := loadInput(t, path)
			got := render(t, Build(in))
			rng := rand.New(rand.NewPCG(1, uint64(len(path))))
			for i := range 20 {
				again := render(t, Build(shuffle(in, rng)))
				if !bytes.Equal(got, again) {
					t.Fatalf("shuffle %d gives other bytes:\n%s", i, cmp.Diff(string(got), string(again)))
				}
			}
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			old, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if d := cmp.Diff(string(old), string(got)); d != "" {
				t.Errorf("%s differs (-golden +got):\n%s", golden, d)
			}
		})
	}
	if *update {
		stale, _ := filepath.Glob("testdata/*.golden.json")
		for _, g := range stale {
			if !want[g] {
				if err := os.Remove(g); err != nil {
					t.Error(err)
				}
				fmt.Println("removed stale", g)
			}
		}
	}
}
