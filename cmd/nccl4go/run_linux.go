package main

// On Linux, nothing `nccl4go run` starts outlives it. Each rank runs under a
// supervisor: this program again, started with the hidden command
// superviseCommand, which
//
//   - starts the rank in a process group of its own (Pdeathsig SIGKILL:
//     the rank dies with its supervisor),
//   - is a child subreaper (PR_SET_CHILD_SUBREAPER), so that whatever the
//     rank starts and leaves behind, in its group or out of it (setsid,
//     double forks), becomes its child when orphaned,
//   - forwards to the rank's group the signals the launcher asks for over
//     a control socket (file descriptor 3), one byte each,
//   - when the rank ends, reports its status on the socket, then sends
//     SIGTERM to what the rank left behind, SIGKILL after the grace, and
//     exits only once it has no child left: nothing below it lives on,
//   - when the launcher ends, whichever way (its SIGKILL included: the
//     socket reads end-of-file), does the same to the rank and what it
//     started.
//
// The launcher waits for every supervisor to exit before it returns. A
// supervisor killed from outside takes its rank with it (Pdeathsig), and the
// launcher kills the rest of the rank's group; what had left the group is
// then out of reach.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rankSys is a rank's supervisor: the launcher's end of its control
// socket.
type rankSys struct {
	ctl *os.File
}

// rankCommand is the supervisor of one rank of f.program.
func rankCommand(f *runFlags) *exec.Cmd {
	// /proc/self/exe: this very binary, even if its file was replaced
	// since it started.
	cmd := exec.Command("/proc/self/exe", append([]string{superviseCommand, f.grace.String(), f.program}, f.args...)...)
	cmd.Args[0] = os.Args[0]
	return cmd
}

// startRank starts the rank's supervisor with its end of a control socket
// as file descriptor 3.
func startRank(p *rankProc) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("control socket: %w", os.NewSyscallError("socketpair", err))
	}
	p.sys.ctl = os.NewFile(uintptr(fds[0]), "supervisor control")
	child := os.NewFile(uintptr(fds[1]), "supervisor control")
	p.cmd.ExtraFiles = []*os.File{child}
	err = p.cmd.Start()
	child.Close()
	if err != nil {
		p.sys.ctl.Close()
		return err
	}
	return nil
}

// watchRank reads the supervisor's reports until it exits: the rank's
// status (sent as soon as the rank ends), then gone once the supervisor
// has exited, with nothing of the rank left.
func watchRank(p *rankProc, events chan<- rankEvent) {
	var exit *rankExit
	pgid := 0
	sc := bufio.NewScanner(p.sys.ctl)
	for sc.Scan() {
		verb, arg, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.Atoi(arg)
		var e *rankExit
		switch verb {
		case "pid":
			pgid = n
		case "exit":
			e = &rankExit{code: n}
		case "signal":
			e = &rankExit{signal: n}
		case "error":
			e = &rankExit{startErr: arg}
		}
		if e != nil && exit == nil {
			exit = e
			events <- rankEvent{p: p, exit: e, end: time.Now()}
		}
	}
	if exit == nil && pgid > 0 {
		// The supervisor died (killed from outside) before the rank
		// ended: the rank got SIGKILL (Pdeathsig); kill the rest of its
		// group, which holds the output pipes open. Processes that left
		// the group are beyond reach now.
		syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // it may be gone
	}
	p.cmd.Wait() //nolint:errcheck // its state is what matters
	if exit == nil {
		events <- rankEvent{p: p, exit: exitOf(p.cmd.ProcessState), end: time.Now()}
	}
	p.sys.ctl.Close()
	events <- rankEvent{p: p, gone: true}
}

// signalRank asks the rank's supervisor to send s to the rank's process
// group (once the rank has ended: to what it left behind).
func signalRank(p *rankProc, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok && sig > 0 && sig < 256 {
		p.sys.ctl.Write([]byte{byte(sig)}) //nolint:errcheck // the supervisor may be gone
	}
}

