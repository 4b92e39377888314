package nccl

import (
	"bytes"
	"errors"
	"testing"
)

// Fuzz targets for the inputs a program passes the binding from outside:
// unique ids in text and binary form, configs and buffers. None may panic;
// what is accepted must round-trip, and what is refused must be refused
// with the binding's typed errors. CI runs each for a few seconds; the
// seeds below (and any saved under testdata/fuzz) run in every go test.

func FuzzUniqueID(f *testing.F) {
	var id UniqueID
	for i := range id {
		id[i] = byte(i * 7)
	}
	text, _ := id.MarshalText()
	f.Add(text)
	f.Add(id[:])
	f.Add([]byte(""))
	f.Add([]byte("zz"))
	f.Add(bytes.Repeat([]byte("0"), 256))
	f.Add(bytes.Repeat([]byte("g"), 256))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fromText UniqueID
		if err := fromText.UnmarshalText(b); err == nil {
			out, err := fromText.MarshalText()
			if err != nil {
				t.Fatalf("MarshalText of an accepted id: %v", err)
			}
			var again UniqueID
			if err := again.UnmarshalText(out); err != nil || again != fromText {
				t.Fatalf("text round trip: %q -> %v -> %q: %v", b, fromText, out, err)
			}
			if p, err := ParseUniqueID(string(b)); err != nil || p != fromText {
				t.Fatalf("ParseUniqueID disagrees with UnmarshalText on %q: %v", b, err)
			}
		} else if _, err2 := ParseUniqueID(string(b)); err2 == nil {
			t.Fatalf("ParseUniqueID accepts %q, UnmarshalText refuses it: %v", b, err)
		}
		var fromBinary UniqueID
		if err := fromBinary.UnmarshalBinary(b); err == nil {
			if len(b) != UniqueIDBytes || !bytes.Equal(fromBinary[:], b) {
				t.Fatalf("UnmarshalBinary accepted %d bytes as %v", len(b), fromBinary)
			}
		} else if len(b) == UniqueIDBytes {
			t.Fatalf("UnmarshalBinary refused %d bytes: %v", len(b), err)
		}
		_ = fromText.String()
	})
}

// FuzzConfig builds a Config from arbitrary values and encodes it for an
// arbitrary release: an error is an *ArgError or an *UnsupportedError,
// never a panic.
func FuzzConfig(f *testing.F) {
	f.Add(uint32(0xffffffff), int64(1), int64(2), int64(8), int64(3), int64(0), "IB", "x", 23007)
	f.Add(uint32(0), int64(-1), int64(0), int64(1<<40), int64(-5), int64(3), "", "", 21901)
	f.Add(uint32(1<<18), int64(9), int64(64), int64(1), int64(7), int64(2), "Socket", "", 22803)
	f.Fuzz(func(t *testing.T, set uint32, a, b, c, d, e int64, net, name string, rel int) {
		i := func(v int64) *int { x := int(v); return &x }
		bl := func(bit uint) *bool { v := set>>bit&1 == 1; return &v }
		cfg := &Config{NetName: net, CommName: name}
		fields := []func(){
			func() { cfg.Blocking = bl(20) },
			func() { cfg.CGAClusterSize = i(a) },
			func() { cfg.MinCTAs = i(b) },
			func() { cfg.MaxCTAs = i(c) },
			func() { cfg.SplitShare = bl(21) },
			func() { cfg.TrafficClass = i(d) },
			func() { cfg.CollNetEnable = bl(22) },
			func() { p := CTAPolicy(e); cfg.CTAPolicy = &p },
			func() { cfg.ShrinkShare = bl(23) },
			func() { cfg.NVLSCTAs = i(a ^ b) },
			func() { cfg.NChannelsPerNetPeer = i(c ^ d) },
			func() { cfg.NVLinkCentricSched = bl(24) },
			func() { m := GraphUsageMode(e); cfg.GraphUsageMode = &m },
			func() { cfg.NumRMACtx = i(a + e) },
			func() { cfg.MaxP2PPeers = i(b - c) },
			func() { cfg.GraphStreamOrdering = bl(25) },
			func() { cfg.Device = i(d) },
		}
		for k, set1 := range fields {
			if set>>uint(k)&1 == 1 {
				set1()
			}
		}
		_, _, err := cfg.encode("Init", Release(rel))
		var arg *ArgError
		var unsup *UnsupportedError
		if err != nil && !errors.As(err, &arg) && !errors.As(err, &unsup) {
			t.Fatalf("encode: %T %v, want an *ArgError or *UnsupportedError", err, err)
		}
		_ = cfg.device(0)
	})
}

// FuzzBuffer checks arbitrary buffers as an operation would, without a
// driver: the fields the binding can judge alone are judged without a
// panic, and whatever needs the driver is refused with a reason.
func FuzzBuffer(f *testing.F) {
	f.Add(uint64(0x7f0000000000), int64(16), int32(7), int64(0), int64(0))
	f.Add(uint64(0), int64(0), int32(-1), int64(-1), int64(3))
	f.Add(^uint64(0)-15, int64(4), int32(8), int64(0), int64(0))
	f.Add(uint64(0x1000), int64(1)<<61, int32(8), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, ptr uint64, count int64, typ int32, dev, commDev int64) {
		for _, b := range []Buffer{
			{Ptr: uintptr(ptr), Count: int(count), Type: DataType(typ), Device: int(dev)},
			RawBuffer(uintptr(ptr), int(count), DataType(typ), int(dev)),
		} {
			r, _ := b.reason(int(commDev))
			if r == "" {
				t.Fatalf("%v accepted on cuda:%d without a driver to vouch for it", b, commDev)
			}
			if err := b.Err(); err == nil {
				t.Fatalf("%v: Err() = nil without a driver", b)
			}
			_ = b.String()
			_ = b.Bytes()
		}
	})
}
