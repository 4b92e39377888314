// Package trace is nccl4go's flight recorder: a per-process record of the
// recent operations of every communicator, its JSON dump, and an analyzer
// that reads the dumps of all ranks of a job and says where they disagree.
//
// It imports nothing of package nccl, which records into Default on every
// call.
package trace
