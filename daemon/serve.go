package daemon

import (
	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/mcp"
	"github.com/clihost/clihost/runner"
)

// Serve runs the control socket and the MCP listener, the bundle watcher, the background login
// refresh and systemd's notifications until ctx ends or a listener fails, then drains the calls in
// flight (Config.DrainTimeout). It does not Close the Engine.
func (d *Engine) Serve(ctx context.Context) error {
	gid := -1
	if d.cfg.Group != "" {
		g, err := user.LookupGroup(d.cfg.Group)
		if err != nil {
			return fmt.Errorf("--group %s: %w", d.cfg.Group, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	ctlLn, err := control.Listen(d.socketPath, gid)
	if err != nil {
		return err
	}
	defer os.Remove(d.socketPath)
	httpLn, err := net.Listen("tcp", d.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", d.cfg.HTTPAddr, err)
	}
	d.httpURL = "http://" + httpLn.Addr().String()

	// Every request's context, and so every call's, derives from calls: canceling it stops them all.
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	base := func(net.Listener) context.Context { return calls }
	// Follow streams (clihostctl audit -f) are no calls: they end when the drain begins.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	ctlHandler := endsWithDrain(streams, control.Handler(d, control.Admission{OwnerUID: os.Geteuid(), GroupID: gid}))
	ctlSrv := &http.Server{Handler: ctlHandler,
		ConnContext: control.ConnContext, BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	httpSrv := &http.Server{Handler: d.withStatusPage(d.httpHandler()), BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- ctlSrv.Serve(ctlLn) }()
	go func() { errc <- httpSrv.Serve(httpLn) }()

	d.log.Info("clihostd ready", "version", d.cfg.Version, "state", d.stateDir, "socket", d.socketPath,
		"mcp", d.httpURL+"/mcp/{bundle}", "token_file", d.tokenFile, "workspace", d.workspace)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	stopWatchdog := d.watchdog()
	defer stopWatchdog()
	go d.warm(ctx)
	go d.refreshLoop(ctx, time.Minute)
	stopWatch := d.watchBundles(ctx)
	defer stopWatch()

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	d.log.Info("clihostd stopping: draining calls", "drain_timeout", d.cfg.DrainTimeout)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	endStreams()
	d.drain(cancelCalls, ctlSrv, httpSrv)
	if serveErr != nil {
		d.log.Error("clihostd stopped", "err", serveErr)
	} else {
		d.log.Info("clihostd stopped")
	}
	return serveErr
}

// endsWithDrain is h, but a request that follows the audit log (follow=1) has a context that
// also ends with streams, so that a follower does not hold the drain, which waits for calls,
// for its whole timeout.
func endsWithDrain(streams context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == control.PathAudit && r.URL.Query().Get("follow") == "1" {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(streams, cancel)
			defer stop()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// stopWait bounds how long drain waits for the calls it canceled: the runner's grace between
// SIGTERM and SIGKILL (runner.DefaultGrace) and a margin. Sandboxes still running when the daemon
// exits die with it (see package sandbox/nsinit).
const stopWait = runner.DefaultGrace + 2*time.Second

// drain stops the servers from accepting connections and calls, waits for the calls in flight at
// most the drain timeout (--drain-timeout), then cancels those still running (each sandbox gets
// SIGTERM, and SIGKILL after the runner's grace; the init's exit kills everything else in it) and
// waits for them at most stopWait more. Connections still open then are closed.
func (d *Engine) drain(cancelCalls context.CancelFunc, srvs ...*http.Server) {
	var idle sync.WaitGroup
	for _, srv := range srvs {
		idle.Go(func() { _ = srv.Shutdown(context.Background()) })
	}
	done := make(chan struct{})
	go func() { idle.Wait(); close(done) }()
	wait := time.NewTimer(d.cfg.DrainTimeout)
	defer wait.Stop()
	select {
	case <-done:
		return
	case <-wait.C:
	}
	d.log.Warn("drain timeout passed: canceling the calls still running", "drain_timeout", d.cfg.DrainTimeout)
	cancelCalls()
	wait.Reset(stopWait)
	select {
	case <-done:
	case <-wait.C:
		d.log.Warn("calls still running after they were canceled: closing their connections", "waited", stopWait)
		for _, srv := range srvs {
			_ = srv.Close()
		}
	}
}

// agentKey marks an HTTP request's context with the name of the bearer token it carried.
type agentKey struct{}

// agentOf is the name of the token an MCP request carried (see httpHandler).
func agentOf(r *http.Request) string {
	name, _ := r.Context().Value(agentKey{}).(string)
	return name
}

// tokenHint is what a 401 of the MCP listener tells the client to do.
const tokenHint = "run 'clihostctl token' on the daemon's host to print the token and the endpoint"

// httpHandler serves MCP at /mcp/… and metrics at /metrics, both behind the bearer token and
// refusing what a web page could send (mcp.Guard).
func (d *Engine) httpHandler() http.Handler {
	return mcp.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, reason := d.tokens.Check(r.Header.Get("Authorization"))
		if reason.Kind != agenttoken.OK {
			agenttoken.Refuse(w, "clihostd", reason, tokenHint)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), agentKey{}, agent))
		if r.URL.Path == "/metrics" {
			d.metrics.write(w)
			writeInFlightMetrics(w, d.inFlight)
			writePoolMetrics(w, d.sandbox.Pool)
			writePolicyMetrics(w, d.policies)
			return
		}
		d.cur.Load().mcp.ServeHTTP(w, r)
	}))
}

// watchdog pings systemd's watchdog at half its interval, when one is configured.
func (d *Engine) watchdog() func() {
	every, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || every == 0 {
		return func() {}
	}
	t := time.NewTicker(every / 2)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// warm checks every bundle's binary in the background after start, so that status is fast and an
// install interrupted before a restart is found.
func (d *Engine) warm(ctx context.Context) {
	if _, err := d.Status(ctx, ""); err != nil {
		d.log.Warn("checking bundles after start", "err", err)
	}
}
