package cobramcp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// stdioLock serialises everything that repoints this process's file descriptors 0, 1 and 2: they
// are shared by the whole process, so only one call at a time may own them. It is a channel so
// that a call waiting for it gives up when its request is cancelled.
var stdioLock = make(chan struct{}, 1)

// lockStdio takes stdioLock, or returns ctx's error.
func lockStdio(ctx context.Context) error {
	select {
	case stdioLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the previous call: %w", ctx.Err())
	}
}

func unlockStdio() { <-stdioLock }

// drainGrace is how long a call waits, after its command returned, for the end of its output:
// a process the command left running in the background may hold the pipes open.
const drainGrace = 500 * time.Millisecond

// DefaultMaxOutputBytes bounds what one call keeps of its stdout, and of its stderr, unless
// Options.MaxOutputBytes says otherwise; the rest is read and dropped, and the result says so.
const DefaultMaxOutputBytes = 16 << 20

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

// Write never fails, so that a command (or a pipe drain) writing more than max is not stopped.
func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room < 0 {
		room = 0
	}
	keep := min(room, len(p))
	c.buf.Write(p[:keep])
	c.dropped += int64(len(p) - keep)
	return len(p), nil
}

// String is what was kept, with a note when some was dropped.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return c.buf.String()
	}
	return fmt.Sprintf("%s\n[cobramcp: output truncated, %d bytes dropped]", c.buf.String(), c.dropped)
}

// fdCapture is one call's capture of file descriptors 1 and 2: each points at the write end of a
// pipe whose read end is drained concurrently (a command writing more than a pipe buffer does not
// block), so that what the command or any process it starts writes there is the call's output.
type fdCapture struct {
	saved              [2]int // the descriptors 1 and 2 pointed at before, to restore
	outR, errR         *os.File
	outW, errW         *os.File
	outDone, errDone   chan struct{}
	savedOut, savedErr *os.File // os.Stdout and os.Stderr, restored even if the command replaced them
	restoreErr         error
}

// startCapture points descriptors 1 and 2 at new pipes; the caller holds stdioLock. The drained
// output goes to outBuf and errBuf.
func startCapture(outBuf, errBuf *capped) (*fdCapture, error) {
	c := &fdCapture{saved: [2]int{-1, -1}, savedOut: os.Stdout, savedErr: os.Stderr}
	var err error
	if c.outR, c.outW, err = blockingPipe(); err != nil {
		return nil, err
	}
	if c.errR, c.errW, err = blockingPipe(); err != nil {
		c.closePipes()
		return nil, err
	}
	for i, fd := range []int{1, 2} {
		if c.saved[i], err = dupCloexec(fd); err != nil {
			c.closeSaved()
			c.closePipes()
			return nil, fmt.Errorf("save descriptor %d: %w", fd, err)
		}
	}
	c.outDone, c.errDone = drain(c.outR, outBuf), drain(c.errR, errBuf)
	for _, r := range []struct {
		w  *os.File
		fd int
	}{{c.outW, 1}, {c.errW, 2}} {
		if err := redirect(r.w, r.fd); err != nil {
			_ = c.finish()
			return nil, err
		}
	}
	return c, nil
}

// finish points descriptors 1 and 2 back where they were, restores os.Stdout and os.Stderr, and
// waits for the rest of the output (at most drainGrace once the command's own ends are closed).
func (c *fdCapture) finish() error {
	os.Stdout, os.Stderr = reopened(c.savedOut, 1, "/dev/stdout"), reopened(c.savedErr, 2, "/dev/stderr")
	for i, fd := range []int{1, 2} {
		if err := dup3(c.saved[i], fd); err != nil && c.restoreErr == nil {
			c.restoreErr = fmt.Errorf("restore descriptor %d: %w", fd, err)
		}
	}
	c.closeSaved()
	c.outW.Close()
	c.errW.Close()
	deadline := time.Now().Add(drainGrace)
	for _, w := range []struct {
		done chan struct{}
		r    *os.File
	}{{c.outDone, c.outR}, {c.errDone, c.errR}} {
		select {
		case <-w.done:
		case <-time.After(time.Until(deadline)):
			_ = w.r.SetReadDeadline(time.Now())
			<-w.done
		}
	}
	c.outR.Close()
	c.errR.Close()
	return c.restoreErr
}

func (c *fdCapture) closeSaved() {
	for i, fd := range c.saved {
		if fd >= 0 {
			closeFD(fd)
			c.saved[i] = -1
		}
	}
}

func (c *fdCapture) closePipes() {
	for _, f := range []*os.File{c.outR, c.outW, c.errR, c.errW} {
		if f != nil {
			f.Close()
		}
	}
}

// drain copies r into buf until EOF or r's deadline, and closes the returned channel then.
func drain(r *os.File, buf *capped) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 64<<10)
		for {
			n, err := r.Read(b)
			buf.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return done
}

// reopened is f, or a new file on descriptor fd when the command closed f (os.Stdout.Close()), so
// that later calls can write there again.
func reopened(f *os.File, fd int, name string) *os.File {
	if rc, err := f.SyscallConn(); err == nil && rc.Control(func(uintptr) {}) == nil {
		return f
	}
	return os.NewFile(uintptr(fd), name)
}
