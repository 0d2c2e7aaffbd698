package tests

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/clihost/clihost/internal/fixture"
)

// chromium is Debian's browser, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// hostileBundle is a bundle "evil" around /usr/bin/true whose name and description carry markup,
// a script that would retitle the page, terminal escapes and a bidi override; its tool run runs,
// its tool stop is refused by the approval policy the test writes.
func hostileBundle(t *testing.T) string {
	t.Helper()
	cli := fixture.CLI("true", "evil", "  run: ./tools/run/TOOL.md\n  stop: ./tools/stop/TOOL.md\n")
	cli = strings.Replace(cli, "description: A coreutils program as a bundle, for tests.",
		`description: "Innocent <script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned2'\"> \e[31mred\e[0m \u202eevil"`, 1)
	cli = strings.Replace(cli, "name: Fixture evil", `name: "Evil <b>bold</b>"`, 1)
	tool := fixture.True()["true/tools/run/TOOL.md"]
	dir := fixture.Write(t, map[string]string{
		"evil/CLI.md":             cli,
		"evil/tools/run/TOOL.md":  strings.ReplaceAll(tool, "true.run", "evil.run"),
		"evil/tools/stop/TOOL.md": strings.ReplaceAll(strings.ReplaceAll(tool, "true.run", "evil.stop"), "name: Run", "name: Stop"),
	})
	fixture.Reachable(t, dir)
	return dir
}

// egressBundle is a bundle "net" whose tool get runs curl to https://blocked.example/, a host
// outside its egress list: the egress proxy refuses the connection (nothing leaves the machine).
func egressBundle(t *testing.T) string {
	t.Helper()
	cli := strings.NewReplacer(`bin: "curl"`, "bin: curl", `parse: 'curl \(GNU coreutils\) (\d+\.\d+)', range: ">=8"`, `parse: 'curl (\d+\.\d+\.\d+)', range: ">=7"`,
		"egress: []", `egress: ["allowed.example"]`, "package: coreutils", "package: curl").Replace(fixture.CLI("curl", "net", "  get: ./tools/get/TOOL.md\n"))
	dir := fixture.Write(t, map[string]string{"net/CLI.md": cli, "net/tools/get/TOOL.md": `---
name: Get
id: net.get
description: Fetches a page of a host the bundle may not reach.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-sS", "--max-time", "5", "https://blocked.example/"] }
---
`})
	fixture.Reachable(t, dir)
	return dir
}

// browser starts Debian's chromium headless (flags that work as root, in a new profile) and
// returns a tab's context; the browser ends with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	fixture.Need(t, chromium)
	var log bytes.Buffer
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1100), chromedp.CombinedOutput(&log))
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
		if t.Failed() {
			t.Logf("chromium's output:\n%s", log.String())
		}
	})
	return ctx
}

