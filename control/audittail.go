package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// AuditQuery narrows what GET /v1/audit sends (clihostctl audit -n, --since, --bundle, --follow).
type AuditQuery struct {
	Last   int       // the last N matching lines of the history, reading the files from their end; -1: all
	Since  time.Time // only lines at or after this time (zero: any)
	Bundle string    // only lines of this bundle (cli_id, with or without @major)
	Follow bool      // then new lines as they are appended, across rotations
}

// sinceSlack is how far before Since reading backwards goes on: lines are appended in about
// time order, but a call's line may be written a little after a later-stamped one.
const sinceSlack = 5 * time.Minute

// values encodes q as GET /v1/audit's query.
func (q AuditQuery) values() url.Values {
	v := url.Values{}
	if q.Last >= 0 {
		v.Set("n", strconv.Itoa(q.Last))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Bundle != "" {
		v.Set("bundle", q.Bundle)
	}
	if q.Follow {
		v.Set("follow", "1")
	}
	return v
}

// parseAuditQuery reads an AuditQuery from r's query; ok is false when it holds none of n, since
// and bundle (the whole log is then copied as before).
func parseAuditQuery(r *http.Request) (q AuditQuery, ok bool, err error) {
	v := r.URL.Query()
	q = AuditQuery{Last: -1, Bundle: v.Get("bundle"), Follow: v.Get("follow") == "1"}
	if s := v.Get("n"); s != "" {
		if q.Last, err = strconv.Atoi(s); err != nil || q.Last < 0 {
			return q, false, errors.New("n: want a count of 0 or more")
		}
	}
	if s := v.Get("since"); s != "" {
		if q.Since, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return q, false, errors.New("since: want an RFC 3339 time")
		}
	}
	return q, v.Has("n") || v.Has("since") || v.Has("bundle"), nil
}

// auditFields are the fields of an audit line a query looks at.
type auditFields struct {
	CLIID string `json:"cli_id"`
	TS    string `json:"ts"`
}

// match reports whether line passes q's bundle and time filters, and whether it is older than
// Since by more than the slack (reading backwards may stop there).
func (q AuditQuery) match(line []byte) (ok, older bool) {
	var f auditFields
	if json.Unmarshal(line, &f) != nil {
		return false, false
	}
	if !q.Since.IsZero() {
		ts, err := time.Parse(time.RFC3339Nano, f.TS)
		if err != nil || ts.Before(q.Since) {
			return false, err == nil && ts.Before(q.Since.Add(-sinceSlack))
		}
	}
	return q.Bundle == "" || sameBundle(f.CLIID, q.Bundle), false
}

// sameBundle reports whether the audit line's cli_id names the bundle want: the same id, and the
// same major when both name one.
func sameBundle(cliID, want string) bool {
	id, major, hasMajor := strings.Cut(cliID, "@")
	wantID, wantMajor, wantsMajor := strings.Cut(want, "@")
	return id == wantID && (!hasMajor || !wantsMajor || major == wantMajor)
}

// serveAuditQuery sends the lines of the audit log at path (its rotated files included) that q
// selects, reading from the end: the last q.Last of them (all with -1) and none older than
// q.Since; then, with q.Follow, the matching lines appended from then on.
func serveAuditQuery(w http.ResponseWriter, r *http.Request, path string, q AuditQuery) {
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		writeError(w, http.StatusInternalServerError, "audit log: "+err.Error(), "")
		return
	}
	var end int64
	if f != nil {
		defer f.Close()
		if end, err = lineEnd(f); err != nil {
			writeError(w, http.StatusInternalServerError, "audit log: "+err.Error(), "")
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if q.Last < 0 && q.Since.IsZero() {
		// Every line of one bundle: read forwards, oldest first, without holding them.
		if copyFiltered(w, f, end, path, q) != nil {
			return
		}
	} else if err := writeNewestLast(w, f, end, path, q); errors.Is(err, errTooMuchHistory) {
		writeError(w, http.StatusRequestEntityTooLarge, "audit: "+err.Error(), "ask for fewer lines: -n N, a later --since, or --bundle")
		return
	} else if err != nil {
		return
	}
	if !q.Follow {
		return
	}
	if f != nil {
		if _, err := f.Seek(end, io.SeekStart); err != nil {
			return
		}
	}
	followAudit(w, r, f, path, q)
}

// lineEnd returns the size of f's complete lines: its size, less a line being written.
func lineEnd(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	if end == 0 {
		return 0, nil
	}
	n := min(end, tailChunk)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, end-n); err != nil {
		return 0, err
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return end - n + int64(i) + 1, nil
	}
	return end, nil
}

// maxHistory bounds the lines -n or --since hold before sending them (in the log's order, they
// are sent once all are read).
var maxHistory = 64 << 20

// errTooMuchHistory is a query whose lines do not fit in maxHistory.
var errTooMuchHistory = errors.New("the lines asked for are more than 64 MiB")

// writeNewestLast writes the history's lines q selects in the log's order; nothing is written
// when it fails.
func writeNewestLast(w io.Writer, f *os.File, end int64, path string, q AuditQuery) error {
	lines, err := auditHistory(f, end, path, q)
	if err != nil {
		return err
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if _, err := w.Write(lines[i]); err != nil {
			return err
		}
	}
	return nil
}

