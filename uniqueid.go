package nccl

import (
	"encoding/hex"
	"fmt"

	"github.com/nccl4go/nccl/internal/capi"
)

// UniqueIDBytes is the size of a [UniqueID] (NCCL_UNIQUE_ID_BYTES).
const UniqueIDBytes = 128

// UniqueID is ncclUniqueId: 128 opaque bytes one rank creates with
// [NewUniqueID] and every rank of the new communicator passes to [Init]. It
// holds the address of the bootstrap root. Send it to the other ranks in its
// binary (MarshalBinary) or text (MarshalText, hex) form.
type UniqueID [UniqueIDBytes]byte

// NewUniqueID creates an id (ncclGetUniqueId). Call it on one rank only.
// Not collective. NCCL 2.3.5.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	if _, err := loaded(); err != nil {
		return id, err
	}
	st := capi.GetUniqueID((*[128]byte)(&id))
	return id, statusErr("NewUniqueID", "ncclGetUniqueId", st)
}

// IsZero reports whether id is all zero bytes: never created.
func (id UniqueID) IsZero() bool { return id == UniqueID{} }

// String shows the first and last 8 bytes in hex.
func (id UniqueID) String() string {
	return fmt.Sprintf("UniqueID(%x…%x)", id[:8], id[UniqueIDBytes-8:])
}

// MarshalBinary returns the 128 bytes.
func (id UniqueID) MarshalBinary() ([]byte, error) { return id[:], nil }

// UnmarshalBinary reads exactly 128 bytes.
func (id *UniqueID) UnmarshalBinary(b []byte) error {
	if len(b) != UniqueIDBytes {
		return &ArgError{Op: "UniqueID.UnmarshalBinary", Arg: "data", Reason: fmt.Sprintf("%d bytes, want %d", len(b), UniqueIDBytes)}
	}
	copy(id[:], b)
	return nil
}

// MarshalText returns 256 hex digits.
func (id UniqueID) MarshalText() ([]byte, error) {
	b := make([]byte, hex.EncodedLen(UniqueIDBytes))
	hex.Encode(b, id[:])
	return b, nil
}

// UnmarshalText reads 256 hex digits.
func (id *UniqueID) UnmarshalText(b []byte) error {
	if len(b) != hex.EncodedLen(UniqueIDBytes) {
		return &ArgError{Op: "UniqueID.UnmarshalText", Arg: "text", Reason: fmt.Sprintf("%d characters, want %d hex digits", len(b), hex.EncodedLen(UniqueIDBytes))}
	}
	var tmp UniqueID
	if _, err := hex.Decode(tmp[:], b); err != nil {
		return &ArgError{Op: "UniqueID.UnmarshalText", Arg: "text", Reason: err.Error()}
	}
	*id = tmp
	return nil
}

// ParseUniqueID reads the text form.
func ParseUniqueID(s string) (UniqueID, error) {
	var id UniqueID
	err := id.UnmarshalText([]byte(s))
	return id, err
}
