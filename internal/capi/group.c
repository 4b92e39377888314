// nccl4go C shim: group bookkeeping, which keeps a communicator from being
// freed while an open group still holds its work.
//
// NCCL's groups belong to a thread. Between ncclGroupStart and the
// outermost ncclGroupEnd, a call that queues work on a communicator
// (collectives, point-to-point, split, window registration, ...: the
// calls marked CAPI_F_QUEUES in shim.h) only links the communicator into
// the thread's group; the group's end runs that work. Were the
// communicator destroyed or aborted in between, from another thread, the
// end would use freed memory; were work of another thread queued on it,
// that work would silently join this thread's group. So the shim records
// which communicators each open group holds, and the gate refuses work on
// a communicator another thread's group holds.
//
// State
//
//   per thread (thread-local, struct group_thread):
//     depth    ncclGroupStart nesting, counted as NCCL counts it
//     manual   bit i set: level i+1 was opened by a manual GroupStart
//     list     the communicators the outermost group queued work on
//     id       the outermost group's id (from group_ids), for the flight
//              recorder: the same for every operation of one group
//   per communicator (the held table, under held_mu):
//     n        how many threads' groups hold it
//     orphan   a thread ended with it in its group: NCCL can never run
//              that work, so it refuses new work until it is freed
//   process-wide (atomics, read without a lock):
//     capi_open_groups  threads whose depth > 0
//     held_len          records in the table (held or orphaned)
//     capi_gate_busy    capi_open_groups + held_len + live non-blocking
//                       communicators; while 0 the trampolines do no
//                       check, no lock and no thread-local access
//
// Transitions
//
//   GroupStart (ok)       depth++, manual bit of the new level cleared;
//                         depth 0->1: capi_open_groups++, a new id and, the
//                         thread's first time, arm the thread-exit hook
//   GroupEnd, SimEnd      depth-- (also when the end fails);
//                         depth 1->0: capi_open_groups--
//   mark                  manual bit of the innermost level set
//   gated call queueing   comm held by another thread (or orphaned) and
//   work on comm          not by this thread: refused, nothing changes;
//                         else, depth > 0: list += comm, n++ (first time
//                         in this list; a new record: held_len++)
//   take (after the       list handed to Go and cleared; holds stay
//   outermost end)
//   release (Go has       n--; n == 0 and not orphan: record dropped
//   recorded the end)     (held_len--)
//   thread exit           each comm of list: n--, orphan = 1;
//                         depth > 0: capi_open_groups--
//   forget (comm is       its record dropped (held_len--)
//   about to be freed)
//
//   One communicator, held by one thread's group:
//
//     free --queueing call in a group--> held --end, take, release--> free
//                                         |
//                                         +--thread exit--> orphaned --forget--> free
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "group.h"
#include "shim.h"

int capi_open_groups;

static __thread struct group_thread {
	int depth;
	unsigned long long id; // the outermost group's id, while depth > 0
	int hooked; // the thread-exit hook is armed
	unsigned long long manual;
	uintptr_t *comms;
	int ncomms, cap;
	void **kept; // group_keep's blocks, freed when the outermost level ends
	int nkept, capkept;
} gt;

static void free_kept(void) {
	for (int i = 0; i < gt.nkept; i++) {
		free(gt.kept[i]);
	}
	gt.nkept = 0;
}

void group_keep(void *p) {
	if (gt.nkept == gt.capkept) {
		int cap = gt.capkept ? 2 * gt.capkept : 8;
		void **k = realloc(gt.kept, (size_t)cap * sizeof *k);
		if (!k) {
			// No room to keep it: leaking a config block beats
			// freeing memory NCCL may still read.
			return;
		}
		gt.kept = k;
		gt.capkept = cap;
	}
	gt.kept[gt.nkept++] = p;
}

int capi_group_kept(void) { return gt.nkept; }

static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct held_entry {
	uintptr_t comm;
	int n;
	int orphan;
} *held;
static int held_cap;
static int held_len; // written under held_mu, read relaxed without it
static unsigned long long group_ids; // ids handed out to outermost groups

static void busy_add(int delta) { __atomic_add_fetch(&capi_gate_busy, delta, __ATOMIC_RELAXED); }

// held_find returns comm's index in held, or held_len (held_mu held).
static int held_find(uintptr_t comm) {
	int i = 0;
	while (i < held_len && held[i].comm != comm) {
		i++;
	}
	return i;
}

// held_drop removes record i (held_mu held).
static void held_drop(int i) {
	held[i] = held[held_len - 1];
	__atomic_store_n(&held_len, held_len - 1, __ATOMIC_RELAXED);
	busy_add(-1);
}

static void held_add(uintptr_t comm, int delta) {
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i == held_len && delta > 0) {
		if (held_len == held_cap) {
			int cap = held_cap ? 2 * held_cap : 16;
			struct held_entry *p = realloc(held, cap * sizeof *p);
			if (!p) {
				pthread_mutex_unlock(&held_mu);
				return;
			}
			held = p;
			held_cap = cap;
		}
		held[i].comm = comm;
		held[i].n = 0;
		held[i].orphan = 0;
		__atomic_store_n(&held_len, held_len + 1, __ATOMIC_RELAXED);
		busy_add(1);
	}
	if (i < held_len) {
		held[i].n += delta;
		if (held[i].n <= 0 && !held[i].orphan) {
			held_drop(i);
		}
	}
	pthread_mutex_unlock(&held_mu);
}