// TestStatusPageInBrowser runs the real clihostd with a hostile bundle, makes calls through it (one
// refused by the approval policy, one whose connection the egress proxy refuses), logs in with the link of `clihostctl open --print` in a real
// headless chromium and reads the page as a person sees it: the bundle ready, the calls with their
// outcomes, the refusal, the egress decision, the hostile description shown as text with its script not run, the
// session cookie out of the page's reach; the link does not work twice.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := browser(t)
	policy := filepath.Join(t.TempDir(), "approvals.yaml")
	if err := os.WriteFile(policy, []byte("rules:\n  - { bundle: evil, tool: stop, decision: deny }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.Need(t, "curl")
	d := startDaemon(t, t.TempDir(), "--bundles", hostileBundle(t), "--bundles", egressBundle(t), "--no-catalog", "--approvals", policy)
	if r := d.ctl(t, "call", "net", "get", "--workspace", d.ws, "--input", `{}`); r.code == 0 || !strings.Contains(r.stdout, "403") {
		t.Fatalf("call get (egress refused): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for range 2 {
		if r := d.ctl(t, "call", "evil", "run", "--workspace", d.ws, "--input", `{"label":"SECRET-ARGUMENT"}`); r.code != 0 {
			t.Fatalf("call run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	if r := d.ctl(t, "call", "evil", "stop", "--workspace", d.ws, "--input", `{}`); r.code == 0 || !strings.Contains(r.stdout, "approval_denied") {
		t.Fatalf("call stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := d.ctl(t, "open", "--print")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(link, d.mcp+"/login?code=") {
		t.Fatalf("open --print: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#calls"))); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil || title != "clihostd status" {
		t.Errorf("title %q, %v: the hostile description's script ran, or the page did not load", title, err)
	}
	page, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	bundles, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("tr.bundle")))
	if !strings.Contains(bundles, "evil@1") || !strings.Contains(bundles, "ready") || strings.Contains(bundles, "not ready") {
		t.Errorf("the bundle's row: %q", bundles)
	}
	for _, want := range []string{
		"Evil <b>bold</b>", "<script>document.title='pwned'</script>", `onerror="document.title='pwned2'"`, `\u001b[31mred\u001b[0m`, `\u202eevil`,
		"sandbox works",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	calls, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.call")].map(r => r.innerText.replace(/\s+/g, " "))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 4 || !strings.Contains(calls[0], "stop") || !strings.Contains(calls[0], "refused approval_denied") || !strings.Contains(calls[0], "denied") ||
		!strings.Contains(calls[1], "run") || !strings.Contains(calls[1], "ok") || !strings.Contains(calls[2], "ok") ||
		!strings.Contains(calls[3], "get") || !strings.Contains(calls[3], "failed") || !strings.Contains(calls[3], "(exit 56) 1") {
		t.Errorf("the calls (newest first): %q", calls)
	}
	egress, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr.egress")].map(r => r.innerText.replace(/\s+/g, " "))`))
	if err != nil || len(egress) != 1 || !strings.Contains(egress[0], "net blocked.example:443 connect refused") || !strings.Contains(egress[0], "not in the egress allowlist") {
		t.Errorf("the egress decisions: %q, %v", egress, err)
	}
	if strings.Contains(page, "SECRET-ARGUMENT") {
		t.Error("the page shows a call's argument")
	}
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script, img, b").length`))
	if err != nil || injected != 0 {
		t.Errorf("%d script, img or b elements in the page (%v): markup from the bundle became HTML", injected, err)
	}
	cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || cookie != "" {
		t.Errorf("the page's script can read %q (%v): the session cookie is not HttpOnly", cookie, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "statuspage.png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() < 1000 || !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Errorf("screenshot %s: %v %v", file, st, err)
	}

	// The link works once: loaded again it says so, and shows nothing of the daemon.
	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	again, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if !strings.Contains(again, "used or expired") || strings.Contains(again, "evil@1") {
		t.Errorf("the link loaded twice: %q", again)
	}
}

// TestStatusPageUnprivilegedDaemon: the shipped unit's deployment, a daemon that is not root (here
// the agent user) with a socket group. Its own user gets a login link from clihostctl open and the
// link opens the page (its sandbox built in a user namespace, or why not); a member of the socket group is refused the link (the page shows every
// caller's calls, as the audit log it may not read) and gets no URL.
func TestStatusPageUnprivilegedDaemon(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Group(t, sockGroup)
	agent := fixture.User(t, agentName, sockGroup)
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	if err := os.Chmod(filepath.Dir(bin.ctl), 0o755); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	fixture.Reachable(t, base)
	state, ws, sock := filepath.Join(base, "state"), filepath.Join(base, "ws"), filepath.Join(base, "run", "ctl.sock")
	for _, dir := range []string{state, ws, filepath.Dir(sock)} {
		privateDir(t, dir, agent.UID, agent.GID, 0o755)
	}
	d := startGroupDaemon(t, agent, state, ws, sock, "", "--no-catalog", "--bundles", identityBundles(t))

	r := d.ctlAs(t, member, "open", "--print")
	if r.code == 0 || strings.Contains(r.stdout, "/login") || !strings.Contains(r.stderr, "only root or clihostd's own user") {
		t.Errorf("open as a socket group member: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.ctlAs(t, agent, "open", "--print")
	link := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.Contains(link, "/login?code=") {
		t.Fatalf("open as the daemon's user: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	resp, err := client.Get(link) // the login page, which refreshes to the status page
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	origin, _, _ := strings.Cut(link, "/login?")
	if resp, err = client.Get(origin + "/"); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "id@1") ||
		!(strings.Contains(page, "in a user namespace") || strings.Contains(page, "UNAVAILABLE")) {
		t.Errorf("the page on an unprivileged daemon: %d\n%s", resp.StatusCode, body)
	}
}

// TestStatusPageOpenedOnDesktop runs `clihostctl open` as on a desktop (xdg-open is a script that
// records what it is given) and opens what xdg-open got in a real headless chromium: it is not the
// login link (every local user reads xdg-open's and the browser's argv in /proc and could redeem
// the one-time code first) but a private file:// page, and the browser still lands on the status
// page, logged in: the navigation began at a file:// page (cross-site), so the login must not
// rely on a redirect carrying the SameSite=Strict cookie.
func TestStatusPageOpenedOnDesktop(t *testing.T) {
	ctx := browser(t)
	d := startDaemon(t, t.TempDir(), "--bundles", hostileBundle(t), "--no-catalog")
	shim, got := t.TempDir(), filepath.Join(t.TempDir(), "xdg-open.arg")
	script := "#!/bin/sh\nprintf %s \"$1\" > " + got + "\n"
	if err := os.WriteFile(filepath.Join(shim, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", shim+":"+os.Getenv("PATH"))
	t.Setenv("DISPLAY", ":99")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	if r := d.ctl(t, "open"); r.code != 0 || !strings.Contains(r.stderr, "opened") {
		t.Fatalf("open: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	arg, err := os.ReadFile(got)
	if err != nil || strings.Contains(string(arg), "code=") || !strings.HasPrefix(string(arg), "file:///") {
		t.Fatalf("xdg-open got %q (%v): the one-time code is in a command line", arg, err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(string(arg)), chromedp.Sleep(2*time.Second), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	if body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(body, "Recent calls") {
		t.Errorf("the browser did not land on the status page:\n%s", body)
	}
}
