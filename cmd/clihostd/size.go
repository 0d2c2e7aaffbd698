package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag holding a positive size in bytes, written as a number with an optional
// binary suffix: 65536, 64KiB, 64MiB, 1GiB (K, M and G are read as KiB, MiB and GiB).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses a size.
func (b *byteSize) Set(v string) error {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range []struct {
		suffixes []string
		mult     int64
	}{{[]string{"GiB", "G"}, 1 << 30}, {[]string{"MiB", "M"}, 1 << 20}, {[]string{"KiB", "K"}, 1 << 10}, {[]string{"B"}, 1}} {
		found := false
		for _, s := range u.suffixes {
			if rest, ok := strings.CutSuffix(num, s); ok {
				num, mult, found = strings.TrimSpace(rest), u.mult, true
				break
			}
		}
		if found {
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a positive size (e.g. 64MiB)", v)
	}
	*b = byteSize(n * mult)
	return nil
}
