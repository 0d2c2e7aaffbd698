package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// loadToken reads the MCP bearer token, creating it (32 random bytes, hex, mode 0600) at first
// start. A token file readable by others is refused.
func loadToken(path string) (string, error) {
	if data, err := os.ReadFile(path); err == nil {
		st, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		if st.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("token file %s is readable by others (mode %v); chmod 600 it or delete it to make a new one", path, st.Mode().Perm())
		}
		tok := strings.TrimSpace(string(data))
		if len(tok) < 32 {
			return "", fmt.Errorf("token file %s is too short; delete it to make a new one", path)
		}
		return tok, nil
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("token file: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return tok, nil
}
