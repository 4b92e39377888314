// nccl4go C shim: the group bookkeeping's interface to shim.c (private;
// the Go side's part is in shim.h). See group.c for the states.
#ifndef NCCL4GO_GROUP_H
#define NCCL4GO_GROUP_H

#include <stdint.h>

// capi_gate_busy counts the reasons a gated trampoline must look closer
// than "call": threads with a group open, records in the held table, and
// communicators NCCL runs non-blocking. While it is 0 a call that queues
// work needs no check and no record (see gate_enter in shim.c). Updated
// with atomic adds; read relaxed.
extern int capi_gate_busy;

// group_conflict is the gate's check for a call that queues work on comm:
// CAPI_ORPHANED or CAPI_HELD when another thread's open group holds comm's
// queue (or a dead thread's did), else 0.
int group_conflict(uintptr_t comm);

// group_track records comm in the calling thread's open group (and holds
// it) when a group is open on the thread; else it does nothing.
void group_track(uintptr_t comm);

// group_open_here reports whether the calling thread has a group open. It
// reads no thread-local state while no thread has one.
int group_open_here(void);

// group_started and group_ended follow a successful ncclGroupStart and
// every ncclGroupEnd or ncclGroupSimulateEnd (NCCL counts the depth down
// even when the end fails).
void group_started(void);
void group_ended(void);

// group_keep hands p (malloc'd) to the calling thread's open group, which
// frees it when its outermost level ends (or the thread exits): memory NCCL
// may read until the group's end (a per-collective config's strings).
void group_keep(void *p);

#endif
