package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nccl4go/nccl/rendezvous"
)

// runAbout is run's help text.
const runAbout = `Starts N processes of PROGRAM on this machine, one rank each, with the
variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT), so that torch scripts and
rendezvous.Init both work, plus nccl4go's own (NCCL4GO_RANK, ...,
NCCL4GO_STORE_ADDR and NCCL4GO_STORE_SECRET: the store this launcher hosts
for the job, on node 0). Each rank uses GPU LOCAL_RANK (rendezvous.Init: modulo
the GPUs it sees); -bind-gpus shows each rank only its GPU instead.

Every output line is prefixed with its rank. When a rank fails, the others
get SIGTERM, then SIGKILL after -grace, and run exits with the failed rank's
status (128+N for signal N). Ctrl-C and SIGTERM are forwarded to every rank.
A summary (rank, status, duration) goes to stderr at the end.

Several nodes: run one launcher per node with the same -nnodes, -master-addr
and -master-port, and each node's -node-rank; node 0 hosts the store on
-store-port of its -master-addr (default master port + 1), and MASTER_PORT is
left to torch's rank 0. Set NCCL4GO_STORE_SECRET to the same value on every
node to protect the store (one node alone makes up a random secret).

Values of -env may use {rank}, {local_rank}, {node_rank}, {world_size}.
Several ranks on one GPU need -hostid-per-rank (NCCL_HOSTID distinct per
rank, NCCL_NVLS_ENABLE=0).`

// runFlags is run's command line.
type runFlags struct {
	nproc, nnodes, nodeRank int
	masterAddr              string
	masterPort, storePort   int
	grace                   time.Duration
	hostidPerRank, bindGPUs bool
	noPrefix, quiet         bool
	env                     multiFlag
	program                 string
	args                    []string
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parseRunFlags(args []string, stdout io.Writer) (*runFlags, error) {
	f := &runFlags{}
	fs := newFlagSet("run", "[flags] PROGRAM [ARGS...]", runAbout)
	fs.IntVar(&f.nproc, "n", 1, "number of processes (ranks) on this node")
	fs.IntVar(&f.nproc, "nproc-per-node", 1, "same as -n (torchrun's name)")
	fs.IntVar(&f.nnodes, "nnodes", 1, "number of nodes, each running one launcher")
	fs.IntVar(&f.nodeRank, "node-rank", 0, "this node's index, 0 to nnodes-1")
	fs.StringVar(&f.masterAddr, "master-addr", "127.0.0.1", "address of node 0 (MASTER_ADDR)")
	fs.IntVar(&f.masterPort, "master-port", 0, "MASTER_PORT; 0: a free port (one node only)")
	fs.IntVar(&f.storePort, "store-port", 0, "port of the store node 0 hosts; 0: a free port on one node, master port + 1 on several")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when stopping the ranks")
	fs.BoolVar(&f.hostidPerRank, "hostid-per-rank", false, "give each rank its own NCCL_HOSTID and NCCL_NVLS_ENABLE=0 (several ranks on one GPU)")
	fs.BoolVar(&f.bindGPUs, "bind-gpus", false, "set CUDA_VISIBLE_DEVICES of each rank to its one GPU")
	fs.BoolVar(&f.noPrefix, "no-prefix", false, "do not prefix output lines with the rank")
	fs.BoolVar(&f.quiet, "quiet", false, "print the summary only when a rank failed")
	fs.Var(&f.env, "env", "KEY=VALUE for every rank, repeatable; VALUE may use {rank}, {local_rank}, {node_rank}, {world_size}")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(stdout)
			return nil, err
		}
		return nil, &usageError{msg: fmt.Sprintf("run: %v", err), usage: fs.usage}
	}
	bad := func(format string, a ...any) error {
		return &usageError{msg: "run: " + fmt.Sprintf(format, a...), usage: fs.usage}
	}
	if fs.NArg() == 0 {
		return nil, bad("no program given")
	}
	f.program, f.args = fs.Arg(0), fs.Args()[1:]
	switch {
	case f.nproc < 1:
		return nil, bad("-n %d: need at least one process", f.nproc)
	case f.nnodes < 1:
		return nil, bad("-nnodes %d: need at least one node", f.nnodes)
	case f.nodeRank < 0 || f.nodeRank >= f.nnodes:
		return nil, bad("-node-rank %d is not below -nnodes %d", f.nodeRank, f.nnodes)
	case f.nnodes > 1 && f.masterPort == 0:
		return nil, bad("-nnodes %d: give every node the same -master-port", f.nnodes)
	case f.masterPort < 0 || f.masterPort > 65535 || f.storePort < 0 || f.storePort > 65535:
		return nil, bad("ports must be 0 to 65535")
	case f.grace < 0:
		return nil, bad("-grace must not be negative")
	}
	for _, kv := range f.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, bad("-env %q is not KEY=VALUE", kv)
		}
	}
	return f, nil
}

