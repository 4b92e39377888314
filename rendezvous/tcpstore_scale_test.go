package rendezvous

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The scale benchmark runs the store's server in a child process (this test
// binary re-run with NCCL4GO_SCALE_SERVER set), so that the server's own peak
// memory (VmHWM) is measured apart from the clients'.

const scaleServerEnv = "NCCL4GO_SCALE_SERVER"

// TestScaleServerChild is the child's body: it serves on loopback, prints
// its address, and when its stdin closes prints its peak RSS and exits. As
// a normal test it does nothing.
func TestScaleServerChild(t *testing.T) {
	if os.Getenv(scaleServerEnv) == "" {
		t.Skip("helper process for BenchmarkRendezvousScale")
	}
	srv, err := Listen("127.0.0.1:0", nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if p := os.Getenv("NCCL4GO_SCALE_CPUPROFILE"); p != "" {
		f, _ := os.Create(p)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Println("addr", srv.Addr())
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		if strings.TrimSpace(line) == "hwm" {
			fmt.Println("hwm", peakRSS())
		}
	}
	srv.Close()
}

// peakRSS returns the process's peak resident set in bytes (Linux; 0
// elsewhere).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type scaleServer struct {
	cmd   *exec.Cmd
	in    *os.File
	out   *bufio.Reader
	addr  string
	close func()
}

func startScaleServer(tb testing.TB) *scaleServer {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestScaleServerChild$")
	cmd.Env = append(os.Environ(), scaleServerEnv+"=1")
	pr, pw, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdin = pr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pr.Close()
	s := &scaleServer{cmd: cmd, in: pw, out: bufio.NewReader(stdout)}
	s.close = func() { pw.Close(); cmd.Wait() }
	tb.Cleanup(s.close)
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			tb.Fatalf("scale server: %v", err)
		}
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "addr "); ok {
			s.addr = a
			return s
		}
	}
}

func (s *scaleServer) hwm(tb testing.TB) int64 {
	fmt.Fprintln(s.in, "hwm")
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			tb.Fatalf("scale server: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "hwm "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
}

// BenchmarkRendezvousScale: n clients (goroutines of this process) against a
// server in a process of its own; each dials, checks in (ADD), rank 0
// publishes a 128-byte id, every rank fetches it. Reports the time per
// rendezvous (ns/op) and the server's peak RSS (server-MB). Targets on a
// 2-core machine: 4096 clients under 3 s with the server under 200 MB.
func BenchmarkRendezvousScale(b *testing.B) {
	for _, n := range []int{1024, 4096, 8192} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			srv := startScaleServer(b)
			i := 0
			for b.Loop() {
				scaleRound(b, srv.addr, n, fmt.Sprint("round", i))
				i++
			}
			b.ReportMetric(float64(srv.hwm(b))/(1<<20), "server-MB")
		})
	}
}

// scaleRound is one rendezvous of n clients against the server at addr.
func scaleRound(tb testing.TB, addr string, n int, round string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, n)
	id := make([]byte, 128)
	for i := range id {
		id[i] = 0xAB
	}
	for rank := range n {
		go func() {
			errs <- func() error {
				c, err := Dial(ctx, addr, &DialOptions{Timeout: time.Minute})
				if err != nil {
					return err
				}
				defer c.Close()
				s := WithPrefix(c, round)
				if _, err := s.Add(ctx, "checkin", 1); err != nil {
					return err
				}
				if rank == 0 {
					if err := s.Set(ctx, "uniqueid", id); err != nil {
						return err
					}
				}
				v, err := s.Get(ctx, "uniqueid")
				if err != nil {
					return err
				}
				if string(v) != string(id) {
					return fmt.Errorf("rank %d: wrong id", rank)
				}
				return nil
			}()
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkScalableInitExchange: n simulated ranks (goroutines, each with
// its own TCP client under a WithPrefix of its own round) run the
// communicator's check-in and unique-id exchange of NCCL's scalable init
// (one id per DefaultRanksPerRoot ranks) against a server in a process of
// its own. Every rank must end with every group's id.
func BenchmarkScalableInitExchange(b *testing.B) {
	for _, n := range []int{4096, 8192} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			srv := startScaleServer(b)
			ngroups := (n + DefaultRanksPerRoot - 1) / DefaultRanksPerRoot
			i := 0
			for b.Loop() {
				scaleExchange(b, srv.addr, n, ngroups, fmt.Sprint("init", i))
				i++
			}
			b.ReportMetric(float64(srv.hwm(b))/(1<<20), "server-MB")
		})
	}
}

func scaleExchange(tb testing.TB, addr string, n, ngroups int, round string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		rank int
		ids  [][]byte
		err  error
	}
	res := make(chan result, n)
	for rank := range n {
		go func() {
			c, err := Dial(ctx, addr, &DialOptions{Timeout: time.Minute})
			if err != nil {
				res <- result{rank, nil, err}
				return
			}
			defer c.Close()
			x := &exchange{store: WithPrefix(c, round), rank: rank, nranks: n, ngroups: ngroups,
				info:  fmt.Sprintf("sim:%d", rank),
				newID: func() ([]byte, error) { return fakeID(rootGroup(rank, n, ngroups)), nil }}
			ids, err := x.run(ctx)
			res <- result{rank, ids, err}
		}()
	}
	for range n {
		r := <-res
		if r.err != nil {
			tb.Fatalf("rank %d: %v", r.rank, r.err)
		}
		if len(r.ids) != ngroups {
			tb.Fatalf("rank %d: %d ids, want %d", r.rank, len(r.ids), ngroups)
		}
		for g, id := range r.ids {
			if string(id) != string(fakeID(g)) {
				tb.Fatalf("rank %d: group %d's id is wrong", r.rank, g)
			}
		}
	}
}

// TestScaleAgainst runs the rendezvous of BenchmarkRendezvousScale against
// the store named by NCCL4GO_SCALE_ADDR ("host:port", e.g. torch's libuv
// TCPStore; "go" for a Go server in a process of its own), with
// NCCL4GO_SCALE_N clients (default 4096), three rounds, and prints one
// "SCALE" line per round. It is for comparing the two servers on one
// machine (the GPU machine has torch); without the variable it skips.
func TestScaleAgainst(t *testing.T) {
	addr := os.Getenv("NCCL4GO_SCALE_ADDR")
	if addr == "" {
		t.Skip("set NCCL4GO_SCALE_ADDR to a store's host:port (or \"go\") to compare servers")
	}
	n := 4096
	if v := os.Getenv("NCCL4GO_SCALE_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	var srv *scaleServer
	if addr == "go" {
		srv = startScaleServer(t)
		addr = srv.addr
	}
	for i := range 3 {
		start := time.Now()
		scaleRound(t, addr, n, fmt.Sprintf("cmp%d-%d", time.Now().UnixNano(), i))
		fmt.Printf("SCALE server=%s clients=%d round=%d seconds=%.3f\n", os.Getenv("NCCL4GO_SCALE_ADDR"), n, i,
			time.Since(start).Seconds())
	}
	if srv != nil {
		fmt.Printf("SCALE server=go peak-rss-MB=%.1f\n", float64(srv.hwm(t))/(1<<20))
	}
}
