package capi

import "sync/atomic"

// CaptureEpoch counts the stream captures package cuda began or ended in
// the process (after the driver call returned). A cached answer to "is
// this stream capturing?" stays true while the epoch is unchanged, for
// captures begun through package cuda; the watchdog keeps one per stream
// so that its per-operation check costs one atomic load.
var CaptureEpoch atomic.Uint64
