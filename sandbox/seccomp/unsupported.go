//go:build !linux || !(amd64 || arm64)

package seccomp

import "golang.org/x/net/bpf"

// Filter returns ErrUnsupported on this platform.
func Filter(opts Options) ([]bpf.RawInstruction, error) {
	return nil, ErrUnsupported
}

// Install returns ErrUnsupported on this platform.
func Install(opts Options) error {
	return ErrUnsupported
}

// Prepare returns ErrUnsupported on this platform.
func Prepare(opts Options) error {
	return ErrUnsupported
}
