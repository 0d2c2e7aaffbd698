//go:build linux && !(amd64 || arm64)

package seccomp

import "golang.org/x/sys/unix"

// Program returns ErrUnsupported on this platform.
func Program(opts Options) ([]unix.SockFilter, error) {
	return nil, ErrUnsupported
}
