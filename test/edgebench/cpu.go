package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMeter reads the CPU time a proxy has used so far; the difference
// over a run, divided by the requests the run completed, is its CPU per
// request.
type cpuMeter func() (time.Duration, error)

// selfCPU is this process's user and system time: the edge's, since the
// backends and every load generator are other processes.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// workersCPU sums the CPU time of master's children: nginx's workers.
func workersCPU(master int) cpuMeter {
	return func() (time.Duration, error) {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return 0, err
		}
		var sum time.Duration
		workers := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue // gone meanwhile
			}
			ppid, cpu, err := parseProcStat(string(b))
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			if ppid == master {
				sum += cpu
				workers++
			}
		}
		if workers == 0 {
			return 0, fmt.Errorf("nginx (pid %d) has no workers", master)
		}
		return sum, nil
	}
}

// userHZ is the unit of /proc/<pid>/stat's CPU times: always 100 per
// second in what Linux shows user space (proc(5)).
const userHZ = 100

// parseProcStat reads the parent's pid and the user plus system time
// from a /proc/<pid>/stat line.
func parseProcStat(stat string) (ppid int, cpu time.Duration, err error) {
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis (field 3, state, first).
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name", len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])               // field 4
	utime, err2 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err3 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, err
	}
	return ppid, time.Duration(utime+stime) * time.Second / userHZ, nil
}
