// Package setup runs a bundle's post-install setup pipeline (AIP-29 §Setup): ordered steps of kind
// cmd, prompt, external and oauth, each recorded in a ledger once done, per Scope (bundle id@major,
// workspace, user).
//
// The ledger (store bucket "setup", one record per scope) holds only which steps are done and when;
// every value a step captures lives in the encrypted secret store (store.Secrets) under the scope,
// with these names:
//
//	input/<step-id>  the value a prompt, external or oauth step captured (for ${input.<step-id>})
//	env/<NAME>       a value persisted with persist.env, injected at call time (PersistedEnv)
//	secret/<slug>    a value persisted with persist.secret_slug, or an oauth step's access token (Secret)
//	oauth/<slug>     an oauth step's grant: refresh token and expiry (FreshSecret)
//
// Commands (cmd steps, skip_if, select options, persist.cmd) run without a shell through package
// runner, and may only run the bundle's own bin (lifecycle.Env.Command). Their words may hold these
// placeholders, each substituted as one whole word after splitting, never re-split:
//
//	${value}            the step's captured value (persist.cmd only)
//	${input.<step-id>}  an earlier prompt, external or oauth step's value
//	${secrets.<slug>}   a value stored under secret/<slug> by an earlier step
//
// External steps get a single-use loopback callback URL; a step's url carries it where it says
// ${callback_url} (query-escaped), else as a redirect_uri query parameter. Oauth steps drive the
// OAuth 2.0 flow their oauth block declares (oauth.go): authorization code with PKCE, redirected to
// a single-use loopback callback, or the device authorization grant.
//
// Captured values never appear in errors, the ledger or StepStatus; stderr excerpts in errors have
// sensitive substituted values redacted.
package setup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/store"
)

// Default timeouts, used when the manifest gives none.
const (
	DefaultCmdTimeout      = 60 * time.Second  // cmd steps and persist.cmd
	DefaultSkipIfTimeout   = 5 * time.Second   // skip_if.cmd
	DefaultOptionsTimeout  = 30 * time.Second  // options.cmd
	DefaultCallbackTimeout = 600 * time.Second // external and oauth callbacks
	DefaultCallbackParam   = "code"            // the query parameter a callback carries
)

// Secret-store name prefixes (see the package comment).
const (
	prefixInput  = "input/"
	prefixEnv    = "env/"
	prefixSecret = "secret/"
)

// Choice is one option of a select (or boolean) prompt.
type Choice struct{ Value, Label string }

// Answerer is the surface that talks to the person: a terminal (clihostctl setup), or answers given
// up front. Headless callers pass a nil Answerer: prompt, external and oauth steps then stay
// pending (setup_required) unless RunOptions.Values answers them.
type Answerer interface {
	// Ask asks a text, select, boolean or secret prompt. choices lists the options of a select
	// (and "true"/"false" for a boolean). An empty answer takes the step's default. A secret
	// answer must not be echoed.
	Ask(ctx context.Context, step manifest.SetupStep, choices []Choice) (string, error)
	// Visit shows or opens url for an external or oauth step. The engine waits on its callback
	// server meanwhile, and cancels ctx once the callback arrived: Visit may return at once, or
	// block until ctx is done. A surface that collects a pasted value delivers it by requesting the
	// callback URL itself (with the value as the callback parameter).
	Visit(ctx context.Context, step manifest.SetupStep, url string) error
}

// Engine runs setup pipelines against a store.
type Engine struct {
	Store   *store.Store
	Secrets *store.Secrets
	// Now is the clock for ledger timestamps; nil means time.Now.
	Now func() time.Time
	// CallbackHost is the loopback address callback servers listen on; "" means 127.0.0.1.
	CallbackHost string

	refreshes flights // the oauth refreshes in progress: one per scope's slug, so a rotated refresh token is used once
}

// StepStatus is a step as the ledger sees it. It never carries a value.
type StepStatus struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Description string    `json:"description,omitempty"`
	Done        bool      `json:"done"`
	DoneAt      time.Time `json:"done_at,omitzero"`
	Skipped     bool      `json:"skipped,omitempty"` // done because skip_if matched
}

// RunOptions tune Run.
type RunOptions struct {
	// Values answers steps by id (--value STEP=VALUE): prompts, external and oauth steps.
	Values map[string]string
	// Force re-runs steps that are already done.
	Force bool
	// Only runs just these steps (done or not), in manifest order.
	Only []string
	// CallbackUIDs, when set, are the only users whose connections the loopback callback servers
	// of external and oauth steps answer (the user running setup, whose browser follows the
	// redirect): another local user who learnt a callback URL and its state cannot answer in the
	// person's place. Empty answers any.
	CallbackUIDs []int
}

// StepError is a setup failure (Code errcode.SetupFailed) or a step that needs an answer (errcode.SetupRequired).
type StepError struct {
	StepID  string
	Code    errcode.Code
	Message string
	Hint    string
	Pending []string // errcode.SetupRequired: the steps still to do, in order
	Err     error    // the cause, when there is one
}

func (e *StepError) Error() string {
	return fmt.Sprintf("%s: step %q: %s", e.Code, e.StepID, e.Message)
}

func (e *StepError) Unwrap() error { return e.Err }

// ledger is the setup bucket's record for one scope.
type ledger struct {
	Steps map[string]ledgerEntry `json:"steps"`
}

