package daemon

import (
	"context"
	"log/slog"

	"github.com/clihost/clihost/host"
)

// onCall receives every finished call's audit record (host.Options.OnCall): it counts it for the
// metrics and writes its log line.
func (d *Engine) onCall(rec host.Invoked) {
	d.metrics.observe(rec)
	logCall(d.log, rec)
}

// logCall writes one call's log line: the audit line's call id, the bundle, the tool, the agent
// token's name, the duration and the outcome ("ok", else the error code). It never holds the
// call's arguments, output or environment: the audit record it is made from has none.
func logCall(log *slog.Logger, rec host.Invoked) {
	tool := rec.ToolID
	if tool == "" {
		tool = rec.Subcommand // a tool the bundle does not have
	}
	outcome := "ok"
	if !rec.OK {
		outcome = string(rec.ErrorCode)
	}
	attrs := []slog.Attr{slog.String("call_id", rec.CallID), slog.String("bundle", rec.CLIID), slog.String("tool", tool),
		slog.Int64("duration_ms", rec.DurationMS), slog.String("outcome", outcome)}
	if rec.ExitCode != nil {
		attrs = append(attrs, slog.Int("exit_code", *rec.ExitCode))
	}
	if rec.Agent != "" {
		attrs = append(attrs, slog.String("agent", rec.Agent))
	}
	if rec.Approval != nil {
		attrs = append(attrs, slog.String("approval", rec.Approval.Decision))
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "call", attrs...)
}
