package devapi

import (
	"errors"
	"fmt"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/versions"
)

// CapabilityError says why a communicator cannot run a device-API path.
// errors.Is matches [nccl.ErrUnsupported].
type CapabilityError struct {
	// Path is "LSA", "multimem" or "GIN".
	Path string
	// Reason says why, from the communicator's properties.
	Reason string
}

// Error reads "devapi: GIN kernels cannot run on this communicator: ...".
func (e *CapabilityError) Error() string {
	return fmt.Sprintf("devapi: %s kernels cannot run on this communicator: %s", e.Path, e.Reason)
}

// Is matches [nccl.ErrUnsupported] and errors.ErrUnsupported.
func (e *CapabilityError) Is(target error) bool { return errors.Is(nccl.ErrUnsupported, target) }

// properties returns c's device-API properties, or a reason they cannot
// be read (NCCL before 2.29.2 has no properties query).
func properties(c *nccl.Communicator, path string) (*nccl.Properties, error) {
	p, err := c.Properties()
	if errors.Is(err, nccl.ErrUnsupported) {
		r, _ := nccl.Version()
		return nil, &CapabilityError{Path: path, Reason: fmt.Sprintf("NCCL %s cannot say whether it supports them (%v)", r, err)}
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// require is nil when c's properties have what path needs (has), else a
// [CapabilityError] for path saying why not.
func require(c *nccl.Communicator, path string, has func(*nccl.Properties) bool, why string) error {
	p, err := properties(c, path)
	return verdict(p, err, path, has, why)
}

// verdict is require's answer on properties p (or the error reading them).
func verdict(p *nccl.Properties, err error, path string, has func(*nccl.Properties) bool, why string) error {
	if err != nil {
		return err
	}
	if !has(p) {
		return &CapabilityError{Path: path, Reason: why}
	}
	return nil
}

// RequireLSA reports whether c can run kernels that use its device
// communicator and load/store-accessible (LSA) memory: nil when the
// communicator reports device-API support. On NCCL before 2.29.2, which
// cannot say, it returns nil too (creating the device communicator is the
// test there), except for a communicator of one rank before NCCL 2.28.7,
// which NCCL never gives symmetric memory ([nccl.SymmetricMemoryError]).
func RequireLSA(c *nccl.Communicator) error {
	p, err := properties(c, "LSA")
	var ce *CapabilityError
	if errors.As(err, &ce) {
		r, _ := nccl.Version()
		if f := versions.SymmetricMemoryOneRank; !f.In(int(r)) {
			if n, err := c.NRanks(); err == nil && n == 1 {
				return &CapabilityError{Path: "LSA", Reason: fmt.Sprintf("NCCL %s gives symmetric memory, which device "+
					"communicators need, only to communicators with at least 2 ranks on the node, and this one has 1 rank "+
					"(NCCL %s lifts this)", r, nccl.Release(f.Since()))}
			}
		}
		return nil
	}
	return verdict(p, err, "LSA", func(p *nccl.Properties) bool { return p.DeviceAPISupport },
		"the communicator reports no device-API support "+
			"(deviceApiSupport is false: its ranks' GPUs cannot map each other's memory, or symmetric memory is disabled)")
}

// RequireMultimem reports whether c can run kernels that use NVLink
// multicast (multimem) pointers: nil when the communicator reports
// multimem support. NVLink SHARP needs NVSwitch systems and
// NCCL_NVLS_ENABLE not 0.
func RequireMultimem(c *nccl.Communicator) error {
	return require(c, "multimem", func(p *nccl.Properties) bool { return p.MultimemSupport },
		"the communicator reports no multimem support "+
			"(NVLink multicast needs NVSwitch-connected GPUs, and NCCL_NVLS_ENABLE must not be 0)")
}

// RequireGIN reports whether c can run kernels that use GPU-initiated
// networking (GIN): nil when the communicator reports a GIN type other than
// none.
func RequireGIN(c *nccl.Communicator) error {
	return require(c, "GIN", func(p *nccl.Properties) bool { return p.GINType != nccl.GINNone },
		"the communicator reports GIN type NCCL_GIN_TYPE_NONE "+
			"(GIN needs ranks on other nodes reached through a network with GPU-initiated transfers: RDMA NICs and the GDAKI or proxy GIN plugin)")
}
