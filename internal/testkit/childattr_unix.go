//go:build unix && !linux

package testkit

import "syscall"

// ChildAttr puts a child in its own process group.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
