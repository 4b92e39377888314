package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl/rendezvous"
)

// runCommand is `nccl4go run`, the launcher.
var runCommand = &command{
	name:       "run",
	summary:    "start N ranks of a program on this machine, torchrun-style, and supervise them",
	synopsis:   "[-n N] [flags] PROGRAM [ARGS...]",
	about:      runAbout,
	flagsFirst: true,
	ownSignals: true,
	flags: func(fs *pflag.FlagSet) action {
		f := bindRunFlags(fs)
		return func(ctx context.Context, in *invocation) error {
			if err := f.check(fs, in.args); err != nil {
				return err
			}
			return launchJob(ctx, f, in.stdout, in.stderr)
		}
	},
}

// runRun is `nccl4go run args`, cancelled by ctx (tests; main's run
// ignores the cancellation of main's context, see ownSignals). A failure
// of a rank is an *exitError with its status.
func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return invoke(ctx, []*command{root, runCommand}, args, stdout, stderr)
}

// runAbout is run's help text.
const runAbout = `Starts N processes of PROGRAM on this machine, one rank each, with the
variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT), so that torch scripts and
rendezvous.Init both work, plus nccl4go's own (NCCL4GO_RANK, ...,
NCCL4GO_STORE_ADDR and NCCL4GO_STORE_SECRET: the store this launcher hosts
for the job, on node 0). Each rank uses GPU LOCAL_RANK (rendezvous.Init: modulo
the GPUs it sees); --bind-gpus shows each rank only its GPU instead.

Every output line is prefixed with its rank. When a rank fails, the others
get SIGTERM, then SIGKILL after --grace, and run exits with the failed rank's
status (128+N for signal N). SIGINT (Ctrl-C), SIGTERM and SIGHUP are
forwarded to every rank as received; a second one kills them. If nobody
reads stdout any more, the ranks get SIGTERM (exit 141; with --no-prefix
they write to it themselves). A summary (rank, status, duration) goes to
stderr at the end.

On Linux nothing run starts outlives it: what a rank leaves behind when it
ends (in its process group or not) gets SIGTERM, then SIGKILL after --grace,
and run returns only when all of it is gone; if run itself dies (even by
SIGKILL), the ranks and all they started get the same. Elsewhere only each
rank's process group is signalled.

Several nodes: run one launcher per node with the same --nnodes, --master-addr
and --master-port, and each node's --node-rank; node 0 hosts the store on
--store-port of its --master-addr (default master port + 1), and MASTER_PORT is
left to torch's rank 0. Set NCCL4GO_STORE_SECRET to the same value on every
node to protect the store (one node alone makes up a random secret; several
without one are warned that the store is open).

Values of --env may use {rank}, {local_rank}, {node_rank}, {world_size}.
Several ranks on one GPU need --hostid-per-rank (NCCL_HOSTID distinct per
rank, NCCL_NVLS_ENABLE=0).`

// runFlags is run's command line.
type runFlags struct {
	nproc, nnodes, nodeRank int
	nprocFlag               onceInt // -n, --nproc-per-node
	masterAddr              string
	masterPort, storePort   int
	grace                   time.Duration
	hostidPerRank, bindGPUs bool
	noPrefix, quiet         bool
	env                     []string
	program                 string
	args                    []string
}

// bindRunFlags defines run's flags on fs.
func bindRunFlags(fs *pflag.FlagSet) *runFlags {
	f := &runFlags{}
	f.nprocFlag.n = 1
	fs.VarP(&f.nprocFlag, "nproc-per-node", "n", "`number` of processes (ranks) on this node, at most 65536")
	fs.IntVar(&f.nnodes, "nnodes", 1, "`number` of nodes, each running one launcher (nnodes × n at most 16777216)")
	fs.IntVar(&f.nodeRank, "node-rank", 0, "this node's `index`, 0 to nnodes-1")
	fs.StringVar(&f.masterAddr, "master-addr", "127.0.0.1", "`address` of node 0 (MASTER_ADDR)")
	fs.IntVar(&f.masterPort, "master-port", 0, "MASTER_PORT; 0: a free `port` (one node only)")
	fs.IntVar(&f.storePort, "store-port", 0, "`port` of the store node 0 hosts; 0: a free port on one node, master port + 1 on several")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when stopping the ranks")
	boolFlag(fs, &f.hostidPerRank, "hostid-per-rank", "", "give each rank its own NCCL_HOSTID and NCCL_NVLS_ENABLE=0 (several ranks on one GPU)")
	boolFlag(fs, &f.bindGPUs, "bind-gpus", "", "set CUDA_VISIBLE_DEVICES of each rank to its one GPU")
	boolFlag(fs, &f.noPrefix, "no-prefix", "", "do not prefix output lines with the rank")
	boolFlag(fs, &f.quiet, "quiet", "", "print the summary only when a rank failed")
	fs.StringArrayVar(&f.env, "env", nil, "`KEY=VALUE` for every rank, repeatable; KEY: letters, digits, _; VALUE may use {rank}, {local_rank}, {node_rank}, {world_size}")
	return f
}

