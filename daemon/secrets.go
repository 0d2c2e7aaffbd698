package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
)

// maxSecretValue is the longest value SetSecret takes: Linux passes at most 128 KiB per
// environment string (MAX_ARG_STRLEN, NAME=value included); a longer one would make every call
// of the bundle fail to start.
const maxSecretValue = 127 << 10

// SecretList implements control.SecretBackend: the bundle's SECRETS.md slots in the caller's scope
// (its user, a workspace it may use), set or unset; never a value.
func (d *Engine) SecretList(ctx context.Context, req control.ScopeRequest, peer control.Caller) (control.SecretList, error) {
	_, done, aerr := d.admit(ctx, peer)
	if aerr != nil {
		return control.SecretList{}, scopeError(aerr)
	}
	defer done()
	b, s, _, _, herr := d.scopeFor(req, hostCaller(peer))
	if herr != nil {
		return control.SecretList{}, scopeError(herr)
	}
	return d.secretList(b, s)
}

// SetSecret implements control.SecretBackend: it seals the value in the caller's own scope, or
// empties the slot.
func (d *Engine) SetSecret(ctx context.Context, req control.SecretRequest, peer control.Caller) (control.SecretList, error) {
	_, done, aerr := d.admit(ctx, peer)
	if aerr != nil {
		return control.SecretList{}, scopeError(aerr)
	}
	defer done()
	b, s, _, _, herr := d.scopeFor(req.ScopeRequest, hostCaller(peer))
	if herr != nil {
		return control.SecretList{}, scopeError(herr)
	}
	slot, ok := b.SecretSlotFor(req.Name)
	if !ok {
		return control.SecretList{}, fmt.Errorf("%s declares no secret %q; it declares %s", b.ID(), req.Name, slotNames(b))
	}
	var err error
	switch {
	case req.Unset:
		err = d.setup.DeleteSecret(s, slot.Slug)
	case req.Value == "":
		return control.SecretList{}, errors.New("the value is empty; to empty the slot, pass --unset")
	case len(req.Value) > maxSecretValue:
		return control.SecretList{}, fmt.Errorf("the value is %d bytes; an environment variable carries at most %d KiB (Linux's limit per variable, less its name)", len(req.Value), maxSecretValue>>10)
	case strings.ContainsRune(req.Value, 0):
		return control.SecretList{}, errors.New("the value holds a NUL byte, which no environment variable can carry")
	default:
		err = d.setup.SetSecret(s, slot.Slug, req.Value)
	}
	if err != nil {
		return control.SecretList{}, err
	}
	d.log.Info("secret changed", "bundle", b.Key(), "slug", slot.Slug, "user", s.User, "workspace", s.Workspace, "unset", req.Unset)
	return d.secretList(b, s)
}

func (d *Engine) secretList(b *manifest.Bundle, s lifecycle.Scope) (control.SecretList, error) {
	set, err := d.setup.SecretsSet(s, slugs(b))
	if err != nil {
		return control.SecretList{}, err
	}
	out := control.SecretList{Bundle: b.Key(), Workspace: s.Workspace, User: s.User, Secrets: []control.SecretInfo{}}
	for _, slot := range b.Secrets {
		info := control.SecretInfo{Slug: slot.Slug, Name: slot.Name, Description: slot.Description, Kind: slot.Kind,
			Required: slot.Required, Tools: slot.Tools, Set: set[slot.Slug], Env: []string{}}
		for _, v := range slot.Env {
			info.Env = append(info.Env, v.Name)
		}
		out.Secrets = append(out.Secrets, info)
	}
	return out, nil
}

// unsetSecret is the first required secret of b unset in s (false when there is none).
func (d *Engine) unsetSecret(b *manifest.Bundle, s lifecycle.Scope) (manifest.SecretSlot, bool) {
	if len(b.Secrets) == 0 {
		return manifest.SecretSlot{}, false
	}
	set, err := d.setup.SecretsSet(s, slugs(b))
	for _, slot := range b.Secrets {
		if slot.Required && (err != nil || !set[slot.Slug]) {
			return slot, true
		}
	}
	return manifest.SecretSlot{}, false
}

func slugs(b *manifest.Bundle) []string {
	out := make([]string, 0, len(b.Secrets))
	for _, s := range b.Secrets {
		out = append(out, s.Slug)
	}
	return out
}

// slotNames lists b's secrets by their first variable, for an error message.
func slotNames(b *manifest.Bundle) string {
	if len(b.Secrets) == 0 {
		return "none (its CLI.md has no auth.ref)"
	}
	var names []string
	for _, s := range b.Secrets {
		names = append(names, strings.TrimPrefix(secretArg(b, s), b.ID()+" "))
	}
	return strings.Join(names, ", ")
}

// secretArg is what follows "clihostctl secret set": the bundle and the slot's first variable.
func secretArg(b *manifest.Bundle, slot manifest.SecretSlot) string {
	name := slot.Slug
	if len(slot.Env) > 0 {
		name = slot.Env[0].Name
	}
	return b.ID() + " " + name
}
