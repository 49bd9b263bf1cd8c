//go:build unix

package testkit

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// roleEnv makes the test binary a child of the tests below.
const roleEnv = "TESTKIT_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "serve": // a backend: announce, accept, end when stdin closes
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(2)
		}
		fmt.Println(l.Addr())
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "exit":
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestChildServes(t *testing.T) {
	cmd, err := SelfCommand(roleEnv + "=serve")
	if err != nil {
		t.Fatal(err)
	}
	c, addr, err := StartReadLine(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAccept(10*time.Second, addr); err != nil {
		t.Errorf("WaitAccept: %v", err)
	}
	c.Stop(nil, 10*time.Second)
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("the child ended with %v, want a clean exit on its closed input", c.err)
		}
	default:
		t.Error("Stop returned before the child ended")
	}
}

func TestChildExitsBeforeAccepting(t *testing.T) {
	cmd, err := SelfCommand(roleEnv + "=exit")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(nil, time.Second)
	start := time.Now()
	err = c.WaitAccept(time.Minute, FreeAddr(t))
	if err == nil || !strings.Contains(err.Error(), "exited (exit status 3) before accepting on 127.0.0.1:") {
		t.Errorf("WaitAccept = %v, want the child's exit", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("WaitAccept took %s to notice the exit", d)
	}
}