// copyFiltered copies the lines q selects of the rotated logs (oldest first) and of f's first end
// bytes.
func copyFiltered(w io.Writer, f *os.File, end int64, path string, q AuditQuery) error {
	n := 0
	for ; ; n++ {
		if _, err := os.Stat(path + "." + strconv.Itoa(n+1)); err != nil {
			break
		}
	}
	for i := n; i >= 1; i-- {
		rf, err := os.Open(path + "." + strconv.Itoa(i))
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away meanwhile
		}
		if err != nil {
			return err
		}
		err = filterLines(w, rf, q)
		rf.Close()
		if err != nil {
			return err
		}
	}
	if f == nil {
		return nil
	}
	return filterLines(w, io.NewSectionReader(f, 0, end), q)
}

// filterLines copies the lines of r that q selects.
func filterLines(w io.Writer, r io.Reader, q AuditQuery) error {
	br := bufio.NewReaderSize(r, tailChunk)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ok, _ := q.match(bytes.TrimSuffix(line, []byte("\n"))); ok {
				if _, werr := w.Write(line); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// auditHistory returns the lines q selects, newest first: from the open log f (its first end
// bytes), then the rotated files path.1, path.2, … until q.Last lines are found or a line is
// older than q.Since.
func auditHistory(f *os.File, end int64, path string, q AuditQuery) ([][]byte, error) {
	var out [][]byte
	held := 0
	visit := func(line []byte) bool {
		ok, older := q.match(line)
		if ok {
			out = append(out, append(bytes.Clone(line), '\n'))
			held += len(line) + 1
		}
		return !older && (q.Last < 0 || len(out) < q.Last) && held <= maxHistory
	}
	if q.Last == 0 {
		return nil, nil
	}
	if f != nil {
		more, err := readBackward(f, end, visit)
		if err != nil || !more {
			return out, tooMuch(held, err)
		}
	}
	for i := 1; ; i++ {
		rf, err := os.Open(path + "." + strconv.Itoa(i))
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		fi, err := rf.Stat()
		if err != nil {
			rf.Close()
			return out, err
		}
		more, err := readBackward(rf, fi.Size(), visit)
		rf.Close()
		if err != nil || !more {
			return out, tooMuch(held, err)
		}
	}
}

// tooMuch is err, or errTooMuchHistory when held passed maxHistory.
func tooMuch(held int, err error) error {
	if err == nil && held > maxHistory {
		return errTooMuchHistory
	}
	return err
}

// tailChunk is how much readBackward reads at a time.
const tailChunk = 64 << 10

// maxAuditLine bounds the line readBackward holds: a longer one (no audit entry is) is skipped.
const maxAuditLine = 4 << 20

// readBackward calls visit with each complete line of f's first end bytes, last line first,
// reading from the end in chunks, until visit returns false; more is false when it did.
func readBackward(f *os.File, end int64, visit func([]byte) bool) (more bool, err error) {
	var carry []byte  // the end of a line whose start is in a chunk not read yet
	skipping := false // the line being read is longer than maxAuditLine
	for pos := end; pos > 0; {
		n := min(int64(tailChunk), pos)
		pos -= n
		buf := make([]byte, n, n+int64(len(carry)))
		if _, err := f.ReadAt(buf, pos); err != nil {
			return false, err
		}
		buf = append(buf, carry...)
		if skipping && bytes.HasSuffix(buf, []byte("\n")) {
			skipping = false // the long line starts right after this chunk
		}
		for {
			i := bytes.LastIndexByte(bytes.TrimSuffix(buf, []byte("\n")), '\n')
			if i < 0 {
				break
			}
			if line := bytes.TrimRight(buf[i+1:], "\n"); len(line) > 0 && !skipping && !visit(line) {
				return false, nil
			}
			skipping = false
			buf = buf[:i+1]
		}
		if carry = buf; len(carry) > maxAuditLine {
			carry, skipping = nil, true
		}
	}
	if line := bytes.TrimRight(carry, "\n"); len(line) > 0 && !skipping && !visit(line) {
		return false, nil
	}
	return true, nil
}

// followAudit sends the lines appended to the log at path from f's offset on that q selects,
// until the request ends, following the log across rotations.
func followAudit(w http.ResponseWriter, r *http.Request, f *os.File, path string, q AuditQuery) {
	defer func() {
		if f != nil {
			f.Close() // a file opened after a rotation; closing the first again is harmless
		}
	}()
	flusher, _ := w.(http.Flusher)
	var partial []byte
	drain := func() error {
		if f == nil {
			return nil
		}
		data, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		partial = append(partial, data...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				return nil
			}
			if ok, _ := q.match(partial[:i]); ok {
				if _, err := w.Write(partial[:i+1]); err != nil {
					return err
				}
			}
			partial = partial[i+1:]
		}
	}
	for {
		if drain() != nil {
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
		if drain() != nil { // what the old file holds past the copy comes first
			return
		}
		if f != nil {
			f.Close()
		}
		partial = nil
		var err error
		if f, err = os.Open(path); err != nil {
			f = nil
		}
	}
}
