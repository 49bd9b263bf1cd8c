package main

import "syscall"

// childAttr puts a child in its own process group and kills it when this
// program dies, even by SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