// held_state returns how many open groups hold comm, and in *orphan
// whether a thread ended holding it.
static int held_state(uintptr_t comm, int *orphan) {
	int n = 0;
	*orphan = 0;
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i < held_len) {
		n = held[i].n;
		*orphan = held[i].orphan;
	}
	pthread_mutex_unlock(&held_mu);
	return n;
}

int capi_group_held(uintptr_t comm) {
	int orphan;
	return held_state(comm, &orphan);
}

int capi_group_orphaned(uintptr_t comm) {
	int orphan;
	held_state(comm, &orphan);
	return orphan;
}

int capi_group_records(void) { return __atomic_load_n(&held_len, __ATOMIC_RELAXED); }

void capi_group_forget(uintptr_t comm) {
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i < held_len) {
		held_drop(i);
	}
	pthread_mutex_unlock(&held_mu);
}

void capi_group_release(const uintptr_t *comms, int n) {
	for (int i = 0; i < n; i++) {
		held_add(comms[i], -1);
	}
}

// ---------------------------------------------------------------------------
// Thread exit. A thread that ends with a group open (a goroutine that
// exits after GroupStart, which locked it to the thread) leaves its
// communicators linked in NCCL's group state of a thread that no longer
// exists: they are marked orphaned and refuse new work; they can still be
// aborted or destroyed (capi_group_forget then drops the mark).

static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void group_thread_exit(void *unused) {
	(void)unused;
	if (gt.depth > 0) {
		__atomic_sub_fetch(&capi_open_groups, 1, __ATOMIC_RELAXED);
		busy_add(-1);
	}
	gt.depth = 0;
	free_kept();
	free(gt.kept);
	gt.kept = NULL;
	gt.capkept = 0;
	pthread_mutex_lock(&held_mu);
	for (int i = 0; i < gt.ncomms; i++) {
		int j = held_find(gt.comms[i]);
		if (j < held_len) {
			held[j].orphan = 1;
			held[j].n--;
		}
	}
	pthread_mutex_unlock(&held_mu);
	gt.ncomms = 0;
	free(gt.comms);
	gt.comms = NULL;
	gt.cap = 0;
}

static void exit_key_init(void) { exit_key_ok = pthread_key_create(&exit_key, group_thread_exit) == 0; }

// ---------------------------------------------------------------------------
// The calling thread's group.

int group_open_here(void) { return __atomic_load_n(&capi_open_groups, __ATOMIC_RELAXED) > 0 && gt.depth > 0; }

void group_started(void) {
	if (gt.depth++ == 0) {
		gt.id = __atomic_add_fetch(&group_ids, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&capi_open_groups, 1, __ATOMIC_RELAXED);
		busy_add(1);
		if (!gt.hooked) {
			pthread_once(&exit_key_once, exit_key_init);
			if (exit_key_ok) {
				pthread_setspecific(exit_key, (void *)1); // run group_thread_exit at exit
			}
			gt.hooked = 1;
		}
	}
	if (gt.depth <= 64) {
		gt.manual &= ~(1ULL << (gt.depth - 1));
	}
}

void group_ended(void) {
	if (gt.depth > 0 && --gt.depth == 0) {
		__atomic_sub_fetch(&capi_open_groups, 1, __ATOMIC_RELAXED);
		busy_add(-1);
		free_kept();
	}
}

// group_holds reports whether the calling thread's open group holds comm.
static int group_holds(uintptr_t comm) {
	for (int i = 0; i < gt.ncomms; i++) {
		if (gt.comms[i] == comm) {
			return 1;
		}
	}
	return 0;
}

// The calls on one communicator are serialized (the Go side's lock), so
// the gate's check and the record it then makes are atomic for comm, and
// the record of another thread's group is visible here: that thread made
// it inside a call on comm that ended before this one began.
int group_conflict(uintptr_t comm) {
	if (__atomic_load_n(&held_len, __ATOMIC_RELAXED) == 0 || group_holds(comm)) {
		return 0;
	}
	int orphan, n = held_state(comm, &orphan);
	if (orphan) {
		return CAPI_ORPHANED;
	}
	return n > 0 ? CAPI_HELD : 0;
}

void group_track(uintptr_t comm) {
	if (!group_open_here() || group_holds(comm)) {
		return;
	}
	if (gt.ncomms == gt.cap) {
		int cap = gt.cap ? 2 * gt.cap : 16;
		uintptr_t *p = realloc(gt.comms, cap * sizeof *p);
		if (!p) {
			return; // the Go side then waits for nothing it cannot name
		}
		gt.comms = p;
		gt.cap = cap;
	}
	gt.comms[gt.ncomms++] = comm;
	held_add(comm, 1);
}

int capi_group_depth(void) { return __atomic_load_n(&capi_open_groups, __ATOMIC_RELAXED) > 0 ? gt.depth : 0; }

unsigned long long capi_group_id(void) { return gt.depth > 0 ? gt.id : 0; }

void capi_group_mark(void) {
	if (gt.depth > 0 && gt.depth <= 64) {
		gt.manual |= 1ULL << (gt.depth - 1);
	}
}

int capi_group_inner_manual(void) {
	if (gt.depth <= 0) {
		return 0;
	}
	if (gt.depth > 64) {
		return 1; // not tracked so deep: let it through
	}
	return (gt.manual >> (gt.depth - 1)) & 1;
}

int capi_group_take(uintptr_t *out, int max) {
	int n = gt.ncomms;
	for (int i = 0; i < n && i < max; i++) {
		out[i] = gt.comms[i];
	}
	if (n <= max) {
		gt.ncomms = 0;
	}
	return n;
}
