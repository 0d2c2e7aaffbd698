package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/setup"
)

// secretEnv adds to env the variables of b's SECRETS.md inventory (auth.ref) bound to tool t, each
// set from its slot in scope's encrypted store (the slot setup's persist.secret_slug fills, or
// clihostctl secret set), and records the values in sensitive so that nothing the call returns
// carries them. Only the variables the inventory declares are set, only for b's calls; values
// never reach argv. A required slot that is unset refuses the call (setup_required) with the
// command that sets it.
func (h *Host) secretEnv(ctx context.Context, b *manifest.Bundle, t *manifest.ToolEntry, scope lifecycle.Scope, env, sensitive *[]string) *Error {
	if slug, ok := b.UngrantedSecret(t); ok {
		return &Error{Code: errcode.BundleInvalid, Category: "configuration",
			Message: fmt.Sprintf("%s's tool %s names ${secrets.%s}, a secret its SECRETS.md's access.bind does not grant it; nothing was run", b.ID(), t.CommandPath(), slug),
			Hint:    "report it to the bundle's author: grant the tool the secret in access.bind, or remove the reference"}
	}
	for _, slot := range b.Secrets {
		if !slot.BoundTo(t) {
			continue
		}
		value, ok, e := h.slotValue(ctx, b, slot, scope)
		if e != nil {
			return e
		}
		if !ok {
			if slot.Required {
				return secretUnset(b, slot, scope)
			}
			continue
		}
		*sensitive = append(*sensitive, value)
		value = oauthEnvelope(b, slot, value)
		for _, v := range slot.Env {
			x, e := exposed(b, slot, v, value, scope)
			if e != nil {
				return e
			}
			*sensitive = append(*sensitive, x)
			*env = setEnv(*env, v.Name, x)
		}
	}
	return nil
}

// slotValue reads slot's value in scope, refreshed first when an oauth step fills the slot and its
// access token has expired; ok is false when it is unset or the host keeps no store.
func (h *Host) slotValue(ctx context.Context, b *manifest.Bundle, slot manifest.SecretSlot, scope lifecycle.Scope) (string, bool, *Error) {
	if h.opts.Setup == nil {
		return "", false, nil
	}
	v, ok, err := h.opts.Setup.FreshSecret(ctx, b, scope, slot.Slug)
	if se := (*setup.StepError)(nil); errors.As(err, &se) {
		return "", false, secretReadError(b, err) // an expired oauth token whose refresh failed
	}
	if err != nil {
		return "", false, &Error{Code: errcode.Internal, Message: fmt.Sprintf("reading %s's secret %q: %v", b.ID(), slot.Slug, err),
			Hint: "set it again: " + SecretSetCommand(b, slot, scope.Workspace)}
	}
	return v, ok, nil
}

// oauthEnvelope turns the bare access token an oauth setup step stores into AIP-19's oauth value
// ({"accessToken": …}) when the slot it fills is of kind oauth, so that an exposure's field
// accessToken finds it; the refresh token stays sealed beside it, never handed to the CLI. Any
// other value is returned unchanged.
func oauthEnvelope(b *manifest.Bundle, slot manifest.SecretSlot, value string) string {
	if slot.Kind != "oauth" || strings.HasPrefix(strings.TrimSpace(value), "{") || filledBy(b, slot) != "oauth" {
		return value
	}
	out, err := json.Marshal(map[string]string{"accessToken": value})
	if err != nil {
		return value
	}
	return string(out)
}

// filledBy is the kind of the setup step that fills slot (an oauth step's secret_slug, or a
// step's persist.secret_slug), or "" when none does.
func filledBy(b *manifest.Bundle, slot manifest.SecretSlot) string {
	for _, st := range b.CLI.Setup {
		if st.Kind == "oauth" && st.SecretSlug == slot.Slug || st.Persist != nil && st.Persist.SecretSlug == slot.Slug {
			return st.Kind
		}
	}
	return ""
}

// exposed is the value variable v gets: the whole value of an opaque secret, else the field v
// names of the JSON object the value is (oauth: accessToken, keypair: private, …).
func exposed(b *manifest.Bundle, slot manifest.SecretSlot, v manifest.SecretEnv, value string, scope lifecycle.Scope) (string, *Error) {
	if slot.Kind == "opaque" || v.Field == "" {
		return value, nil
	}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber() // a number as written: a float64 would print a long id as 1.2e+18
	if err := dec.Decode(&obj); err == nil {
		switch f := obj[v.Field].(type) {
		case string:
			return f, nil
		case json.Number, bool:
			return fmt.Sprint(f), nil
		}
	}
	return "", &Error{Code: errcode.SetupRequired, Category: "authentication",
		Message: fmt.Sprintf("%s's secret %q is of kind %s, but its value is not a JSON object with a string field %q for %s", b.ID(), slot.Slug, slot.Kind, v.Field, v.Name),
		Hint:    "set it again as that JSON object: " + SecretSetCommand(b, slot, scope.Workspace)}
}

// secretUnset is the refusal of a call whose required secret has no value.
func secretUnset(b *manifest.Bundle, slot manifest.SecretSlot, scope lifecycle.Scope) *Error {
	names := make([]string, 0, len(slot.Env))
	for _, v := range slot.Env {
		names = append(names, v.Name)
	}
	hint := "set it (clihostd keeps it encrypted and passes it to the CLI's environment): " + SecretSetCommand(b, slot, scope.Workspace)
	if filledBy(b, slot) != "" {
		hint = "run the bundle's setup, whose step fills it: clihostctl setup " + b.ID()
		if scope.Workspace != "" {
			hint += " --workspace " + scope.Workspace
		}
		hint += " (or " + SecretSetCommand(b, slot, scope.Workspace) + ")"
	}
	return &Error{Code: errcode.SetupRequired, Category: "authentication",
		Message: fmt.Sprintf("%s needs the secret %q (%s, its %s) and it is not set for this workspace and user", b.ID(), slot.Slug, slot.Name, strings.Join(names, ", ")),
		Hint:    hint}
}

// SecretSetCommand is the clihostctl command that sets slot's value for workspace.
func SecretSetCommand(b *manifest.Bundle, slot manifest.SecretSlot, workspace string) string {
	name := slot.Slug
	if len(slot.Env) > 0 {
		name = slot.Env[0].Name
	}
	cmd := "clihostctl secret set " + b.ID() + " " + name
	if workspace != "" {
		cmd += " --workspace " + workspace
	}
	return cmd
}

// onCommandLine refuses a process whose arguments carry one of values (the SECRETS.md values the
// call received; four characters or longer, as redaction): a command line is world-readable
// (/proc/PID/cmdline, ps -eo args) while the process runs. The argv template put it there
// (${secrets.SLUG}), or a step's output that printed it (${steps.N.output}).
func onCommandLine(b *manifest.Bundle, program string, args, values []string) *Error {
	for _, v := range values {
		if len(v) < minRedacted {
			continue
		}
		for _, a := range args {
			if strings.Contains(a, v) {
				return &Error{Code: errcode.BundleInvalid, Category: "configuration",
					Message: fmt.Sprintf("the call would put a secret of %s's SECRETS.md on %s's command line, where every local user reads it while it runs; nothing was run", b.ID(), program),
					Hint:    "the bundle gives secrets through the environment (SECRETS.md exposures) or standard input, never in argv (${secrets.SLUG}, or a step output that printed one); report it to the bundle's author"}
			}
		}
	}
	return nil
}
