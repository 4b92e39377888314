package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The check-in and unique-id exchange, in pure Go over a [Store], apart from
// NCCL so that it is tested with [NewMemStore] and goroutines.
//
// Keys, under a namespace fresh for each communicator:
//
//	rank/<r>   rank r's check-in: its host and pid, or "!" and the error
//	           that stopped it before it could check in
//	id/<g>     the id of group g, published by the group's root: "=" and the
//	           id's bytes, or "!" and the root's error
//	outcome    written once (CompareSet): "=" and every group's id in
//	           order, by rank 0 once everyone checked in; or "!" and the
//	           first failure
//	abort      written once: the first rank that failed after the ids
//	           were out (creating its communicator)
//	done       counts the ranks that no longer need the store
const (
	keyRank    = "rank/"
	keyID      = "id/"
	keyOutcome = "outcome"
	keyAbort   = "abort"
	keyDone    = "done"
	markOK     = '='
	markFailed = '!'
)

// MissingError says which ranks never checked in before the wait ended. It
// wraps the context's error.
type MissingError struct {
	// Missing are the ranks that never checked in, in increasing order.
	Missing []int
	// WorldSize is the number of ranks of the job.
	WorldSize int
	// What is what they never did: "checked in", or "published its
	// group's unique id" (a root that checked in, then stalled).
	What string
	// Err is why the wait ended (context.DeadlineExceeded, Canceled).
	Err error
}

// Error implements error: "ranks 3, 5 of 8 never checked in: ...".
func (e *MissingError) Error() string {
	word := "ranks"
	if len(e.Missing) == 1 {
		word = "rank"
	}
	return fmt.Sprintf("rendezvous: %s %s of %d never %s: %v", word, sortedInts(append([]int(nil), e.Missing...)),
		e.WorldSize, e.What, e.Err)
}

// Unwrap returns the context's error.
func (e *MissingError) Unwrap() error { return e.Err }

// RankError is a failure another rank (or this one) reported through the
// store: the others stop waiting with it instead of timing out.
type RankError struct {
	// Rank is the rank that failed.
	Rank int
	// Msg is its error's text.
	Msg string
}

// Error implements error.
func (e *RankError) Error() string {
	return fmt.Sprintf("rendezvous: rank %d failed: %s", e.Rank, e.Msg)
}

// encodeFailure is the stored form of rank's failure. Missing ranks are
// stored as such ("!m<what>|<n>|<r1>,<r2>...") so that every rank returns
// a *[MissingError].
func encodeFailure(rank int, err error) []byte {
	var me *MissingError
	if errors.As(err, &me) {
		parts := make([]string, len(me.Missing))
		for i, r := range me.Missing {
			parts[i] = strconv.Itoa(r)
		}
		cause := "d"
		if errors.Is(me.Err, context.Canceled) {
			cause = "c"
		}
		return []byte(fmt.Sprintf("%cm%s%s|%d|%s", markFailed, cause, me.What, me.WorldSize, strings.Join(parts, ",")))
	}
	return []byte(string(markFailed) + strconv.Itoa(rank) + ":" + err.Error())
}

// decodeFailure reads what encodeFailure wrote.
func decodeFailure(v []byte) error {
	s := string(v[1:])
	if rest, ok := strings.CutPrefix(s, "m"); ok && len(rest) > 0 {
		cause := context.DeadlineExceeded
		if rest[0] == 'c' {
			cause = context.Canceled
		}
		f := strings.Split(rest[1:], "|")
		if len(f) == 3 {
			n, err := strconv.Atoi(f[1])
			me := &MissingError{What: f[0], WorldSize: n, Err: cause}
			for _, r := range strings.Split(f[2], ",") {
				k, err2 := strconv.Atoi(r)
				err = errors.Join(err, err2)
				me.Missing = append(me.Missing, k)
			}
			if err == nil {
				return me
			}
		}
	}
	r, msg, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(r)
	if err != nil {
		return &RankError{Rank: -1, Msg: s}
	}
	return &RankError{Rank: n, Msg: msg}
}

// IDBytes is the size of the blobs the exchange passes (NCCL's unique id).
const idBytes = 128

// exchange is one communicator's rendezvous.
type exchange struct {
	store   Store
	rank    int
	nranks  int
	ngroups int
	info    string                 // this rank's host and pid, for check-in
	newID   func() ([]byte, error) // makes a group's id (on roots)
	logf    func(string, ...any)   // progress, may be nil
}

// groupRoot is the first rank of group g when n ranks are split into
// ngroups groups as NCCL's scalable bootstrap splits them (the first
// n mod ngroups groups have one rank more).
func groupRoot(g, n, ngroups int) int {
	per, extra := n/ngroups, n%ngroups
	if g < extra {
		return g * (per + 1)
	}
	return extra*(per+1) + (g-extra)*per
}

// rootGroup returns the group rank r is the root of, or -1.
func rootGroup(r, n, ngroups int) int {
	per, extra := n/ngroups, n%ngroups
	lim := extra * (per + 1)
	if r < lim {
		if r%(per+1) == 0 {
			return r / (per + 1)
		}
		return -1
	}
	if per > 0 && (r-lim)%per == 0 {
		return extra + (r-lim)/per
	}
	return -1
}

