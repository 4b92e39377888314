package trace

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is what [Analyze] found in the dumps of a job, communicator by
// communicator. WriteText renders it as sentences; it also marshals to
// JSON.
type Report struct {
	// Dumps is the number of dumps read.
	Dumps int `json:"dumps"`
	// Comms has one report per communicator (by hash), those with a
	// problem first.
	Comms []CommReport `json:"comms"`
	// Notes are problems with the dumps themselves: the same rank dumped
	// twice, sizes that disagree, entries of forgotten communicators.
	Notes []string `json:"notes,omitempty"`
}

// Verdict sums up one communicator.
type Verdict string

// The verdicts, worst first.
const (
	// VerdictMismatch: ranks enqueued different operations (or the same
	// operation with a different count, type, operator or root) at the same
	// place in the sequence: a bug in the program.
	VerdictMismatch Verdict = "mismatch"
	// VerdictBehind: some ranks have not enqueued an operation others have:
	// they are stuck elsewhere (another communicator, the host program) or
	// dead.
	VerdictBehind Verdict = "behind"
	// VerdictStuck: every rank enqueued the same operations, but the
	// watchdog saw one not complete on some ranks: stuck on the GPU or the
	// network, or waiting for a rank without a dump.
	VerdictStuck Verdict = "stuck"
	// VerdictP2P: the collectives agree, but point-to-point operations do
	// not pair up (a send without its receive, or sizes that differ).
	VerdictP2P Verdict = "p2p-mismatch"
	// VerdictIncomplete: no disagreement among the ranks with dumps, but
	// some ranks left none.
	VerdictIncomplete Verdict = "incomplete"
	// VerdictOK: no disagreement found.
	VerdictOK Verdict = "ok"
)

var verdictRank = map[Verdict]int{VerdictMismatch: 0, VerdictBehind: 1, VerdictStuck: 2, VerdictP2P: 3, VerdictIncomplete: 4, VerdictOK: 5}

// CommReport is the analysis of one communicator across the ranks' dumps.
type CommReport struct {
	Name string `json:"name"`
	Hash Hash   `json:"hash"`
	Size int    `json:"size"`
	// Verdict sums up the findings.
	Verdict Verdict `json:"verdict"`
	// Findings say, in sentences, what went wrong (or that nothing did).
	Findings []string `json:"findings"`
	// MissingDumps are the ranks of the communicator without a dump, as
	// ranges: their number follows the dumps read, not the communicator's
	// size.
	MissingDumps []RankRange `json:"missing_dumps,omitempty"`
	// Disagreement is the first collective where the ranks disagree.
	Disagreement *Disagreement `json:"disagreement,omitempty"`
	// Behind are the ranks that enqueued the fewest collectives (or, when
	// all enqueued the same, completed the fewest); empty when all are
	// level.
	Behind []int `json:"behind,omitempty"`
	// Ranks is each dumped rank's state, by rank.
	Ranks []RankStatus `json:"ranks"`
}

// RankRange is the ranks First to Last, both included.
type RankRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

// missingRanges are the ranks below size not in have (sorted, distinct),
// as ranges.
func missingRanges(have []int, size int) []RankRange {
	var out []RankRange
	next := 0
	for _, r := range have {
		if r > next {
			out = append(out, RankRange{next, r - 1})
		}
		next = max(next, r+1)
	}
	if next < size {
		out = append(out, RankRange{next, size - 1})
	}
	return out
}

