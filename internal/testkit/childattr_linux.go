package testkit

import "syscall"

// ChildAttr puts a child in its own process group and kills it when this
// process dies, even by SIGKILL.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
