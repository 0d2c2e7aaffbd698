package output

import (
	"regexp"
	"strconv"
	"strings"
)

// Class is an error category with its retry and fallback guidance.
type Class struct {
	Category     string
	Retryable    bool
	Fallback     bool
	RetryAfterMS int64
}

// categories are checked in this order (the CLI provider adapter protocol's table): the first whose
// pattern matches wins.
var categories = []struct {
	name            string
	retry, fallback bool
	pattern         *regexp.Regexp
}{
	{"quota", false, true, ci(`insufficient_quota|quota_exceeded|billing_hard_limit|resource_exhausted|credit_limit|usage_limit`)},
	{"rate_limit", true, false, ci(`rate_limit|rate\.limit|rate limit|too_many_requests|too many requests|\b429\b|overloaded|throttl`)},
	{"authentication", false, false, ci(`invalid_api_key|unauthori[sz]ed|unauthenticated|permission_denied|authentication_failed|not_authenticated|auth_required|not logged in|\b401\b|\b403\b`)},
	{"validation", false, false, ci(`invalid_request|malformed|bad_request|validation_error|invalid_parameter|usage_error|\b400\b`)},
	{"network", true, true, ci(`econnreset|etimedout|enotfound|econnrefused|network_error|connection_failed|connection refused|could not resolve host|deadline_exceeded|socket_hang_up`)},
	{"server", true, true, ci(`internal_server_error|service_unavailable|bad_gateway|\b50[0234]\b`)},
	{"timeout", true, true, ci(`timed_out|timed out|timeout|sigterm|sigkill`)},
	{"not_found", false, true, ci(`command_not_found|enoent|not_found|not found|model_not_found|\b404\b`)},
	{"configuration", false, false, ci(`not_configured|missing_config|invalid_config|cli_not_installed|not_installed`)},
}

func ci(p string) *regexp.Regexp { return regexp.MustCompile(`(?i)` + p) }

var retryAfter = regexp.MustCompile(`(?i)(?:retry after|retry-after:?|wait)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?)?`)

// DefaultRetryAfterMS is suggested for a rate limit that names no wait.
const DefaultRetryAfterMS = 1000

// Classify puts an error text in a category and, for rate limits, extracts the suggested wait.
func Classify(text string) Class {
	for _, c := range categories {
		if c.pattern.MatchString(text) {
			cl := Class{Category: c.name, Retryable: c.retry, Fallback: c.fallback}
			if c.name == "rate_limit" {
				cl.RetryAfterMS = DefaultRetryAfterMS
				if m := retryAfter.FindStringSubmatch(text); m != nil {
					cl.RetryAfterMS = toMS(m[1], m[2])
				}
			}
			return cl
		}
	}
	return Class{Category: "unknown", Fallback: true}
}

func toMS(num, unit string) int64 {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return DefaultRetryAfterMS
	}
	switch u := strings.ToLower(unit); {
	case strings.HasPrefix(u, "ms"), strings.HasPrefix(u, "milli"):
		return int64(f)
	case strings.HasPrefix(u, "m"):
		return int64(f * 60000)
	}
	return int64(f * 1000)
}

// ansi matches CSI sequences, OSC sequences (ended by BEL or ST) and two-byte escapes (including
// keypad modes and cursor save/restore).
var ansi = regexp.MustCompile("\x1b(?:\\[[0-?]*[ -/]*[@-~]|\\][^\x07\x1b]*(?:\x07|\x1b\\\\)|[@-Z\\\\-_=>78c])")

// StripANSI removes terminal escape sequences (colours, cursor movement, titles).
func StripANSI(s string) string {
	if !strings.ContainsRune(s, 0x1b) {
		return s
	}
	return ansi.ReplaceAllString(s, "")
}
