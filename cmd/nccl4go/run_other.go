//go:build !unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
)

func setProcAttr(*exec.Cmd) {}

func notifySignals() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 4)
	signal.Notify(c, os.Interrupt)
	return c, func() { signal.Stop(c) }
}

func forward(p *rankProc, _ os.Signal) { killRank(p) }
func terminate(p *rankProc)            { killRank(p) }
func killRank(p *rankProc) {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill() //nolint:errcheck
	}
}

func signalOf(*os.ProcessState) (int, bool) { return 0, false }
func signalName(st *os.ProcessState) string { return st.String() }