// rangeList writes ranges for a sentence as rankList writes ranks.
func rangeList(rs []RankRange) string {
	n := 0
	for _, r := range rs {
		n += r.Last - r.First + 1
		if n > 3 {
			break
		}
	}
	if n <= 3 || len(rs) == 1 && rs[0].Last-rs[0].First >= 2 {
		// Few ranks (or one range): as rankList words them.
		if n > 3 {
			return fmt.Sprintf("ranks %d-%d", rs[0].First, rs[0].Last)
		}
		var ranks []int
		for _, r := range rs {
			for i := r.First; i <= r.Last; i++ {
				ranks = append(ranks, i)
			}
		}
		return rankList(ranks)
	}
	var parts []string
	for _, r := range rs {
		switch {
		case r.Last-r.First >= 2:
			parts = append(parts, fmt.Sprintf("%d-%d", r.First, r.Last))
		case r.Last == r.First+1:
			parts = append(parts, strconv.Itoa(r.First), strconv.Itoa(r.Last))
		default:
			parts = append(parts, strconv.Itoa(r.First))
		}
	}
	if len(parts) == 1 {
		return "ranks " + parts[0]
	}
	return "ranks " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Disagreement is the first collective sequence number at which the ranks
// differ: some did not enqueue it, or enqueued something else.
type Disagreement struct {
	Seq uint64 `json:"seq"`
	// Groups are the ranks by what they had at Seq; a group with a nil [Op]
	// did not enqueue it, and one with Unknown set had dropped it from its
	// ring (it enqueued something, not known what).
	Groups []OpGroup `json:"groups"`
}

// OpGroup is a set of ranks that had the same operation at a sequence
// number.
type OpGroup struct {
	Ranks   []int      `json:"ranks"`
	Op      *OpSummary `json:"op,omitempty"`
	Unknown bool       `json:"unknown,omitempty"`
}

// RankStatus is one rank's place in a communicator.
type RankStatus struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Source string `json:"source,omitempty"`
	Closed bool   `json:"closed,omitempty"`
	// LastEnqueued, LastStarted and LastCompleted are the highest
	// collective sequence numbers enqueued, seen started and seen completed
	// (the last two only when the watchdog watched).
	LastEnqueued  uint64 `json:"last_enqueued"`
	LastStarted   uint64 `json:"last_started"`
	LastCompleted uint64 `json:"last_completed"`
	Watched       bool   `json:"watched"`
	// Last is the rank's newest operation on the communicator, if its ring
	// still holds one.
	Last *OpSummary `json:"last,omitempty"`
	// Elsewhere is the rank's newest operation on another communicator of
	// the same process, when newer than Last.
	Elsewhere *OpSummary `json:"elsewhere,omitempty"`
}

// OpSummary describes one recorded operation.
type OpSummary struct {
	Comm     string   `json:"comm,omitempty"` // communicator name, in Elsewhere
	Seq      uint64   `json:"seq"`
	Op       Op       `json:"op"`
	DataType DataType `json:"dtype"`
	RedOp    RedOp    `json:"redop"`
	Count    uint64   `json:"count"`
	Root     *int     `json:"root,omitempty"`
	Peer     *int     `json:"peer,omitempty"`
	Watched  bool     `json:"watched"`
	State    State    `json:"state"`
	// AgeNs is how long before its rank's dump the operation was enqueued;
	// RunningNs how long before the dump it started (started, not
	// completed); DurationNs how long it ran (completed).
	AgeNs      int64 `json:"age_ns"`
	RunningNs  int64 `json:"running_ns,omitempty"`
	DurationNs int64 `json:"duration_ns,omitempty"`
}

// summarize describes e as seen from a dump taken at dumpNs.
func summarize(e *DumpEntry, dumpNs int64) *OpSummary {
	s := &OpSummary{
		Seq: e.Seq, Op: e.Op, DataType: e.DataType, RedOp: e.RedOp, Count: e.Count,
		Root: e.Root, Peer: e.Peer, Watched: e.Watched, State: e.State,
		AgeNs: dumpNs - e.EnqueuedNs,
	}
	if e.Watched && e.State == Started && e.StartedNs != 0 {
		s.RunningNs = dumpNs - e.StartedNs
	}
	if e.Watched && e.State == Completed {
		s.DurationNs = e.DurationNs
	}
	return s
}

// signature is what ranks must agree on for a collective.
func (s *OpSummary) signature() string {
	var b strings.Builder
	b.WriteString(s.Op.String())
	if s.Op.HasData() {
		fmt.Fprintf(&b, " %d %v", s.Count, s.DataType)
	}
	if s.Op.HasRedOp() && s.RedOp.Builtin() {
		fmt.Fprintf(&b, " %v", s.RedOp)
	}
	if s.Op.HasRoot() && s.Root != nil {
		fmt.Fprintf(&b, " root %d", *s.Root)
	}
	return b.String()
}

