package store

// Tests that need a second process: bbolt's lock is an flock on state.db,
// and durability is about a process dying, so these re-exec the test binary
// (os.Args[0] -test.run=^TestHelperProcess$) with childModeEnv set.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

const (
	childModeEnv = "CLIHOST_STORE_TEST_CHILD"
	childDirEnv  = "CLIHOST_STORE_TEST_DIR"
	crashKeys    = 8
)

// TestHelperProcess is the child side of the re-exec tests; it does nothing
// unless childModeEnv is set.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		t.Skip("child process for the re-exec tests")
	}
	dir := os.Getenv(childDirEnv)
	switch mode {
	case "crash":
		crashChild(dir)
	case "open", "open-ro":
		openChild(dir, mode == "open-ro")
	case "hold":
		holdChild(dir)
	default:
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		os.Exit(2)
	}
	os.Exit(0)
}

func childCmd(ctx context.Context, mode, dir string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDirEnv+"="+dir)
	return cmd
}

// crashPayload is what the crash child stores; Pad is derived from Key and
// N so a torn or mixed-up record is detectable.
type crashPayload struct {
	Key string `json:"key"`
	N   uint64 `json:"n"`
	Pad string `json:"pad"`
}

func crashPad(key string, n uint64) string {
	// 0..9000 bytes: small records, page-sized ones and overflow pages.
	size := int((n*7919 + uint64(len(key))*104729) % 9001)
	return strings.Repeat(string(rune('a'+n%26)), size)
}

func secretScope(key string) string { return ScopeKey("crash@1", "/w", key) }

