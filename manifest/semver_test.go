package manifest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// TestRangeMatchesNodeSemver checks ParseRange/Contains against node-semver 7.8.6's answers for the
// same 50 (range, version) pairs (research/aip.md §8).
func TestRangeMatchesNodeSemver(t *testing.T) {
	f, err := os.Open("testdata/semver_npm_oracle_node-semver-7.8.6.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var row [3]string
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		n++
		rng, ver, want := row[0], row[1], row[2]
		r, err := ParseRange(rng)
		if want == "badrange" {
			if err == nil {
				t.Errorf("ParseRange(%q) accepted a range npm rejects", rng)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRange(%q): %v", rng, err)
			continue
		}
		v, err := semver.StrictNewVersion(ver)
		if err != nil {
			t.Fatalf("oracle version %q: %v", ver, err)
		}
		if got := r.Contains(v); (got && want != "true") || (!got && want != "false") {
			t.Errorf("%q contains %q = %v, node-semver says %s", rng, ver, got, want)
		}
	}
	if n != 50 {
		t.Fatalf("read %d oracle rows, want 50", n)
	}
}

func TestNormalizeVersion(t *testing.T) {
	cases := map[string]string{
		"2.40.1":                 "2.40.1",
		"v1.30.2":                "1.30.2",
		"1.6":                    "1.6.0",
		"2.4.0+dfsg1":            "2.4.0",
		"5.1.6-0+deb12u1":        "5.1.6",
		"6.1.1-3ubuntu5":         "6.1.1",
		"4.4.2-0ubuntu0.22.04.1": "4.4.2",
		"7.0.2-static":           "7.0.2",
		"2024.08.06":             "2024.8.6",
		"2.45.1.windows.1":       "2.45.1",
		"1.5-1-a5b5cbe":          "1.5.0",
		"2.45.0-beta.1":          "2.45.0-beta.1",
		"3.0.0-rc.1":             "3.0.0-rc.1",
		"1:2.39.5-0+deb12u2":     "2.39.5",
		"3.14.4+g81c902a":        "3.14.4",
		"14":                     "14.0.0",
	}
	for in, want := range cases {
		v, err := NormalizeVersion(in)
		if err != nil {
			t.Errorf("NormalizeVersion(%q): %v", in, err)
			continue
		}
		if v.String() != want {
			t.Errorf("NormalizeVersion(%q) = %s, want %s", in, v, want)
		}
	}
	for _, bad := range []string{"DEV", "N-116000-g1234abcd", "", "99999999999999999999999.1"} {
		if v, err := NormalizeVersion(bad); err == nil {
			t.Errorf("NormalizeVersion(%q) = %s, want an error", bad, v)
		}
	}
}

// TestDistroVersionsSatisfyRanges is the research's real-output matrix: after normalisation the
// distro builds satisfy the plain ranges that npm alone would refuse.
func TestDistroVersionsSatisfyRanges(t *testing.T) {
	cases := []struct {
		rng, ver string
		want     bool
	}{
		{">=4.4", "6.1.1-3ubuntu5", true},
		{">=4.4", "5.1.6-0+deb12u1", true},
		{">=4.4", "7.1", true},
		{">=2.40 <3", "2.4.0+dfsg1", false},
		{">=1.28 <1.32", "v1.30.2", true},
		{">=2024.1.1", "2024.08.06", true},
		{">=2.30", "2.45.1.windows.1", true},
		{">=1.6", "1.6", true},
		{">=1.6", "1.5-1-a5b5cbe", false},
		{">=460", "458.0.1", false},
		{"", "1.0.0", true},
		{">=2.40 <3", "3.0.0-rc.1", false},
	}
	for _, c := range cases {
		r, err := ParseRange(c.rng)
		if err != nil {
			t.Fatal(err)
		}
		v, err := NormalizeVersion(c.ver)
		if err != nil {
			t.Fatalf("%q: %v", c.ver, err)
		}
		if got := r.Contains(v); got != c.want {
			t.Errorf("%q contains %q (%s) = %v, want %v", c.rng, c.ver, v, got, c.want)
		}
	}
}

func TestISODuration(t *testing.T) {
	good := map[string]string{"PT24H": "24h0m0s", "P1D": "24h0m0s", "P1W": "168h0m0s", "PT0.5S": "500ms", "P1DT12H": "36h0m0s", "PT30M": "30m0s", "P1Y": "8760h0m0s", "P1M": "720h0m0s"}
	for in, want := range good {
		d, err := ParseISODuration(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseISODuration(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"P", "PT", "24h", "PT24", "P1DT", "PT1H1H", "PT1M1H", "P1.5D", "P1W1D", "PTfoo", "-PT1H", "P1H", ""} {
		if d, err := ParseISODuration(bad); err == nil {
			t.Errorf("ParseISODuration(%q) = %v, want an error", bad, d)
		}
	}
}
