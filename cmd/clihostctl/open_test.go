package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestOpen: open prints the login link the daemon mints (--print, or without a desktop), hands it
// to xdg-open on a desktop (printing it when xdg-open fails), prints it as JSON with --json, and
// refuses a link that is not an http URL on loopback (the daemon may be another user's process:
// xdg-open would run a file: URL, a .desktop file or a page elsewhere).
func TestOpen(t *testing.T) {
	link := "http://127.0.0.1:8931/login?code=abc"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/page/login", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"url":"`+link+`","expires":"2026-11-26T08:00:00Z"}`)
	})
	sock := fakeDaemon(t, mux)
	bin := t.TempDir()
	opened := filepath.Join(t.TempDir(), "opened")
	xdg := filepath.Join(bin, "xdg-open")
	script := func(exit string) {
		if err := fixture.WriteFile(xdg, []byte("#!/bin/sh\necho \"$1\" >> "+opened+"\nexit "+exit+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())

	t.Setenv("DISPLAY", "")
	ios, out, errOut := testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "open"); code != 0 || out.String() != link+"\n" || !strings.Contains(errOut.String(), "works once") {
		t.Errorf("no desktop: exit %d stdout %q stderr %q", code, out, errOut)
	}
	t.Setenv("DISPLAY", ":99")
	script("0")
	ios, out, errOut = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "open"); code != 0 || out.String() != "" || !strings.Contains(errOut.String(), "opened") {
		t.Errorf("a desktop: exit %d stdout %q stderr %q", code, out, errOut)
	}
	openedPage(t, opened, link)
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "open", "--print"); code != 0 || out.String() != link+"\n" {
		t.Errorf("--print: exit %d stdout %q", code, out)
	}
	script("3")
	ios, out, _ = testStreams("")
	if code := ctl(ios, nil, "--socket", sock, "open"); code != 0 || out.String() != link+"\n" {
		t.Errorf("xdg-open failed: exit %d stdout %q", code, out)
	}
	ios, out, _ = testStreams("")
	var j struct{ URL, Expires string }
	if code := ctl(ios, nil, "--socket", sock, "open", "--json"); code != 0 || json.Unmarshal(out.Bytes(), &j) != nil || j.URL != link || j.Expires == "" {
		t.Errorf("--json: exit %d stdout %q", code, out)
	}
	if err := os.Remove(opened); err != nil {
		t.Fatal(err)
	}
	script("0")
	for _, bad := range []string{"file:///etc/passwd", "http://evil.example/login?code=x", "https://127.0.0.1:8931/", "/tmp/x.desktop", "http://10.0.0.1/"} {
		link = bad
		ios, out, errOut = testStreams("")
		if code := ctl(ios, nil, "--socket", sock, "open"); code == 0 || out.String() != "" || !strings.Contains(errOut.String(), "not an http URL on loopback") {
			t.Errorf("%s: exit %d stdout %q stderr %q", bad, code, out, errOut)
		}
	}
	if _, err := os.Stat(opened); err == nil {
		t.Error("xdg-open was given a link that is not on loopback")
	}
}

// openedPage checks what open handed xdg-open: not the login link itself (any local user reads
// xdg-open's and the browser's argv in /proc and could redeem the one-time code first) but a
// file:// URL of a page only this user can read, which sends the browser on to the link.
func openedPage(t *testing.T, opened, link string) {
	t.Helper()
	got, _ := os.ReadFile(opened)
	arg := strings.TrimSpace(string(got))
	if strings.Contains(arg, "code=") || !strings.HasPrefix(arg, "file:///") {
		t.Fatalf("xdg-open got %q: the login link (its code) is in its argv, readable by every local user", arg)
	}
	page := strings.TrimPrefix(arg, "file://")
	for _, p := range []string{page, filepath.Dir(page)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: other users could read the login code", p, st.Mode())
		}
	}
	body, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(body), `content="0;url=`+link+`"`) {
		t.Errorf("the page handed to the browser does not send it on to %s: %q, %v", link, body, err)
	}
}