// String names the operation with its arguments: "AllReduce #17 (1024
// float32, sum)".
func (s *OpSummary) String() string {
	var args []string
	if s.Op.HasData() {
		args = append(args, fmt.Sprintf("%d %v", s.Count, s.DataType))
	}
	if s.Op.HasRedOp() {
		args = append(args, s.RedOp.String())
	}
	if s.Op.HasRoot() && s.Root != nil {
		args = append(args, fmt.Sprintf("root %d", *s.Root))
	}
	if s.Op.HasPeer() && s.Peer != nil {
		switch s.Op {
		case Recv:
			args = append(args, fmt.Sprintf("from rank %d", *s.Peer))
		default:
			args = append(args, fmt.Sprintf("to rank %d", *s.Peer))
		}
	}
	name := s.Op.String()
	if s.Seq != 0 {
		name += " #" + strconv.FormatUint(s.Seq, 10)
	}
	if len(args) > 0 {
		name += " (" + strings.Join(args, ", ") + ")"
	}
	return name
}

// progress says where the operation stood at the dump: "enqueued 3.0 s
// before the dump", "started 12.3 s before the dump, not completed",
// "completed in 1.2 ms".
func (s *OpSummary) progress() string {
	switch {
	case !s.Watched:
		return "enqueued " + fmtDur(s.AgeNs) + " before the dump (not watched: state unknown)"
	case s.State == Completed:
		return "completed in " + fmtDur(s.DurationNs)
	case s.State == Started:
		return "started " + fmtDur(s.RunningNs) + " before the dump, not completed"
	}
	return "enqueued " + fmtDur(s.AgeNs) + " before the dump, not started"
}

// member is one rank of a communicator, from one dump.
type member struct {
	rank    int
	dump    *Dump
	info    *dumpInfo
	comm    *DumpComm
	coll    map[uint64]*DumpEntry // collectives by seq
	minSeq  uint64                // lowest collective seq in the ring; 0 none
	entries []*DumpEntry          // all entries of the communicator, oldest first
}

