package control

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/internal/rotate"
)

// auditServer serves the audit log at <dir>/audit.jsonl on a control socket and returns a client.
func auditServer(t *testing.T) (*Client, string) {
	t.Helper()
	dir := t.TempDir()
	sock, audit := filepath.Join(dir, "ctl.sock"), filepath.Join(dir, "audit.jsonl")
	ln, err := Listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(fakeBackend{audit: audit}, Admission{OwnerUID: os.Geteuid(), GroupID: -1}), ConnContext: ConnContext}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return NewClient(sock), audit
}

// entry is audit line i: bundle gh for even i, jq for odd, i minutes after base.
func entry(base time.Time, i int) string {
	cli := map[bool]string{true: "gh", false: "jq@1"}[i%2 == 0]
	return fmt.Sprintf("{\"type\":\"cli.invoked\",\"cli_id\":%q,\"n\":%d,\"ts\":%q}\n", cli, i, base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
}

// TestAuditTail: -n, --since and --bundle select from the log's end, across its rotated files,
// and print in the log's order.
func TestAuditTail(t *testing.T) {
	c, audit := auditServer(t)
	log, err := rotate.Open(audit, rotate.Options{MaxSize: 1000, Keep: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	base := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	for i := range 100 { // ~100 bytes a line: ten a file, nine rotated files
		if _, err := log.Write([]byte(entry(base, i))); err != nil {
			t.Fatal(err)
		}
	}
	want := func(ns ...int) string {
		var b strings.Builder
		for _, n := range ns {
			b.WriteString(entry(base, n))
		}
		return b.String()
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    AuditQuery
		want string
	}{
		{"last 3", AuditQuery{Last: 3}, want(97, 98, 99)},
		{"last 0", AuditQuery{Last: 0}, ""},
		{"last 25, into the rotated files", AuditQuery{Last: 25}, want(seq(75, 100)...)},
		{"one bundle", AuditQuery{Last: 3, Bundle: "jq"}, want(95, 97, 99)},
		{"one bundle by major", AuditQuery{Last: 2, Bundle: "jq@1"}, want(97, 99)},
		{"another major", AuditQuery{Last: 2, Bundle: "jq@2"}, ""},
		{"since", AuditQuery{Last: -1, Since: base.Add(95 * time.Minute)}, want(95, 96, 97, 98, 99)},
		{"since and bundle", AuditQuery{Last: -1, Since: base.Add(71 * time.Minute), Bundle: "gh"}, want(72, 74, 76, 78, 80, 82, 84, 86, 88, 90, 92, 94, 96, 98)},
		{"since and last", AuditQuery{Last: 2, Since: base.Add(50 * time.Minute)}, want(98, 99)},
		{"a bundle's whole history", AuditQuery{Last: -1, Bundle: "gh"}, want(evens(100)...)},
	} {
		var got strings.Builder
		if err := c.AuditTail(ctx, tc.q, &got); err != nil || got.String() != tc.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", tc.name, err, got.String(), tc.want)
		}
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func evens(to int) []int {
	var out []int
	for i := 0; i < to; i += 2 {
		out = append(out, i)
	}
	return out
}

// TestAuditTailReadsFromTheEnd: the last lines of a log too large to read whole in the test's
// time (a 64 GiB hole, then lines) come back at once, and a line longer than any entry is
// skipped, not held.
func TestAuditTailReadsFromTheEnd(t *testing.T) {
	c, audit := auditServer(t)
	f, err := os.OpenFile(audit, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse file: %v", err)
	}
	tail := entry(base, 1) + "\n" + strings.Repeat("x", maxAuditLine+tailChunk+7) + "\n" + entry(base, 2) + entry(base, 3)
	if _, err := f.WriteAt([]byte("\n"+tail), 64<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got strings.Builder
	before := bytesRead(t)
	if err := c.AuditTail(ctx, AuditQuery{Last: 3}, &got); err != nil || got.String() != entry(base, 1)+entry(base, 2)+entry(base, 3) {
		t.Fatalf("%v %q", err, got.String())
	}
	// What this process read meanwhile (the log, the control socket): far below the 64 GiB hole.
	if n := bytesRead(t) - before; n > 1<<30 {
		t.Errorf("the tail read %d bytes: the log was read from its start", n)
	}
}

// bytesRead is how many bytes this process has read with read system calls (rchar in
// /proc/self/io), from files, sockets and pipes alike.
func bytesRead(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatalf("no /proc/self/io (task I/O accounting) to count what the tail read: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "rchar:"); ok {
			var n int64
			if _, err := fmt.Sscan(strings.TrimSpace(v), &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// TestAuditTailFollow: --follow -n 2 prints the last two lines, then only the new lines of the
// bundle asked for, across a rotation, and never the history before them.
func TestAuditTailFollow(t *testing.T) {
	c, audit := auditServer(t)
	log, err := rotate.Open(audit, rotate.Options{MaxSize: 300, Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	base := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	for i := range 6 {
		log.Write([]byte(entry(base, i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fctx, stop := context.WithCancel(ctx)
	var follow fixture.Buffer
	done := make(chan error, 1)
	go func() { done <- c.AuditTail(fctx, AuditQuery{Last: 2, Bundle: "gh", Follow: true}, &follow) }()
	waitFor := func(want string) {
		t.Helper()
		for follow.String() != want {
			select {
			case <-ctx.Done():
				t.Fatalf("the follower printed\n%s\nwant\n%s", follow.String(), want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor(entry(base, 2) + entry(base, 4))
	for i := 6; i < 12; i++ { // rotates every few lines
		log.Write([]byte(entry(base, i)))
	}
	waitFor(entry(base, 2) + entry(base, 4) + entry(base, 6) + entry(base, 8) + entry(base, 10))
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAuditQueryRefused: a bad n or since is refused with 400, not read as "all".
func TestAuditQueryRefused(t *testing.T) {
	c, _ := auditServer(t)
	for _, q := range []string{"n=-3", "n=x", "since=yesterday"} {
		var got strings.Builder
		resp, err := c.do(context.Background(), http.MethodGet, PathAudit+"?"+q, nil)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: accepted (%s)", q, got.String())
		}
	}
}

// TestAuditTailBounded: a --since reaching further back than the daemon holds at once is refused
// with 413 and a hint, instead of the daemon holding the whole history in memory.
func TestAuditTailBounded(t *testing.T) {
	c, audit := auditServer(t)
	base := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range 200 {
		b.WriteString(entry(base, i))
	}
	if err := os.WriteFile(audit, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	defer func(n int) { maxHistory = n }(maxHistory)
	maxHistory = 2000 // about 20 lines
	var got strings.Builder
	err := c.AuditTail(context.Background(), AuditQuery{Last: -1, Since: base}, &got)
	if err == nil || !strings.Contains(err.Error(), "more than 64 MiB") || got.Len() != 0 {
		t.Errorf("since the start: %v, %d bytes", err, got.Len())
	}
	got.Reset()
	if err := c.AuditTail(context.Background(), AuditQuery{Last: 5, Since: base}, &got); err != nil || got.String() != entry(base, 195)+entry(base, 196)+entry(base, 197)+entry(base, 198)+entry(base, 199) {
		t.Errorf("-n 5: %v %q", err, got.String())
	}
}
