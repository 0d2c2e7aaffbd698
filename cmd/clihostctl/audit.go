package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/control"
)

// auditOptions are audit's flags.
type auditOptions struct {
	*globalOptions
	follow, rotated bool
	last            int
	since, bundle   string
	asJSON          bool
}

func newAuditCmd(g *globalOptions) *cobra.Command {
	o := &auditOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Print the daemon's audit log (one JSON object a line)",
		Long: `Audit prints clihostd's audit log. -n N prints the last N lines, --since the lines of the last
DURATION (10m, 2h) or since a time (RFC 3339), --bundle one bundle's lines; these read the log
and its rotated files from their end, so the whole history is not sent first. --follow keeps
printing new lines across rotations, after the last 10 (-n 0: only new ones; --rotated: after
every file). Without any of them the whole current log is printed (--rotated: the rotated files
first).

Piped, or with --json, each line is the log's JSON object; on a terminal, one short line each
(time, type, bundle, tool, outcome, duration), in colour unless NO_COLOR is set.`,
		Example: "  clihostctl audit -n 20 --bundle gh\n  clihostctl audit --since 1h --json | jq 'select(.ok == false)'\n  clihostctl audit -f",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines (across rotations), after the last 10 unless -n or --since says otherwise")
	cmd.Flags().BoolVar(&o.rotated, "rotated", false, "print the rotated logs (audit.jsonl.N … .1) first, oldest first")
	cmd.Flags().IntVarP(&o.last, "lines", "n", -1, "print the last N lines (of those --since and --bundle select); -1: all, or the last 10 with --follow")
	cmd.Flags().StringVar(&o.since, "since", "", "print the lines of the last DURATION (e.g. 10m) or since TIME (RFC 3339)")
	cmd.Flags().StringVar(&o.bundle, "bundle", "", "print only this bundle's lines (ID or ID@MAJOR)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the log's JSON lines, also on a terminal")
	_ = cmd.RegisterFlagCompletionFunc("bundle", func(c *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return matching(bundleNames(c.Context(), g), prefix), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// runAudit copies the daemon's audit log (the lines the flags select) to stdout.
func runAudit(ctx context.Context, o *auditOptions) error {
	if o.last < -1 {
		return usageError{fmt.Errorf("-n %d: want 0 or more, or -1 for all", o.last)}
	}
	out, flush := o.io.Out, func() error { return nil }
	if o.io.IsStdoutTTY() && !o.asJSON {
		pw := newAuditPrinter(o.io)
		out, flush = pw, pw.Close
	}
	var err error
	if o.last < 0 && o.since == "" && o.bundle == "" && (!o.follow || o.rotated) {
		err = o.client().Audit(ctx, o.follow, o.rotated, out) // whole files, as asked
	} else {
		var q control.AuditQuery
		if q, err = o.query(time.Now()); err != nil {
			return err
		}
		err = o.client().AuditTail(ctx, q, out)
	}
	if ferr := flush(); err == nil {
		err = ferr
	}
	return err
}

// query is the daemon's query for the flags, at now.
func (o *auditOptions) query(now time.Time) (control.AuditQuery, error) {
	if o.rotated && (o.last >= 0 || o.since != "" || o.bundle != "") {
		return control.AuditQuery{}, usageError{fmt.Errorf("--rotated prints whole files: -n, --since and --bundle read the rotated files themselves")}
	}
	q := control.AuditQuery{Last: o.last, Bundle: o.bundle, Follow: o.follow}
	if o.since != "" {
		t, err := parseSince(o.since, now)
		if err != nil {
			return q, err
		}
		q.Since = t
	}
	if q.Follow && q.Last < 0 && q.Since.IsZero() {
		q.Last = 10 // as tail -f
	}
	return q, nil
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usageError{fmt.Errorf("--since %s: want a duration back from now (e.g. 10m)", s)}
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError{fmt.Errorf("--since %q: want a duration (10m, 2h) or an RFC 3339 time (2026-11-26T08:00:00Z)", s)}
}

// auditPrinter turns the log's JSON lines written to it into one short line each on a terminal.
type auditPrinter struct {
	pw   *io.PipeWriter
	done chan error
}

// newAuditPrinter prints to ios.Out, in colour when ios allows it.
func newAuditPrinter(ios *IOStreams) *auditPrinter {
	pr, pw := io.Pipe()
	p := &auditPrinter{pw: pw, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			fmt.Fprintln(ios.Out, auditLine(sc.Bytes(), newPalette(ios)))
		}
		pr.CloseWithError(sc.Err())
		p.done <- sc.Err()
	}()
	return p
}

func (p *auditPrinter) Write(b []byte) (int, error) { return p.pw.Write(b) }

// Close waits until every line written is printed.
func (p *auditPrinter) Close() error {
	p.pw.Close()
	return <-p.done
}

// auditLine is one audit entry as a person reads it: time, type, bundle, tool, outcome, duration.
func auditLine(raw []byte, c palette) string {
	var e struct {
		TS         string `json:"ts"`
		Type       string `json:"type"`
		CLIID      string `json:"cli_id"`
		ToolID     string `json:"tool_id"`
		OK         *bool  `json:"ok"`
		ErrorCode  string `json:"error_code"`
		DurationMS *int64 `json:"duration_ms"`
		Host       string `json:"host"`
		Allowed    *bool  `json:"allowed"`
		Reason     string `json:"reason"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return plain(string(raw))
	}
	// Every field may hold what a sandboxed CLI chose (a host it asked for, a reason quoting it):
	// its control characters are made visible before it reaches the terminal.
	parts := []string{c.dim(plain(e.TS)), plain(strings.TrimPrefix(e.Type, "cli.")), c.bold(plain(e.CLIID))}
	if e.ToolID != "" {
		parts = append(parts, plain(e.ToolID))
	}
	if e.Host != "" {
		parts = append(parts, plain(e.Host))
	}
	switch {
	case e.OK != nil && *e.OK:
		parts = append(parts, c.green("ok"))
	case e.OK != nil:
		parts = append(parts, c.red("failed "+plain(e.ErrorCode)))
	case e.Allowed != nil && *e.Allowed:
		parts = append(parts, c.green("allowed"))
	case e.Allowed != nil:
		parts = append(parts, c.red("refused "+plain(e.Reason)))
	}
	if e.DurationMS != nil {
		parts = append(parts, fmt.Sprintf("%dms", *e.DurationMS))
	}
	return strings.Join(parts, "  ")
}