// Analyze reads the dumps of the ranks of a job (one per process; a
// process driving several GPUs holds several ranks) and reports, for every
// communicator, where the ranks disagree: the first collective some rank
// did not enqueue or enqueued differently, the ranks that are behind, and
// what each rank was doing last. Dumps need not come from the same moment;
// each operation's age is measured against its own rank's dump.
func Analyze(dumps []*Dump) *Report {
	rep := &Report{Dumps: len(dumps), Comms: []CommReport{}}
	byHash := map[Hash]map[int]*member{}
	var hashes []Hash
	for di, d := range dumps {
		if d == nil {
			continue
		}
		ids := map[uint32]*DumpComm{}
		for i := range d.Comms {
			ids[d.Comms[i].ID] = &d.Comms[i]
		}
		info := &dumpInfo{ids: ids}
		for i := len(d.Entries) - 1; i >= 0; i-- {
			if ids[d.Entries[i].Comm] != nil {
				info.newest = &d.Entries[i]
				break
			}
		}
		perComm := map[uint32][]*DumpEntry{}
		unknown := 0
		for i := range d.Entries {
			e := &d.Entries[i]
			if ids[e.Comm] == nil {
				unknown++
				continue
			}
			perComm[e.Comm] = append(perComm[e.Comm], e)
		}
		if unknown > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d entries of communicators the dump no longer describes (ignored)", dumpName(d, di), unknown))
		}
		for i := range d.Comms {
			c := &d.Comms[i]
			m := &member{rank: c.Rank, dump: d, info: info, comm: c, coll: map[uint64]*DumpEntry{}, entries: perComm[c.ID]}
			for _, e := range m.entries {
				if e.Class == Collective {
					m.coll[e.Seq] = e
					if m.minSeq == 0 || e.Seq < m.minSeq {
						m.minSeq = e.Seq
					}
				}
			}
			ranks := byHash[c.Hash]
			if ranks == nil {
				ranks = map[int]*member{}
				byHash[c.Hash] = ranks
				hashes = append(hashes, c.Hash)
			}
			if prev := ranks[c.Rank]; prev != nil {
				keep := prev
				if m.dump.TimeNs > prev.dump.TimeNs {
					keep = m
				}
				rep.Notes = append(rep.Notes, fmt.Sprintf("communicator %q (hash %v): rank %d appears in two dumps (%s and %s); using the later, %s",
					c.Name, c.Hash, c.Rank, dumpName(prev.dump, -1), dumpName(m.dump, di), dumpName(keep.dump, -1)))
				m = keep
			}
			ranks[c.Rank] = m
		}
	}
	for _, h := range hashes {
		cr, notes := analyzeComm(h, byHash[h])
		rep.Comms = append(rep.Comms, cr)
		rep.Notes = append(rep.Notes, notes...)
	}
	slices.SortStableFunc(rep.Comms, func(a, b CommReport) int {
		if c := cmp.Compare(verdictRank[a.Verdict], verdictRank[b.Verdict]); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return rep
}

// dumpName names a dump for notes: its file, else its rank and pid.
func dumpName(d *Dump, index int) string {
	if d.source != "" {
		return d.source
	}
	if index >= 0 {
		return fmt.Sprintf("dump %d (rank %d, pid %d)", index+1, d.Rank, d.PID)
	}
	return fmt.Sprintf("dump of rank %d, pid %d", d.Rank, d.PID)
}

// analyzeComm analyzes one communicator.
func analyzeComm(h Hash, ranks map[int]*member) (CommReport, []string) {
	var notes []string
	ms := make([]*member, 0, len(ranks))
	for _, m := range ranks {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.rank, b.rank) })
	cr := CommReport{Name: ms[0].comm.Name, Hash: h, Size: ms[0].comm.Size}
	for _, m := range ms {
		if m.comm.Size != cr.Size {
			notes = append(notes, fmt.Sprintf("communicator %q (hash %v): rank %d says it has %d ranks, rank %d says %d",
				cr.Name, h, m.rank, m.comm.Size, ms[0].rank, cr.Size))
			cr.Size = max(cr.Size, m.comm.Size)
		}
	}
	cr.MissingDumps = missingRanges(ranksOf(ms), cr.Size)
	for _, m := range ms {
		cr.Ranks = append(cr.Ranks, rankStatus(m))
	}
	if len(cr.MissingDumps) > 0 {
		cr.Findings = append(cr.Findings, fmt.Sprintf("no dump from %s of %d; a rank without a dump may be the one that is stuck or dead, and what follows covers only %s.",
			rangeList(cr.MissingDumps), cr.Size, rankList(ranksOf(ms))))
	}

	// The first collective the ranks disagree on.
	lo, hi, minLast := uint64(0), uint64(0), ms[0].comm.LastSeq
	for _, m := range ms {
		hi = max(hi, m.comm.LastSeq)
		minLast = min(minLast, m.comm.LastSeq)
		if m.minSeq != 0 && (lo == 0 || m.minSeq < lo) {
			lo = m.minSeq
		}
	}
	if lo == 0 {
		lo = minLast + 1
	}
	// Only sequence numbers some ring holds can disagree in content.
	var seqs []uint64
	for _, m := range ms {
		for s := range m.coll {
			if s >= lo && s <= minLast {
				seqs = append(seqs, s)
			}
		}
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	for _, s := range seqs {
		if g := groupAt(ms, s); countKnown(g) > 1 {
			cr.Disagreement = &Disagreement{Seq: s, Groups: g}
			cr.Verdict = VerdictMismatch
			cr.Findings = append(cr.Findings, mismatchSentence(s, g))
			break
		}
	}
	if cr.Disagreement == nil && minLast < hi {
		s := minLast + 1
		g := groupAt(ms, s)
		cr.Disagreement = &Disagreement{Seq: s, Groups: g}
		cr.Verdict = VerdictBehind
		cr.Findings = append(cr.Findings, behindSentences(s, g, ms, cr.Size)...)
	}
	if cr.Disagreement == nil {
		cr.Findings = append(cr.Findings, levelSentences(&cr, ms, hi)...)
	}
	if f := p2pFindings(ms); len(f) > 0 {
		if cr.Verdict == "" || cr.Verdict == VerdictOK {
			cr.Verdict = VerdictP2P
		}
		cr.Findings = append(cr.Findings, f...)
	}
	if f := pendingP2P(ms, ranks); len(f) > 0 {
		if cr.Verdict == "" || cr.Verdict == VerdictOK {
			cr.Verdict = VerdictStuck
		}
		cr.Findings = append(cr.Findings, f...)
	}
	if len(cr.Findings) == 0 {
		cr.Findings = append(cr.Findings, "nothing recorded on this communicator.")
	}
	if cr.Verdict == "" || cr.Verdict == VerdictOK {
		cr.Verdict = VerdictOK
		if len(cr.MissingDumps) > 0 {
			cr.Verdict = VerdictIncomplete
		}
	}
	return cr, notes
}

