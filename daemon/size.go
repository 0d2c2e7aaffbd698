package daemon

import (
	"fmt"
	"strconv"

	"github.com/clihost/clihost/host"
)

// ByteSize is a flag holding a positive size in bytes, written as host.ParseSize reads it: 65536,
// 64KiB, 64MiB, 1GiB (K, M, G and T are binary).
type ByteSize int64

// String is the size in bytes.
func (b *ByteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses a size.
func (b *ByteSize) Set(v string) error {
	n, err := host.ParseSize(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive size (e.g. 64MiB)", v)
	}
	*b = ByteSize(n)
	return nil
}
