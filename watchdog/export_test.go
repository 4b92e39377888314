package watchdog

import "time"

// SetExitGrace shortens the grace Exit gives the action and OnFailure.
func SetExitGrace(d time.Duration) { exitGrace = d }

// SetDefaultHeartbeat changes what Options.Heartbeat 0 means.
func SetDefaultHeartbeat(d time.Duration) { defaultHeartbeat = d }