// ranksOf lists the members' ranks.
func ranksOf(ms []*member) []int {
	r := make([]int, len(ms))
	for i, m := range ms {
		r[i] = m.rank
	}
	return r
}

// rankStatus is m's [RankStatus].
func rankStatus(m *member) RankStatus {
	rs := RankStatus{
		Rank: m.rank, Host: m.dump.Host, PID: m.dump.PID, Source: m.dump.source, Closed: m.comm.Closed,
		LastEnqueued: m.comm.LastSeq, LastStarted: m.comm.LastStartedSeq, LastCompleted: m.comm.LastCompletedSeq,
	}
	for _, e := range m.entries {
		if e.Watched {
			rs.Watched = true
		}
	}
	if n := len(m.entries); n > 0 {
		rs.Last = summarize(m.entries[n-1], m.dump.TimeNs)
	}
	// The newest entry of the process on another communicator, when it is
	// the newest of the dump (it was searched for per communicator, which
	// cost communicators × trailing entries of forgotten communicators).
	if e := m.info.newest; e != nil && e.Comm != m.comm.ID {
		rs.Elsewhere = summarize(e, m.dump.TimeNs)
		rs.Elsewhere.Comm = m.info.ids[e.Comm].Name
	}
	return rs
}

// dumpInfo is what the analysis derives once per dump.
type dumpInfo struct {
	ids    map[uint32]*DumpComm // the dump's communicators by id
	newest *DumpEntry           // the newest entry of a listed communicator
}

// groupAt groups the members by what they had at collective sequence s.
func groupAt(ms []*member, s uint64) []OpGroup {
	var gs []OpGroup
	index := map[string]int{}
	for _, m := range ms {
		key := ""
		var g OpGroup
		switch e := m.coll[s]; {
		case s > m.comm.LastSeq:
			key = "\x00missing"
		case e == nil:
			key, g.Unknown = "\x00unknown", true
		default:
			g.Op = summarize(e, m.dump.TimeNs)
			key = g.Op.signature()
		}
		if i, ok := index[key]; ok {
			gs[i].Ranks = append(gs[i].Ranks, m.rank)
			continue
		}
		index[key] = len(gs)
		g.Ranks = []int{m.rank}
		gs = append(gs, g)
	}
	// Largest group first, then by first rank.
	slices.SortStableFunc(gs, func(a, b OpGroup) int { return cmp.Compare(len(b.Ranks), len(a.Ranks)) })
	return gs
}

// countKnown counts the groups that enqueued a known operation.
func countKnown(gs []OpGroup) int {
	n := 0
	for _, g := range gs {
		if g.Op != nil {
			n++
		}
	}
	return n
}

// mismatchSentence describes ranks that enqueued different operations at s.
func mismatchSentence(s uint64, gs []OpGroup) string {
	var parts []string
	for _, g := range gs {
		switch {
		case g.Op != nil:
			parts = append(parts, fmt.Sprintf("%s enqueued %s", rankList(g.Ranks), g.Op))
		case g.Unknown:
			parts = append(parts, fmt.Sprintf("%s no longer hold collective #%d in their rings", rankList(g.Ranks), s))
		}
	}
	return fmt.Sprintf("the ranks disagree on collective #%d: %s. Every rank must call the same collectives in the same order with the same count, type, operator and root; this is a bug in the program (or ranks running different code).",
		s, strings.Join(parts, "; "))
}

// behindSentences describe ranks that did not enqueue collective s.
func behindSentences(s uint64, gs []OpGroup, ms []*member, size int) []string {
	var ahead, missing []int
	var op *OpSummary
	for _, g := range gs {
		if g.Op == nil && !g.Unknown {
			missing = append(missing, g.Ranks...)
			continue
		}
		ahead = append(ahead, g.Ranks...)
		if op == nil && g.Op != nil {
			op = g.Op
		}
	}
	slices.Sort(ahead)
	slices.Sort(missing)
	what := fmt.Sprintf("collective #%d", s)
	if op != nil {
		what = op.String()
	}
	var out []string
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %d never enqueued %s that %s enqueued", rankList(missing), size, what, rankList(ahead))
	if op != nil {
		fmt.Fprintf(&b, " (%s)", aheadProgress(ms, s, ahead))
	}
	b.WriteString(".")
	out = append(out, b.String())
	byRank := map[int]*member{}
	for _, m := range ms {
		byRank[m.rank] = m
	}
	for _, r := range missing {
		m := byRank[r]
		out = append(out, fmt.Sprintf("rank %d %s", r, lastWords(m)))
	}
	return out
}

