package main

import (
	"fmt"
	"strconv"

	"github.com/clihost/clihost/host"
)

// byteSize is a flag holding a positive size in bytes, written as host.ParseSize reads it: 65536,
// 64KiB, 64MiB, 1GiB (K, M, G and T are binary).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses a size.
func (b *byteSize) Set(v string) error {
	n, err := host.ParseSize(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive size (e.g. 64MiB)", v)
	}
	*b = byteSize(n)
	return nil
}
