package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestStatusBundleExit: status BUNDLE exits 0 when the bundle is ready, 3 when it is not (its
// --json says ready), and status without BUNDLE exits 0 whatever the bundles' state.
func TestStatusBundleExit(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/daemon", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, `{"version":"dev","sandbox":{"state":"ok"},"bundles":{"loaded":2}}`)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		all := map[string]string{
			"jq": `{"key":"jq","install":"ok","setup":"none","auth":"none","ready":true}`,
			"gh": `{"key":"gh","install":"ok","setup":"done","auth":"missing","ready":false,"reason":"not logged in: run clihostctl login gh"}`,
		}
		if b := r.URL.Query().Get("bundle"); b != "" {
			reply(w, 200, "["+all[b]+"]")
			return
		}
		reply(w, 200, "["+all["gh"]+","+all["jq"]+"]")
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args  []string
		code  int
		ready string
	}{
		{[]string{"status", "jq"}, 0, ""},
		{[]string{"status", "gh"}, 3, ""},
		{[]string{"status", "gh", "--json"}, 3, "false"},
		{[]string{"status", "jq", "--json"}, 0, "true"},
		{[]string{"status"}, 0, ""},
	} {
		ios, out, errOut := testStreams("")
		if code := ctl(ios, nil, append([]string{"--socket", sock}, tc.args...)...); code != tc.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errOut)
		}
		if tc.ready != "" {
			var st struct {
				Bundles []map[string]any `json:"bundles"`
			}
			if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Bundles) != 1 || st.Bundles[0]["ready"] != (tc.ready == "true") {
				t.Errorf("%q: %s (%v), want ready %s", tc.args, out, err, tc.ready)
			}
		}
	}
}

// TestUsageErrorNamesSubcommandHelp: a usage mistake points at the help of the command it was made
// with, not the root's.
func TestUsageErrorNamesSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		help string
	}{
		{[]string{"call", "jq"}, "Run 'clihostctl call --help' for usage."},
		{[]string{"lint", "--no-such-flag"}, "Run 'clihostctl lint --help' for usage."},
		{[]string{"token", "create"}, "Run 'clihostctl token create --help' for usage."},
	} {
		code, _, errOut := runCtl(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.help) {
			t.Errorf("%q: exit %d stderr %q, want 2 and %q", tc.args, code, errOut, tc.help)
		}
	}
}
