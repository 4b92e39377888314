package nccl_test

import (
	"errors"
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
			var ae *nccl.ArgError
			if !errors.As(err, &ae) || ae.Arg != "PSK" || !errors.Is(err, nccl.ErrInvalidArgument) {
				t.Errorf("key of %d bytes: %v", len(bad), err)
			}
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

// RegisterWindow refuses NCCL 2.32.3's NCCL_WIN_GIN_ONLY (0x04) and
// NCCL_WIN_CFT_COUNTED (0x08), whose values are not established, before
// calling NCCL.
func TestFakeWindowFlags2323Refused(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23203}, func(t *testing.T) {
		c := fakeComm(t, 2, 0, nil)
		buf := mustMemAlloc[float32](t, 0, 1024)
		for _, f := range []nccl.WindowFlag{0x04, 0x08, nccl.WindowCollSymmetric | 0x04} {
			_, err := c.RegisterWindow(nccl.BufferOf(buf), f)
			wantArg(t, "window flag", err, "flags")
		}
		if n := faketest.Calls(t, "ncclCommWindowRegister"); n != 0 {
			t.Errorf("ncclCommWindowRegister called %d times", n)
		}
	})
}
