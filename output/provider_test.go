package output

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// providerFixture is one recorded provider run (testdata/providers/*.json), in the shape of the
// CLI provider adapter protocol's fixtures: the raw output and what must be read from it.
type providerFixture struct {
	Provider     string `json:"provider"`
	Scenario     string `json:"scenario"`
	OutputFormat string `json:"outputFormat"`
	RawOutput    struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exitCode"`
	} `json:"rawOutput"`
	Expected struct {
		Content       string `json:"content"`
		IsError       bool   `json:"isError"`
		ErrorCategory string `json:"errorCategory"`
		Usage         *Usage `json:"usage"`
		Estimated     *bool  `json:"estimated"`
		RetryAfterMS  int64  `json:"retryAfterMS"`
	} `json:"expected"`
}

func TestProviderFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/providers/*.json")
	if err != nil || len(files) < 30 {
		t.Fatalf("fixtures: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var fx providerFixture
			if err := json.Unmarshal(data, &fx); err != nil {
				t.Fatal(err)
			}
			r, err := ParseProvider(fx.OutputFormat, []byte(fx.RawOutput.Stdout))
			if err != nil {
				t.Fatal(err)
			}
			if r.Content != fx.Expected.Content {
				t.Errorf("content %q, want %q", r.Content, fx.Expected.Content)
			}
			if u := fx.Expected.Usage; u != nil && r.Usage != *u {
				t.Errorf("usage %+v, want %+v", r.Usage, *u)
			}
			if e := fx.Expected.Estimated; e != nil && r.Estimated != *e {
				t.Errorf("estimated %v, want %v", r.Estimated, *e)
			}
			failed := fx.RawOutput.ExitCode != 0 || r.Error != ""
			if failed != fx.Expected.IsError {
				t.Fatalf("failed=%v (exit %d, error %q), want isError %v", failed, fx.RawOutput.ExitCode, r.Error, fx.Expected.IsError)
			}
			if !failed {
				return
			}
			pe := ClassifyProvider(fx.RawOutput.Stderr+"\n"+fx.RawOutput.Stdout, fx.RawOutput.ExitCode)
			if pe.Category != fx.Expected.ErrorCategory {
				t.Errorf("category %s (from %q), want %s", pe.Category, pe.Message, fx.Expected.ErrorCategory)
			}
			if fx.Expected.RetryAfterMS != 0 && pe.RetryAfterMS != fx.Expected.RetryAfterMS {
				t.Errorf("retry after %d ms, want %d", pe.RetryAfterMS, fx.Expected.RetryAfterMS)
			}
		})
	}
}

// TestProviderCategoriesTable checks every pattern the protocol lists, written inside a sentence,
// against its category and the category's retry and fallback answers.
func TestProviderCategoriesTable(t *testing.T) {
	patterns := map[string][]string{
		CategoryQuota:          {"insufficient_quota", "quota_exceeded", "billing_hard_limit", "RESOURCE_EXHAUSTED", "credit_limit", "usage_limit"},
		CategoryRateLimit:      {"rate_limit", "rate.limit", "RATE_LIMIT_EXCEEDED", "too_many_requests", "429", "overloaded", "throttled", "throttling"},
		CategoryAuthentication: {"invalid_api_key", "unauthorized", "UNAUTHENTICATED", "PERMISSION_DENIED", "authentication_failed", "not_authenticated", "401", "403"},
		CategoryValidation:     {"invalid_request", "malformed", "bad_request", "validation_error", "invalid_parameter", "400"},
		CategoryNetwork:        {"ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "ECONNREFUSED", "network_error", "connection_failed", "DEADLINE_EXCEEDED", "socket_hang_up"},
		CategoryServer:         {"internal_server_error", "service_unavailable", "bad_gateway", "500", "502", "503", "504"},
		CategoryTimeout:        {"timed_out", "timeout", "SIGTERM", "SIGKILL"},
		CategoryNotFound:       {"command_not_found", "ENOENT", "not_found", "model_not_found", "404"},
		CategoryConfiguration:  {"not_configured", "missing_config", "invalid_config", "cli_not_installed"},
	}
	answers := map[string][2]bool{ // retry, fallback
		CategoryQuota: {false, true}, CategoryRateLimit: {true, false}, CategoryAuthentication: {false, false},
		CategoryValidation: {false, false}, CategoryNetwork: {true, true}, CategoryServer: {true, true},
		CategoryTimeout: {true, true}, CategoryNotFound: {false, true}, CategoryConfiguration: {false, false},
		CategoryUnknown: {false, true},
	}
	for cat, ps := range patterns {
		for _, p := range ps {
			pe := ClassifyProvider("Error: "+p+" occurred", 1)
			if pe.Category != cat {
				t.Errorf("%q: %s, want %s", p, pe.Category, cat)
				continue
			}
			if a := answers[cat]; pe.ShouldRetry != a[0] || pe.ShouldFallback != a[1] {
				t.Errorf("%s: retry %v fallback %v, want %v", cat, pe.ShouldRetry, pe.ShouldFallback, a)
			}
		}
	}
	if pe := ClassifyProvider("Error: something odd occurred", 1); pe.Category != CategoryUnknown || pe.ShouldRetry || !pe.ShouldFallback {
		t.Errorf("unknown: %+v", pe)
	}
	// Order: the first category in the protocol's order wins.
	order := map[string]string{
		"RESOURCE_EXHAUSTED: requests per minute exceeded (429)": CategoryQuota,
		"429 Too Many Requests: insufficient_quota":              CategoryQuota,
		"401 rate limited":                 CategoryRateLimit,
		"504 Gateway Timeout":              CategoryServer,
		"ETIMEDOUT while connecting":       CategoryNetwork,
		"invalid_request: model_not_found": CategoryValidation,
		"Request timed out: 404":           CategoryTimeout,
	}
	for text, want := range order {
		if got := ClassifyProvider(text, 1).Category; got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}

func TestProviderRetryAfter(t *testing.T) {
	cases := map[string]int64{
		"rate_limit: retry after 30 seconds":           30000,
		"rate_limit: retry after 100ms":                100,
		"rate limited, wait 5 seconds":                 5000,
		"429 Too Many Requests":                        DefaultRetryAfterMS,
		"Rate limit reached. Please try again in 1.5s": 1500,
		"overloaded; Retry-After: 2":                   2000,
		"rate limit, retry after 2 minutes":            120000,
		"503 service_unavailable, retry after 3s":      3000,
		"502 bad gateway":                              0,
		"invalid_api_key; retry after 30 seconds":      0, // not retryable: no wait
	}
	for text, want := range cases {
		if got := ClassifyProvider(text, 1).RetryAfterMS; got != want {
			t.Errorf("%q: retry after %d, want %d", text, got, want)
		}
	}
}

func TestClassifyProviderExitCodes(t *testing.T) {
	if pe := ClassifyProvider("", 124); pe.Category != CategoryTimeout || pe.Message != "Exit code: 124" {
		t.Errorf("exit 124: %+v", pe)
	}
	if pe := ClassifyProvider("sh: 1: claude: not here", 127); pe.Category != CategoryNotFound {
		t.Errorf("exit 127: %+v", pe)
	}
	if pe := ClassifyProvider("", 3); pe.Category != CategoryUnknown || !pe.ShouldFallback {
		t.Errorf("exit 3: %+v", pe)
	}
	long := strings.Repeat("é", 2*MaxProviderMessage)
	if pe := ClassifyProvider(long, 1); len([]rune(pe.Message)) != MaxProviderMessage {
		t.Errorf("message is %d characters", len([]rune(pe.Message)))
	}
	// A JSON error on stdout wins over noise around it.
	pe := ClassifyProvider("Loading...\n{\"type\":\"error\",\"message\":\"insufficient_quota\"}\nbye 500", 1)
	if pe.Category != CategoryQuota || pe.Message != "insufficient_quota" {
		t.Errorf("json error: %+v", pe)
	}
}

func TestParseProviderBasics(t *testing.T) {
	if _, err := ParseProvider("xml", nil); err == nil {
		t.Fatal("unknown format accepted")
	}
	r, _ := ParseProvider("text", []byte("\x1b[1mabcdefghi\x1b[0m"))
	if r.Content != "abcdefghi" || r.Usage.OutputTokens != 3 || !r.Estimated {
		t.Fatalf("text: %+v", r)
	}
	for _, in := range []string{"{}", "[]", ""} {
		if r, _ := ParseProvider("json", []byte(in)); r.Content != "" {
			t.Errorf("json %q: %+v", in, r)
		}
	}
	if EstimateTokens("") != 0 || EstimateTokens("abcd") != 1 || EstimateTokens("abcde") != 2 || EstimateTokens("日本語") != 1 {
		t.Fatal("EstimateTokens is not ceil(characters/4)")
	}
}
