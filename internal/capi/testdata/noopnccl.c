// A stand-in libnccl for capi's own tests and benchmarks: every function
// returns at once, so that a benchmark of a trampoline measures the shim
// and not the library (internal/faketest's fake NCCL moves real data).
//
// Communicator handles are arbitrary numbers. ncclCommGetAsyncError
// reports an operation in progress (ncclInProgress) for the handle
// NOOP_PENDING_COMM; a collective on NOOP_FAILING_COMM fails with
// ncclInvalidArgument, and ncclGetLastError then says so.
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))
#define NOOP_PENDING_COMM ((void *)0x7)
#define NOOP_FAILING_COMM ((void *)0xbad)

static const char *last = "";

EXPORT int ncclGetVersion(int *v) {
	*v = 23007;
	return 0;
}

EXPORT const char *ncclGetErrorString(int r) { return r ? "noop error" : "no error"; }

EXPORT const char *ncclGetLastError(void *comm) {
	(void)comm;
	return last;
}

EXPORT int ncclCommGetAsyncError(void *comm, int *state) {
	*state = comm == NOOP_PENDING_COMM ? 7 : 0;
	return 0;
}

EXPORT int ncclCommCount(void *comm, int *n) {
	(void)comm;
	*n = 1;
	return 0;
}

EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int dt, int op, void *comm, void *stream) {
	(void)send, (void)recv, (void)count, (void)dt, (void)op, (void)stream;
	if (comm == NOOP_FAILING_COMM) {
		last = "noop: failing communicator";
		return 4; // ncclInvalidArgument
	}
	return 0;
}

EXPORT int ncclGroupStart(void) { return 0; }

EXPORT int ncclGroupEnd(void) { return 0; }
