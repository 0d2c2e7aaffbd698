package install

import "golang.org/x/sys/unix"

// HoldReplaced makes the install hand each replaced binary's descriptor to hold (on the goroutine
// that would free it) instead of closing it, so the replaced inode stays alive (the window between
// the rename and the free) until the test closes the descriptor. The returned function restores
// the default. A test using it must not run in parallel with other installs in this process.
func HoldReplaced(hold func(fd int)) (restore func()) {
	freeReplaced = func(fd int) error { hold(fd); return nil }
	return func() { freeReplaced = unix.Close }
}

// HoldsReplacedIn reports whether place keeps a replaced binary alive across the rename on dir's
// file system.
func HoldsReplacedIn(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && localFileSystem(uint32(st.Type))
}
