package dev

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Down stops every process of the fleet in dir, removes the pods' and the
// nodes' network namespaces (ending what still runs inside them) and the
// bridge, and deletes the folder. It returns nil only when nothing of the
// fleet is left on the machine; otherwise its error names what is. A
// folder with no fleet is not an error.
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
	// Whatever fleetnetctl made it: the echo servers an older `dev serve`
	// ran itself end with their pods' networks.
	s, err := load(dir)
	if err != nil {
		return err
	}
	var errs []error
	left := map[string]PodState{}
	for key, pod := range s.Pods {
		if p, ok := s.legacyServers[key]; ok {
			stopProcess(p, syscall.SIGTERM, 5*time.Second)
		}
		if err := removePodNetwork(pod); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", key, err))
			left[key] = pod
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
	if s.Nodes {
		for _, c := range s.Clusters {
			if err := removeNodeNetwork(s.Dir, c); err != nil {
				errs = append(errs, fmt.Errorf("node of %s: %w", c.Name, err))
			}
		}
	}
	if len(s.Pods) > 0 || s.Nodes {
		// Whatever of this fleet is still there (a pod whose network was
		// being made while its node stopped), and the bridge.
		err := sweepLeftovers(runningClaims(dir), func(l leftover) {
			fmt.Fprintf(progress, "removing %s\n", l)
		})
		if err != nil {
			errs = append(errs, err)
		} else if err := removeBridge(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Keep the state of what is left, so that another `down` can finish
		// the job.
		s.Pods = left
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
	s, unlock, err := lockAndLoad(dir)
	if unlock != nil {
		defer unlock()
	}
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
