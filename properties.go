package nccl

import (
	"context"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/versions"
)

// Properties is what a communicator can do with NCCL's device API
// (ncclCommProperties_t, NCCL 2.29.2). The loaded NCCL is asked once per
// communicator; the answer is cached, as it cannot change. Fields a loaded
// NCCL does not report are nil, never a zero that looks real: NumLSATeams,
// HostRMASupport and RailedGINType need NCCL 2.29.7.
type Properties struct {
	Rank             int     `json:"rank"`               // this rank (rank)
	NRanks           int     `json:"nranks"`             // the number of ranks (nRanks)
	CUDADevice       int     `json:"cuda_device"`        // the CUDA device index (cudaDev)
	NVMLDevice       int     `json:"nvml_device"`        // the NVML device index (nvmlDev)
	DeviceAPISupport bool    `json:"device_api_support"` // a device communicator can be created (deviceApiSupport)
	MultimemSupport  bool    `json:"multimem_support"`   // LSA teams can use multimem (multimemSupport)
	GINType          GINType `json:"gin_type"`           // the GIN transport (ginType)
	// NumLSATeams is the number of load/store-accessible teams across the
	// communicator. NCCL 2.29.7.
	NumLSATeams *int `json:"num_lsa_teams"`
	// HostRMASupport: host-initiated one-sided operations (PutSignal and
	// Signal) work. NCCL 2.29.7.
	HostRMASupport *bool `json:"host_rma_support"`
	// RailedGINType is the GIN transport of rail connections. NCCL 2.29.7.
	RailedGINType *GINType `json:"railed_gin_type"`
	// CommHash identifies the communicator: the same on every rank of it
	// (commHash). NCCL 2.31.0.
	CommHash *uint64 `json:"comm_hash,omitempty"`
	// GINMinStride is the smallest rank stride GIN connects: 1 with a
	// [GINConnectionFull] connection, else the number of consecutive ranks
	// of a host (ginMinStride). NCCL 2.31.0.
	GINMinStride *int `json:"gin_min_stride,omitempty"`
	// GINConnectionType is the communicator's GIN connection
	// (ginConnectionType). NCCL 2.31.0.
	GINConnectionType *GINConnectionType `json:"gin_connection_type,omitempty"`
	// GINSupport is the set of GIN transports the communicator can use
	// (ginSupport[], indexed by ncclGinType_t). NCCL 2.31.0.
	GINSupport *GINTypeSet `json:"gin_support,omitempty"`
	// DevCommRuntimeVersionSize is the size in bytes of the library's own
	// ncclDevComm_t (devCommRuntimeVersionSize). NCCL 2.31.0.
	DevCommRuntimeVersionSize *int `json:"devcomm_runtime_version_size,omitempty"`
	// Declared is the struct version the binding declared to NCCL: the
	// loaded release for a 2.31 library (the 144-byte layout), else
	// min(2.30.7, the loaded release).
	Declared Release `json:"declared_version"`
}

// queryPropertiesLocked asks NCCL once and caches the answer (mu held). It returns
// capi.Pending while the communicator is still being created.
func (c *Communicator) queryPropertiesLocked(op string) (int32, error) {
	if c.props != nil || c.propsErr != nil {
		return 0, c.propsErr
	}
	r, err := loaded()
	if err != nil {
		return 0, err
	}
	l, declared := versions.PropsDeclared(int(r))
	v := Release(declared)
	raw, st := capi.CommQueryProperties(c.ptr, uint32(v), l.Family)
	switch {
	case st.Code == capi.Pending:
		return capi.Pending, nil
	case st.Code == capi.Missing:
		c.propsErr = unsupported(capi.SymCommQueryProperties)
		return 0, c.propsErr
	}
	if err := statusErr(op, "ncclCommQueryProperties", st); err != nil {
		return 0, err
	}
	p := &Properties{
		Rank: int(raw.Rank), NRanks: int(raw.NRanks), CUDADevice: int(raw.CUDADev), NVMLDevice: int(raw.NVMLDev),
		DeviceAPISupport: raw.DeviceAPISupport, MultimemSupport: raw.MultimemSupport,
		GINType: GINType(raw.GINType), Declared: v,
	}
	if has(v, versions.PropsNumLSATeams) {
		n, h, g := int(raw.NLsaTeams), raw.HostRMASupport, GINType(raw.RailedGINType)
		p.NumLSATeams, p.HostRMASupport, p.RailedGINType = &n, &h, &g
	}
	if has(v, versions.PropsCommHash) && l.Family == capi.PropsV23100 {
		hash, stride, conn, size := raw.CommHash, int(raw.GINMinStride), GINConnectionType(raw.GINConnectionType), int(raw.DevCommRuntimeVersionSize)
		var set GINTypeSet
		for i, ok := range raw.GINSupport {
			if ok {
				set |= 1 << i
			}
		}
		p.CommHash, p.GINMinStride, p.GINConnectionType, p.DevCommRuntimeVersionSize = &hash, &stride, &conn, &size
		p.GINSupport = &set
	}
	c.props = p
	return 0, nil
}

