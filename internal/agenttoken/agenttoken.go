// Package agenttoken keeps the bearer tokens of clihostd's MCP endpoints: the default one
// (<state>/token, made at first start) and named ones an operator makes per agent
// (<state>/tokens/NAME), so that approval rules and the audit log can tell agents apart.
package agenttoken

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Default is the name of the token in <state>/token.
const Default = "default"

// validName is what a token name may be: it appears in policy files, audit lines and file names.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Info describes one token (never its value).
type Info struct {
	Name    string    `json:"name"`
	File    string    `json:"file"`
	Created time.Time `json:"created"`
}

// Store holds the tokens, read at Open and changed by Create and Revoke.
type Store struct {
	state string

	mu      sync.RWMutex
	tokens  map[string]string  // name → token
	revoked map[string]revoked // SHA-256 (hex) of a revoked token → which
}

// Open reads the tokens of state directory dir, making the default token at first start. A
// token file readable by group or others, or too short, is refused.
func Open(dir string) (_ *Store, err error) {
	s := &Store{state: dir, tokens: map[string]string{}}
	if s.revoked, err = readRevoked(s.revokedFile()); err != nil {
		return nil, err
	}
	tok, err := load(filepath.Join(dir, "token"), true)
	if err != nil {
		return nil, err
	}
	s.tokens[Default] = tok
	entries, err := os.ReadDir(s.dir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent tokens: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !validName.MatchString(name) || name == Default {
			continue // not ours (an editor's backup, a .tmp): never a token
		}
		if s.tokens[name], err = load(filepath.Join(s.dir(), name), false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Store) dir() string { return filepath.Join(s.state, "tokens") }

// File is the file of the token name.
func (s *Store) File(name string) string {
	if name == Default {
		return filepath.Join(s.state, "token")
	}
	return filepath.Join(s.dir(), name)
}

// Token returns the value of the token name.
func (s *Store) Token(name string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tokens[name]
	return t, ok
}

// Match returns the name of the token an Authorization header carries ("Bearer TOKEN"). Every
// token is compared in constant time, whichever matches.
func (s *Store) Match(header string) (string, bool) {
	name, r := s.Check(header)
	return name, r.Kind == OK
}

// List describes the tokens, by name.
func (s *Store) List() []Info {
	s.mu.RLock()
	names := make([]string, 0, len(s.tokens))
	for n := range s.tokens {
		names = append(names, n)
	}
	s.mu.RUnlock()
	slices.Sort(names)
	out := make([]Info, 0, len(names))
	for _, n := range names {
		info := Info{Name: n, File: s.File(n)}
		if st, err := os.Stat(info.File); err == nil {
			info.Created = st.ModTime()
		}
		out = append(out, info)
	}
	return out
}

// Create makes a token for agent name and returns it.
func (s *Store) Create(name string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("token name %q: use 1-64 lower-case letters, digits, - and _, starting with a letter or digit", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tokens[name]; ok {
		return "", fmt.Errorf("a token named %s exists; revoke it first to make a new one", name)
	}
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		return "", fmt.Errorf("agent tokens: %w", err)
	}
	tok, err := write(filepath.Join(s.dir(), name))
	if err != nil {
		return "", err
	}
	s.tokens[name] = tok
	return tok, nil
}

// Revoke deletes the token name; requests carrying it are refused from now on. The default token
// cannot be revoked (delete <state>/token and restart to replace it).
func (s *Store) Revoke(name string) error {
	if name == Default {
		return errors.New("the default token cannot be revoked: stop clihostd, delete its token file and start it again to replace it")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tokens[name]; !ok {
		return fmt.Errorf("no token named %q", name)
	}
	// The token goes first: a revoked list that cannot be written (it only sharpens refusals'
	// reasons) must not keep it valid.
	tok := s.tokens[name]
	delete(s.tokens, name)
	if err := os.Remove(filepath.Join(s.dir(), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("revoke %s: %w", name, err)
	}
	return s.remember(name, tok)
}

// load reads a token file; create makes it when it does not exist. A file owned by another user
// than root or this process's is refused: whoever wrote it knows the token.
func load(path string, create bool) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) && create {
		return write(path)
	}
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := checkFile(path, st); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < 32 {
		return "", fmt.Errorf("token file %s is too short; delete it to make a new one", path)
	}
	return tok, nil
}

// checkFile refuses a token file (st, of the open file) that is not a regular file, that group or
// others may read, or that another user than root or this process's owns.
func checkFile(path string, st os.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("token file %s is not a regular file; delete it to make a new one", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("token file %s is readable by others (mode %v); chmod 600 it or delete it to make a new one", path, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("token file %s is owned by uid %d, not by this user or root: whoever wrote it knows the token; delete it to make a new one", path, sys.Uid)
	}
	return nil
}

// writeNew writes data to a new file at path, mode 0600, replacing what is there (a crash's
// leftover, or a file or link someone planted: never written through, so never read by them).
func writeNew(path string, data []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write makes a token (32 random bytes, hex) in path, mode 0600, atomically.
func write(path string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	tmp := path + ".tmp"
	if err := writeNew(tmp, []byte(tok+"\n")); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return tok, nil
}