// check validates the flags once parsed; args are PROGRAM and its
// arguments.
func (f *runFlags) check(fs *pflag.FlagSet, args []string) error {
	bad := usagef
	if len(args) == 0 {
		return bad("no program given")
	}
	f.program, f.args = args[0], args[1:]
	if f.nprocFlag.conflict {
		return bad("-n and --nproc-per-node disagree (%d, then %d): give one of them", f.nprocFlag.first, f.nprocFlag.n)
	}
	f.nproc = f.nprocFlag.n
	switch {
	case f.nproc < 1:
		return bad("-n %d: need at least one process", f.nproc)
	case f.nproc > maxLocalRanks:
		return bad("-n %d: at most %d processes on one node", f.nproc, maxLocalRanks)
	case f.nnodes < 1:
		return bad("--nnodes %d: need at least one node", f.nnodes)
	case f.nnodes > maxWorldSize/f.nproc: // f.nnodes*f.nproc without overflow
		return bad("--nnodes %d × -n %d: more than %d ranks", f.nnodes, f.nproc, maxWorldSize)
	case f.nodeRank < 0 || f.nodeRank >= f.nnodes:
		return bad("--node-rank %d is not below --nnodes %d", f.nodeRank, f.nnodes)
	case f.nnodes > 1 && f.masterPort == 0:
		return bad("--nnodes %d: give every node the same --master-port", f.nnodes)
	case f.masterPort < 0 || f.masterPort > 65535:
		return bad("--master-port %d: a port is 0 to 65535", f.masterPort)
	case f.storePort < 0 || f.storePort > 65535:
		return bad("--store-port %d: a port is 0 to 65535", f.storePort)
	case f.grace < 0:
		return bad("--grace must not be negative")
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return bad("--env %q is not KEY=VALUE", kv)
		case !isEnvName(k):
			return bad("--env %q: the name %q is not letters, digits and _ (not starting with a digit)", kv, k)
		case strings.IndexByte(v, 0) >= 0:
			return bad("--env %q: the value holds a NUL byte", kv)
		}
	}
	return nil
}

// onceInt is an int flag that may be given twice (as -n and as
// --nproc-per-node) only with the same value.
type onceInt struct {
	n, first int
	set      bool
	conflict bool
}

func (o *onceInt) String() string { return strconv.Itoa(o.n) }
func (o *onceInt) Type() string   { return "int" }
func (o *onceInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("not a number")
	}
	if o.set && int(v) != o.n {
		o.conflict, o.first = true, o.n
	}
	o.n, o.set = int(v), true
	return nil
}

// Bounds of -n and --nnodes × -n: far above any machine or job, low enough
// that the launcher's own tables stay small (they panicked in makeslice).
const (
	maxLocalRanks = 1 << 16
	maxWorldSize  = 1 << 24
)

// isEnvName reports whether k is a portable environment variable name, as
// shells accept: letters, digits and underscores, not starting with a
// digit.
func isEnvName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return k != ""
}

// rankProc is one rank: its process (on Linux, its supervisor's) and how
// it ended. Only the supervising loop touches its fields once started.
type rankProc struct {
	rank, local int
	cmd         *exec.Cmd
	out, errw   *prefixWriter
	start, end  time.Time
	exit        *rankExit // nil while the rank runs
	gone        bool      // the rank and everything it started are gone
	sys         rankSys   // the platform's part
}

// rankExit is how a rank ended.
type rankExit struct {
	startErr string // the program did not start: why
	code     int    // its exit code, when signal is 0
	signal   int    // the signal that ended it; 0: it exited
}

// status is a shell's status: the exit code, 128 + the signal, or 127 for
// a program that did not start.
func (e *rankExit) status() int {
	switch {
	case e == nil:
		return 0
	case e.startErr != "":
		return 127
	case e.signal != 0:
		return 128 + e.signal
	}
	return e.code
}