// aheadProgress says how far the ranks that enqueued s got with it:
// "started 12.3 s before the dumps on ranks 0, 1, 3".
func aheadProgress(ms []*member, s uint64, ahead []int) string {
	in := map[int]bool{}
	for _, r := range ahead {
		in[r] = true
	}
	byState := map[string][]int{}
	var maxAge int64
	var keys []string
	for _, m := range ms {
		if !in[m.rank] {
			continue
		}
		e := m.coll[s]
		if e == nil {
			continue
		}
		sum := summarize(e, m.dump.TimeNs)
		maxAge = max(maxAge, sum.AgeNs)
		k := "not watched"
		if e.Watched {
			k = e.State.String()
		}
		if byState[k] == nil {
			keys = append(keys, k)
		}
		byState[k] = append(byState[k], m.rank)
	}
	parts := []string{"up to " + fmtDur(maxAge) + " before the dumps"}
	for _, k := range keys {
		parts = append(parts, k+" on "+rankList(byState[k]))
	}
	return strings.Join(parts, "; ")
}

// lastWords says what a rank was doing last on its communicator, and
// elsewhere in its process.
func lastWords(m *member) string {
	rs := rankStatus(m)
	var b strings.Builder
	if m.comm.LastSeq == 0 {
		b.WriteString("enqueued no collective on this communicator")
	} else if e := m.coll[m.comm.LastSeq]; e != nil {
		sum := summarize(e, m.dump.TimeNs)
		fmt.Fprintf(&b, "last enqueued %s, %s", sum, sum.progress())
	} else {
		fmt.Fprintf(&b, "last enqueued collective #%d", m.comm.LastSeq)
	}
	if rs.Last != nil && rs.Last.Op.Class() != Collective {
		fmt.Fprintf(&b, "; its newest operation here is %s, %s", rs.Last, rs.Last.progress())
	}
	if rs.Elsewhere != nil {
		fmt.Fprintf(&b, "; since then it enqueued %s on communicator %q, %s", rs.Elsewhere, rs.Elsewhere.Comm, rs.Elsewhere.progress())
	}
	if m.comm.Closed {
		b.WriteString("; it has closed (destroyed or aborted) the communicator")
	}
	b.WriteString(".")
	return b.String()
}

// firstUndone is the first collective in [from, hi] that some rank
// watched and did not see complete, or whose entry a rank no longer has
// (it may be the one); 0 when every one is unwatched or completed.
func firstUndone(ms []*member, from, hi uint64) uint64 {
	for q := from; q <= hi; q++ {
		for _, m := range ms {
			e := m.coll[q]
			if e == nil || (e.Watched && e.State != Completed && m.comm.LastCompletedSeq < q) {
				return q
			}
		}
	}
	return 0
}

