package rendezvous

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Item 6: node lists whose ranges end at the largest integer, or whose
// tails hold millions of names, cost only the names asked for.
func TestNodeListOverflowAndLaziness(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err := expandNodeList("c[9223372036854775806-9223372036854775807]", 0)
		if err != nil || strings.Join(got, " ") != "c9223372036854775806 c9223372036854775807" {
			t.Errorf("range ending at MaxInt64 = %q, %v", got, err)
		}
		if h, err := firstHost("c[0-9223372036854775807]"); err != nil || h != "c0" {
			t.Errorf("firstHost of a 2^63-name range = %q, %v", h, err)
		}
		if _, err := expandNodeList("c[0-9223372036854775807]", 0); err == nil || !strings.Contains(err.Error(), "more than") {
			t.Errorf("expanding 2^63 names whole: %v, want a too-many-names error", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("node list expansion did not finish (overflowing loop)")
	}
	// The first host of a list with a 10^7-name tail: a handful of
	// allocations, not 10^7.
	allocs := testing.AllocsPerRun(3, func() {
		if h, err := firstHost("gpu[1-2]-ib[0-10000000]"); err != nil || h != "gpu1-ib0" {
			t.Fatalf("firstHost = %q, %v", h, err)
		}
	})
	if allocs > 100 {
		t.Fatalf("firstHost of a list with a 10^7-name tail made %v allocations", allocs)
	}
	for _, bad := range []string{"a[1-2]b[", "a[1-2]b[x]", "a[1-2]b[2-1]"} {
		if _, err := firstHost(bad); err == nil {
			t.Errorf("firstHost(%q): no error for a bad tail", bad)
		}
	}
}

// Items 7, 8, 9: sizes beyond what NCCL runs, node ranks at or above the
// node count, and store addresses with unusable ports are *EnvErrors.
func TestFromEnvRejectsImpossibleJobs(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"world size 2^63-1", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=9223372036854775807", "MASTER_ADDR=h"), "above 1048576"},
		{"torch world size 2^31", env("RANK=0", "WORLD_SIZE=2147483648", "MASTER_ADDR=h", "MASTER_PORT=5"), "above 1048576"},
		{"node 5 of 1", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=1", "NCCL4GO_NODE_RANK=5"), "node rank 5"},
		{"node 3 of one-node job", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_NODE_RANK=3", "MASTER_ADDR=127.0.0.1"), "node rank 3"},
		{"node 2 of 2", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=4", "NCCL4GO_NODE_RANK=2", "NCCL4GO_NNODES=2", "MASTER_ADDR=h"), "node rank 2"},
		{"store port abc", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_ADDR=h:abc"), "NCCL4GO_STORE_ADDR"},
		{"store port 99999", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_ADDR=h:99999"), "not 1-65535"},
		{"store port empty", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_ADDR=:"), "no port"},
		{"store port 0", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "NCCL4GO_STORE_ADDR=h:0"), "not 1-65535"},
		{"master bad literal", env("NCCL4GO_RANK=0", "NCCL4GO_WORLD_SIZE=2", "MASTER_ADDR=300.1.1.1", "NCCL4GO_NNODES=2"), "not an IP address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := FromMap(tt.env)
			var ee *EnvError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("FromMap = %v, %v; want an *EnvError containing %q", j, err, tt.want)
			}
		})
	}
}