// String says how a rank ended: "exited 3", "killed by SIGTERM".
func (e *rankExit) String() string {
	switch {
	case e == nil:
		return "did not start"
	case e.startErr != "":
		return "did not start: " + e.startErr
	case e.signal != 0:
		return "killed by " + signalName(e.signal)
	}
	return "exited " + strconv.Itoa(e.code)
}

// exitOf is how the process of st ended.
func exitOf(st *os.ProcessState) *rankExit {
	if c := st.ExitCode(); c >= 0 {
		return &rankExit{code: c}
	}
	if sig, ok := signalOf(st); ok {
		return &rankExit{signal: sig}
	}
	return &rankExit{code: 1}
}

// rankEvent is news of a rank from its watching goroutine: it ended
// (exit), or it and everything it started are gone (gone).
type rankEvent struct {
	p    *rankProc
	exit *rankExit
	end  time.Time
	gone bool
}

// launchJob runs the job f describes: a failure of a rank is an *exitError
// with its status.
func launchJob(ctx context.Context, f *runFlags, stdout, stderr io.Writer) error {
	var err error
	world := f.nnodes * f.nproc
	jobID := fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if f.masterPort == 0 {
		if f.masterPort, err = freePort(f.masterAddr); err != nil {
			return fmt.Errorf("run: choosing a master port: %w", err)
		}
	}
	if !setsPath(f.env) {
		// Checked once here, so that a typo is one clear error rather than
		// a failure of every rank.
		if _, err := exec.LookPath(f.program); err != nil {
			return &exitError{code: 127, msg: "run: " + err.Error()}
		}
	}
	// The store: node 0 hosts it.
	storePort := f.storePort
	if storePort == 0 && f.nnodes > 1 {
		storePort = f.masterPort + 1
	}
	secret := os.Getenv(rendezvous.EnvStoreSecret)
	switch {
	case secret == "" && f.nnodes == 1:
		secret = randomSecret()
	case secret == "":
		fmt.Fprintf(stderr, "nccl4go run: warning: %s is not set: the store on node 0 (port %d of every interface) accepts anyone who can reach it; set it to the same value on every node\n",
			rendezvous.EnvStoreSecret, storePort)
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
	outGone := &brokenOutput{c: make(chan struct{})}
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
				return fmt.Errorf("run: --bind-gpus: %w", err)
			}
			vars["CUDA_VISIBLE_DEVICES"] = dev
		}
		for _, kv := range f.env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = expandTemplate(v, rank, local, f.nodeRank, world)
		}
		cmd := rankCommand(f)
		cmd.Env = append(append([]string(nil), base...), sortedVars(vars)...)
		cmd.Stdin = nil
		if f.noPrefix {
			cmd.Stdout, cmd.Stderr = stdout, stderr
		} else {
			prefix := fmt.Sprintf("[%*d] ", width, rank)
			p.out = &prefixWriter{w: stdout, prefix: prefix, mu: &mu, broken: outGone}
			p.errw = &prefixWriter{w: stderr, prefix: prefix, mu: &mu}
			cmd.Stdout, cmd.Stderr = p.out, p.errw
		}
		cmd.WaitDelay = time.Second // a process escaped the rank's end holds the pipes open
		p.cmd = cmd
	}
	return supervise(ctx, f, procs, stderr, outGone.c)
}

// setsPath reports whether --env sets PATH for the ranks.
func setsPath(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return true
		}
	}
	return false
}

// brokenOutput is closed (once) when the reader of the launcher's stdout
// has gone away.
type brokenOutput struct {
	once sync.Once
	c    chan struct{}
}

func (b *brokenOutput) close() { b.once.Do(func() { close(b.c) }) }