type ledgerEntry struct {
	DoneAt  time.Time `json:"done_at"`
	Skipped bool      `json:"skipped,omitempty"`
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

// ledger reads s's ledger (empty when none).
func (e *Engine) ledger(b *manifest.Bundle, s lifecycle.Scope) (ledger, error) {
	if err := s.Validate(b); err != nil {
		return ledger{}, fmt.Errorf("setup: %w", err)
	}
	var l ledger
	if _, _, err := e.Store.Get(store.BucketSetup, s.Key(), &l); err != nil {
		return ledger{}, fmt.Errorf("setup: %s: %w", b.Key(), err)
	}
	return l, nil
}

// markDone records step id as done, in one store transaction.
func (e *Engine) markDone(s lifecycle.Scope, id string, skipped bool) error {
	entry := ledgerEntry{DoneAt: e.now(), Skipped: skipped}
	_, err := e.Store.Update(store.BucketSetup, s.Key(), func(cur store.Record) (any, error) {
		var l ledger
		if cur.Version > 0 {
			if err := json.Unmarshal(cur.Data, &l); err != nil {
				return nil, fmt.Errorf("decode setup ledger: %w", err)
			}
		}
		if l.Steps == nil {
			l.Steps = map[string]ledgerEntry{}
		}
		l.Steps[id] = entry
		return l, nil
	})
	if err != nil {
		return fmt.Errorf("setup: %s: record step %q: %w", s.Bundle, id, err)
	}
	return nil
}

// Status lists b's setup steps in order with their ledger state.
func (e *Engine) Status(b *manifest.Bundle, s lifecycle.Scope) ([]StepStatus, error) {
	l, err := e.ledger(b, s)
	if err != nil {
		return nil, err
	}
	out := make([]StepStatus, 0, len(b.CLI.Setup))
	for _, st := range b.CLI.Setup {
		ent, done := l.Steps[st.ID]
		out = append(out, StepStatus{ID: st.ID, Kind: st.Kind, Description: st.Description,
			Done: done, DoneAt: ent.DoneAt, Skipped: ent.Skipped})
	}
	return out, nil
}

// Pending returns the steps not done yet, in order. Empty means setup is complete.
func (e *Engine) Pending(b *manifest.Bundle, s lifecycle.Scope) ([]manifest.SetupStep, error) {
	l, err := e.ledger(b, s)
	if err != nil {
		return nil, err
	}
	var out []manifest.SetupStep
	for _, st := range b.CLI.Setup {
		if _, done := l.Steps[st.ID]; !done {
			out = append(out, st)
		}
	}
	return out, nil
}

// secrets returns the secret store, or an error saying none is configured.
func (e *Engine) secrets() (*store.Secrets, error) {
	if e.Secrets == nil {
		return nil, errors.New("setup: no secret store configured (Engine.Secrets)")
	}
	return e.Secrets, nil
}

// getSecret reads name under s; ok is false when absent.
func (e *Engine) getSecret(s lifecycle.Scope, name string) (string, bool, error) {
	x, err := e.secrets()
	if err != nil {
		return "", false, err
	}
	v, ok, err := x.Get(s.Key(), name)
	if err != nil {
		return "", false, fmt.Errorf("setup: %w", err)
	}
	return v, ok, nil
}

// putSecret seals value as name under s.
func (e *Engine) putSecret(s lifecycle.Scope, name, value string) error {
	x, err := e.secrets()
	if err != nil {
		return err
	}
	if err := x.Put(s.Key(), name, value); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// PersistedEnv returns the variables b's steps persisted with persist.env for s, to inject into
// the CLI's environment at call time. Variables not captured yet are absent.
func (e *Engine) PersistedEnv(b *manifest.Bundle, s lifecycle.Scope) (map[string]string, error) {
	if err := s.Validate(b); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	out := map[string]string{}
	for _, st := range b.CLI.Setup {
		if st.Persist == nil || st.Persist.Env == "" {
			continue
		}
		v, ok, err := e.getSecret(s, prefixEnv+st.Persist.Env)
		if err != nil {
			return nil, err
		}
		if ok {
			out[st.Persist.Env] = v
		}
	}
	return out, nil
}

// Secret returns the value stored for slug under s by persist.secret_slug or an oauth step.
func (e *Engine) Secret(s lifecycle.Scope, slug string) (string, bool, error) {
	return e.getSecret(s, prefixSecret+slug)
}

// Reset forgets s's setup: the ledger record first (one transaction, so every step is pending
// again even if the rest is interrupted), then the captured inputs, the persisted env values and
// the secret slugs b's steps declare.
func (e *Engine) Reset(b *manifest.Bundle, s lifecycle.Scope) error {
	if err := s.Validate(b); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if _, err := e.Store.Update(store.BucketSetup, s.Key(), func(store.Record) (any, error) { return nil, nil }); err != nil {
		return fmt.Errorf("setup: reset %s: %w", b.Key(), err)
	}
	if e.Secrets == nil {
		return nil
	}
	names, err := e.Secrets.Names(s.Key())
	if err != nil {
		return fmt.Errorf("setup: reset %s: %w", b.Key(), err)
	}
	for _, n := range names {
		slug, isSlug := strings.CutPrefix(n, prefixSecret)
		if grant, isGrant := strings.CutPrefix(n, prefixOAuth); isGrant {
			slug, isSlug = grant, true
		}
		if !strings.HasPrefix(n, prefixInput) && !strings.HasPrefix(n, prefixEnv) && !(isSlug && declaresSlug(b, slug)) {
			continue // not setup's to delete
		}
		if err := e.Secrets.Delete(s.Key(), n); err != nil {
			return fmt.Errorf("setup: reset %s: %w", b.Key(), err)
		}
	}
	return nil
}

// declaresSlug reports whether one of b's steps writes secret slug.
func declaresSlug(b *manifest.Bundle, slug string) bool {
	for _, st := range b.CLI.Setup {
		if st.Kind == manifest.StepOAuth && st.SecretSlug == slug || st.Persist != nil && st.Persist.SecretSlug == slug {
			return true
		}
	}
	return false
}
