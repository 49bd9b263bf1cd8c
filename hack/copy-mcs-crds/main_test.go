package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"
)

func TestCopies(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file     string
		original []byte
		// columns are the names and priorities of every version's columns.
		columns []string
	}{
		{"multicluster.x-k8s.io_serviceexports.yaml", mcscrd.ServiceExportCRD, []string{"Valid/0", "Ready/0", "Conflict/0", "Age/0"}},
		{"multicluster.x-k8s.io_serviceimports.yaml", mcscrd.ServiceImportCRD, []string{"Type/0", "IP/0", "Age/0", "Service/1", "Clusters/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var original, copied apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(tt.original, &original); err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, &copied); err != nil {
				t.Fatal(err)
			}
			if len(copied.Spec.Versions) != len(original.Spec.Versions) {
				t.Fatalf("%d versions, mcs-api has %d", len(copied.Spec.Versions), len(original.Spec.Versions))
			}
			for i, v := range copied.Spec.Versions {
				// The schema is mcs-api's: same JSON, map keys sorted.
				want, _ := json.Marshal(original.Spec.Versions[i].Schema)
				got, _ := json.Marshal(v.Schema)
				if string(got) != string(want) {
					t.Errorf("version %s: schema differs from mcs-api's", v.Name)
				}
				var names []string
				for _, c := range v.AdditionalPrinterColumns {
					names = append(names, fmt.Sprintf("%s/%d", c.Name, c.Priority))
				}
				if !slices.Equal(names, tt.columns) {
					t.Errorf("version %s: columns %v, want %v", v.Name, names, tt.columns)
				}
				// Everything else of the version is unchanged too.
				v.AdditionalPrinterColumns, original.Spec.Versions[i].AdditionalPrinterColumns = nil, nil
				want, _ = json.Marshal(original.Spec.Versions[i])
				got, _ = json.Marshal(v)
				if string(got) != string(want) {
					t.Errorf("version %s differs from mcs-api's beyond its columns", v.Name)
				}
			}
			copied.Spec.Versions, original.Spec.Versions = nil, nil
			want, _ := json.Marshal(original)
			got, _ := json.Marshal(copied)
			if string(got) != string(want) {
				t.Errorf("CRD differs from mcs-api's beyond its versions:\n%s\n%s", got, want)
			}
		})
	}
}

func TestInsertBeforeRefusesAColumnMCSAPIHas(t *testing.T) {
	if _, err := insertBefore([]column{{Name: "Ready"}}, "", serviceExportColumns); err == nil {
		t.Fatal("no error for a column mcs-api already defines")
	}
}
