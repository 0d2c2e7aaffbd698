package doctor

import (
	"context"
	"fmt"

	"github.com/clihost/clihost/control"
)

// stateDBCheck asks the daemon to run bbolt's consistency check on its open state.db.
func stateDBCheck(ctx context.Context, c *control.Client) Check {
	s, err := c.StateCheck(ctx)
	switch {
	case err != nil:
		return Check{Name: "state database", Status: Warn, Message: "the daemon did not check it: " + err.Error(),
			Fix: "stop clihostd and run `clihostd --check-state`"}
	case !s.OK:
		return Check{Name: "state database", Status: Fail, Message: s.Error,
			Fix: fmt.Sprintf("stop clihostd, keep a copy of %s and restore the last backup: clihostctl state restore BACKUP (docs/operations.md, \"State: backups, checks and recovery\")", s.File)}
	}
	msg := s.File + ": bbolt's consistency check passed"
	if s.Version > 0 {
		msg = fmt.Sprintf("%s: storage version %d, bbolt's consistency check passed", s.File, s.Version)
	}
	return Check{Name: "state database", Status: OK, Message: msg}
}
