//go:build race

package rendezvous

// raceEnabled: the race detector slows the 4096-rank tests several times.
const raceEnabled = true
