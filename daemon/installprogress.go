package daemon

import (
	"sync"
	"time"

	"github.com/clihost/clihost/control"
)

// runningInstall reports an install attempt while it runs: every tick, a "running" event with
// the time since it started and the last line its package manager printed (nothing is sent
// while nothing changed but the time, more often than every tick).
type runningInstall struct {
	mu       sync.Mutex
	last     string
	done     chan struct{}
	finished sync.WaitGroup
}

// startRunning starts reporting the attempt msg to progress every tick until stop.
func startRunning(msg string, progress func(control.InstallEvent), tick time.Duration) *runningInstall {
	r := &runningInstall{done: make(chan struct{})}
	start := time.Now()
	r.finished.Add(1)
	go func() {
		defer r.finished.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-t.C:
				r.mu.Lock()
				out := r.last
				r.mu.Unlock()
				progress(control.InstallEvent{Phase: "running", Message: msg, ElapsedMS: time.Since(start).Milliseconds(), Output: out})
			}
		}
	}()
	return r
}

// line records the package manager's latest line (install.Options.OutputLine).
func (r *runningInstall) line(s string) {
	r.mu.Lock()
	r.last = s
	r.mu.Unlock()
}

// stop ends the reports; none is sent after it returns.
func (r *runningInstall) stop() {
	close(r.done)
	r.finished.Wait()
}
