package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/store"
)

// stateWithMarker makes a state directory whose state.db holds a meta record the tests look for
// after a restore, and enough records to span several data pages.
func stateWithMarker(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Put(store.BucketMeta, "marker", "before the damage"); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, err := s.Put(store.BucketInstall, "filler-"+strings.Repeat("x", i%50)+"@"+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("p", 200)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// stateDamage are the ways an operator finds a state.db damaged.
var stateDamage = map[string]func(t *testing.T, db string){
	"meta pages overwritten": func(t *testing.T, db string) { fixture.Garble(t, db, 0, 2*int64(os.Getpagesize())) },
	"a data page overwritten": func(t *testing.T, db string) {
		fixture.Garble(t, db, 4*int64(os.Getpagesize()), int64(os.Getpagesize()))
	},
	"all data pages overwritten": func(t *testing.T, db string) {
		fi, _ := os.Stat(db)
		fixture.Garble(t, db, 2*int64(os.Getpagesize()), fi.Size()-2*int64(os.Getpagesize()))
	},
	"zero length": func(t *testing.T, db string) { truncate(t, db, func(int64) int64 { return 0 }) },
	"truncated":   func(t *testing.T, db string) { truncate(t, db, func(n int64) int64 { return n / 3 }) },
	"directory in its place": func(t *testing.T, db string) {
		if err := os.Remove(db); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(db, 0o700); err != nil {
			t.Fatal(err)
		}
	},
}

func truncate(t *testing.T, path string, to func(int64) int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, to(fi.Size())); err != nil {
		t.Fatal(err)
	}
}

// runDaemonToExit runs the built clihostd with args, after wrap (when not nil) changed how, and waits (at most a minute) for it to exit.
func runDaemonToExit(t *testing.T, wrap func(*exec.Cmd), args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.daemon, args...)
	cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "CLIHOST_BUNDLES="}
	if wrap != nil {
		wrap(cmd)
	}
	o, err := fixture.Run(cmd)
	if ctx.Err() != nil {
		t.Fatalf("clihostd %v did not exit within a minute: it started on a damaged state.db\n%s", args, o.Stderr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

// assertRefused: exit 1, a message naming the file and the restore command, no panic or
// goroutine dump, and the file left as it was.
func assertRefused(t *testing.T, r result, db string) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, bad := range []string{"panic:", "goroutine "} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr has %q:\n%s", bad, r.stderr)
		}
	}
	for _, want := range []string{db, "damaged or unreadable", "clihostctl state restore"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

// TestDaemonRefusesDamagedState: the built clihostd, started on each kind of damaged state.db,
// exits 1 with a message naming the file and how to restore it (never a bbolt panic, never an
// empty start), leaves the file as it was, and --check-state fails on it too.
func TestDaemonRefusesDamagedState(t *testing.T) {
	for name, damage := range stateDamage {
		t.Run(name, func(t *testing.T) {
			dir := stateWithMarker(t)
			db := filepath.Join(dir, store.DBFile)
			damage(t, db)
			before := fileSummary(t, db)
			r := runDaemonToExit(t, nil, "--state", dir, "--socket", filepath.Join(dir, "ctl.sock"), "--http", "127.0.0.1:0", "--no-catalog")
			assertRefused(t, r, db)
			if after := fileSummary(t, db); after != before {
				t.Errorf("state.db changed: %s, was %s", after, before)
			}
			assertRefused(t, runDaemonToExit(t, nil, "--check-state", "--state", dir), db)
		})
	}
}

// fileSummary is path's type, size and checksum-free content sample.
func fileSummary(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.IsDir() {
		return "directory"
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().String() + " " + string(raw)
}

// TestStateBackupCorruptRestore: back up a running daemon's state over the control socket, damage
// state.db, see the daemon refuse it, restore (refused while a daemon runs, and from a damaged
// backup), and the daemon starts again with the old records.
func TestStateBackupCorruptRestore(t *testing.T) {
	dir := stateWithMarker(t)
	db := filepath.Join(dir, store.DBFile)
	d := startDaemon(t, dir, "--no-catalog")
	backup := filepath.Join(t.TempDir(), "state.backup")
	if r := d.ctl(t, "state", "backup", backup); r.code != 0 {
		t.Fatalf("state backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup: %v, mode %v; want 0600", err, fi.Mode())
	}
	if r := d.ctl(t, "doctor", "--json"); !strings.Contains(r.stdout, "consistency check passed") {
		t.Errorf("doctor does not report the state database as consistent:\n%s", r.stdout)
	}
	if r := runBin(t, bin.ctl, "", "state", "restore", backup, "--state", dir); r.code != 1 || !strings.Contains(r.stderr, "stop it first") {
		t.Errorf("restore while the daemon runs: exit %d, want 1 with \"stop it first\"\n%s", r.code, r.stderr)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.proc.Wait()

	stateDamage["a data page overwritten"](t, db)
	assertRefused(t, runDaemonToExit(t, nil, "--state", dir, "--socket", filepath.Join(dir, "ctl.sock"), "--http", "127.0.0.1:0", "--no-catalog"), db)

	bad := filepath.Join(t.TempDir(), "bad.backup")
	if err := os.WriteFile(bad, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBin(t, bin.ctl, "", "state", "restore", bad, "--state", dir); r.code != 1 || !strings.Contains(r.stderr, "not usable") {
		t.Errorf("restore from an empty backup: exit %d, want 1 with \"not usable\"\n%s", r.code, r.stderr)
	}
	r := runBin(t, bin.ctl, "", "state", "restore", backup, "--state", dir)
	if r.code != 0 {
		t.Fatalf("state restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	kept, _ := filepath.Glob(db + ".broken-*")
	if len(kept) != 1 {
		t.Fatalf("kept damaged databases: %v, want one state.db.broken-<time>", kept)
	}
	if r := runDaemonToExit(t, nil, "--check-state", "--state", dir); r.code != 0 {
		t.Fatalf("--check-state after restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	d = startDaemon(t, dir, "--no-catalog")
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.proc.Wait()
	s, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var marker string
	if _, ok, err := s.Get(store.BucketMeta, "marker", &marker); err != nil || !ok || marker != "before the damage" {
		t.Errorf("marker after restore = %q, %v, %v; want the record from before the damage", marker, ok, err)
	}
}

// TestDaemonRefusesUnreadableState: a state.db of mode 000, with clihostd running as a non-root
// user (nobody) that owns it, is refused with exit 1 and the restore message, not replaced.
func TestDaemonRefusesUnreadableState(t *testing.T) {
	fixture.NeedRoot(t)
	dir := stateWithMarker(t)
	db := filepath.Join(dir, store.DBFile)
	fixture.Reachable(t, filepath.Dir(dir))
	if err := os.Chmod(filepath.Dir(bin.daemon), 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	for _, p := range []string{dir, db} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0); err != nil {
		t.Fatal(err)
	}
	before := fileSummary(t, db)
	for _, args := range [][]string{
		{"--state", dir, "--socket", filepath.Join(dir, "ctl.sock"), "--http", "127.0.0.1:0", "--no-catalog"},
		{"--check-state", "--state", dir},
	} {
		r := runDaemonToExit(t, func(c *exec.Cmd) {
			c.Dir = "/"
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		}, args...)
		assertRefused(t, r, db)
		if !strings.Contains(r.stderr, "cannot read it") {
			t.Errorf("stderr does not say it cannot read it:\n%s", r.stderr)
		}
	}
	if after := fileSummary(t, db); after != before {
		t.Errorf("state.db changed")
	}
}

// TestDaemonSurvivesStateDamage: state.db damaged on disk while clihostd runs. A call that needs
// state (a bundle with a setup step) fails with the store's message naming the file and the way
// back; the daemon logs the damage once, loudly, never a panic or goroutine dump, and stays up:
// calls that need no state and the control API go on, doctor reports the damage, and nothing
// writes the file any more.
func TestDaemonSurvivesStateDamage(t *testing.T) {
	fixture.Need(t, "echo", "true")
	files := fixture.True()
	files["withsetup/CLI.md"] = strings.Replace(fixture.CLI("echo", "withsetup", "  say: ./tools/say/TOOL.md\n"), "sandbox:",
		`setup:
  - { id: token, kind: prompt, type: secret, prompt: "A token", persist: { env: WS_TOKEN } }
sandbox:`, 1)
	files["withsetup/tools/say/TOOL.md"] = `---
name: Say
id: withsetup.say
description: Says hello.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [hello] }
---
`
	dir := stateWithMarker(t)
	db := filepath.Join(dir, store.DBFile)
	d := startDaemon(t, dir, "--no-catalog", "--bundles", fixture.Write(t, files))
	ws := []string{"--workspace", d.ws}
	stateless := func() {
		t.Helper()
		if r := d.ctl(t, append([]string{"call", "true", "run"}, ws...)...); r.code != 0 {
			t.Fatalf("call true run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	// Positive control: the store answers before the damage.
	stateless()
	if r := d.ctl(t, append([]string{"call", "withsetup", "say"}, ws...)...); r.code != 1 || !strings.Contains(r.stdout, "setup_required") {
		t.Fatalf("call before the damage: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	stateDamage["all data pages overwritten"](t, db)
	for range 2 {
		r := d.ctl(t, append([]string{"call", "withsetup", "say"}, ws...)...)
		for _, want := range []string{db, "damaged or unreadable", "clihostd --check-state", "clihostctl state restore"} {
			if r.code == 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("call that needs state after the damage: exit %d, want an error saying %q\n%s%s", r.code, want, r.stdout, r.stderr)
			}
		}
	}
	after := fileSummary(t, db)
	stateless()
	if r := d.ctl(t, "doctor", "--json"); !strings.Contains(r.stdout, "damaged or unreadable") {
		t.Errorf("doctor does not report the damage:\n%s", r.stdout)
	}
	if r := d.ctl(t, append([]string{"setup", "withsetup", "--value", "token=x"}, ws...)...); r.code == 0 {
		t.Errorf("setup wrote to the damaged state.db: exit 0\n%s", r.stdout)
	}
	if fileSummary(t, db) != after {
		t.Errorf("state.db was written after the damage was found")
	}
	if d.cmd.ProcessState != nil {
		t.Fatalf("clihostd exited: %v", d.cmd.ProcessState)
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.proc.Wait()
	d.log.Drain() // until stderr closes: the log is then complete
	history := d.log.All()
	loud := 0
	for _, l := range history {
		if strings.Contains(l, "STATE DATABASE DAMAGED") {
			loud++
		}
		for _, bad := range []string{"panic:", "goroutine ", "fatal error"} {
			if strings.Contains(l, bad) {
				t.Errorf("clihostd logged %q: %s", bad, l)
			}
		}
	}
	if loud != 1 {
		t.Errorf("clihostd logged the damage %d times, want once:\n%s", loud, strings.Join(history, "\n"))
	}
}

// sealedState makes a state directory whose state.db holds the marker record and one secret
// sealed with its own secrets.key, and returns the directory.
func sealedState(t *testing.T, secret string) string {
	t.Helper()
	dir := stateWithMarker(t)
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x, err := store.OpenSecrets(s, filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Put("scope", "token", secret); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(store.BucketSetup, "scope", "done"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStateRestoreChecksSecretsKey: clihostctl state restore refuses a backup whose secrets were
// sealed with another secrets.key than the state directory's (or while that key file is missing),
// naming both files and the two ways on, and changes nothing; with the matching key file it
// restores and the secret opens; with --force it restores the records without the secrets (and
// setup ledgers), and clihostd's secret store opens on it with the current key. The replaced
// state.db is always kept beside the new one.
func TestStateRestoreChecksSecretsKey(t *testing.T) {
	backupDir := sealedState(t, "from-the-backup")
	backup := filepath.Join(backupDir, store.DBFile)
	target := sealedState(t, "current")
	db, key := filepath.Join(target, store.DBFile), filepath.Join(target, "secrets.key")
	before := fileSummary(t, db)
	restore := func(args ...string) result {
		return runBin(t, bin.ctl, "", append([]string{"state", "restore", backup, "--state", target}, args...)...)
	}

	r := restore()
	for _, want := range []string{"refused, nothing was changed", backup, key, "--force", "secrets.key that was backed up with it", "1 sealed secrets"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("restore under another key: exit %d, want 1 saying %q\n%s", r.code, want, r.stderr)
		}
	}
	if fileSummary(t, db) != before {
		t.Fatal("state.db changed by a refused restore")
	}
	if err := os.Rename(key, key+".away"); err != nil {
		t.Fatal(err)
	}
	if r := restore(); r.code != 1 || !strings.Contains(r.stderr, "does not exist") || !strings.Contains(r.stderr, key) {
		t.Errorf("restore without a key file: exit %d, want 1 naming the missing %s\n%s", r.code, key, r.stderr)
	}
	if fileSummary(t, db) != before {
		t.Fatal("state.db changed by a refused restore")
	}

	// The matching key file: restored, the secret opens, the old state.db kept.
	copyFile(t, filepath.Join(backupDir, "secrets.key"), key, 0o600)
	if r := restore(); r.code != 0 || !strings.Contains(r.stdout, "state.db.replaced-") {
		t.Fatalf("restore with the backup's key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	assertSecret(t, target, "from-the-backup", true)
	kept, _ := filepath.Glob(db + ".replaced-*")
	if len(kept) != 1 || fileSummary(t, kept[0]) != before {
		t.Fatalf("kept: %v, want the replaced state.db as it was", kept)
	}

	// --force under another key: restored without secrets or setup ledgers; the store opens.
	if err := os.Rename(key+".away", key); err != nil {
		t.Fatal(err)
	}
	r = restore("--force")
	if r.code != 0 || !strings.Contains(r.stdout, "its 1 sealed secrets were dropped") {
		t.Fatalf("restore --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	assertSecret(t, target, "", false)
	if kept, _ := filepath.Glob(db + ".replaced-*"); len(kept) != 2 {
		t.Errorf("kept: %v, want both replaced databases", kept)
	}
}

// assertSecret opens dir's store and secrets as clihostd does and checks the marker record, the
// secret (want, present) and that the setup ledger is there exactly when the secret is.
func assertSecret(t *testing.T, dir, want string, present bool) {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var marker string
	if _, ok, err := s.Get(store.BucketMeta, "marker", &marker); err != nil || !ok || marker != "before the damage" {
		t.Errorf("marker = %q, %v, %v", marker, ok, err)
	}
	x, err := store.OpenSecrets(s, filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatalf("the secret store does not open after the restore: %v", err)
	}
	if v, ok, err := x.Get("scope", "token"); err != nil || ok != present || v != want {
		t.Errorf("secret = %q, %v, %v; want %q, %v", v, ok, err, want, present)
	}
	if _, ok, _ := s.Get(store.BucketSetup, "scope", nil); ok != present {
		t.Errorf("setup ledger present = %v, want %v", ok, present)
	}
}
