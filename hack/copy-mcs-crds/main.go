// Command copy-mcs-crds writes the ServiceExport and ServiceImport CRDs that
// the sigs.k8s.io/mcs-api module embeds into config/crd, so that the CRDs we
// install are always those of the mcs-api version in go.mod. `make generate`
// runs it and `make verify` fails when the copies drift.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	mcscrd "sigs.k8s.io/mcs-api/config/crd"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: copy-mcs-crds DIR")
		os.Exit(2)
	}
	files := map[string][]byte{
		"multicluster.x-k8s.io_serviceexports.yaml": mcscrd.ServiceExportCRD,
		"multicluster.x-k8s.io_serviceimports.yaml": mcscrd.ServiceImportCRD,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(os.Args[1], name), data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "copy-mcs-crds: %v\n", err)
			os.Exit(1)
		}
	}
}