// levelSentences describe a communicator whose ranks enqueued the same
// collectives: did they finish them?
func levelSentences(cr *CommReport, ms []*member, hi uint64) []string {
	if hi == 0 {
		return nil
	}
	watched := false
	minDone, maxDone := hi, uint64(0)
	for _, m := range ms {
		if m.comm.LastStartedSeq > 0 || m.comm.LastCompletedSeq > 0 || anyWatched(m) {
			watched = true
		}
		minDone = min(minDone, m.comm.LastCompletedSeq)
		maxDone = max(maxDone, m.comm.LastCompletedSeq)
	}
	var op *OpSummary
	for _, m := range ms {
		if e := m.coll[hi]; e != nil {
			op = summarize(e, m.dump.TimeNs)
			break
		}
	}
	what := fmt.Sprintf("collective #%d", hi)
	if op != nil {
		what = op.String()
	}
	agree := fmt.Sprintf("all %d ranks with dumps enqueued the same collectives, up to %s; no disagreement.", len(ms), what)
	if !watched {
		cr.Verdict = VerdictOK
		return []string{agree + " The watchdog was off, so the dumps do not say whether the last one finished."}
	}
	if minDone >= hi {
		cr.Verdict = VerdictOK
		return []string{agree + " Every rank completed every one of them."}
	}
	// The first collective some rank has not completed. Only a watched
	// entry says so: collectives nobody followed (the watchdog stopped, or
	// only lifecycle operations, which the binding follows itself, were)
	// say nothing about completion.
	s := firstUndone(ms, minDone+1, hi)
	if s == 0 {
		cr.Verdict = VerdictOK
		return []string{agree + " The ones after #" + fmt.Sprint(minDone) + " were not watched, so the dumps do not say whether they finished."}
	}
	var notDone, done []int
	for _, m := range ms {
		if m.comm.LastCompletedSeq >= s {
			done = append(done, m.rank)
		} else {
			notDone = append(notDone, m.rank)
		}
	}
	if maxDone > minDone {
		cr.Behind = notDone
	}
	cr.Verdict = VerdictStuck
	what = fmt.Sprintf("collective #%d", s)
	for _, m := range ms {
		if e := m.coll[s]; e != nil {
			what = summarize(e, m.dump.TimeNs).String()
			break
		}
	}
	out := []string{agree}
	var b strings.Builder
	fmt.Fprintf(&b, "%s did not complete %s", rankList(notDone), what)
	if len(done) > 0 {
		fmt.Fprintf(&b, ", which %s completed", rankList(done))
	}
	b.WriteString("; ")
	var states []string
	for _, m := range ms {
		if m.comm.LastCompletedSeq >= s {
			continue
		}
		if e := m.coll[s]; e != nil && e.Watched {
			states = append(states, fmt.Sprintf("rank %d: %s", m.rank, summarize(e, m.dump.TimeNs).progress()))
		}
	}
	if len(states) > 0 {
		b.WriteString(strings.Join(states, "; ") + ". ")
	}
	if len(cr.MissingDumps) > 0 {
		fmt.Fprintf(&b, "It may be waiting for %s, which left no dump.", rangeList(cr.MissingDumps))
	} else {
		b.WriteString("Every rank enqueued it, so it is stuck in NCCL: on the GPU (a kernel that does not finish) or the network (a link or peer that does not answer).")
	}
	out = append(out, b.String())
	return out
}

// pendingP2P reports watched point-to-point operations that did not
// complete, oldest per rank, with what the peer was doing.
func pendingP2P(ms []*member, ranks map[int]*member) []string {
	var out []string
	for _, m := range ms {
		for _, e := range m.entries {
			if e.Class != PointToPoint || !e.Watched || e.State == Completed {
				continue
			}
			sum := summarize(e, m.dump.TimeNs)
			line := fmt.Sprintf("rank %d is waiting in %s, %s", m.rank, sum, sum.progress())
			if e.Peer != nil {
				if p := ranks[*e.Peer]; p == nil {
					line += fmt.Sprintf("; rank %d left no dump", *e.Peer)
				} else if len(p.entries) > 0 {
					last := summarize(p.entries[len(p.entries)-1], p.dump.TimeNs)
					line += fmt.Sprintf("; rank %d's newest operation here is %s, %s", *e.Peer, last, last.progress())
				}
			}
			out = append(out, line+".")
			break
		}
	}
	return out
}

// anyWatched reports whether the watchdog watched any of m's entries.
func anyWatched(m *member) bool {
	for _, e := range m.entries {
		if e.Watched {
			return true
		}
	}
	return false
}

