package nccl

import "github.com/nccl4go/nccl/internal/capi"

// Hooks for the external tests (config_test.go, errors_test.go): the
// unexported pieces they check without a library.

// EncodeConfigForTest is cfg.encode: the C config the binding would pass to
// NCCL release r, and whether the communicator is blocking.
func EncodeConfigForTest(cfg *Config, op string, r Release) (*capi.Config, bool, error) {
	return cfg.encode(op, r)
}

// ReleaseFromCodeForTest reads an ncclGetVersion value (both encodings).
func ReleaseFromCodeForTest(code int) Release { return releaseFromCode(code) }
