package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Binary names that `make tools` puts into bin/.
const (
	EtcdBinary                  = "etcd"
	KubeAPIServerBinary         = "kube-apiserver"
	KubeControllerManagerBinary = "kube-controller-manager"
	KubeSchedulerBinary         = "kube-scheduler"
	KwokBinary                  = "kwok"
	// KwokStages is kwok's configuration: the stages that make nodes Ready
	// and Pods Running.
	KwokStages = "kwok-stages.yaml"
)

// BinDirEnv overrides where the binaries are looked up.
const BinDirEnv = "FLEETNET_BIN_DIR"

// Binaries finds the binaries that `make tools` builds.
type Binaries struct {
	Dir string
}

// FindBinaries locates bin/ of the fleetnet checkout that contains the
// working directory, or the directory that FLEETNET_BIN_DIR names.
func FindBinaries() (Binaries, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return Binaries{Dir: dir}, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return Binaries{}, err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/fleetnet/fleetnet\n") {
			return Binaries{Dir: filepath.Join(dir, "bin")}, nil
		}
		if filepath.Dir(dir) == dir {
			return Binaries{}, fmt.Errorf("no fleetnet checkout contains %s; set %s to the folder that holds kube-apiserver and etcd", wd, BinDirEnv)
		}
	}
}

// Path returns the path of a binary, or an error that says how to build it.
func (b Binaries) Path(name string) (string, error) {
	path := filepath.Join(b.Dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make tools` in the fleetnet checkout to build it (about 20 minutes the first time)", path)
	}
	return path, nil
}
