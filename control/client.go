package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/callresult"
)

// EnvSocket names the environment variable that points clihostctl at the daemon's socket.
const EnvSocket = "CLIHOST_SOCKET"

// ErrNoDaemon means no daemon answers on the socket.
var ErrNoDaemon = errors.New("no clihostd is running")

// DefaultStateDir is clihostd's state directory when not told otherwise: $STATE_DIRECTORY (systemd),
// else $XDG_STATE_HOME/clihost, else ~/.local/state/clihost.
func DefaultStateDir() (string, error) {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return filepath.SplitList(d)[0], nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "clihost"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory: pass --state: %w", err)
	}
	return filepath.Join(home, ".local", "state", "clihost"), nil
}

// DefaultSocket is where clihostd listens when not told otherwise: $RUNTIME_DIRECTORY (systemd),
// else $XDG_RUNTIME_DIR/clihost, else the state directory.
func DefaultSocket(stateDir string) string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		return filepath.Join(filepath.SplitList(d)[0], "clihostd.sock")
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "clihost", "clihostd.sock")
	}
	return filepath.Join(stateDir, "clihostd.sock")
}

// SystemSocket is the control socket of the shipped systemd unit (RuntimeDirectory=clihost):
// clients use it when no socket is named and none is at their own default, so that
// `sudo clihostctl …` (sudo drops $CLIHOST_SOCKET) and the socket group's members reach the
// unit's daemon without --socket.
const SystemSocket = "/run/clihost/clihostd.sock"

// ClientSocket is the socket a client uses when none is named: def (the caller's DefaultSocket)
// when a socket is there, else SystemSocket when one is there, else def (whose absence the
// connection error then names).
func ClientSocket(def string) string { return firstSocket(def, SystemSocket) }

// socketAdmits says whom a control socket admits, for a caller it refused.
const socketAdmits = "the daemon admits its own user, root and the members of its --group " +
	"(the systemd unit's: group clihost); ask an administrator to add you to that group, then log in again"

// unreachableSystemSocket notes, for a caller that found no daemon on socket, that the systemd
// unit's socket may be there but is hidden from it (its folder is not searchable by the caller):
// "no clihostd is running" alone would be untrue.
func unreachableSystemSocket(socket string) string {
	if socket == SystemSocket {
		return ""
	}
	if _, err := os.Stat(SystemSocket); errors.Is(err, os.ErrPermission) {
		return "; the systemd unit's socket " + SystemSocket + " is out of this user's reach (a daemon may listen there): " + socketAdmits
	}
	return ""
}

// firstSocket is the first of paths a socket is at, else paths[0].
func firstSocket(paths ...string) string {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().Type() == os.ModeSocket {
			return p
		}
	}
	return paths[0]
}

// Client talks to a daemon over its socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient makes a client for the socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{Socket: path, http: &http.Client{Transport: tr}}
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://clihostd"+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w on %s%s", ErrNoDaemon, c.Socket, unreachableSystemSocket(c.Socket))
		}
		if errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("control socket %s: %w (%s)", c.Socket, err, socketAdmits)
		}
		return nil, fmt.Errorf("control socket %s: %w", c.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e errorBody
		_ = json.NewDecoder(resp.Body).Decode(&e)
		msg := fmt.Sprintf("clihostd: %s (HTTP %d)", e.Error, resp.StatusCode)
		if e.Hint != "" {
			msg = fmt.Sprintf("clihostd: %s (%s)", e.Error, e.Hint)
		}
		return nil, &ResponseError{StatusCode: resp.StatusCode, msg: msg}
	}
	return resp, nil
}

// ResponseError is a request the daemon answered with an error status: StatusCode tells a
// missing thing (404, e.g. no such bundle) from other refusals.
type ResponseError struct {
	StatusCode int
	msg        string
}

func (e *ResponseError) Error() string { return e.msg }

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Status returns every bundle's status, or one's.
func (c *Client) Status(ctx context.Context, bundle string) ([]BundleStatus, error) {
	var st []BundleStatus
	path := PathStatus
	if bundle != "" {
		path += "?bundle=" + url.QueryEscape(bundle)
	}
	return st, c.getJSON(ctx, path, &st)
}

// Token returns how to reach the MCP endpoints.
func (c *Client) Token(ctx context.Context) (TokenInfo, error) {
	var t TokenInfo
	return t, c.getJSON(ctx, PathToken, &t)
}