// properties returns the cached properties, querying NCCL the first time.
// The returned value is shared: callers copy what they return.
func (c *Communicator) properties(op string) (p *Properties, err error) {
	_, err = c.retry(context.Background(), op, func() (capi.Status, error) {
		var code int32
		p, code, err = c.tryProperties(op)
		return capi.Status{Code: code}, err
	})
	return p, err
}

// tryProperties is one attempt of properties, with mu held: code is
// capi.Pending while NCCL is still creating the communicator.
func (c *Communicator) tryProperties(op string) (*Properties, int32, error) {
	if _, err := c.lockLive(op); err != nil {
		return nil, 0, err
	}
	defer c.mu.Unlock()
	if p := c.props; p != nil {
		return p, 0, nil
	}
	code, err := c.queryPropertiesLocked(op)
	if err != nil {
		return nil, code, err
	}
	return c.props, code, nil
}

// Properties returns every device-API property (ncclCommQueryProperties,
// queried once and cached). On NCCL before 2.29.2 it returns an error
// wrapping [ErrUnsupported]. Not collective. NCCL 2.29.2.
func (c *Communicator) Properties() (Properties, error) {
	p, err := c.properties("Properties")
	if err != nil {
		return Properties{}, err
	}
	return p.clone(), nil
}

// clone copies p, and what its pointer fields point to.
func (p *Properties) clone() Properties {
	out := *p
	if p.NumLSATeams != nil {
		n, h, g := *p.NumLSATeams, *p.HostRMASupport, *p.RailedGINType
		out.NumLSATeams, out.HostRMASupport, out.RailedGINType = &n, &h, &g
	}
	if p.CommHash != nil {
		hash, stride, conn, size, set := *p.CommHash, *p.GINMinStride, *p.GINConnectionType, *p.DevCommRuntimeVersionSize, *p.GINSupport
		out.CommHash, out.GINMinStride, out.GINConnectionType, out.DevCommRuntimeVersionSize = &hash, &stride, &conn, &size
		out.GINSupport = &set
	}
	return out
}

// CUDADevice is the CUDA device index NCCL reports in the properties
// (ncclCommQueryProperties' cudaDev, cached). Not collective. NCCL 2.29.2.
func (c *Communicator) CUDADevice() (int, error) {
	p, err := c.properties("CUDADevice")
	if err != nil {
		return 0, err
	}
	return p.CUDADevice, nil
}

// NVMLDevice is the NVML index of the device, which can differ from the
// CUDA index (ncclCommQueryProperties' nvmlDev, cached). Not collective.
// NCCL 2.29.2.
func (c *Communicator) NVMLDevice() (int, error) {
	p, err := c.properties("NVMLDevice")
	if err != nil {
		return 0, err
	}
	return p.NVMLDevice, nil
}

// DeviceAPISupport reports whether a device communicator can be created
// (ncclCommQueryProperties' deviceApiSupport, cached). Not collective.
// NCCL 2.29.2.
func (c *Communicator) DeviceAPISupport() (bool, error) {
	p, err := c.properties("DeviceAPISupport")
	if err != nil {
		return false, err
	}
	return p.DeviceAPISupport, nil
}

// MultimemSupport reports whether ranks of an LSA team can use multimem
// (ncclCommQueryProperties' multimemSupport, cached). Not collective.
// NCCL 2.29.2.
func (c *Communicator) MultimemSupport() (bool, error) {
	p, err := c.properties("MultimemSupport")
	if err != nil {
		return false, err
	}
	return p.MultimemSupport, nil
}

// GINType is the GPU-initiated networking transport available
// (ncclCommQueryProperties' ginType, cached); [GINNone] means no GIN
// resources can be requested. Not collective. NCCL 2.29.2.
func (c *Communicator) GINType() (GINType, error) {
	p, err := c.properties("GINType")
	if err != nil {
		return 0, err
	}
	return p.GINType, nil
}

