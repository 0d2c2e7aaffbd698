package daemon

import (
	"testing"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"65536": 65536, "64KiB": 64 << 10, "64K": 64 << 10, "64MiB": 64 << 20, "64M": 64 << 20,
		"1GiB": 1 << 30, "2G": 2 << 30, "100B": 100, " 8 MiB ": 8 << 20, "64 MB": 64 << 20, "1TiB": 1 << 40,
	} {
		var b ByteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "0MiB", "1.5MiB", "99999999999G", "MiB", "5 parsecs"} {
		var b ByteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
}