// exitError makes the command exit with a status of its own.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// runCmd is the run subcommand: the launcher exits with the failed rank's
// status, which mainExit (0, 1, 2) cannot express.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := runRun(ctx, args, stdout, stderr)
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stderr, "nccl4go: %v\n", ee)
		os.Exit(ee.code)
	}
	return err
}

// rankProc is one rank's process.
type rankProc struct {
	rank, local int
	cmd         *exec.Cmd
	out, errw   *prefixWriter
	start, end  time.Time
	state       *os.ProcessState
	waitErr     error
}

// runRun is the launcher, without exiting: a failure of a rank is an
// *exitError with its status.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stdout)
	if err != nil {
		return err
	}
	world := f.nnodes * f.nproc
	jobID := fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if f.masterPort == 0 {
		if f.masterPort, err = freePort(f.masterAddr); err != nil {
			return fmt.Errorf("run: choosing a master port: %w", err)
		}
	}
	secret := os.Getenv(rendezvous.EnvStoreSecret)
	if secret == "" && f.nnodes == 1 {
		secret = randomSecret()
	}
	// The store: node 0 hosts it.
	storePort := f.storePort
	if storePort == 0 && f.nnodes > 1 {
		storePort = f.masterPort + 1
	}
	storeAddr := net.JoinHostPort(f.masterAddr, strconv.Itoa(storePort))
	if f.nodeRank == 0 {
		listen := net.JoinHostPort(f.masterAddr, strconv.Itoa(storePort))
		if f.nnodes > 1 {
			listen = net.JoinHostPort("", strconv.Itoa(storePort))
		}
		srv, err := rendezvous.Listen(listen, &rendezvous.ServerOptions{Secret: secret})
		if err != nil {
			return fmt.Errorf("run: hosting the job's store: %w", err)
		}
		defer srv.Close()
		if storePort == 0 {
			_, port, _ := net.SplitHostPort(srv.Addr().String())
			storeAddr = net.JoinHostPort(f.masterAddr, port)
		}
	}
	base := childBase(os.Environ())
	var mu sync.Mutex // one line at a time on each stream
	procs := make([]*rankProc, f.nproc)
	width := len(strconv.Itoa(world - 1))
	for local := range procs {
		rank := f.nodeRank*f.nproc + local
		p := &rankProc{rank: rank, local: local}
		procs[local] = p
		vars := map[string]string{
			"RANK": strconv.Itoa(rank), "WORLD_SIZE": strconv.Itoa(world),
			"LOCAL_RANK": strconv.Itoa(local), "LOCAL_WORLD_SIZE": strconv.Itoa(f.nproc),
			"GROUP_RANK": strconv.Itoa(f.nodeRank), "GROUP_WORLD_SIZE": strconv.Itoa(f.nnodes),
			"ROLE_RANK": strconv.Itoa(rank), "ROLE_WORLD_SIZE": strconv.Itoa(world), "ROLE_NAME": "default",
			"MASTER_ADDR": f.masterAddr, "MASTER_PORT": strconv.Itoa(f.masterPort),
			rendezvous.EnvRank: strconv.Itoa(rank), rendezvous.EnvWorldSize: strconv.Itoa(world),
			rendezvous.EnvLocalRank: strconv.Itoa(local), rendezvous.EnvLocalWorldSize: strconv.Itoa(f.nproc),
			rendezvous.EnvNodeRank: strconv.Itoa(f.nodeRank), rendezvous.EnvNumNodes: strconv.Itoa(f.nnodes),
			rendezvous.EnvMasterAddr: f.masterAddr, rendezvous.EnvMasterPort: strconv.Itoa(f.masterPort),
			rendezvous.EnvStoreAddr: storeAddr, rendezvous.EnvJobID: jobID,
		}
		if secret != "" {
			vars[rendezvous.EnvStoreSecret] = secret
		}
		if _, ok := os.LookupEnv("OMP_NUM_THREADS"); !ok && f.nproc > 1 {
			vars["OMP_NUM_THREADS"] = "1" // as torchrun does
		}
		if f.hostidPerRank {
			host, _ := os.Hostname()
			vars["NCCL_HOSTID"] = fmt.Sprintf("%s-nccl4go-%d", host, rank)
			if _, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok {
				vars["NCCL_NVLS_ENABLE"] = "0"
			}
		}
		if f.bindGPUs {
			dev, err := bindGPU(local)
			if err != nil {
				return fmt.Errorf("run: -bind-gpus: %w", err)
			}
			vars["CUDA_VISIBLE_DEVICES"] = dev
		}
		for _, kv := range f.env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = expandTemplate(v, rank, local, f.nodeRank, world)
		}
		cmd := exec.Command(f.program, f.args...)
		cmd.Env = append(append([]string(nil), base...), sortedVars(vars)...)
		cmd.Stdin = nil
		if f.noPrefix {
			cmd.Stdout, cmd.Stderr = stdout, stderr
		} else {
			prefix := fmt.Sprintf("[%*d] ", width, rank)
			p.out = &prefixWriter{w: stdout, prefix: prefix, mu: &mu}
			p.errw = &prefixWriter{w: stderr, prefix: prefix, mu: &mu}
			cmd.Stdout, cmd.Stderr = p.out, p.errw
		}
		cmd.WaitDelay = time.Second // a grandchild holding the pipes open
		setProcAttr(cmd)
		p.cmd = cmd
	}
	return supervise(ctx, f, procs, stderr)
}

