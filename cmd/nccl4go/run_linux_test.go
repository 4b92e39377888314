package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leftoverScript is a rank that starts two processes it does not wait
// for: one in its process group that ignores SIGINT, SIGTERM and SIGHUP,
// and one in a session of its own (setsid), which no signal to the rank's
// group reaches. It writes their pids and its own to $DIR/pids.$RANK, then
// does what $END says: exit with a status, or wait for a signal.
const leftoverScript = `(trap '' INT TERM HUP; exec sleep 300) & a=$!; ` +
	`setsid sleep 301 & b=$!; ` +
	`echo "$$ $a $b" > "$DIR/pids.$RANK"; ` +
	`case "$END" in wait) while :; do sleep 0.05; done;; fail) if [ "$RANK" = 1 ]; then exit 3; fi; while :; do sleep 0.05; done;; *) exit 0;; esac`

func requireSetsid(t *testing.T) {
	t.Helper()
	requireSh(t)
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid command:", err)
	}
}

// A rank that exits while processes it started live on: they end with the
// launcher (they lived on: only the groups of ranks still running were
// signalled).
func TestRunNoLeftoversRankExits(t *testing.T) {
	requireSetsid(t)
	dir := t.TempDir()
	_, _, err := launch(t, context.Background(), "-n", "2", "-grace", "300ms", "-env", "DIR="+dir, "-env", "END=exit", "sh", "-c", leftoverScript)
	if err != nil {
		t.Fatal(err)
	}
	pids := pidsIn(t, dir)
	if live := survivors(pids, 0); len(live) > 0 {
		t.Errorf("%d processes outlived the launcher:%s", len(live), describePids(live))
	}
}

// A failing rank: its leftovers and every other rank's go too.
func TestRunNoLeftoversRankFails(t *testing.T) {
	requireSetsid(t)
	dir := t.TempDir()
	_, _, err := launch(t, context.Background(), "-n", "3", "-grace", "300ms", "-env", "DIR="+dir, "-env", "END=fail", "sh", "-c", leftoverScript)
	if code := exitCodeOf(t, err); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	pids := pidsIn(t, dir)
	if live := survivors(pids, 0); len(live) > 0 {
		t.Errorf("%d processes outlived the launcher:%s", len(live), describePids(live))
	}
}

// Ctrl-C (SIGINT to the launcher process): nothing outlives it.
func TestRunNoLeftoversInterrupt(t *testing.T) {
	requireSetsid(t)
	dir := t.TempDir()
	l := startLauncher(t, "run", "-n", "2", "-grace", "300ms", "-env", "DIR="+dir, "-env", "END=wait", "sh", "-c", leftoverScript)
	waitFiles(t, 10*time.Second, filepath.Join(dir, "pids.0"), filepath.Join(dir, "pids.1"))
	pids := pidsIn(t, dir)
	l.cmd.Process.Signal(syscall.SIGINT)
	code := l.wait(t, 20*time.Second)
	if code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	if live := survivors(pids, 0); len(live) > 0 {
		t.Errorf("%d processes outlived the launcher:%s", len(live), describePids(live))
	}
}

// SIGKILL of the launcher itself: everything it started goes, within the
// ranks' grace.
func TestRunNoLeftoversLauncherKilled(t *testing.T) {
	requireSetsid(t)
	dir := t.TempDir()
	l := startLauncher(t, "run", "-n", "2", "-grace", "300ms", "-env", "DIR="+dir, "-env", "END=wait", "sh", "-c", leftoverScript)
	waitFiles(t, 10*time.Second, filepath.Join(dir, "pids.0"), filepath.Join(dir, "pids.1"))
	pids := pidsIn(t, dir)
	l.cmd.Process.Signal(syscall.SIGKILL)
	if code := l.wait(t, 10*time.Second); code != 137 {
		t.Errorf("exit status %d, want 137", code)
	}
	if live := survivors(pids, 10*time.Second); len(live) > 0 {
		t.Errorf("%d processes outlived the killed launcher by 10 s:%s", len(live), describePids(live))
	}
	if strings.Contains(l.stdout.String(), "panic") {
		t.Errorf("output: %s", l.stdout.String())
	}
}

// A supervisor killed from outside (SIGKILL): its rank dies with it
// (Pdeathsig), the launcher kills what is left of the rank's group, counts
// the rank as failed and stops the others.
func TestRunSupervisorKilled(t *testing.T) {
	requireSh(t)
	dir := t.TempDir()
	l := startLauncher(t, "run", "-n", "2", "-grace", "300ms", "-env", "DIR="+dir, "sh", "-c",
		`(trap '' INT TERM HUP; exec sleep 300) & echo "$$ $!" > "$DIR/pids.$RANK"; echo $PPID > "$DIR/sup.$RANK"; while :; do sleep 0.05; done`)
	waitFiles(t, 10*time.Second, filepath.Join(dir, "pids.0"), filepath.Join(dir, "pids.1"), filepath.Join(dir, "sup.0"))
	pids := pidsIn(t, dir)
	b, _ := os.ReadFile(filepath.Join(dir, "sup.0"))
	sup, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(sup, syscall.SIGKILL)
	if code := l.wait(t, 20*time.Second); code != 137 {
		t.Errorf("exit status %d, want 137", code)
	}
	if live := survivors(pids, 0); len(live) > 0 {
		t.Errorf("%d processes outlived the launcher:%s", len(live), describePids(live))
	}
}
