package agenttoken

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Kind is why a request's bearer token was accepted or refused.
type Kind int

// The outcomes of Check.
const (
	OK         Kind = iota // a token of the store
	NoToken                // no Authorization header, or an empty token
	NotBearer              // an Authorization header of another scheme
	WrongToken             // a bearer token that is none of the store's (mistyped, another server's)
	Revoked                // an agent token that was revoked
)

// Reason is the outcome of Check: its kind and, for a revoked token, whose it was and when.
type Reason struct {
	Kind    Kind
	Agent   string    // Revoked: the token's name
	Revoked time.Time // Revoked: when
}

// Description says what was wrong, for people: it never holds the token. It has no double quote
// or backslash, so it fits an RFC 6750 error_description as it is.
func (r Reason) Description() string {
	switch r.Kind {
	case OK:
		return "accepted"
	case NoToken:
		return "no bearer token: send the header 'Authorization: Bearer <token>'"
	case NotBearer:
		return "the Authorization header is not a bearer token: send 'Authorization: Bearer <token>'"
	case Revoked:
		return fmt.Sprintf("agent token %s was revoked on %s: ask the operator for a new one (clihostctl token create NAME)",
			r.Agent, r.Revoked.UTC().Format(time.RFC3339))
	default:
		return "the bearer token is not a token of this server (mistyped, cut short, or another server's)"
	}
}

// revoked is a token revoked by Revoke: its name and when.
type revoked struct {
	name string
	at   time.Time
}

// Check says which token an Authorization header carries ("Bearer TOKEN", the scheme in any
// case), or why it is refused. Every token is compared in constant time, whichever matches; a
// token that matches none is looked up, by its SHA-256, among the revoked ones.
func (s *Store) Check(header string) (string, Reason) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", Reason{Kind: NoToken}
	}
	scheme, got, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", Reason{Kind: NotBearer}
	}
	if got = strings.TrimSpace(got); got == "" {
		return "", Reason{Kind: NoToken}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := ""
	for name, tok := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(got), []byte(tok)) == 1 {
			found = name
		}
	}
	if found != "" {
		return found, Reason{Kind: OK}
	}
	if r, ok := s.revoked[digest(got)]; ok {
		return "", Reason{Kind: Revoked, Agent: r.name, Revoked: r.at}
	}
	return "", Reason{Kind: WrongToken}
}

// Refuse answers 401 for reason: the challenge of RFC 6750 (realm, error="invalid_token" and the
// reason as error_description, so that a client can show it instead of starting an OAuth flow)
// and, as the body that clients print, the same reason followed by hint (how to get a token; no
// double quotes or backslashes).
func Refuse(w http.ResponseWriter, realm string, reason Reason, hint string) {
	desc := reason.Description() + "; " + hint
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error="invalid_token", error_description="%s"`, realm, quotable(desc)))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, "%s: %s\n", realm, desc)
}

// quotable keeps the characters RFC 6750 allows in error_description (%x20-21 / %x23-5B /
// %x5D-7E), replacing the others with a space.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, s)
}

// digest is a token's SHA-256 in hex: what the revoked list keeps (never the token).
func digest(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// revokedFile lists the revoked tokens' digests, one "DIGEST NAME TIME" a line; its name is not a
// valid token name, so Open never takes it for a token.
func (s *Store) revokedFile() string { return filepath.Join(s.dir(), ".revoked") }

// remember adds tok, agent name's token being revoked, to the revoked list (in memory, and on
// disk, mode 0600, when it can). The caller holds s.mu.
func (s *Store) remember(name, tok string) error {
	at := time.Now().UTC().Truncate(time.Second)
	s.revoked[digest(tok)] = revoked{name: name, at: at}
	// O_NOFOLLOW: a symlink planted as the list is refused, not appended through.
	f, err := os.OpenFile(s.revokedFile(), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		_, err = fmt.Fprintf(f, "%s %s %s\n", digest(tok), name, at.Format(time.RFC3339))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("revoke %s: the token is revoked, but not recorded in %s (its refusals will say it is unknown): %w", name, s.revokedFile(), err)
	}
	return nil
}

// readRevoked reads the revoked list; a missing file is an empty list, a line it cannot read is
// skipped (the list only sharpens a refusal's reason: it never admits anything).
func readRevoked(path string) (map[string]revoked, error) {
	out := map[string]revoked{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent tokens: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		at, _ := time.Parse(time.RFC3339, fields[2])
		out[fields[0]] = revoked{name: fields[1], at: at}
	}
	return out, sc.Err()
}
