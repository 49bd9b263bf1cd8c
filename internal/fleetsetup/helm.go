package fleetsetup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/fleetnet/fleetnet/charts"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// helmTimeout bounds one install, upgrade or uninstall.
const helmTimeout = 5 * time.Minute

// loadChart reads one of the embedded charts ("fleetnet-agent").
func loadChart(name string) (*chart.Chart, error) {
	sub, err := fs.Sub(charts.FS, name)
	if err != nil {
		return nil, err
	}
	var files []*loader.BufferedFile
	err = fs.WalkDir(sub, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(sub, path)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", name, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", name, err)
	}
	return ch, nil
}

// helm is Helm's action configuration for one namespace of c, releases
// kept in Secrets as the helm command keeps them.
func (c *Cluster) helm(namespace string) (*action.Configuration, error) {
	cfg := new(action.Configuration)
	if err := cfg.Init(configFlags(c.kubeconfig, c.context, namespace), namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("%s: helm: %w", c.Name, err)
	}
	return cfg, nil
}

// applyRelease installs the release from the embedded chart, or upgrades it
// when it is installed, with exactly values (the previous release's values
// are not reused: the command's flags are the whole configuration). It does
// not wait for the workloads; the caller waits with progress.
func (c *Cluster) applyRelease(ctx context.Context, namespace, name, chartName string, values map[string]any) (*release.Release, error) {
	cfg, err := c.helm(namespace)
	if err != nil {
		return nil, err
	}
	ch, err := loadChart(chartName)
	if err != nil {
		return nil, err
	}
	history := action.NewHistory(cfg)
	history.Max = 1
	last, err := history.Run(name)
	if err == nil && len(last) > 0 {
		// A run that was interrupted (or failed its first install) left
		// the release where Helm refuses to upgrade it: put it back first.
		switch rel := last[len(last)-1]; rel.Info.Status {
		case release.StatusPendingUpgrade, release.StatusPendingRollback:
			rb := action.NewRollback(cfg)
			rb.Timeout = helmTimeout
			if err := rb.Run(name); err != nil {
				return nil, fmt.Errorf("%s: rolling back the interrupted upgrade of %s/%s: %w", c.Name, namespace, name, err)
			}
		case release.StatusPendingInstall, release.StatusFailed:
			if rel.Version == 1 {
				if _, err := c.uninstall(namespace, name); err != nil {
					return nil, err
				}
				err = driver.ErrReleaseNotFound
			}
		}
	}
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		install := action.NewInstall(cfg)
		install.Namespace, install.ReleaseName, install.Timeout = namespace, name, helmTimeout
		rel, err := install.RunWithContext(ctx, ch, values)
		if err != nil {
			return nil, fmt.Errorf("%s: installing %s/%s: %w", c.Name, namespace, name, err)
		}
		return rel, nil
	case err != nil:
		return nil, fmt.Errorf("%s: reading the history of release %s/%s: %w", c.Name, namespace, name, err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout, upgrade.MaxHistory = namespace, helmTimeout, 10
	rel, err := upgrade.RunWithContext(ctx, name, ch, values)
	if err != nil {
		return nil, fmt.Errorf("%s: upgrading %s/%s: %w", c.Name, namespace, name, err)
	}
	return rel, nil
}

// releaseValues are the values a release was installed with (nil, nil when
// there is no such release).
func (c *Cluster) releaseValues(namespace, name string) (map[string]any, error) {
	cfg, err := c.helm(namespace)
	if err != nil {
		return nil, err
	}
	vals, err := action.NewGetValues(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading the values of release %s/%s: %w", c.Name, namespace, name, err)
	}
	return vals, nil
}

// uninstall removes a release; false when there was none.
func (c *Cluster) uninstall(namespace, name string) (bool, error) {
	cfg, err := c.helm(namespace)
	if err != nil {
		return false, err
	}
	u := action.NewUninstall(cfg)
	u.IgnoreNotFound, u.Timeout = true, helmTimeout
	resp, err := u.Run(name)
	if err != nil {
		return false, fmt.Errorf("%s: uninstalling %s/%s: %w", c.Name, namespace, name, err)
	}
	return resp != nil && resp.Release != nil, nil
}