// margin returns ctx with an earlier deadline, leaving time before ctx's
// deadline for naming the missing ranks and telling the others: ranks 0 and
// 1 (the deputy when rank 0 is missing) stop waiting first, at the
// deadline minus m (a tenth of the time left, 20 ms to 2 s), and publish
// what they found; the other ranks wait until the deadline minus m/3 for
// it, and only then look for themselves, so that thousands of ranks do not
// all search the store at once.
func margin(ctx context.Context, rank int) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	m := min(max(time.Until(d)/10, 20*time.Millisecond), 2*time.Second)
	if rank > 1 {
		m /= 3
	}
	return context.WithDeadline(ctx, d.Add(-m))
}

// run checks in, publishes this rank's group id if it is a root, and
// returns every group's id once rank 0 has seen every rank.
func (x *exchange) run(ctx context.Context) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wctx, cancel := margin(ctx, x.rank)
	defer cancel()
	if err := x.store.Set(wctx, keyRank+strconv.Itoa(x.rank), append([]byte{markOK}, x.info...)); err != nil {
		return nil, x.storeErr(ctx, "checking in", err)
	}
	if g := rootGroup(x.rank, x.nranks, x.ngroups); g >= 0 {
		id, err := x.newID()
		if err != nil {
			err = fmt.Errorf("creating the unique id of group %d: %w", g, err)
			x.fail(ctx, err, keyID+strconv.Itoa(g))
			return nil, err
		}
		if err := x.store.Set(wctx, keyID+strconv.Itoa(g), append([]byte{markOK}, id...)); err != nil {
			return nil, x.storeErr(ctx, "publishing the unique id", err)
		}
	}
	if x.rank == 0 {
		return x.lead(ctx, wctx)
	}
	v, err := x.store.Get(wctx, keyOutcome)
	if err != nil && x.rank == 1 && ctx.Err() == nil && wctx.Err() != nil {
		// The deputy: when rank 0 is there, it reports; wait for it as
		// long as the other ranks do.
		cctx, cancel := after(ctx)
		there, cerr := x.store.Check(cctx, keyRank+"0")
		cancel()
		if cerr == nil && there {
			w2, cancel2 := margin(ctx, 2)
			v, err = x.store.Get(w2, keyOutcome)
			cancel2()
		} else {
			err = x.diagnose(ctx, err)
			x.publish(ctx, encodeFailure(1, err))
			return nil, err
		}
	}
	if err != nil {
		if ctx.Err() != nil || wctx.Err() != nil {
			return nil, x.diagnose(ctx, err)
		}
		return nil, x.storeErr(ctx, "waiting for the unique ids", err)
	}
	return x.decode(v)
}

// lead is rank 0's part: wait for every check-in and every id, then publish
// the outcome.
func (x *exchange) lead(ctx, wctx context.Context) ([][]byte, error) {
	keys := make([]string, x.nranks)
	for r := range keys {
		keys[r] = keyRank + strconv.Itoa(r)
	}
	if err := x.store.Wait(wctx, keys...); err != nil {
		if ctx.Err() != nil || wctx.Err() != nil {
			err = x.diagnose(ctx, err)
			x.publish(ctx, encodeFailure(0, err))
			return nil, err
		}
		return nil, x.storeErr(ctx, "waiting for the ranks to check in", err)
	}
	if x.logf != nil {
		x.logf("rendezvous: all %d ranks checked in", x.nranks)
	}
	ids := make([]byte, 1, 1+x.ngroups*idBytes)
	ids[0] = markOK
	for g := 0; g < x.ngroups; g++ {
		v, err := x.store.Get(wctx, keyID+strconv.Itoa(g))
		if err != nil {
			if ctx.Err() != nil || wctx.Err() != nil {
				err = x.diagnose(ctx, err)
				x.publish(ctx, encodeFailure(0, err))
				return nil, err
			}
			return nil, x.storeErr(ctx, "reading the unique ids", err)
		}
		if len(v) > 0 && v[0] == markFailed {
			ferr := decodeFailure(v)
			x.publish(ctx, v)
			return nil, ferr
		}
		if len(v) != 1+idBytes || v[0] != markOK {
			err := fmt.Errorf("rendezvous: the unique id of group %d in the store has %d bytes, not %d", g, len(v)-1, idBytes)
			x.publish(ctx, encodeFailure(0, err))
			return nil, err
		}
		ids = append(ids, v[1:]...)
	}
	// A rank that failed before checking in marked its check-in and the
	// outcome: CompareSet keeps its failure.
	got, err := x.store.CompareSet(wctx, keyOutcome, nil, ids)
	if err != nil {
		return nil, x.storeErr(ctx, "publishing the unique ids", err)
	}
	return x.decode(got)
}

