package main

import (
	"fmt"
	"io"
	"time"

	"github.com/clihost/clihost/control"
)

// pipedEvery is how often a running install is reported when stderr is not a terminal.
const pipedEvery = 5 * time.Second

// statusWidth bounds the in-place status line on a terminal (it must not wrap, or \r no longer
// returns to its start).
const statusWidth = 79

// runningStatus shows a package manager's install as it runs: the attempt, the time it has
// taken and the manager's last line, redrawn in place on a terminal, or as one line every
// pipedEvery when piped.
type runningStatus struct {
	w       io.Writer
	tty     bool
	active  bool      // a line is drawn and not ended (tty)
	printed time.Time // when the last line was printed (piped)
	now     func() time.Time
}

// update shows ev, a "running" event.
func (s *runningStatus) update(ev control.InstallEvent) {
	line := plain(ev.Message) + " " + (time.Duration(ev.ElapsedMS) * time.Millisecond).Truncate(time.Second).String()
	if ev.Output != "" {
		line += ": " + plain(ev.Output)
	}
	if !s.tty {
		if now := s.now(); now.Sub(s.printed) >= pipedEvery {
			s.printed = now
			fmt.Fprintln(s.w, line)
		}
		return
	}
	if r := []rune(line); len(r) > statusWidth {
		line = string(r[:statusWidth-1]) + "…"
	}
	fmt.Fprint(s.w, "\r\x1b[K"+line)
	s.active = true
}

// done ends the line drawn in place, before anything else is printed.
func (s *runningStatus) done() {
	if s.active {
		fmt.Fprintln(s.w)
		s.active = false
	}
}

// newRunningStatus reports on ios's stderr.
func newRunningStatus(ios *IOStreams) *runningStatus {
	return &runningStatus{w: ios.ErrOut, tty: ios.IsStderrTTY(), now: time.Now}
}
