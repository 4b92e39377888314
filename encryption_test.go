package nccl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// SetEncryption: unsupported before 2.32.3; bad keys refused; on 2.32.3 a
// typed refusal naming the unknown ncclEncryptionConfig_t layout and the
// OpenSSL 3 build, and NCCL is never called.
func TestFakeSetEncryption(t *testing.T) {
	key := strings.Repeat("k", 32)
	faketest.Run(t, faketest.Env{Release: 23102}, func(t *testing.T) {
		err := nccl.SetEncryption(nccl.EncryptionConfig{PSK: key})
		var ue *nccl.UnsupportedError
		if !errors.As(err, &ue) || !errors.Is(err, nccl.ErrUnsupported) ||
			err.Error() != "nccl: ncclSetEncryption: requires NCCL 2.32.3, loaded 2.31.2" {
			t.Errorf("on 2.31.2: %v", err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
		for _, bad := range []string{"", strings.Repeat("k", 31), key + "\x00x"} {
			err := nccl.SetEncryption(nccl.EncryptionConfig{PSK: bad})
			wantArg(t, fmt.Sprintf("key of %d bytes", len(bad)), err, "PSK")
		}
		err := nccl.SetEncryption(nccl.EncryptionConfig{PSK: key})
		var le *nccl.UnknownLayoutError
		if !errors.As(err, &le) || le.Struct != "ncclEncryptionConfig_t" || le.Loaded != 23203 ||
			!errors.Is(err, nccl.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("on 2.32.3: %v", err)
		}
		for _, want := range []string{"ncclEncryptionConfig_t in NCCL 2.32.3 is not established", "does not guess", "TLS_BACKEND=OPENSSL3"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
		if n := faketest.Calls(t, "ncclSetEncryption"); n != 0 {
			t.Errorf("ncclSetEncryption called %d times", n)
		}
	})
}
