package setup

import (
	"fmt"
	"slices"

	"github.com/clihost/clihost/lifecycle"
)

// SetSecret seals value in s's slot for slug: the slot persist.secret_slug and oauth steps write,
// which the bundle's SECRETS.md inventory (auth.ref) injects into calls. The value never appears
// in an error.
func (e *Engine) SetSecret(s lifecycle.Scope, slug, value string) error {
	if slug == "" {
		return fmt.Errorf("setup: set secret: empty slug")
	}
	return e.putSecret(s, prefixSecret+slug, value)
}

// DeleteSecret empties s's slot for slug (a slot already empty is not an error).
func (e *Engine) DeleteSecret(s lifecycle.Scope, slug string) error {
	x, err := e.secrets()
	if err != nil {
		return err
	}
	if err := x.Delete(s.Key(), prefixSecret+slug); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// SecretsSet reports which of slugs have a value in s, without opening any.
func (e *Engine) SecretsSet(s lifecycle.Scope, slugs []string) (map[string]bool, error) {
	x, err := e.secrets()
	if err != nil {
		return nil, err
	}
	names, err := x.Names(s.Key())
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	out := make(map[string]bool, len(slugs))
	for _, slug := range slugs {
		out[slug] = slices.Contains(names, prefixSecret+slug)
	}
	return out, nil
}