// NumLSATeams is the number of LSA teams across the communicator
// (ncclCommQueryProperties' nLsaTeams, cached). Not collective. NCCL
// 2.29.7; [ErrUnsupported] before.
func (c *Communicator) NumLSATeams() (int, error) {
	p, err := c.properties("NumLSATeams")
	if err != nil {
		return 0, err
	}
	if p.NumLSATeams == nil {
		return 0, laterField(versions.PropsNumLSATeams)
	}
	return *p.NumLSATeams, nil
}

// HostRMASupport reports whether host-initiated one-sided operations work
// (ncclCommQueryProperties' hostRmaSupport, cached). Not collective.
// NCCL 2.29.7; [ErrUnsupported] before.
func (c *Communicator) HostRMASupport() (bool, error) {
	p, err := c.properties("HostRMASupport")
	if err != nil {
		return false, err
	}
	if p.HostRMASupport == nil {
		return false, laterField(versions.PropsHostRMASupport)
	}
	return *p.HostRMASupport, nil
}

// RailedGINType is the GIN transport of rail connections
// (ncclCommQueryProperties' railedGinType, cached); [GINNone] means the RAIL
// connection type is not possible. Not collective. NCCL 2.29.7;
// [ErrUnsupported] before.
func (c *Communicator) RailedGINType() (GINType, error) {
	p, err := c.properties("RailedGINType")
	if err != nil {
		return 0, err
	}
	if p.RailedGINType == nil {
		return 0, laterField(versions.PropsRailedGINType)
	}
	return *p.RailedGINType, nil
}

// laterField is the error for a property field f the loaded NCCL does not
// report.
func laterField(f versions.Feature) error {
	r, _ := loaded()
	if u := f.UseWith(int(r)); u.Has {
		// The library has it, but the binding declares an older version
		// (versions.PropsVersion).
		return fmt.Errorf("nccl: %s: not read from NCCL %s: %s: %w", f.Name(), r, u.Why, ErrUnsupported)
	}
	return unsupportedFeature(f, r)
}

// propField is one field of the cached properties that the loaded NCCL may
// not report (nil in Properties): op names the accessor, f the field's row.
func propField[T any](c *Communicator, op string, f versions.Feature, get func(*Properties) *T) (T, error) {
	var zero T
	p, err := c.properties(op)
	if err != nil {
		return zero, err
	}
	v := get(p)
	if v == nil {
		return zero, laterField(f)
	}
	return *v, nil
}

// CommHash identifies the communicator, the same on all its ranks
// (ncclCommQueryProperties' commHash, cached). Not collective. NCCL 2.31.0
// (a 2.31 library); [ErrUnsupported] otherwise.
func (c *Communicator) CommHash() (uint64, error) {
	return propField(c, "CommHash", versions.PropsCommHash, func(p *Properties) *uint64 { return p.CommHash })
}

// GINMinStride is the smallest rank stride GIN connects
// (ncclCommQueryProperties' ginMinStride, cached). Not collective.
// NCCL 2.31.0 (a 2.31 library); [ErrUnsupported] otherwise.
func (c *Communicator) GINMinStride() (int, error) {
	return propField(c, "GINMinStride", versions.PropsGINMinStride, func(p *Properties) *int { return p.GINMinStride })
}

// GINConnectionType is the communicator's GIN connection
// (ncclCommQueryProperties' ginConnectionType, cached). Not collective.
// NCCL 2.31.0 (a 2.31 library); [ErrUnsupported] otherwise.
func (c *Communicator) GINConnectionType() (GINConnectionType, error) {
	return propField(c, "GINConnectionType", versions.PropsGINConnectionType, func(p *Properties) *GINConnectionType { return p.GINConnectionType })
}

// GINSupport is the set of GIN transports the communicator can use
// (ncclCommQueryProperties' ginSupport[], cached). Not collective.
// NCCL 2.31.0 (a 2.31 library); [ErrUnsupported] otherwise.
func (c *Communicator) GINSupport() (GINTypeSet, error) {
	return propField(c, "GINSupport", versions.PropsGINSupport, func(p *Properties) *GINTypeSet { return p.GINSupport })
}

// DevCommRuntimeVersionSize is the size in bytes of the loaded library's
// ncclDevComm_t (ncclCommQueryProperties' devCommRuntimeVersionSize,
// cached). Not collective. NCCL 2.31.0 (a 2.31 library); [ErrUnsupported]
// otherwise.
func (c *Communicator) DevCommRuntimeVersionSize() (int, error) {
	return propField(c, "DevCommRuntimeVersionSize", versions.PropsDevCommRuntimeVersionSize, func(p *Properties) *int { return p.DevCommRuntimeVersionSize })
}
