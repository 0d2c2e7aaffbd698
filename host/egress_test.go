package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// fetchBundle is a bundle around curl whose egress allows only localhost.
var fetchBundle = map[string]string{
	"fetch/CLI.md": `---
name: Fetch
id: fetch
description: Fetches a URL with curl.
version: 1.0.0
bin: curl
install: [{ method: apt, package: curl }]
version_check: { cmd: "curl --version", parse: 'curl (\d+\.\d+\.\d+)', range: ">=7" }
sandbox:
  network: { egress: [localhost] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  get: ./tools/get/TOOL.md
---
`,
	"fetch/tools/get/TOOL.md": `---
name: Get
id: fetch.get
description: Prints the body at a URL.
version: 1.0.0
inputs: { type: object, required: [url], properties: { url: { type: string } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [--silent, --show-error, --fail, --max-time, "20", "${input.url}"] }
---
`,
}

// TestCallEgressThroughTheProxy calls curl in the sandbox: the host's loopback server is reachable
// only through the call's egress proxy, only for an allowed name, and only when the operator admits
// loopback; every decision is audited under the call's id.
func TestCallEgressThroughTheProxy(t *testing.T) {
	fixture.Need(t, "curl")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello from the host") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portN, _ := strconv.Atoi(port)
	lookup := func(k string) (string, bool) {
		if k == "PATH" {
			return "/usr/bin:/bin", true
		}
		return "", false
	}
	var audit bytes.Buffer
	h, _ := writeBundle(t, fetchBundle, Options{LookupEnv: lookup, Audit: &audit,
		Sandbox: SandboxOptions{AdmitNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, EgressPorts: []int{portN}}})
	b := bundle(t, h, "fetch")
	ws := fixture.Workspace(t)
	call := func(h *Host, url string) Envelope {
		return h.Call(context.Background(), b, "get", js(t, fmt.Sprintf(`{"url": %q}`, url)), Caller{Workspace: ws}, CallOptions{})
	}

	if env := call(h, "http://localhost:"+port+"/"); !env.OK || env.Value != "hello from the host" {
		t.Fatalf("allowed name: %+v %+v", env, env.Error)
	}
	if env := call(h, "http://127.0.0.1:"+port+"/"); env.OK {
		t.Fatalf("an IP literal was let through: %+v", env)
	}
	if env := call(h, "http://example.com/"); env.OK {
		t.Fatalf("a name the bundle does not declare was let through: %+v", env)
	}
	// Without the operator's admission, loopback (like private and metadata addresses) is refused
	// after resolution.
	h2, _ := writeBundle(t, fetchBundle, Options{LookupEnv: lookup, Sandbox: SandboxOptions{EgressPorts: []int{portN}}})
	b = bundle(t, h2, "fetch")
	if env := call(h2, "http://localhost:"+port+"/"); env.OK {
		t.Fatalf("loopback reached without admission: %+v", env)
	}

	var invoked []string
	allowed, refused := 0, 0
	for line := range strings.Lines(audit.String()) {
		var rec struct {
			Type    string
			CallID  string `json:"call_id"`
			Allowed bool
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec.Type {
		case "cli.invoked":
			invoked = append(invoked, rec.CallID)
		case "cli.egress":
			if !strings.HasPrefix(rec.CallID, "c_") {
				t.Errorf("egress decision without a call id: %s", line)
			}
			if rec.Allowed {
				allowed++
			} else {
				refused++
			}
		}
	}
	if len(invoked) != 3 || allowed == 0 || refused < 2 {
		t.Fatalf("audit: %d calls, %d allowed and %d refused egress decisions:\n%s", len(invoked), allowed, refused, audit.String())
	}
	if !strings.Contains(audit.String(), `"call_id":"`+invoked[0]+`","cli_id":"fetch","host":"localhost"`) {
		t.Errorf("the first call's egress decision is not filed under its call id %s:\n%s", invoked[0], audit.String())
	}
}
