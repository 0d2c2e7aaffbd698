package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// TestGitGlobalConfigIsNeverADevice: the git rule reads the caller's per-user git configs
// (~/.gitconfig) in the daemon, which on a root host is root. A caller whose ~/.gitconfig is a
// symbolic link to a device (/dev/watchdog: opening it arms a reboot) must not get root to open
// that device; the config is read only when it is a regular file. The device here is a private
// copy of /dev/null watched with inotify, and opening it ourselves afterwards is the positive
// control. Before the fix SnapshotGit opened it.
func TestGitGlobalConfigIsNeverADevice(t *testing.T) {
	fx.NeedRoot(t) // mknod
	f := newFixture(t)
	dev := filepath.Join(realTemp(t), "null")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, filepath.Join(f.home, ".gitconfig")); err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, dev, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	opened := func() bool {
		buf := make([]byte, 4096)
		n, _ := unix.Read(in, buf)
		return n > 0
	}
	p := f.compile(f.input(fsSandbox([]string{"./**"}, []string{"./**"}, nil)))
	if err := p.SnapshotGit(0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sweep(p); err != nil {
		t.Fatal(err)
	}
	if opened() {
		t.Fatalf("the git rule opened %s, the device ~/.gitconfig links to", dev)
	}
	fd, err := unix.Open(dev, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("positive control: open %s: %v", dev, err)
	}
	unix.Close(fd)
	if !opened() {
		t.Fatal("positive control: inotify saw no open of the device")
	}
}
