package nccl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nccl4go/nccl/internal/capi"
)

// EncryptionConfig is what [SetEncryption] hands NCCL: TLS with a
// pre-shared key for NCCL's socket traffic (ncclEncryptionConfig_t, NCCL
// 2.32.3, mode NCCL_ENCRYPTION_MODE_PSK).
type EncryptionConfig struct {
	// PSK is the pre-shared key every rank of the job uses: at least 32
	// bytes, no NUL byte (NCCL reads a NUL-terminated string).
	PSK string
}

// minPSK is the shortest pre-shared key NCCL takes (its setup
// documentation for 2.32.3: "at least 32 bytes").
const minPSK = 32

// SetEncryption is ncclSetEncryption: it turns on TLS for NCCL's socket
// traffic (bootstrap and the socket transport) in this process, and must be
// called on every rank before [NewUniqueID] and before any communicator is
// created. Process-wide, not collective. NCCL 2.32.3, and only in NCCL
// builds with TLS_BACKEND=OPENSSL3 (NVIDIA's builds without OpenSSL 3 have
// no TLS).
//
// The binding does not call it yet, and says so: the layout of
// ncclEncryptionConfig_t (its fields' offsets and the numeric mode values)
// is not established from NVIDIA's headers or sources, and the binding
// does not guess a layout. So, after the checks below, it returns an
// [*UnknownLayoutError] naming the struct and both requirements. A library
// without the function gives an [*UnsupportedError] ("ncclSetEncryption:
// requires NCCL 2.32.3, loaded ..."); a key shorter than 32 bytes or with a
// NUL byte an [*ArgError]. Every error matches [ErrUnsupported] or
// [ErrInvalidArgument]; NCCL is never called.
func SetEncryption(cfg EncryptionConfig) error {
	const op = "SetEncryption"
	r, err := require(capi.SymSetEncryption)
	if err != nil {
		return err
	}
	switch {
	case len(cfg.PSK) < minPSK:
		return argErr(op, "PSK", "%d bytes: NCCL wants a pre-shared key of at least %d bytes", len(cfg.PSK), minPSK)
	case strings.IndexByte(cfg.PSK, 0) >= 0:
		return argErr(op, "PSK", "holds a NUL byte: NCCL reads the key as a NUL-terminated string")
	}
	return &UnknownLayoutError{
		Op: op, Struct: "ncclEncryptionConfig_t", Loaded: r,
		Reason: "its field offsets and mode values are known only from third-party code, not from NVIDIA's headers; " +
			"NCCL's TLS also needs a build with TLS_BACKEND=OPENSSL3",
	}
}

// UnknownLayoutError is the binding's refusal to call an NCCL function whose
// C struct it cannot lay out for the loaded release: the layout is not
// established from NVIDIA's headers or sources, and a guessed one would
// hand NCCL memory it misreads. errors.Is matches [ErrUnsupported] and
// errors.ErrUnsupported.
type UnknownLayoutError struct {
	Op     string  // e.g. "SetEncryption"
	Struct string  // the C struct, e.g. "ncclEncryptionConfig_t"
	Loaded Release // the loaded NCCL
	Reason string  // why the layout is unknown, and what else the call needs
}

// Error reads "nccl: SetEncryption: the layout of ncclEncryptionConfig_t in
// NCCL 2.32.3 is not established, and the binding does not guess one: ...".
func (e *UnknownLayoutError) Error() string {
	return fmt.Sprintf("nccl: %s: the layout of %s in NCCL %s is not established, and the binding does not guess one: %s",
		e.Op, e.Struct, e.Loaded, e.Reason)
}

// Is matches [ErrUnsupported] and errors.ErrUnsupported.
func (e *UnknownLayoutError) Is(target error) bool {
	return target == ErrUnsupported || target == errors.ErrUnsupported
}
