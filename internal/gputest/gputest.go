// Package gputest holds the helpers of the GPU tests: skipping with a reason
// where no GPU or NCCL is found, and running several ranks as child
// processes of the test binary.
//
// Ranks of one communicator may share one GPU when each runs in its own
// process with a distinct NCCL_HOSTID: NCCL then sees separate hosts and
// connects them through its socket transport (slow, but correct). Every
// child gets NCCL_NVLS_ENABLE=0: NVLink multicast must stay off.
package gputest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Environment of a rank's child process.
const (
	envRank   = "NCCL4GO_TEST_RANK"
	envNRanks = "NCCL4GO_TEST_NRANKS"
	envID     = "NCCL4GO_TEST_ID"
	envTest   = "NCCL4GO_TEST_NAME"
)

// SafeEnv is set in every process the tests start on a GPU machine.
var SafeEnv = []string{"NCCL_NVLS_ENABLE=0"}

func init() {
	// This process too: never NVLink multicast.
	for _, kv := range SafeEnv {
		k, v, _ := strings.Cut(kv, "=")
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
}

// Require skips the test, saying why, unless a CUDA driver with at least one
// device and an NCCL library load. It returns the loaded NCCL release.
func Require(t testing.TB) nccl.Release {
	t.Helper()
	if os.Getenv("NCCL4GO_FAKE_CHILD") != "" {
		t.Skip("GPU test: skipped in a fake-library child process")
	}
	n, err := cuda.Count()
	if err != nil {
		t.Skipf("GPU test: no usable CUDA driver: %v", err)
	}
	if n == 0 {
		t.Skip("GPU test: the CUDA driver reports no device")
	}
	r, err := nccl.Version()
	if err != nil {
		t.Skipf("GPU test: no NCCL: %v", err)
	}
	return r
}

// RequireFunc skips, saying why, unless the loaded NCCL exports function s
// (its presence is the fact; the release only explains the skip). A library
// of a release that should have it but does not fails t: a skip would hide
// a broken library or a wrong first release in shim.h's list.
func RequireFunc(t testing.TB, s capi.Sym) nccl.Release {
	t.Helper()
	r := Require(t)
	if since := nccl.Release(capi.SymSince[s]); !capi.Present(s) {
		if r >= since {
			t.Fatalf("the loaded NCCL %s lacks %s, first in %s", r, capi.SymName[s], since)
		}
		t.Skipf("needs %s (NCCL %s), loaded %s", capi.SymName[s], since, r)
	}
	return r
}

// IsRank reports whether this process is a rank child of RunRanks.
func IsRank() bool { return os.Getenv(envRank) != "" }

// RunRanks runs fn as nranks ranks of one communicator, each in a child
// process of the test binary that re-runs only this test, each with a
// distinct NCCL_HOSTID (so that they may share GPU 0) and the id in its
// environment. In the parent it waits for every child, failing the test if
// any fails or if timeout passes; in a child it calls fn(t, rank, nranks, id).
// extraEnv is added to every child's environment.
func RunRanks(t *testing.T, nranks int, timeout time.Duration, extraEnv []string, fn func(t *testing.T, rank, nranks int, id nccl.UniqueID)) {
	t.Helper()
	if IsRank() {
		if os.Getenv(envTest) != t.Name() {
			t.Skip("not this rank child's test")
		}
		rank, _ := strconv.Atoi(os.Getenv(envRank))
		n, _ := strconv.Atoi(os.Getenv(envNRanks))
		id, err := nccl.ParseUniqueID(os.Getenv(envID))
		if err != nil {
			t.Fatalf("rank %d: bad id in environment: %v", rank, err)
		}
		fn(t, rank, n, id)
		return
	}
	Require(t)
	id, err := nccl.NewUniqueID()
	if err != nil {
		t.Fatalf("NewUniqueID: %v", err)
	}
	text, _ := id.MarshalText()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pattern := runPattern(t.Name())
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, nranks)
	errs := make([]error, nranks)
	for r := 0; r < nranks; r++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+pattern, "-test.v", "-test.timeout="+timeout.String())
		cmd.Env = append(os.Environ(), SafeEnv...)
		cmd.Env = append(cmd.Env,
			envRank+"="+strconv.Itoa(r), envNRanks+"="+strconv.Itoa(nranks), envID+"="+string(text),
			envTest+"="+t.Name(),
			"NCCL_HOSTID=nccl4go-test-host-"+strconv.Itoa(r),
			"NCCL_SOCKET_IFNAME=lo", "NCCL_IB_DISABLE=1")
		cmd.Env = append(cmd.Env, extraEnv...)
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting rank %d: %v", r, err)
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = cmd.Wait()
		}(r)
	}
	wg.Wait()
	for r := 0; r < nranks; r++ {
		out := outs[r].String()
		if errs[r] != nil || !strings.Contains(out, "--- PASS") && !strings.Contains(out, "--- SKIP") {
			t.Errorf("rank %d of %d failed (%v):\n%s", r, nranks, errs[r], out)
		} else if strings.Contains(out, "--- SKIP") && !strings.Contains(out, "--- PASS") {
			t.Logf("rank %d skipped:\n%s", r, out)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("ranks did not finish within %v", timeout)
	}
}

// runPattern is a -test.run pattern matching exactly the test name (with
// its subtests' path).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// MultiRankGPU reports whether ranks of one process may share a GPU with the
// loaded NCCL (one that has [versions.MultiRankGPU], with
// NCCL_MULTI_RANK_GPU_ENABLE=1), and if not, why.
func MultiRankGPU() error {
	r, err := nccl.Version()
	if err != nil {
		return err
	}
	if f := versions.MultiRankGPU; !f.In(int(r)) {
		return &nccl.UnsupportedError{Feature: f.Name(), Since: nccl.Release(f.Since()), Loaded: r}
	}
	if os.Getenv("NCCL_MULTI_RANK_GPU_ENABLE") != "1" {
		return fmt.Errorf("NCCL_MULTI_RANK_GPU_ENABLE is not 1")
	}
	return nil
}

// SkipUnsupported skips t when err says the loaded NCCL is too old for a
// feature (an *nccl.UnsupportedError whose loaded release is older than the
// feature's first release), and fails t when the loaded release is new
// enough: then the binding refused what NCCL has, a bug a skip would hide.
// Any other err, nil included, is left to the caller.
func SkipUnsupported(t testing.TB, err error) {
	t.Helper()
	var ue *nccl.UnsupportedError
	if !errors.As(err, &ue) {
		return
	}
	if ue.Since != 0 && ue.Loaded >= ue.Since {
		t.Fatalf("%v: but the loaded NCCL %s is new enough to have it (first in %s)", err, ue.Loaded, ue.Since)
		return
	}
	t.Skipf("needs NCCL %s or newer: %v", ue.Since, err)
}
