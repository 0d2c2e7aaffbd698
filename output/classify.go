package output

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The ten error categories of the CLI provider adapter protocol, in the order Classify checks them.
const (
	CategoryQuota          = "quota"
	CategoryRateLimit      = "rate_limit"
	CategoryAuthentication = "authentication"
	CategoryValidation     = "validation"
	CategoryNetwork        = "network"
	CategoryServer         = "server"
	CategoryTimeout        = "timeout"
	CategoryNotFound       = "not_found"
	CategoryConfiguration  = "configuration"
	CategoryUnknown        = "unknown"
)

// Class is an error category with its retry and fallback guidance.
type Class struct {
	Category     string
	Retryable    bool
	Fallback     bool
	RetryAfterMS int64 // the suggested wait before a retry; 0 when none applies
}

// sep matches the separators providers put between the words of an error code: "rate_limit",
// "rate-limit", "rate.limit", "rate limit" and "ratelimit" are one pattern.
const sep = `[ _.\-]?`

// w joins words with sep.
func w(words ...string) string { return strings.Join(words, sep) }

// categories are checked in this order (the CLI provider adapter protocol's table): the first whose
// pattern matches wins, so "RESOURCE_EXHAUSTED: requests per minute" is quota, not rate_limit, and
// "504 Gateway Timeout" is server, not timeout. Bare status codes are word-bounded.
var categories = []struct {
	name            string
	retry, fallback bool
	pattern         *regexp.Regexp
}{
	{CategoryQuota, false, true, alt(w("insufficient", "quota"), w("quota", "exceeded"), w("billing", "hard", "limit"),
		w("resource", "exhausted"), w("credit", "limit"), w("usage", "limit"))},
	{CategoryRateLimit, true, false, alt(w("rate", "limit"), w("too", "many", "requests"), `\b429\b`, `overloaded`, `throttl`)},
	{CategoryAuthentication, false, false, alt(w("invalid", "api", "key"), `unauthori[sz]ed`, `unauthenticated`, w("permission", "denied"),
		w("authentication", "failed"), w("not", "authenticated"), w("auth", "required"), `not logged in`, `\b401\b`, `\b403\b`)},
	{CategoryValidation, false, false, alt(w("invalid", "request"), `malformed`, w("bad", "request"), w("validation", "error"),
		w("invalid", "parameter"), w("usage", "error"), `\b400\b`)},
	{CategoryNetwork, true, true, alt(`econnreset`, `etimedout`, `enotfound`, `econnrefused`, `eai_again`, `enetunreach`,
		`ehostunreach`, `getaddrinfo`, w("fetch", "failed"), `err_proxy_tunnel`, w("waiting", "for", "network"), w("network", "error"),
		w("connection", "failed"), w("connection", "refused"), w("connection", "reset"), w("connection", "error"),
		`could not resolve host`, w("no", "such", "host"), `\blookup [\w.-]+: `, `error sending request`, `und_err_\w+`, w("deadline", "exceeded"), w("socket", "hang", "up"))},
	{CategoryServer, true, true, alt(w("internal", "server", "error"), w("service", "unavailable"), w("bad", "gateway"), `\b50[0234]\b`)},
	{CategoryTimeout, true, true, alt(w("timed", "out"), `timeout`, `sigterm`, `sigkill`)},
	{CategoryNotFound, false, true, alt(w("command", "not", "found"), `enoent`, w("not", "found"), w("model", "not", "found"), `\b404\b`)},
	{CategoryConfiguration, false, false, alt(w("not", "configured"), w("missing", "config"), w("invalid", "config"),
		w("cli", "not", "installed"), w("not", "installed"))},
}

func alt(ps ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:` + strings.Join(ps, "|") + `)`)
}

// retryAfter finds a suggested wait: "retry after 30 seconds", "Retry-After: 2", "retry_after 100ms",
// "try again in 1.5s", "wait 5 seconds". A number without a unit is seconds.
var retryAfter = regexp.MustCompile(`(?i)(?:retry[ _\-]?after|(?:try again|retry) in|\bwait)\s*:?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s\b|secs?\b|seconds?|m\b|mins?\b|minutes?)?`)

// DefaultRetryAfterMS is suggested for a rate limit that names no wait.
const DefaultRetryAfterMS = 1000

// Classify puts an error text in one of the ten categories, checked in the protocol's order, with
// its retry and fallback guidance. A retryable error that names a wait ("retry after 30 seconds")
// carries it in RetryAfterMS; a rate limit that names none gets DefaultRetryAfterMS.
func Classify(text string) Class { return classifyText(text) }

// classifyText is Classify without the categories named in skip.
func classifyText(text string, skip ...string) Class {
	for _, c := range categories {
		if slices.Contains(skip, c.name) || !c.pattern.MatchString(text) {
			continue
		}
		cl := Class{Category: c.name, Retryable: c.retry, Fallback: c.fallback}
		if c.retry {
			if m := retryAfter.FindStringSubmatch(text); m != nil {
				cl.RetryAfterMS = toMS(m[1], m[2])
			} else if c.name == CategoryRateLimit {
				cl.RetryAfterMS = DefaultRetryAfterMS
			}
		}
		return cl
	}
	return Class{Category: CategoryUnknown, Fallback: true}
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