// Install installs a bundle's CLI, calling progress for each event; it returns the last one.
func (c *Client) Install(ctx context.Context, req InstallRequest, progress func(InstallEvent)) (InstallEvent, error) {
	var last InstallEvent
	err := c.stream(ctx, PathInstall, req, func(line []byte) error {
		var ev InstallEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		last = ev
		if progress != nil {
			progress(ev)
		}
		return nil
	})
	if err == nil && last.Phase != "done" && last.Phase != "error" && last.Phase != "needs_root" {
		err = errors.New("install stream ended early: the daemon stopped?")
	}
	return last, err
}

// RecordInstall asks the daemon to check and record an install entry the caller ran as root; it
// returns the daemon's verdict ("done" or "error").
func (c *Client) RecordInstall(ctx context.Context, req RecordRequest) (InstallEvent, error) {
	var ev InstallEvent
	resp, err := c.do(ctx, http.MethodPost, PathInstallRecord, req)
	if err != nil {
		return ev, err
	}
	defer resp.Body.Close()
	return ev, json.NewDecoder(resp.Body).Decode(&ev)
}

// stream posts body and hands each NDJSON line of the response to fn.
func (c *Client) stream(ctx context.Context, path string, body any, fn func([]byte) error) error {
	resp, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("%s stream: %w", path, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s stream: %w", path, err)
	}
	return nil
}

// Call runs a tool through the daemon.
func (c *Client) Call(ctx context.Context, req CallRequest) (callresult.Envelope, error) {
	var env callresult.Envelope
	resp, err := c.do(ctx, http.MethodPost, PathCall, req)
	if err != nil {
		return env, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	return env, dec.Decode(&env)
}

// Audit copies the audit log to w: with rotated, its rotated files first (oldest first); with
// follow, new lines until ctx ends.
func (c *Client) Audit(ctx context.Context, follow, rotated bool, w io.Writer) error {
	q := url.Values{}
	if follow {
		q.Set("follow", "1")
	}
	if rotated {
		q.Set("rotated", "1")
	}
	path := PathAudit
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// AuditTail copies to w the audit lines q selects, read from the log's end (then new ones, with
// q.Follow, until ctx ends).
func (c *Client) AuditTail(ctx context.Context, q AuditQuery, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, PathAudit+"?"+q.values().Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// SetupInfo returns a bundle's setup steps for the caller's scope.
func (c *Client) SetupInfo(ctx context.Context, req ScopeRequest) (SetupInfo, error) {
	var info SetupInfo
	return info, c.getJSON(ctx, PathSetup+"?bundle="+url.QueryEscape(req.Bundle)+"&workspace="+url.QueryEscape(req.Workspace), &info)
}

// Setup runs setup with the given answers, calling visit for each URL the person must open; it
// returns the last event ("done" or "error").
func (c *Client) Setup(ctx context.Context, req SetupRequest, visit func(SetupEvent)) (SetupEvent, error) {
	var last SetupEvent
	err := c.stream(ctx, PathSetup, req, func(line []byte) error {
		var ev SetupEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		last = ev
		if ev.Phase == "visit" && visit != nil {
			visit(ev)
		}
		return nil
	})
	if err == nil && last.Phase != "done" && last.Phase != "error" {
		err = errors.New("setup stream ended early: the daemon stopped?")
	}
	return last, err
}

// LoginInfo returns the login command to run in the person's terminal.
func (c *Client) LoginInfo(ctx context.Context, bundle, workspace string) (LoginInfo, error) {
	var info LoginInfo
	return info, c.getJSON(ctx, PathLogin+"?bundle="+url.QueryEscape(bundle)+"&workspace="+url.QueryEscape(workspace), &info)
}

// Login asks the daemon to confirm a login (it polls completes_when).
func (c *Client) Login(ctx context.Context, req ScopeRequest) (AuthResult, error) {
	return c.authCall(ctx, PathLogin, req)
}

// Logout marks the scope logged out.
func (c *Client) Logout(ctx context.Context, req ScopeRequest) (AuthResult, error) {
	return c.authCall(ctx, PathLogout, req)
}

func (c *Client) authCall(ctx context.Context, path string, req ScopeRequest) (AuthResult, error) {
	var res AuthResult
	resp, err := c.do(ctx, http.MethodPost, path, req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	return res, json.NewDecoder(resp.Body).Decode(&res)
}

// DaemonUID is the uid of the process listening on the socket, as the kernel recorded it when that
// process called listen(2) (SO_PEERCRED on a connection to it): who the daemon is, whatever it
// says about itself.
func (c *Client) DaemonUID(ctx context.Context) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return -1, fmt.Errorf("%w on %s", ErrNoDaemon, c.Socket)
		}
		return -1, fmt.Errorf("control socket %s: %w", c.Socket, err)
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, fmt.Errorf("control socket %s: SO_PEERCRED: %w", c.Socket, cerr)
	}
	return int(cred.Uid), nil
}