// superviseMain is the supervisor: args are the grace, the program and its
// arguments; file descriptor 3 is the control socket.
func superviseMain(args []string) int {
	var st syscall.Stat_t
	if len(args) < 2 || syscall.Fstat(3, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		fmt.Fprintf(os.Stderr, "nccl4go: %s is nccl4go run's own; use nccl4go run\n", superviseCommand)
		return 2
	}
	grace, err := time.ParseDuration(args[0])
	if err != nil {
		grace = 5 * time.Second
	}
	syscall.CloseOnExec(3)
	syscall.SetNonblock(3, true) //nolint:errcheck // a blocking read works too
	ctl := os.NewFile(3, "launcher control")
	// Signals sent to the supervisor itself (a terminal's Ctrl-C reaches
	// the launcher's whole process group) are not forwarded: the launcher
	// forwards what it receives, once.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		fmt.Fprintf(ctl, "error prctl(PR_SET_CHILD_SUBREAPER): %v\n", e)
		return 127
	}
	program, argv := args[1], args[1:]
	path, err := exec.LookPath(program)
	if err == nil {
		var proc *os.Process
		proc, err = os.StartProcess(path, argv, &os.ProcAttr{
			Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		})
		if err == nil {
			fmt.Fprintf(ctl, "pid %d\n", proc.Pid)
			return supervisePID(ctl, proc.Pid, grace)
		}
	}
	fmt.Fprintf(ctl, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	return 127
}

// supervisePID supervises the rank pid (leader of its process group) and
// everything it starts, until none is left, and returns the rank's shell
// status.
func supervisePID(ctl *os.File, pid int, grace time.Duration) int {
	type reaped struct {
		pid  int
		ws   syscall.WaitStatus
		none bool // no child left
	}
	reaps := make(chan reaped, 16)
	go func() {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WALL, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: no child, so no descendant, is left
				reaps <- reaped{none: true}
				return
			}
			reaps <- reaped{pid: p, ws: ws}
		}
	}()
	requests := make(chan syscall.Signal, 16)
	launcherGone := make(chan struct{})
	go func() {
		b := make([]byte, 64)
		for {
			n, err := ctl.Read(b)
			for _, c := range b[:n] {
				requests <- syscall.Signal(c)
			}
			if err != nil {
				close(launcherGone)
				return
			}
		}
	}()
	running, status := true, 0
	killing := false
	var deadline <-chan time.Time
	var rescan *time.Ticker // while killing: /proc's lists of children can miss one in flux
	stopAll := func(sig syscall.Signal) {
		if !killing && deadline == nil {
			deadline = time.After(grace)
		}
		signalDescendants(pid, sig)
	}
	killAll := func() {
		if !killing {
			killing, deadline = true, nil
			rescan = time.NewTicker(100 * time.Millisecond)
		}
		signalDescendants(pid, syscall.SIGKILL)
	}
	var tick <-chan time.Time
	for {
		if rescan != nil {
			tick = rescan.C
		}
		select {
		case sig := <-requests:
			switch {
			case killing:
			case sig == syscall.SIGKILL:
				killAll()
			case running:
				syscall.Kill(-pid, sig) //nolint:errcheck // the group may be gone
			default:
				signalDescendants(pid, sig)
			}
		case <-launcherGone:
			launcherGone = nil
			if !killing {
				stopAll(syscall.SIGTERM)
			}
		case r := <-reaps:
			if r.none {
				return status
			}
			if r.pid == pid && running {
				running = false
				if r.ws.Signaled() {
					status = 128 + int(r.ws.Signal())
					fmt.Fprintf(ctl, "signal %d\n", int(r.ws.Signal()))
				} else {
					status = r.ws.ExitStatus()
					fmt.Fprintf(ctl, "exit %d\n", status)
				}
				if !killing {
					stopAll(syscall.SIGTERM) // what the rank left behind
				}
			}
			if killing {
				signalDescendants(pid, syscall.SIGKILL) // orphans just reparented to us
			}
		case <-deadline:
			killAll()
		case <-tick:
			signalDescendants(pid, syscall.SIGKILL)
		}
	}
}

// signalDescendants sends sig to the process group pgid and to every child
// of this process (the rank, and orphans reparented to this subreaper) and
// its group.
func signalDescendants(pgid int, sig syscall.Signal) {
	syscall.Kill(-pgid, sig) //nolint:errcheck // ESRCH: the group is empty
	for _, c := range children() {
		syscall.Kill(c, sig)  //nolint:errcheck
		syscall.Kill(-c, sig) //nolint:errcheck // a group exists with id c only if c leads it
	}
}

// children lists the children of this process: from each thread's
// /proc/self/task/TID/children, or, where the kernel lacks those files, by
// scanning /proc for processes whose parent is this one.
func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	found := false
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		found = true
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	if found {
		return out
	}
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == self {
				out = append(out, n)
			}
		}
	}
	return out
}
