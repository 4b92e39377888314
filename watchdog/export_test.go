package watchdog

import "time"

// SetExitGrace shortens the grace Exit gives the action and OnFailure.
func SetExitGrace(d time.Duration) { exitGrace = d }
