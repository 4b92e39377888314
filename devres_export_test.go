package nccl

// DevResourceRequirement is the requirement NCCL's helper filled in for r
// (its ncclDevResourceRequirements_t's bufferSize and ginSignalCount).
func DevResourceRequirement(r *DevResource) (bufferSize uint64, ginSignalCount int) {
	b, n := r.mem.Requirement()
	return b, int(n)
}

// WithoutDevCommPropertyChecks runs f with CreateDevComm's checks against
// the communicator's properties off, so that f sees NCCL's own answer.
func WithoutDevCommPropertyChecks(f func()) {
	skipDevCommPropertyChecks.Store(true)
	defer skipDevCommPropertyChecks.Store(false)
	f()
}
