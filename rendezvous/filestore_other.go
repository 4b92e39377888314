//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package rendezvous

import (
	"errors"
	"fmt"
	"os"
)

func lockFile(*os.File, bool) error {
	return fmt.Errorf("file locking is not implemented on this system: %w", errors.ErrUnsupported)
}

func unlockFile(*os.File) error { return nil }