// p2pFindings pairs sends with receives between ranks whose rings still
// hold all their point-to-point operations, and reports the first pair
// that does not match.
func p2pFindings(ms []*member) []string {
	type pairKey struct{ from, to int }
	sends := map[pairKey][]*DumpEntry{}
	recvs := map[pairKey][]*DumpEntry{}
	complete := map[int]bool{}
	dumpOf := map[int]*member{}
	for _, m := range ms {
		dumpOf[m.rank] = m
		var n uint64
		var seen = map[uint64]bool{}
		for _, e := range m.entries {
			if e.Class != PointToPoint {
				continue
			}
			seen[e.Seq] = true
			n++
			switch {
			case e.Op == Send && e.Peer != nil:
				k := pairKey{m.rank, *e.Peer}
				sends[k] = append(sends[k], e)
			case e.Op == Recv && e.Peer != nil:
				k := pairKey{*e.Peer, m.rank}
				recvs[k] = append(recvs[k], e)
			}
		}
		// Complete history: every p2p seq from 1 to the last is in the ring.
		complete[m.rank] = n == m.comm.LastP2PSeq && len(seen) == int(n)
	}
	var keys []pairKey
	for k := range sends {
		keys = append(keys, k)
	}
	for k := range recvs {
		if sends[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b pairKey) int {
		if c := cmp.Compare(a.from, b.from); c != 0 {
			return c
		}
		return cmp.Compare(a.to, b.to)
	})
	var out []string
	for _, k := range keys {
		if !complete[k.from] || !complete[k.to] || dumpOf[k.from] == nil || dumpOf[k.to] == nil {
			continue
		}
		s, r := sends[k], recvs[k]
		for i := range min(len(s), len(r)) {
			a := summarize(s[i], dumpOf[k.from].dump.TimeNs)
			b := summarize(r[i], dumpOf[k.to].dump.TimeNs)
			if a.Count != b.Count || a.DataType != b.DataType {
				out = append(out, fmt.Sprintf("rank %d's send %d to rank %d, %s, does not match rank %d's receive %d from it, %s.",
					k.from, i+1, k.to, a, k.to, i+1, b))
				break
			}
		}
		switch {
		case len(s) > len(r):
			e := summarize(s[len(r)], dumpOf[k.from].dump.TimeNs)
			out = append(out, fmt.Sprintf("rank %d sent %d times to rank %d, which posted %d receives from it; rank %d has no receive for %s (%s).",
				k.from, len(s), k.to, len(r), k.to, e, e.progress()))
		case len(r) > len(s):
			e := summarize(r[len(s)], dumpOf[k.to].dump.TimeNs)
			out = append(out, fmt.Sprintf("rank %d posted %d receives from rank %d, which sent %d times to it; rank %d has no send for %s (%s).",
				k.to, len(r), k.from, len(s), k.from, e, e.progress()))
		}
	}
	return out
}

// rankList writes ranks for a sentence: "rank 2", "ranks 0, 1 and 3",
// "ranks 0-63"; consecutive runs of three or more become ranges.
func rankList(ranks []int) string {
	if len(ranks) == 0 {
		return "no rank"
	}
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		switch {
		case j-i >= 2:
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(rs[i]), strconv.Itoa(rs[j]))
		default:
			parts = append(parts, strconv.Itoa(rs[i]))
		}
		i = j + 1
	}
	if len(parts) == 1 {
		return "ranks " + parts[0]
	}
	return "ranks " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// fmtDur writes nanoseconds for people: "12.3 s", "4.5 ms", "120 µs".
func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "0 s"
	case d >= time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	case d >= 2*time.Minute:
		return fmt.Sprintf("%.1f min", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d µs", d/time.Microsecond)
}

// WriteText writes the report as sentences: for each communicator its
// findings, then one line per rank saying what it was doing last; then the
// notes about the dumps.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if len(r.Comms) == 0 {
		fmt.Fprintf(&b, "%d dumps, no communicators in them.\n", r.Dumps)
	}
	for i, c := range r.Comms {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "communicator %q (hash %v, %d ranks): %s\n", c.Name, c.Hash, c.Size, c.Verdict)
		for _, f := range c.Findings {
			b.WriteString("- " + f + "\n")
		}
		if len(c.Behind) > 0 {
			fmt.Fprintf(&b, "- behind: %s\n", rankList(c.Behind))
		}
		for _, rs := range c.Ranks {
			fmt.Fprintf(&b, "  rank %d", rs.Rank)
			if rs.Host != "" {
				fmt.Fprintf(&b, " (%s pid %d)", rs.Host, rs.PID)
			}
			fmt.Fprintf(&b, ": enqueued #%d", rs.LastEnqueued)
			if rs.Watched {
				fmt.Fprintf(&b, ", completed #%d", rs.LastCompleted)
			}
			if rs.Last != nil {
				fmt.Fprintf(&b, "; last %s, %s", rs.Last, rs.Last.progress())
			}
			if rs.Elsewhere != nil {
				fmt.Fprintf(&b, "; then %s on %q, %s", rs.Elsewhere, rs.Elsewhere.Comm, rs.Elsewhere.progress())
			}
			if rs.Closed {
				b.WriteString("; closed")
			}
			b.WriteString("\n")
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range r.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the report as WriteText writes it.
func (r *Report) String() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}
