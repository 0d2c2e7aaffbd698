package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
)

// placeholderRE matches one ${…} placeholder in a command line.
var placeholderRE = regexp.MustCompile(`\$\{\s*([^}\s]*)\s*\}`)

// excerptLen is how much of a failed command's output an error quotes (its end).
const excerptLen = 512

// words is a command line split and substituted, with the values an error quoting its output must
// not show: sensitive substituted values and the sensitive env values the command gets.
type words struct {
	argv   []string
	redact []string
}

// expand splits line into words as argv.Split does and substitutes its placeholders (see the
// package comment). Each placeholder must be a whole word (quoted or not) and not the first one:
// values are put in after splitting, so nothing in a value is ever re-split or unquoted. value is
// what ${value} stands for; nil when the line may not use it.
func (r *runState) expand(line string, value *string) (words, error) {
	var tok [8]byte
	_, _ = rand.Read(tok[:]) // crypto/rand never fails since Go 1.24
	marker := "CLIHOSTPH" + hex.EncodeToString(tok[:])
	var names []string
	back := map[string]string{} // marker form → placeholder as written, for error messages
	protected := placeholderRE.ReplaceAllStringFunc(line, func(m string) string {
		mk := marker + strconv.Itoa(len(names)) + "Z"
		names = append(names, placeholderRE.FindStringSubmatch(m)[1])
		back[mk] = m
		return mk
	})
	unprotect := func(s string) string {
		for _, mk := range slices.Sorted(maps.Keys(back)) {
			s = strings.ReplaceAll(s, mk, back[mk])
		}
		return s
	}
	split, err := argv.Split(protected)
	if err != nil {
		return words{}, errors.New(unprotect(err.Error()))
	}
	w := words{redact: slices.Clone(r.hidden)}
	for i, word := range split {
		if !strings.Contains(word, marker) {
			w.argv = append(w.argv, word)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(word, marker), "Z"))
		if err != nil || word != marker+strconv.Itoa(n)+"Z" {
			return words{}, fmt.Errorf("%q: a placeholder must be a whole word, not part of %q", line, unprotect(word))
		}
		if i == 0 {
			return words{}, fmt.Errorf("%q: the first word must be the bundle's bin, not a placeholder", line)
		}
		v, sensitive, err := r.resolve(names[n], value)
		if err != nil {
			return words{}, fmt.Errorf("%q: %s: %w", line, back[word], err)
		}
		w.argv = append(w.argv, v)
		if sensitive {
			w.redact = append(w.redact, v)
		}
	}
	return w, nil
}

// resolve returns a placeholder's value and whether it must be redacted from error output.
func (r *runState) resolve(name string, value *string) (string, bool, error) {
	if name == "value" {
		if value == nil {
			return "", false, errors.New("${value} exists only in persist.cmd")
		}
		return *value, sensitive(r.cur), nil
	}
	if id, ok := strings.CutPrefix(name, "input."); ok {
		i := slices.IndexFunc(r.b.CLI.Setup, func(st manifest.SetupStep) bool { return st.ID == id })
		if i < 0 {
			return "", false, fmt.Errorf("the bundle has no setup step %q", id)
		}
		v, ok, err := r.e.getSecret(r.s, prefixInput+id)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", false, fmt.Errorf("step %q has no value: it has not run, was skipped, or captures none", id)
		}
		return v, sensitive(r.b.CLI.Setup[i]), nil
	}
	if slug, ok := strings.CutPrefix(name, "secrets."); ok {
		v, ok, err := r.e.Secret(r.s, slug)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", false, fmt.Errorf("no secret %q is stored for this scope", slug)
		}
		return v, true, nil
	}
	return "", false, errors.New("unknown placeholder: use ${value}, ${input.<step-id>} or ${secrets.<slug>}")
}

// sensitive reports whether a step's value must stay out of error output.
func sensitive(st manifest.SetupStep) bool {
	return st.Type == "secret" || st.Kind == manifest.StepOAuth || st.Kind == manifest.StepExternal
}

// spawn runs w for step st: the bundle's binary, Env.Dir, Env.Env overlaid with the env values
// persisted so far. The error is a StepError when the process could not start or ctx ended it;
// exit codes, timeouts and signals are for the caller to judge.
func (r *runState) spawn(ctx context.Context, st manifest.SetupStep, line string, w words, timeout time.Duration, tty bool) (runner.Result, error) {
	c, err := r.env.Command(r.b.CLI.Bin, w.argv, timeout)
	if err != nil {
		return runner.Result{}, failed(st, fmt.Sprintf("%q cannot run: %v", line, err), "lifecycle commands run the bundle's bin; fix the manifest", err)
	}
	c.Env = r.childEnv()
	c.TTY = tty
	res, err := r.env.Run(ctx, c)
	switch {
	case err != nil:
		return res, failed(st, fmt.Sprintf("%q could not start: %v", line, err), "check that the bundle's binary is installed", err)
	case res.Canceled:
		return res, failed(st, fmt.Sprintf("%q was stopped: %v", line, context.Cause(ctx)), "run setup again", context.Cause(ctx))
	}
	return res, nil
}

// mustSucceed judges a finished command: a timeout, a signal or a non-zero exit is a setup_failed
// quoting the end of its output (stderr, else stdout) with w's sensitive values redacted.
func mustSucceed(st manifest.SetupStep, line string, w words, timeout time.Duration, res runner.Result) error {
	why := ""
	switch {
	case res.TimedOut:
		why = fmt.Sprintf("did not finish within %s", timeout)
	case res.Signal != "":
		why = "died of " + res.Signal
	case res.ExitCode != 0:
		why = fmt.Sprintf("exited %d", res.ExitCode)
	default:
		return nil
	}
	msg := fmt.Sprintf("%q %s", line, why)
	if ex := excerpt(res, w.redact); ex != "" {
		msg += ": " + ex
	}
	return failed(st, msg, "fix the cause and run setup again", nil)
}

// excerpt is the end of a command's stderr (stdout when stderr is empty), redacted.
func excerpt(res runner.Result, redact []string) string {
	out := strings.TrimSpace(string(res.Stderr))
	if out == "" {
		out = strings.TrimSpace(string(res.Stdout))
	}
	for _, v := range redact {
		if v != "" {
			out = strings.ReplaceAll(out, v, "[redacted]")
		}
	}
	if len(out) > excerptLen {
		out = "…" + out[len(out)-excerptLen:]
	}
	return strings.ToValidUTF8(out, "")
}

// childEnv is Env.Env with the persisted env values set over it.
func (r *runState) childEnv() []string {
	env := make([]string, 0, len(r.env.Env)+len(r.persisted))
	for _, kv := range r.env.Env {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := r.persisted[name]; !over {
			env = append(env, kv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.persisted)) {
		env = append(env, name+"="+r.persisted[name])
	}
	return env
}

// failed builds a setup_failed StepError.
func failed(st manifest.SetupStep, msg, hint string, cause error) *StepError {
	return &StepError{StepID: st.ID, Code: errcode.SetupFailed, Message: msg, Hint: hint, Err: cause}
}

// timeoutMS turns a manifest timeout_ms into a duration, def when unset.
func timeoutMS(ms int, def time.Duration) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return def
}