// supervise starts the ranks, stops them all on the first failure or a
// signal, and reports.
func supervise(ctx context.Context, f *runFlags, procs []*rankProc, stderr io.Writer) error {
	type exit struct {
		p     *rankProc
		state *os.ProcessState
		err   error
		end   time.Time
	}
	done := make(chan exit, len(procs))
	sigs, stopSignals := notifySignals()
	defer stopSignals()
	started := 0
	var startErr error
	for _, p := range procs {
		p.start = time.Now()
		if err := p.cmd.Start(); err != nil {
			startErr = fmt.Errorf("starting rank %d: %w", p.rank, err)
			break
		}
		started++
		go func() { // only the loop below touches p's fields
			err := p.cmd.Wait()
			done <- exit{p: p, state: p.cmd.ProcessState, err: err, end: time.Now()}
		}()
	}
	var first *rankProc // the first rank that failed
	stopping := startErr != nil
	var kill <-chan time.Time
	stopAll := func(sig func(*rankProc)) {
		for _, p := range procs[:started] {
			if p.state == nil {
				sig(p)
			}
		}
	}
	if stopping {
		stopAll(terminate)
		kill = time.After(f.grace)
	}
	interrupted := false
	signals := 0          // signals received on sigs: a second one ends the grace
	ctxDone := ctx.Done() // nil once handled, or the loop would spin on it
	for running := started; running > 0; {
		select {
		case e := <-done:
			running--
			p := e.p
			p.state, p.waitErr, p.end = e.state, e.err, e.end
			if p.out != nil {
				p.out.flush()
				p.errw.flush()
			}
			if exitCode(p.state) != 0 && first == nil && !stopping {
				first = p
				stopping = true
				stopAll(terminate)
				kill = time.After(f.grace)
			}
		case s := <-sigs:
			// The same Ctrl-C may also have cancelled ctx (main's
			// NotifyContext): only a second signal here ends the grace.
			if signals++; signals > 1 {
				stopAll(killRank)
				continue
			}
			stopAll(func(p *rankProc) { forward(p, s) })
			if !interrupted {
				interrupted, stopping = true, true
				kill = time.After(f.grace)
			}
		case <-ctxDone:
			ctxDone = nil
			if !interrupted {
				interrupted, stopping = true, true
				stopAll(terminate)
				kill = time.After(f.grace)
			}
		case <-kill:
			stopAll(killRank)
			kill = nil
		}
	}
	failed := first != nil || startErr != nil
	if !f.quiet || failed || interrupted {
		summary(stderr, procs[:started])
	}
	switch {
	case startErr != nil:
		return &exitError{code: 127, msg: "run: " + startErr.Error()}
	case first != nil:
		code := exitCode(first.state)
		return &exitError{code: code, msg: fmt.Sprintf("run: rank %d %s", first.rank, describeState(first.state))}
	case interrupted:
		for _, p := range procs {
			if c := exitCode(p.state); c != 0 {
				return &exitError{code: c, msg: fmt.Sprintf("run: interrupted; rank %d %s", p.rank, describeState(p.state))}
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("run: %w", ctx.Err())
		}
	}
	return nil
}

// exitCode is a shell's status: the exit code, or 128 + the signal.
func exitCode(st *os.ProcessState) int {
	if st == nil {
		return 0
	}
	if c := st.ExitCode(); c >= 0 {
		return c
	}
	if sig, ok := signalOf(st); ok {
		return 128 + sig
	}
	return 1
}

// describeState says how a rank ended: "exited 3", "killed by SIGTERM".
func describeState(st *os.ProcessState) string {
	if st == nil {
		return "did not start"
	}
	if c := st.ExitCode(); c >= 0 {
		return "exited " + strconv.Itoa(c)
	}
	if _, ok := signalOf(st); ok {
		return "killed by " + signalName(st)
	}
	return st.String()
}

// summary prints one line per rank.
func summary(w io.Writer, procs []*rankProc) {
	fmt.Fprintf(w, "nccl4go run: %-6s %-22s %s\n", "RANK", "STATUS", "DURATION")
	for _, p := range procs {
		d := p.end.Sub(p.start)
		fmt.Fprintf(w, "nccl4go run: %-6d %-22s %v\n", p.rank, describeState(p.state), d.Round(time.Millisecond))
	}
}

// childBase is the launcher's environment without the variables run sets
// (a launcher started inside another job must not leak that job's nccl4go
// variables).
func childBase(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NCCL4GO_") && k != "NCCL4GO_CUDA_LIBRARY" {
			continue
		}
		switch k {
		case "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT":
			continue // not torchrun's agent store here
		}
		out = append(out, kv)
	}
	return out
}

