package nccl_test

import (
	"os"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

// TestMain checks for leaks after the tests: goroutines still running, and,
// in each fake-library child, communicators of the fake NCCL still alive.
func TestMain(m *testing.M) { os.Exit(faketest.Main(m)) }
