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

// TestAuditAcrossRotation serves an audit log that internal/rotate rotates: --rotated prints the
// rotated files oldest first and then the current one, and --follow keeps printing new lines
// after the file is rotated away under it.
func TestAuditAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	sock, audit := filepath.Join(dir, "ctl.sock"), filepath.Join(dir, "audit.jsonl")
	log, err := rotate.Open(audit, rotate.Options{MaxSize: 64, Keep: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	line := func(i int) string { return fmt.Sprintf("{\"type\":\"t\",\"n\":%04d,\"pad\":\"xxxxxxxxxx\"}\n", i) } // 40 bytes: one a file
	ln, err := Listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(fakeBackend{audit: audit}, Admission{OwnerUID: os.Geteuid(), GroupID: -1}), ConnContext: ConnContext}
	go srv.Serve(ln)
	defer srv.Close()
	c := NewClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var all strings.Builder
	for i := range 4 {
		all.WriteString(line(i))
		if _, err := log.Write([]byte(line(i))); err != nil {
			t.Fatal(err)
		}
	}
	var got strings.Builder
	if err := c.Audit(ctx, false, true, &got); err != nil || got.String() != all.String() {
		t.Fatalf("--rotated: %v\n%s\nwant\n%s", err, got.String(), all.String())
	}
	got.Reset()
	if err := c.Audit(ctx, false, false, &got); err != nil || got.String() != line(3) {
		t.Fatalf("current file only: %v %q", err, got.String())
	}

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var follow fixture.Buffer // what a follower receives
	done := make(chan error, 1)
	go func() { done <- c.Audit(fctx, true, false, &follow) }()
	waitFor := func(want string) {
		t.Helper()
		for !strings.Contains(follow.String(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("the follower never printed %q; it printed\n%s", want, follow.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor(line(3))
	for i := 4; i < 7; i++ { // each write rotates: the follower must move to the new file
		if _, err := log.Write([]byte(line(i))); err != nil {
			t.Fatal(err)
		}
		waitFor(line(i))
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := line(3) + line(4) + line(5) + line(6); follow.String() != want {
		t.Errorf("followed\n%s\nwant\n%s", follow.String(), want)
	}
}