func sortedVars(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// expandTemplate replaces {rank}, {local_rank}, {node_rank} and
// {world_size}.
func expandTemplate(v string, rank, local, node, world int) string {
	return strings.NewReplacer("{rank}", strconv.Itoa(rank), "{local_rank}", strconv.Itoa(local),
		"{node_rank}", strconv.Itoa(node), "{world_size}", strconv.Itoa(world)).Replace(v)
}

// bindGPU is the CUDA_VISIBLE_DEVICES of a local rank: its entry of the
// launcher's own list, or its index.
func bindGPU(local int) (string, error) {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		list := strings.Split(v, ",")
		if v == "" || len(list) == 0 {
			return "", errors.New("CUDA_VISIBLE_DEVICES is empty: no GPU to bind")
		}
		return strings.TrimSpace(list[local%len(list)]), nil
	}
	return strconv.Itoa(local), nil
}

// freePort returns a TCP port free on host at the time of the call.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomSecret() string {
	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// prefixWriter prefixes each line written to w; partial lines wait for
// their end (or flush).
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     *sync.Mutex
	buf    []byte
}

// Write implements io.Writer.
func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	p.buf = append(p.buf, b...)
	i := bytes.LastIndexByte(p.buf, '\n')
	if i < 0 {
		if len(p.buf) >= 64<<10 { // a very long line: out in pieces
			p.emit(append(p.buf, '\n'))
			p.buf = p.buf[:0]
		}
		return n, nil
	}
	p.emit(p.buf[:i+1])
	p.buf = append(p.buf[:0], p.buf[i+1:]...)
	return n, nil
}

// emit writes complete lines, each with the prefix, in one write.
func (p *prefixWriter) emit(lines []byte) {
	var out []byte
	for len(lines) > 0 {
		j := bytes.IndexByte(lines, '\n')
		out = append(out, p.prefix...)
		out = append(out, lines[:j+1]...)
		lines = lines[j+1:]
	}
	p.mu.Lock()
	p.w.Write(out) //nolint:errcheck // output lost is not the job's failure
	p.mu.Unlock()
}

// flush writes a last line without its newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = p.buf[:0]
	}
}
