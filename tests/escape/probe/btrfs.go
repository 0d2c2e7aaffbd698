package main

import (
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// btrfsIocSnapCreate is BTRFS_IOC_SNAP_CREATE, _IOW(0x94, 1, struct btrfs_ioctl_vol_args).
const btrfsIocSnapCreate = 0x50009401

// btrfsSwap DST SRC removes the btrfs subvolume DST (emptying it, then rmdir: an empty subvolume
// needs no capability to go) and snapshots the subvolume SRC in its place (BTRFS_IOC_SNAP_CREATE,
// which the owner of SRC may call), as any tool could in a workspace on btrfs.
func btrfsSwap(args []string) report {
	if r := need(args, 2); r != nil {
		return *r
	}
	if err := os.RemoveAll(args[0]); err != nil {
		return result("remove", err)
	}
	src, err := unix.Open(args[1], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result("open-source", err)
	}
	defer unix.Close(src)
	dst, err := unix.Open(filepath.Dir(args[0]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result("open-parent", err)
	}
	defer unix.Close(dst)
	var a struct {
		fd   int64
		name [4088]byte
	}
	a.fd = int64(src)
	copy(a.name[:], filepath.Base(args[0]))
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(dst), btrfsIocSnapCreate, uintptr(unsafe.Pointer(&a)))
	return result("snapshot", errnoErr(e))
}