// crashChild loops doing Updates (and now and then a secret Put) until it
// is killed, acknowledging each commit on stdout after it returns.
func crashChild(dir string) {
	s, err := Open(dir, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	x, err := OpenSecrets(s, filepath.Join(dir, "secrets.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		key := fmt.Sprintf("k%d", i%crashKeys)
		v, err := s.Update(BucketSetup, key, func(cur Record) (any, error) {
			if cur.Data != nil {
				var p crashPayload
				if err := json.Unmarshal(cur.Data, &p); err != nil {
					return nil, err
				}
				if p.N != cur.Version || p.Key != key || p.Pad != crashPad(key, p.N) {
					return nil, fmt.Errorf("record %s: payload n=%d does not match version %d", key, p.N, cur.Version)
				}
			}
			n := cur.Version + 1
			return crashPayload{Key: key, N: n, Pad: crashPad(key, n)}, nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		// One write(2) per line on a pipe: whole lines or nothing.
		fmt.Fprintf(os.Stdout, "U %s %d\n", key, v)
		if i%5 == 0 {
			if err := x.Put(secretScope(key), "TOKEN", fmt.Sprintf("%s-%d", key, v)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(5)
			}
			fmt.Fprintf(os.Stdout, "S %s %d\n", key, v)
		}
	}
}

func TestCrashDurability(t *testing.T) {
	dir := t.TempDir()
	acked := map[string]uint64{}       // last acknowledged (or found committed) version per key
	ackedSecret := map[string]uint64{} // last acknowledged secret Put per key
	const rounds = 4
	inFlight := 0 // commits found that the child was killed before acknowledging
	for round := range rounds {
		target := 150 + rand.IntN(400) // acks before the kill
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := childCmd(ctx, "crash", dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		child := fixture.Start(t, cmd)
		sc := bufio.NewScanner(out)
		n, killed := 0, false
		for sc.Scan() {
			var kind, key string
			var v uint64
			if _, err := fmt.Sscanf(sc.Text(), "%s %s %d", &kind, &key, &v); err != nil {
				t.Fatalf("round %d: bad ack line %q: %v", round, sc.Text(), err)
			}
			switch kind {
			case "U":
				if v != acked[key]+1 {
					t.Fatalf("round %d: key %s acknowledged version %d after %d (not monotonic by one)", round, key, v, acked[key])
				}
				acked[key] = v
			case "S":
				ackedSecret[key] = v
			}
			if n++; n == target {
				// A random delay moves the kill around inside the child's
				// transaction cycle (encode, page writes, fsync, meta write).
				time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		werr := child.Wait()
		cancel()
		if !killed {
			t.Fatalf("round %d: child exited after %d acks (%v): %s", round, n, werr, stderr.String())
		}
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, want SIGKILL; stderr: %s", round, werr, stderr.String())
		}
		t.Logf("round %d: killed after %d acks (%d lines read)", round, target, n)

		// Reopen: every record decodes and matches its version, and every
		// acknowledged version is there (or the one in flight after it).
		s, err := Open(dir, Options{LockTimeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		checkDB(t, s)
		found := map[string]bool{}
		err = s.List(BucketSetup, "", func(key string, rec Record) error {
			found[key] = true
			var p crashPayload
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if p.Key != key || p.N != rec.Version || p.Pad != crashPad(key, p.N) {
				return fmt.Errorf("%s: version %d holds payload key=%s n=%d (torn or misplaced)", key, rec.Version, p.Key, p.N)
			}
			switch rec.Version {
			case acked[key]:
			case acked[key] + 1: // committed, killed before the ack
				acked[key] = rec.Version
				inFlight++
			default:
				return fmt.Errorf("%s: stored version %d, last acknowledged %d", key, rec.Version, acked[key])
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for key, v := range acked {
			if v > 0 && !found[key] {
				t.Fatalf("round %d: acknowledged %s@%d is gone", round, key, v)
			}
		}
		x, err := OpenSecrets(s, filepath.Join(dir, "secrets.key"))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for key, v := range ackedSecret {
			val, ok, err := x.Get(secretScope(key), "TOKEN")
			if err != nil || !ok {
				t.Fatalf("round %d: secret for %s: %v %v", round, key, ok, err)
			}
			var gotKey string
			var gotV uint64
			if _, err := fmt.Sscanf(strings.Replace(val, "-", " ", 1), "%s %d", &gotKey, &gotV); err != nil || gotKey != key || gotV < v || gotV > acked[key] {
				t.Fatalf("round %d: secret for %s = %q, acknowledged %d", round, key, val, v)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	total := uint64(0)
	for _, v := range acked {
		total += v
	}
	t.Logf("%d committed updates over %d kills; %d committed but unacknowledged", total, rounds, inFlight)
}

type openResult struct {
	OK      bool   `json:"ok"`
	Locked  bool   `json:"locked"`
	Msg     string `json:"msg"`
	Elapsed string `json:"elapsed"`
}

// openChild tries one Open and reports the outcome as JSON on stdout.
func openChild(dir string, ro bool) {
	start := time.Now()
	s, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond, ReadOnly: ro})
	r := openResult{OK: err == nil, Locked: errors.Is(err, ErrLocked), Elapsed: time.Since(start).String()}
	if err != nil {
		r.Msg = err.Error()
	} else {
		_ = s.Close()
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// holdChild opens the store, says "ready", and holds it until stdin closes.
func holdChild(dir string) {
	s, err := Open(dir, Options{LockTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
}

func runOpenChild(t *testing.T, mode, dir string) openResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := childCmd(ctx, mode, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v: %s", mode, err, stderr.String())
	}
	var r openResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLine(out)), &r); err != nil {
		t.Fatalf("child %s output %q: %v", mode, out, err)
	}
	return r
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

func TestOpenLockedByOtherProcess(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.Put(BucketMeta, "x", 1); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"open", "open-ro"} {
		r := runOpenChild(t, mode, dir)
		if r.OK || !r.Locked {
			t.Fatalf("%s while held: %+v, want ErrLocked", mode, r)
		}
		for _, want := range []string{dir, "another clihostd (or clihostctl)", "pid " + strconv.Itoa(os.Getpid()), PIDFile} {
			if !strings.Contains(r.Msg, want) {
				t.Errorf("%s: message %q does not contain %q", mode, r.Msg, want)
			}
		}
		t.Logf("%s: failed after %s: %s", mode, r.Elapsed, r.Msg)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := runOpenChild(t, "open", dir); !r.OK {
		t.Fatalf("Open after the holder closed: %+v", r)
	}
}

func TestOpenLockedHolderNamed(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := childCmd(ctx, "hold", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	child := fixture.Start(t, cmd)
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
	}
	_, err = Open(dir, Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while a child holds it = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("message %q does not name the child's pid %d", err, cmd.Process.Pid)
	}
	t.Log(err)
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("holder: %v: %s", err, stderr.String())
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after the holder exited: %v", err)
	}
	s.Close()
}