// decode reads the outcome.
func (x *exchange) decode(v []byte) ([][]byte, error) {
	if len(v) > 0 && v[0] == markFailed {
		return nil, decodeFailure(v)
	}
	if len(v) != 1+x.ngroups*idBytes || v[0] != markOK {
		return nil, fmt.Errorf("rendezvous: the store's outcome has %d bytes, not the %d ids of %d bytes this rank expects "+
			"(do all ranks use the same ranks per root?)", len(v), x.ngroups, idBytes)
	}
	out := make([][]byte, x.ngroups)
	for g := range out {
		out[g] = v[1+g*idBytes : 1+(g+1)*idBytes]
	}
	return out, nil
}

// after returns a context for the work done after ctx's wait ended: what
// is left of ctx's deadline, at least a moment.
func after(ctx context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok && time.Until(d) > 50*time.Millisecond {
		return context.WithDeadline(base, d)
	}
	return context.WithTimeout(base, 500*time.Millisecond)
}

// publish writes a failure as the outcome unless one is there.
func (x *exchange) publish(ctx context.Context, v []byte) {
	pctx, cancel := after(ctx)
	defer cancel()
	x.store.CompareSet(pctx, keyOutcome, nil, v) //nolint:errcheck // best effort: the caller returns its own error
}

// fail reports this rank's failure before the ids are out: it marks key
// (its check-in or its group's id) so that rank 0 stops waiting for it, and
// the outcome so that every rank stops.
func (x *exchange) fail(ctx context.Context, err error, key string) {
	pctx, cancel := after(ctx)
	defer cancel()
	v := encodeFailure(x.rank, err)
	x.store.CompareSet(pctx, keyOutcome, nil, v) //nolint:errcheck
	x.store.Set(pctx, key, v)                    //nolint:errcheck
}

// failEarly reports a failure of this rank before it could check in: it
// marks its check-in, its group's id if it is a root, and the outcome.
func (x *exchange) failEarly(ctx context.Context, err error) {
	if g := rootGroup(x.rank, x.nranks, x.ngroups); g >= 0 {
		x.fail(ctx, err, keyID+strconv.Itoa(g))
	}
	x.fail(ctx, err, keyRank+strconv.Itoa(x.rank))
}

// storeErr wraps a store failure; when the wait ended because of ctx, it
// says so.
func (x *exchange) storeErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = errors.Join(ctx.Err(), err)
	}
	return fmt.Errorf("rendezvous: rank %d of %d: %s: %w", x.rank, x.nranks, what, err)
}

// diagnose is called when a wait ended with ctx (or its margin): it reads
// the outcome if it appeared meanwhile, else names the ranks that never
// checked in, else the roots that never published their group's id.
func (x *exchange) diagnose(ctx context.Context, waitErr error) error {
	dctx, cancel := after(ctx)
	defer cancel()
	cause := ctx.Err()
	if cause == nil {
		cause = context.DeadlineExceeded // the margin before ctx's deadline ended
	}
	if ok, err := x.store.Check(dctx, keyOutcome); err == nil && ok {
		if v, err := x.store.Get(dctx, keyOutcome); err == nil {
			if len(v) > 0 && v[0] == markFailed {
				return decodeFailure(v)
			}
		}
	}
	missing, err := x.missing(dctx, keyRank, x.nranks, func(i int) int { return i })
	if err != nil {
		return x.storeErr(ctx, "looking for the ranks that never checked in", errors.Join(waitErr, err))
	}
	if len(missing) > 0 {
		return &MissingError{Missing: missing, WorldSize: x.nranks, What: "checked in", Err: cause}
	}
	roots, err := x.missing(dctx, keyID, x.ngroups, func(g int) int { return groupRoot(g, x.nranks, x.ngroups) })
	if err != nil {
		return x.storeErr(ctx, "looking for the missing unique ids", errors.Join(waitErr, err))
	}
	if len(roots) > 0 {
		return &MissingError{Missing: roots, WorldSize: x.nranks, What: "published its group's unique id", Err: cause}
	}
	return fmt.Errorf("rendezvous: rank %d of %d: every rank checked in, but rank 0 did not publish the unique ids in time: %w",
		x.rank, x.nranks, cause)
}

// missing returns which of the n keys prefix+i do not exist, mapped by
// name, with a binary search over Check: a few round trips when few are
// missing.
func (x *exchange) missing(ctx context.Context, prefix string, n int, name func(int) int) ([]int, error) {
	var out []int
	var search func(lo, hi int) error
	search = func(lo, hi int) error {
		keys := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			keys = append(keys, prefix+strconv.Itoa(i))
		}
		ok, err := x.store.Check(ctx, keys...)
		if err != nil || ok {
			return err
		}
		if hi-lo == 1 {
			out = append(out, name(lo))
			return nil
		}
		mid := (lo + hi) / 2
		if err := search(lo, mid); err != nil {
			return err
		}
		return search(mid, hi)
	}
	for lo := 0; lo < n; lo += DefaultMaxKeys {
		if err := search(lo, min(n, lo+DefaultMaxKeys)); err != nil {
			return out, err
		}
	}
	return out, nil
}