// supervise starts the ranks, stops them all on the first failure, a
// signal or the loss of stdout's reader, waits until every rank and
// everything it started are gone, and reports.
func supervise(ctx context.Context, f *runFlags, procs []*rankProc, stderr io.Writer, outGone <-chan struct{}) error {
	events := make(chan rankEvent, 2*len(procs))
	sigs, stopSignals := notifySignals()
	defer stopSignals()
	started := 0
	var startErr error
	for _, p := range procs {
		p.start = time.Now()
		if err := startRank(p); err != nil {
			startErr = fmt.Errorf("starting rank %d: %w", p.rank, err)
			break
		}
		started++
		go watchRank(p, events) // reports on events; only the loop below touches p
	}
	var first *rankProc // the first rank that failed
	stopping := startErr != nil
	var kill <-chan time.Time
	// stopAll signals every rank not gone: the supervisor of a rank that
	// has ended still holds what the rank left behind.
	stopAll := func(sig os.Signal) {
		for _, p := range procs[:started] {
			if !p.gone {
				signalRank(p, sig)
			}
		}
	}
	stop := func(sig os.Signal) { // the first stop of the job: grace, then SIGKILL
		stopping = true
		stopAll(sig)
		if kill == nil {
			kill = time.After(f.grace)
		}
	}
	if stopping {
		stop(termSignal)
	}
	var received os.Signal // the signal that interrupted the job
	interrupted := false
	signals := 0          // signals received on sigs: a second one ends the grace
	ctxDone := ctx.Done() // nil once handled, or the loop would spin on it
	for running := started; running > 0; {
		select {
		case e := <-events:
			p := e.p
			if e.gone {
				running--
				p.gone = true
				if p.out != nil {
					p.out.flush()
					p.errw.flush()
				}
				continue
			}
			p.exit, p.end = e.exit, e.end
			if p.exit.status() != 0 && first == nil && !stopping {
				first = p
				stop(termSignal)
			}
		case s := <-sigs:
			// A library caller's context may be cancelled by the same
			// Ctrl-C (as main's was): only a second signal ends the grace.
			if signals++; signals > 1 {
				stopAll(killSignal)
				continue
			}
			if !interrupted {
				interrupted, received = true, s
			}
			stop(s)
		case <-ctxDone:
			ctxDone = nil
			if !interrupted {
				interrupted = true
				stop(termSignal)
			}
		case <-outGone:
			// The reader of stdout went away (a closed pipe): nothing the
			// ranks print can be shown any more. Stop them as a pipeline
			// member stops, but with their grace.
			outGone = nil
			if !interrupted && !stopping {
				interrupted, received = true, brokenPipeSignal
				fmt.Fprintf(stderr, "nccl4go run: stdout was closed; stopping the ranks (SIGTERM, SIGKILL after %v)\n", f.grace)
				stop(termSignal)
			}
		case <-kill:
			stopAll(killSignal)
			kill = nil
		}
	}
	failed := first != nil || startErr != nil
	if (!f.quiet || failed || interrupted) && started > 0 {
		summary(stderr, procs[:started])
	}
	switch {
	case startErr != nil:
		return &exitError{code: 127, msg: "run: " + startErr.Error()}
	case first != nil:
		return &exitError{code: first.exit.status(), msg: fmt.Sprintf("run: rank %d %s", first.rank, first.exit)}
	case interrupted:
		for _, p := range procs {
			if c := p.exit.status(); c != 0 {
				return &exitError{code: c, msg: fmt.Sprintf("run: interrupted; rank %d %s", p.rank, p.exit)}
			}
		}
		if code, ok := signalStatus(received); ok {
			return &exitError{code: code, msg: fmt.Sprintf("run: interrupted by %s; every rank exited 0", signalName(code-128))}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("run: %w", ctx.Err())
		}
	}
	return nil
}

// summary prints one line per rank.
func summary(w io.Writer, procs []*rankProc) {
	fmt.Fprintf(w, "nccl4go run: %-6s %-22s %s\n", "RANK", "STATUS", "DURATION")
	for _, p := range procs {
		d := p.end.Sub(p.start)
		fmt.Fprintf(w, "nccl4go run: %-6d %-22s %v\n", p.rank, p.exit, d.Round(time.Millisecond))
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
		if v == "" {
			return "", errors.New("CUDA_VISIBLE_DEVICES is empty: no GPU to bind")
		}
		list := strings.Split(v, ",")
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
	broken *brokenOutput // closed when w's reader has gone; nil: not watched
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
	_, err := p.w.Write(out) // output lost is not the job's failure...
	p.mu.Unlock()
	if errors.Is(err, syscall.EPIPE) && p.broken != nil {
		p.broken.close() // ...but nobody reading it any more ends the job
	}
}

// flush writes a last line without its newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = p.buf[:0]
	}
}

// superviseCommand is the hidden command that runs one rank's supervisor
// (see run_linux.go).
const superviseCommand = "__nccl4go-supervise"

// maybeSupervise runs the supervisor, and exits, when this process was
// started as one; main (and the tests' TestMain) call it first. It exits
// with syscall.Exit: there is nothing to flush, and a race-enabled build
// would sleep a second in os.Exit.
func maybeSupervise() {
	if len(os.Args) > 1 && os.Args[1] == superviseCommand {
		syscall.Exit(superviseMain(os.Args[2:]))
	}
}
