//go:build !race

package trace

// put writes one word of a slot the caller holds. Plain stores suffice: the
// slot's version is taken with a compare-and-swap before and released with
// an atomic store after, and readers load every word atomically between two
// loads of the version (see slot).
func put(p *uint64, v uint64) { *p = v }
