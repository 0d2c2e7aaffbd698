package store

import (
	"strconv"
	"strings"
)

// Scope keys are netstrings (https://cr.yp.to/proto/netstrings.txt):
// "<decimal length>:<bytes>," per part, so
//
//	ScopeKey("gh@2", "/work/repo", "alice") == "4:gh@2,10:/work/repo,5:alice,"
//
// A netstring is self-delimiting, so the encoding is unambiguous for any
// strings (commas, colons, digits, NUL, invalid UTF-8), and the encoding of
// the bundle alone, ScopePrefix, is a prefix of exactly the keys of that
// bundle: no other bundle's key starts with it.

func appendNetstring(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	b = append(b, s...)
	return append(b, ',')
}

// readNetstring splits one netstring off the front of s.
func readNetstring(s string) (part, rest string, ok bool) {
	colon := strings.IndexByte(s, ':')
	if colon <= 0 || colon > 10 {
		return "", "", false
	}
	digits := s[:colon]
	if len(digits) > 1 && digits[0] == '0' {
		return "", "", false // not canonical
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || digits[0] == '+' || digits[0] == '-' {
		return "", "", false
	}
	body := s[colon+1:]
	if len(body) < n+1 || body[n] != ',' {
		return "", "", false
	}
	return body[:n], body[n+1:], true
}

// ScopeKey is the key of per-(bundle, workspace, user) state (setup, auth,
// secrets). It is unambiguous for any strings, and ScopePrefix(bundle) is a
// prefix of every ScopeKey of that bundle and of no other bundle's.
func ScopeKey(bundle, workspace, user string) string {
	b := make([]byte, 0, len(bundle)+len(workspace)+len(user)+12)
	b = appendNetstring(b, bundle)
	b = appendNetstring(b, workspace)
	b = appendNetstring(b, user)
	return string(b)
}

// ScopePrefix is the common prefix of every ScopeKey of bundle; List a
// bucket with it to walk that bundle's scopes.
func ScopePrefix(bundle string) string {
	return string(appendNetstring(nil, bundle))
}

// ParseScopeKey splits a ScopeKey back into its parts. ok is false when key
// is not exactly a ScopeKey.
func ParseScopeKey(key string) (bundle, workspace, user string, ok bool) {
	var parts [3]string
	rest := key
	for i := range parts {
		if parts[i], rest, ok = readNetstring(rest); !ok {
			return "", "", "", false
		}
	}
	if rest != "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
