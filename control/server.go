package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/errcode"
)

// Backend is what the daemon offers through the API.
type Backend interface {
	Status(ctx context.Context, bundle string) ([]BundleStatus, error)
	Install(ctx context.Context, req InstallRequest, progress func(InstallEvent)) InstallEvent
	RecordInstall(ctx context.Context, req RecordRequest) InstallEvent
	// Call runs req with its input decoded by argv.DecodeInput (every digit of a number kept).
	Call(ctx context.Context, req CallRequest, input map[string]any, caller Caller) callresult.Envelope
	Token() TokenInfo
	AuditFile() string
	// The scope methods get the caller with the request's workspace ("" for the daemon's): the
	// backend must refuse a workspace the caller may not use (errcode.WorkspaceDenied).
	SetupInfo(ctx context.Context, req ScopeRequest, caller Caller) (SetupInfo, error)
	Setup(ctx context.Context, req SetupRequest, caller Caller, emit func(SetupEvent)) SetupEvent
	LoginInfo(ctx context.Context, req ScopeRequest, caller Caller) (LoginInfo, error)
	Login(ctx context.Context, req ScopeRequest, caller Caller) AuthResult
	Logout(ctx context.Context, req ScopeRequest, caller Caller) AuthResult
	Daemon(ctx context.Context, probe bool) DaemonStatus
}

// Peer is the process at the other end of a control connection: its uid, gid and pid
// (SO_PEERCRED) and supplementary groups (SO_PEERGROUPS), as they were when it connected.
type Peer struct {
	UID, GID, PID int
	Groups        []int
}

type peerKey struct{}

// Admission decides which peers may use the API.
type Admission struct {
	OwnerUID int // the daemon's user
	GroupID  int // a group whose members are admitted; -1 for none
}

// operatorOnly lets the peer of r through when it is root or the daemon's own user; anyone else
// (a member of --group) gets 403 with message and hint, and false.
func (a Admission) operatorOnly(w http.ResponseWriter, r *http.Request, message, hint string) bool {
	if p, _ := PeerOf(r.Context()); p.UID == 0 || p.UID == a.OwnerUID {
		return true
	}
	writeError(w, http.StatusForbidden, message, hint)
	return false
}

func (a Admission) admits(p Peer) bool {
	if p.UID == 0 || p.UID == a.OwnerUID {
		return true
	}
	if a.GroupID < 0 {
		return false
	}
	if p.GID == a.GroupID || slices.Contains(p.Groups, a.GroupID) {
		return true
	}
	u, err := user.LookupId(strconv.Itoa(p.UID))
	if err != nil {
		return false
	}
	gids, err := u.GroupIds()
	if err != nil {
		return false
	}
	for _, g := range gids {
		if g == strconv.Itoa(a.GroupID) {
			return true
		}
	}
	return false
}

// Listen creates the unix socket at path (mode 0660, group-owned by gid when gid ≥ 0), replacing a
// stale socket file but refusing to take over one that still answers.
func Listen(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s is in use: another clihostd is running", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("control socket: give it to group %d: %w", gid, err)
		}
	}
	return ln, nil
}

// ConnContext records the peer's credentials (SO_PEERCRED) and supplementary groups
// (SO_PEERGROUPS) on each connection; use it as http.Server.ConnContext. A connection whose
// credentials cannot be read carries none, and is refused.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var groups []int
	var gerr error
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
	})
	if err != nil || cred == nil || gerr != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid), Groups: groups})
}

// peerGroups reads the peer's supplementary groups (SO_PEERGROUPS: an array of gid_t; ERANGE with
// the size needed when the buffer is too small).
func peerGroups(fd int) ([]int, error) {
	buf := make([]uint32, 64)
	for {
		size := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		if e == unix.ERANGE && int(size/4) > len(buf) && size <= 1<<20 {
			buf = make([]uint32, size/4)
			continue
		}
		if e != 0 {
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
		}
		out := make([]int, 0, size/4)
		for _, g := range buf[:size/4] {
			out = append(out, int(g))
		}
		return out, nil
	}
}

