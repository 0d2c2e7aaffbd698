package host

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Per-call bounds of the egress audit (issue 10 §6: one call flooding refused DNS queries wrote
// 20,000 lines). A call is a Host.Call, with every process it runs (login checks, steps); a
// bundle's own command run through LifecycleEnv counts as one call per process.
const (
	// EgressAuditBytes caps the cli.egress lines one call writes. The decisions past it are
	// counted, and reported by a cli.audit_truncated line when the call ends.
	EgressAuditBytes = 64 << 10
	// EgressRefusedSamples and EgressAllowedSamples are how many distinct refused and allowed
	// decisions one call writes as cli.egress lines; later distinct decisions are only counted.
	EgressRefusedSamples = 32
	EgressAllowedSamples = 64
	// egressTracked bounds the distinct decisions counted one by one per call (memory); the
	// ones past it are counted together (untracked).
	egressTracked = 4096
	// egressRepeatedTop is how many repeated decisions the summary lists with their counts.
	egressRepeatedTop = 16
	// egressReasonMax cuts a reason longer than this (a name resolving to many refused addresses).
	egressReasonMax = 512
)

// EgressSummary is the cli.egress_summary audit entry, written when a call that made egress
// decisions ends: how many there were, and what was not written as a cli.egress line. Each
// distinct decision (same host, port, via, outcome, reason and address) is written once, when
// first seen, while the call's samples and bytes last; its repetitions are only counted.
type EgressSummary struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	CLIID     string `json:"cli_id"`
	Decisions int    `json:"decisions"`     // every decision of the call
	Allowed   int    `json:"allowed_count"` // not "allowed", which is a cli.egress line's outcome
	Refused   int    `json:"refused_count"`
	Logged    int    `json:"logged"`   // written as cli.egress lines
	Distinct  int    `json:"distinct"` // distinct decisions counted one by one
	// Unsampled are the distinct decisions not written because the call's samples were used up;
	// Untracked the decisions not counted one by one (past 4096 distinct); Dropped the lines the
	// byte cap kept out (see cli.audit_truncated).
	Unsampled int `json:"unsampled,omitempty"`
	Untracked int `json:"untracked,omitempty"`
	Dropped   int `json:"dropped,omitempty"`
	// Repeated are the decisions seen more than once, most frequent first (at most 16).
	Repeated []EgressCount `json:"repeated,omitempty"`
	TS       string        `json:"ts"`
}

