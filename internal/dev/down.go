package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

const syscallTERM = syscall.SIGTERM

// Down stops every process of the fleet in dir, removes the echo pods'
// network namespaces and the bridge, and deletes the folder. A folder with
// no fleet is not an error.
func Down(dir string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(progress, "no fleet in %s\n", dir)
		return nil
	}
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := Load(dir)
	if err != nil {
		return err
	}
	var errs []error
	for key, pod := range s.Pods {
		stopProcess(pod.Process, syscall.SIGTERM, 5*time.Second)
		if err := removePodNetwork(pod); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", key, err))
		}
	}
	if len(s.Pods) > 0 {
		if err := removeBridge(); err != nil {
			errs = append(errs, err)
		}
	}
	components := s.Components()
	slices.Reverse(components)
	for _, c := range components {
		if s.Processes[c].Alive() {
			fmt.Fprintf(progress, "stopping %s\n", c)
		}
		stopProcess(s.Processes[c], syscall.SIGTERM, 10*time.Second)
	}
	if err := errors.Join(errs...); err != nil {
		// Keep the state so that another `down` can finish the job.
		s.Pods = map[string]PodState{}
		_ = s.save()
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	fmt.Fprintf(progress, "fleet in %s removed\n", dir)
	return nil
}

// Stop ends one component of the fleet (SIGTERM, or SIGKILL when kill is
// set), for fault drills; `Up` starts it again.
func Stop(dir, component string, kill bool) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	unlock, err := lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	s, err := Load(dir)
	if err != nil {
		return err
	}
	if !slices.Contains(s.Components(), component) {
		return fmt.Errorf("component %q: the fleet's components are %v", component, s.Components())
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	stopProcess(s.Processes[component], sig, 10*time.Second)
	delete(s.Processes, component)
	return s.save()
}

func httpOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
