// Command copy-mcs-crds writes the ServiceExport and ServiceImport CRDs that
// the sigs.k8s.io/mcs-api module embeds into config/crd, so that the CRDs we
// install are always those of the mcs-api version in go.mod. `make generate`
// runs it and `make verify` fails when the copies drift.
//
// The copies differ from mcs-api's only by printer columns, so that `kubectl
// get serviceexports` shows the export's conditions and `kubectl get
// serviceimports -o wide` the exporting clusters. Everything else, the
// schema above all, stays mcs-api's: the command fails when its output
// differs from the original in anything but additionalPrinterColumns.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/fleetnet/fleetnet/api/keys"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

type column = apiextensionsv1.CustomResourceColumnDefinition

// conditionColumn shows the status of one condition: True, False, Unknown,
// or nothing before the agent has set it.
func conditionColumn(t mcsv1beta1.ServiceExportConditionType, description string) column {
	return column{
		Name:        string(t),
		Type:        "string",
		Description: description,
		JSONPath:    fmt.Sprintf(".status.conditions[?(@.type==%q)].status", t),
	}
}

// serviceExportColumns come before mcs-api's Age, as in kubectl's own tables.
var serviceExportColumns = []column{
	conditionColumn(mcsv1beta1.ServiceExportConditionValid, "Whether the export is valid (condition Valid)"),
	conditionColumn(mcsv1beta1.ServiceExportConditionReady, "Whether the export is published (condition Ready)"),
	conditionColumn(mcsv1beta1.ServiceExportConditionConflict, "Whether the exporting clusters disagree (condition Conflict)"),
}

// serviceImportColumns come after mcs-api's, and only with -o wide: the list
// of clusters can be long. The column shows the whole list because the API
// server prints only the first value of a path that has several, such as
// .status.clusters[*].cluster.
var serviceImportColumns = []column{{
	Name:        "Service",
	Type:        "string",
	Description: "The derived Service that serves this import in this cluster",
	JSONPath:    ".metadata.annotations." + strings.ReplaceAll(keys.AnnotationDerivedService, ".", `\.`),
	Priority:    1,
}, {
	Name:        "Clusters",
	Type:        "string",
	Description: "The clusters that export this service",
	JSONPath:    ".status.clusters",
	Priority:    1,
}}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: copy-mcs-crds DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "copy-mcs-crds: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files := []struct {
		name string
		data []byte
		add  func([]column) ([]column, error)
	}{
		{"multicluster.x-k8s.io_serviceexports.yaml", mcscrd.ServiceExportCRD, func(cols []column) ([]column, error) {
			return insertBefore(cols, "Age", serviceExportColumns)
		}},
		{"multicluster.x-k8s.io_serviceimports.yaml", mcscrd.ServiceImportCRD, func(cols []column) ([]column, error) {
			return insertBefore(cols, "", serviceImportColumns)
		}},
	}
	for _, f := range files {
		out, err := addColumns(f.data, f.add)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// insertBefore inserts add before the column named before, or at the end
// when there is none (or before is empty). A column that mcs-api already
// has is an error: its definition would have to be reconciled with ours.
func insertBefore(cols []column, before string, add []column) ([]column, error) {
	for _, c := range cols {
		for _, a := range add {
			if c.Name == a.Name {
				return nil, fmt.Errorf("mcs-api already has a printer column %s", a.Name)
			}
		}
	}
	at := len(cols)
	for i, c := range cols {
		if before != "" && c.Name == before {
			at = i
			break
		}
	}
	out := append([]column{}, cols[:at]...)
	out = append(out, add...)
	return append(out, cols[at:]...), nil
}

// addColumns rewrites the printer columns of every version of a CRD. It
// edits the CRD as a plain map rather than as apiextensions types so that
// fields those types do not know survive; the license header is kept.
func addColumns(src []byte, add func([]column) ([]column, error)) ([]byte, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(src, &obj); err != nil {
		return nil, err
	}
	versions, err := versionsOf(obj)
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		var cols []column
		if err := convert(v["additionalPrinterColumns"], &cols); err != nil {
			return nil, fmt.Errorf("version %v: additionalPrinterColumns: %w", v["name"], err)
		}
		if cols, err = add(cols); err != nil {
			return nil, fmt.Errorf("version %v: %w", v["name"], err)
		}
		var plain []any
		if err := convert(cols, &plain); err != nil {
			return nil, err
		}
		v["additionalPrinterColumns"] = plain
	}
	body, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if err := sameButColumns(src, body); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(header(src))
	out.WriteString("#\n# Copied from sigs.k8s.io/mcs-api by hack/copy-mcs-crds, which adds printer\n# columns; the rest is unchanged. Do not edit.\n")
	out.Write(body)
	return out.Bytes(), nil
}

// sameButColumns fails unless a and b differ only in printer columns, and
// b is a CRD that decodes strictly, as config/crd reads it.
func sameButColumns(a, b []byte) error {
	var strict apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &strict); err != nil {
		return fmt.Errorf("the CRD written does not decode: %w", err)
	}
	strip := func(data []byte) (map[string]any, error) {
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		versions, err := versionsOf(obj)
		for _, v := range versions {
			delete(v, "additionalPrinterColumns")
		}
		return obj, err
	}
	x, err := strip(a)
	if err != nil {
		return err
	}
	y, err := strip(b)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(x, y) {
		return errors.New("the copy differs from mcs-api's in more than printer columns")
	}
	return nil
}

func versionsOf(crd map[string]any) ([]map[string]any, error) {
	spec, _ := crd["spec"].(map[string]any)
	list, _ := spec["versions"].([]any)
	if len(list) == 0 {
		return nil, errors.New("no spec.versions")
	}
	out := make([]map[string]any, len(list))
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.versions[%d] is not an object", i)
		}
		out[i] = m
	}
	return out, nil
}

// convert copies in to out through JSON, between plain maps and types.
func convert(in, out any) error {
	if in == nil {
		return nil
	}
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// header returns the comment lines that start src.
func header(src []byte) []byte {
	end := 0
	for end < len(src) && src[end] == '#' {
		nl := bytes.IndexByte(src[end:], '\n')
		if nl < 0 {
			return src
		}
		end += nl + 1
	}
	return src[:end]
}