// EgressCount is one distinct decision of a call and how often it was made.
type EgressCount struct {
	Host    string `json:"host"`
	Port    int    `json:"port,omitempty"`
	Addr    string `json:"addr,omitempty"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Via     string `json:"via,omitempty"`
	Count   int    `json:"count"`
}

// AuditTruncated is the cli.audit_truncated audit entry: a call's cli.egress lines reached
// EgressAuditBytes and Dropped more were not written.
type AuditTruncated struct {
	Type       string `json:"type"`
	CallID     string `json:"call_id"`
	CLIID      string `json:"cli_id"`
	Dropped    int    `json:"dropped"`
	LimitBytes int    `json:"limit_bytes"`
	TS         string `json:"ts"`
}

// callEgress aggregates the egress decisions of one call.
type callEgress struct {
	cliID string
	held  bool // a Host.Call holds it and writes its summary; else the session's end does
	seen  map[egressKey]*EgressCount
	sum   EgressSummary
	bytes int // of cli.egress lines written
	// samples of refused and allowed decisions written so far
	refusedSamples, allowedSamples int
}

type egressKey struct {
	host, addr, reason, via string
	port                    int
	allowed                 bool
}

// holdCall makes the audit aggregate callID's egress decisions until release, which writes its
// summary; Host.Call holds its call for its whole run.
func (a *auditLog) holdCall(callID, cliID string) (release func()) {
	a.cmu.Lock()
	ce := a.callLocked(callID, cliID)
	ce.held = true
	a.cmu.Unlock()
	return func() { a.endCall(callID, true) }
}

// egress records one decision of call callID, writing it as a cli.egress line when it is the
// first of its kind and the call's samples and bytes allow.
func (a *auditLog) egress(callID string, rec EgressDecision) {
	if a == nil || a.w == nil {
		return
	}
	if len(rec.Reason) > egressReasonMax {
		rec.Reason = strings.ToValidUTF8(rec.Reason[:egressReasonMax], "") + "…"
	}
	a.cmu.Lock()
	defer a.cmu.Unlock()
	ce := a.callLocked(callID, rec.CLIID)
	ce.sum.Decisions++
	if rec.Allowed {
		ce.sum.Allowed++
	} else {
		ce.sum.Refused++
	}
	k := egressKey{host: rec.Host, addr: rec.Addr, reason: rec.Reason, via: rec.Via, port: rec.Port, allowed: rec.Allowed}
	if c, ok := ce.seen[k]; ok {
		c.Count++
		return
	}
	if len(ce.seen) >= egressTracked {
		ce.sum.Untracked++
		return
	}
	ce.seen[k] = &EgressCount{Host: rec.Host, Port: rec.Port, Addr: rec.Addr, Allowed: rec.Allowed, Reason: rec.Reason, Via: rec.Via, Count: 1}
	samples, limit := &ce.refusedSamples, EgressRefusedSamples
	if rec.Allowed {
		samples, limit = &ce.allowedSamples, EgressAllowedSamples
	}
	if *samples >= limit {
		ce.sum.Unsampled++
		return
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	if ce.bytes+len(line)+1 > EgressAuditBytes {
		ce.sum.Dropped++
		return
	}
	*samples++
	ce.bytes += len(line) + 1
	ce.sum.Logged++
	a.writeLine(line)
}

// sessionEnd writes the summary of callID when no Host.Call holds it (a lifecycle command's
// egress session has ended).
func (a *auditLog) sessionEnd(callID string) { a.endCall(callID, false) }

// endCall writes callID's cli.audit_truncated (when lines were dropped) and cli.egress_summary
// lines and forgets the call; a held call only when release is true.
func (a *auditLog) endCall(callID string, release bool) {
	if a == nil {
		return
	}
	a.cmu.Lock()
	defer a.cmu.Unlock()
	ce, ok := a.calls[callID]
	if !ok || ce.held && !release {
		return
	}
	delete(a.calls, callID)
	if ce.sum.Decisions == 0 {
		return
	}
	ts := timestamp(time.Now())
	if ce.sum.Dropped > 0 {
		a.write(AuditTruncated{Type: "cli.audit_truncated", CallID: callID, CLIID: ce.cliID, Dropped: ce.sum.Dropped,
			LimitBytes: EgressAuditBytes, TS: ts})
	}
	ce.sum.Distinct = len(ce.seen)
	for _, c := range ce.seen {
		if c.Count > 1 {
			ce.sum.Repeated = append(ce.sum.Repeated, *c)
		}
	}
	slices.SortFunc(ce.sum.Repeated, func(x, y EgressCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), strings.Compare(x.Host, y.Host), strings.Compare(x.Reason, y.Reason))
	})
	ce.sum.Repeated = ce.sum.Repeated[:min(len(ce.sum.Repeated), egressRepeatedTop)]
	ce.sum.TS = ts
	a.write(ce.sum)
}

// callLocked returns callID's aggregate, creating it; a.cmu is held.
func (a *auditLog) callLocked(callID, cliID string) *callEgress {
	if a.calls == nil {
		a.calls = map[string]*callEgress{}
	}
	ce, ok := a.calls[callID]
	if !ok {
		ce = &callEgress{cliID: cliID, seen: map[egressKey]*EgressCount{},
			sum: EgressSummary{Type: "cli.egress_summary", CallID: callID, CLIID: cliID}}
		a.calls[callID] = ce
	}
	return ce
}