// Handler serves the API for b to the peers a admits.
func Handler(b Backend, a Admission) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, r *http.Request) {
		st, err := b.Status(r.Context(), r.URL.Query().Get("bundle"))
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error(), "clihostctl status lists the loaded bundles")
			return
		}
		writeJSON(w, st)
	})
	mux.HandleFunc("POST "+PathInstall, func(w http.ResponseWriter, r *http.Request) {
		var req InstallRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad install request: "+err.Error(), "")
			return
		}
		// Running an installer script nobody checked (as root on a root daemon) is the
		// operator's decision, not a socket group member's.
		if req.AllowUnverified && !a.operatorOnly(w, r, "only root or clihostd's own user may allow unverified installers",
			"install without --allow-unverified, or ask the operator") {
			return
		}
		send := stream(w)
		emit := func(ev InstallEvent) { send(ev) }
		emit(b.Install(r.Context(), req, emit))
	})
	mux.HandleFunc("POST "+PathInstallRecord, recordHandler(b, a))
	mux.HandleFunc("POST "+PathCall, func(w http.ResponseWriter, r *http.Request) {
		var req CallRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad call request: "+err.Error(), "")
			return
		}
		input, err := argv.DecodeInput(req.Input)
		if err != nil {
			writeJSON(w, callresult.Envelope{Error: &callresult.Error{Code: errcode.InputInvalid, Message: "input: " + err.Error(), Hint: "send the tool's input as one JSON object"}})
			return
		}
		writeJSON(w, b.Call(r.Context(), req, input, callerOf(r, req.Workspace)))
	})
	mux.HandleFunc("GET "+PathDaemon, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, b.Daemon(r.Context(), r.URL.Query().Get("probe") == "1"))
	})
	mux.HandleFunc("GET "+PathToken, tokenHandler(b, a))
	mux.HandleFunc("GET "+PathSetup, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		info, err := b.SetupInfo(r.Context(), ScopeRequest{Bundle: q.Get("bundle"), Workspace: q.Get("workspace")}, callerOf(r, q.Get("workspace")))
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error(), "")
			return
		}
		writeJSON(w, info)
	})
	mux.HandleFunc("POST "+PathSetup, func(w http.ResponseWriter, r *http.Request) {
		var req SetupRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad setup request: "+err.Error(), "")
			return
		}
		send := stream(w)
		emit := func(ev SetupEvent) { send(ev) }
		emit(b.Setup(r.Context(), req, callerOf(r, req.Workspace), emit))
	})
	mux.HandleFunc("GET "+PathLogin, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		info, err := b.LoginInfo(r.Context(), ScopeRequest{Bundle: q.Get("bundle"), Workspace: q.Get("workspace")}, callerOf(r, q.Get("workspace")))
		if err != nil {
			writeError(w, http.StatusNotFound, err.Error(), "")
			return
		}
		writeJSON(w, info)
	})
	for path, fn := range map[string]func(context.Context, ScopeRequest, Caller) AuthResult{PathLogin: b.Login, PathLogout: b.Logout} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var req ScopeRequest
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
				writeError(w, http.StatusBadRequest, "bad request: "+err.Error(), "")
				return
			}
			writeJSON(w, fn(r.Context(), req, callerOf(r, req.Workspace)))
		})
	}
	mux.HandleFunc("GET "+PathAudit, func(w http.ResponseWriter, r *http.Request) {
		// Every caller's calls are in it (users, tools, workspaces, egress): the operator's.
		if !a.operatorOnly(w, r, "only root or clihostd's own user may read the audit log",
			"it records every caller's calls: ask the operator (sudo clihostctl audit)") {
			return
		}
		if aq, ok, err := parseAuditQuery(r); err != nil {
			writeError(w, http.StatusBadRequest, "audit: "+err.Error(), "")
			return
		} else if ok {
			serveAuditQuery(w, r, b.AuditFile(), aq)
			return
		}
		q := r.URL.Query()
		serveAudit(w, r, b.AuditFile(), q.Get("follow") == "1", q.Get("rotated") == "1")
	})
	stateHandlers(mux, b, a)
	providerHandlers(mux, b)
	approvalHandlers(mux, b, a)
	tokenHandlers(mux, b, a)
	secretHandlers(mux, b)
	pageHandlers(mux, b, a)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := r.Context().Value(peerKey{}).(Peer)
		if !ok || !a.admits(p) {
			writeError(w, http.StatusForbidden, "this user may not use clihostd's control socket", "run as the daemon's user or root, or join the group clihostd was started with (--group)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// stream starts an NDJSON response and returns a function that sends one value a line, flushed at
// once (progress must reach clihostctl as it happens); it is safe for concurrent use.
func stream(w http.ResponseWriter) func(v any) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	var mu sync.Mutex
	flusher, _ := w.(http.Flusher)
	return func(v any) {
		mu.Lock()
		defer mu.Unlock()
		line, _ := json.Marshal(v)
		_, _ = w.Write(append(line, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// callerOf is the connection's peer as the backend gets it, naming workspace ws.
func callerOf(r *http.Request, ws string) Caller {
	p, _ := r.Context().Value(peerKey{}).(Peer)
	p.Groups = slices.Clone(p.Groups)
	return Caller{Workspace: ws, User: peerUser(r), Peer: &p}
}

// peerUser names the connection's user: the user name of its uid, or the uid.
func peerUser(r *http.Request) string {
	p, _ := r.Context().Value(peerKey{}).(Peer)
	name := strconv.Itoa(p.UID)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return name
}

// serveAudit copies the audit log (after its rotated files, oldest first, with rotated), then
// (follow) new lines as they are appended, following the log across rotations.
func serveAudit(w http.ResponseWriter, r *http.Request, path string, follow, rotated bool) {
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		writeError(w, http.StatusInternalServerError, "audit log: "+err.Error(), "")
		return
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	if rotated {
		if err := copyRotated(w, path); err != nil {
			return
		}
	}
	if f == nil && !follow {
		return
	}
	flusher, _ := w.(http.Flusher)
	for {
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return
			}
		}
		if !follow {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		if f != nil && !replaced(f, path) {
			continue
		}
		// Not there yet, or rotated: what the old file holds past the copy is copied first.
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return
			}
			f.Close()
		}
		if f, err = os.Open(path); err != nil {
			f = nil
		}
	}
}

// replaced reports whether path no longer names the open file f (the log was rotated).
func replaced(f *os.File, path string) bool {
	open, err1 := f.Stat()
	named, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && !os.SameFile(open, named)
}

// copyRotated copies the rotated audit logs path.N … path.1 (N the highest of a run from 1).
func copyRotated(w io.Writer, path string) error {
	n := 0
	for {
		if _, err := os.Stat(path + "." + strconv.Itoa(n+1)); err != nil {
			break
		}
		n++
	}
	for i := n; i >= 1; i-- {
		f, err := os.Open(path + "." + strconv.Itoa(i))
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away meanwhile
		}
		if err != nil {
			return err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg, hint string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg, Hint: hint})
}
