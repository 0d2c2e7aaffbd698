package approval

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/clihost/clihost/errcode"
)

// DefaultTTL is how long a pending approval (and the requestState an MCP client gets for it) is
// valid.
const DefaultTTL = 10 * time.Minute

// maxPending bounds the pending approvals kept, maxPerCaller those of one caller (front end, user
// and socket uid), so that one caller's flood does not push the others' out; the oldest go first.
const (
	maxPending   = 1024
	maxPerCaller = 256
)

// Request is one call to decide.
type Request struct {
	Bundle    string   // bundle id
	BundleKey string   // id@major, part of the binding
	Tool      string   // TOOL.md id
	ToolPath  string   // command path ("pr merge")
	Approval  string   // the TOOL.md approval field
	Mutates   []string // the TOOL.md mutates field
	// Runner digests what the tool runs and how (an approval does not survive a change to it); it
	// is called only for calls that need an approval. Nil: nothing to bind.
	Runner    func() string
	Input     map[string]any // the validated input, defaults filled in
	Via       string         // front end (ViaMCP, …)
	User      string         // the caller's user name
	Agent     string         // the agent token's name (MCP over the daemon's HTTP), or ""
	Workspace string         // absolute workspace
	PeerUID   int            // the control-socket caller's uid, -1 for none
}

// Answer is what a front end collected for a call: the requestState it was given back and the
// person's answer, or nothing.
type Answer struct {
	State    string // the signed state Pending.State gave out
	Approved bool   // the person approved (false: declined or dismissed)
	By       string // who answered, for the audit log ("mcp client claude-code 2.1 (elicitation)")
}

// Record is what the audit log keeps about an approval.
type Record struct {
	Class       string `json:"class"`
	Decision    string `json:"decision"` // approved, denied, required, invalid
	By          string `json:"by,omitempty"`
	At          string `json:"at,omitempty"`
	RequestID   string `json:"request_id,omitempty"`
	InputSHA256 string `json:"input_sha256"`
}

// Pending is a call waiting for an approval.
type Pending struct {
	ID       string `json:"id"`
	Bundle   string `json:"bundle"`
	Tool     string `json:"tool"`
	ToolPath string `json:"tool_path"`
	Input    string `json:"input"` // the arguments as JSON, shortened for display
	// Workspace is the folder the call runs in (invisible characters escaped, for display).
	Workspace string    `json:"workspace"`
	Via       string    `json:"via"`
	User      string    `json:"user,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	PeerUID   int       `json:"peer_uid"`
	Reason    string    `json:"reason"`
	Created   time.Time `json:"created"`
	Deadline  time.Time `json:"deadline"`
	Answer    string    `json:"answer,omitempty"` // "", approved or denied (by an operator)
	By        string    `json:"by,omitempty"`

	binding string
	state   string
}

// State is the signed requestState that stands for this pending approval.
func (p *Pending) State() string { return p.state }

// Question is the text shown to the person asked.
func (p *Pending) Question() string {
	return fmt.Sprintf("Allow %s %s with arguments %s in %s? %s. (approval %s, valid until %s)",
		p.Bundle, p.ToolPath, p.Input, p.Workspace, upperFirst(p.Reason), p.ID, p.Deadline.UTC().Format(time.RFC3339))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Outcome is the gate's verdict on one call.
type Outcome struct {
	Run     bool
	Record  *Record      // nil when the call needed no approval and no rule spoke
	Code    errcode.Code // approval_required, approval_denied, approval_invalid when !Run
	Message string       // when !Run
	Hint    string       // when !Run
	Pending *Pending     // approval_required: what waits (a copy)
	// Elicit says whether an MCP front end may ask its client (the policy allows it).
	Elicit bool
}

// Gate decides calls and keeps the pending approvals. It lives as long as the daemon (reloads
// keep it); its key signs requestStates, so a restart voids them.
type Gate struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	served bool // pending approvals are answered through the daemon's control socket (Served)

	mu      sync.Mutex
	policy  *Policy
	pending map[string]*Pending // by id
	used    map[string]spent    // consumed or refused ids (their requestState is refused until its deadline)
}

// spent is an approval id that may not approve a call any more: used once, or refused by an
// operator (then a client's later "accept" of the same question is refused too).
type spent struct {
	until    time.Time // the approval's deadline: its requestState is refused at least until then
	deniedBy string    // the operator who refused it; "" when it was used
}

// NewGate makes a gate with policy (nil: no rules).
func NewGate(policy *Policy) *Gate {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("approval: crypto/rand: " + err.Error()) // the kernel's random source never fails on Linux ≥ 3.17
	}
	if policy == nil {
		policy = &Policy{}
	}
	return &Gate{key: key, ttl: DefaultTTL, now: time.Now, policy: policy, pending: map[string]*Pending{}, used: map[string]spent{}}
}

// Served says that this gate's pending approvals can be answered with clihostctl approve: it is
// the daemon's (a gate in another process, such as clihostctl serve-mcp's, is reached by nobody).
func (g *Gate) Served() *Gate {
	g.served = true
	return g
}

// SetPolicy replaces the policy (a reload).
func (g *Gate) SetPolicy(p *Policy) {
	if p == nil {
		p = &Policy{}
	}
	g.mu.Lock()
	g.policy = p
	g.mu.Unlock()
}

// Policy returns the policy in force.
func (g *Gate) Policy() *Policy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.policy
}

// Decide says whether req may run, given the answer its front end collected (nil: none).
func (g *Gate) Decide(req Request, ans *Answer) Outcome {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	class := g.policy.ClassOf(req.Approval, req.Mutates)
	need, reason := class.Needed, class.Reason
	rule, i, ruled := g.policy.match(&req)
	if ruled {
		need = rule.Decision
		reason = fmt.Sprintf("rule %d of %s says %s", i+1, g.policy.sourceName(), rule.Decision)
	}
	ref, byRef := strings.CutPrefix(class.Name, "policy:")
	if need == Allow && class.Needed == Allow && (ruled || !byRef) {
		return Outcome{Run: true} // nothing asked for an approval: no record, no digest (every auto call)
	}
	rec := &Record{Class: class.Name, InputSHA256: inputDigest(req.Input)}
	switch {
	case need == Allow && ruled: // the operator's rule approved it in advance
		rec.Decision, rec.By, rec.At = "approved", fmt.Sprintf("policy %s rule %d", g.policy.sourceName(), i+1), stamp(g.now())
		return Outcome{Run: true, Record: rec}
	case need == Allow: // policy:REF, which the operator's policies.REF allows
		rec.Decision, rec.By, rec.At = "approved", fmt.Sprintf("policy %s policies.%s", g.policy.sourceName(), escapeInvisible(ref)), stamp(g.now())
		return Outcome{Run: true, Record: rec}
	}
	reason = escapeInvisible(reason) // it holds the bundle's words (mutates, the policy ref): shown on terminals
	digest := rec.InputSHA256
	switch need {
	case Deny:
		rec.Decision = "denied"
		rec.By = reason
		return Outcome{Code: errcode.ApprovalDenied, Record: rec,
			Message: fmt.Sprintf("%s %s may not run here: %s", req.Bundle, req.ToolPath, reason),
			Hint:    "the operator's approval policy refuses this tool; ask the operator to change " + g.policy.sourceName()}
	}
	binding := bindingOf(req, digest)
	if ans != nil && ans.State != "" {
		return g.answered(req, ans, binding, rec)
	}
	// An operator's answer to a pending call with the same binding.
	for id, p := range g.pending {
		if p.binding != binding || p.Answer == "" {
			continue
		}
		delete(g.pending, id)
		g.used[id] = spent{until: p.Deadline, deniedBy: g.used[id].deniedBy}
		rec.RequestID, rec.By, rec.At = id, p.By, stamp(g.now())
		if p.Answer == "approved" {
			rec.Decision = "approved"
			return Outcome{Run: true, Record: rec}
		}
		rec.Decision = "denied"
		return Outcome{Code: errcode.ApprovalDenied, Record: rec, Message: fmt.Sprintf("%s denied this call (approval %s)", p.By, id),
			Hint: "do not repeat it; ask the user what to do instead"}
	}
	p := g.pendingFor(req, binding, reason)
	rec.Decision, rec.RequestID = "required", p.ID
	out := *p
	return Outcome{Code: errcode.ApprovalRequired, Record: rec, Pending: &out, Elicit: g.policy.ElicitationAllowed(),
		Message: fmt.Sprintf("%s %s needs an approval: %s", req.Bundle, req.ToolPath, reason), Hint: g.howToApprove(req.Via, p)}
}

// howToApprove is the hint of an approval_required error: who can approve, where.
func (g *Gate) howToApprove(via string, p *Pending) string {
	policy := fmt.Sprintf("or the operator allows the tool in the approval policy (%s)", g.policy.sourceName())
	switch via {
	case ViaCLI:
		return "run the call from a terminal to be asked, " + policy
	case ViaStdio:
		if !g.policy.ElicitationAllowed() {
			return fmt.Sprintf("the approval policy lets no MCP client ask its user (elicitation: false): ask the operator to allow the tool in the approval policy (%s)", g.policy.sourceName())
		}
		return "this MCP client cannot ask its user (it does not declare elicitation): use one that does, " + policy
	}
	if !g.served {
		return "no operator can answer this server's pending calls (it is not clihostd): use an MCP client that declares elicitation, serve the bundle through clihostd, " + policy
	}
	return fmt.Sprintf("ask the user to approve it: root or clihostd's user runs `clihostctl approve %s` before %s, then repeat exactly the same call; %s",
		p.ID, p.Deadline.UTC().Format(time.RFC3339), policy)
}

// answered checks an answer against the call it claims to answer.
func (g *Gate) answered(req Request, ans *Answer, binding string, rec *Record) Outcome {
	id, err := g.verify(ans.State, binding)
	if err == nil && !g.policy.ElicitationAllowed() {
		err = errors.New("the operator's approval policy does not let MCP clients approve calls (elicitation: false)")
	}
	if err != nil {
		rec.Decision = "invalid"
		return Outcome{Code: errcode.ApprovalInvalid, Record: rec, Message: "the approval does not answer this call: " + err.Error(),
			Hint: "repeat the call without the old answer to be asked again"}
	}
	if s := g.used[id]; s.deniedBy != "" { // the operator's refusal is final, whatever the client answers
		delete(g.pending, id)
		rec.Decision, rec.RequestID, rec.By, rec.At = "denied", id, s.deniedBy, stamp(g.now())
		return Outcome{Code: errcode.ApprovalDenied, Record: rec, Message: fmt.Sprintf("%s denied this call (approval %s)", s.deniedBy, id),
			Hint: "do not repeat it; ask the user what to do instead"}
	}
	g.used[id] = spent{until: g.now().Add(g.ttl)}
	delete(g.pending, id)
	rec.RequestID, rec.By, rec.At = id, ans.By, stamp(g.now())
	if !ans.Approved {
		rec.Decision = "denied"
		return Outcome{Code: errcode.ApprovalDenied, Record: rec, Message: fmt.Sprintf("the user did not approve %s %s", req.Bundle, req.ToolPath),
			Hint: "do not repeat it; ask the user what to do instead"}
	}
	rec.Decision = "approved"
	return Outcome{Run: true, Record: rec}
}

// pendingFor returns the pending approval of binding, creating it. A caller past maxPerCaller
// pending calls loses its own oldest; past maxPending in all, the oldest goes.
func (g *Gate) pendingFor(req Request, binding, reason string) *Pending {
	var oldest, oldestMine *Pending
	mine := 0
	for _, p := range g.pending {
		if p.binding == binding {
			return p
		}
		if p.Via == req.Via && p.User == req.User && p.PeerUID == req.PeerUID {
			mine++
			if oldestMine == nil || p.Created.Before(oldestMine.Created) {
				oldestMine = p
			}
		}
		if oldest == nil || p.Created.Before(oldest.Created) {
			oldest = p
		}
	}
	switch {
	case mine >= maxPerCaller:
		delete(g.pending, oldestMine.ID)
	case len(g.pending) >= maxPending:
		delete(g.pending, oldest.ID)
	}
	now := g.now()
	p := &Pending{ID: newID(), Bundle: req.Bundle, Tool: req.Tool, ToolPath: req.ToolPath, Input: displayInput(req.Input), Workspace: escapeInvisible(req.Workspace), Via: req.Via,
		User: req.User, Agent: req.Agent, PeerUID: req.PeerUID, Reason: reason, Created: now, Deadline: now.Add(g.ttl), binding: binding}
	p.state = g.sign(p.ID, binding, p.Deadline)
	g.pending[p.ID] = p
	return p
}

// List returns the pending approvals, oldest first.
func (g *Gate) List() []Pending {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	out := make([]Pending, 0, len(g.pending))
	for _, p := range g.pending {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pending) int { return a.Created.Compare(b.Created) })
	return out
}

// ErrUnknown is returned for an id that is not pending (never was, expired or already used).
var ErrUnknown = errors.New("no such pending approval (it expired, was used, or never existed)")

// Get returns a pending approval.
func (g *Gate) Get(id string) (Pending, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	p, ok := g.pending[id]
	if !ok {
		return Pending{}, ErrUnknown
	}
	return *p, nil
}

// Answer records an operator's answer to a pending call; the caller repeats the call to use it.
func (g *Gate) Answer(id string, approve bool, by string) (Pending, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	p, ok := g.pending[id]
	if !ok {
		return Pending{}, ErrUnknown
	}
	if p.Answer != "" {
		return *p, fmt.Errorf("approval %s was already %s by %s", id, p.Answer, p.By)
	}
	p.Answer, p.By = "denied", by
	if approve {
		p.Answer = "approved"
	} else {
		// The requestState an MCP client holds for it is refused from now on, even after p
		// leaves the pending list (expired, or pushed out by newer calls).
		g.used[id] = spent{until: p.Deadline, deniedBy: by}
	}
	return *p, nil
}

// prune drops expired pending approvals and consumed ids past their deadline.
func (g *Gate) prune() {
	now := g.now()
	for id, p := range g.pending {
		if !now.Before(p.Deadline) {
			delete(g.pending, id)
		}
	}
	for id, s := range g.used {
		if !now.Before(s.until) {
			delete(g.used, id)
		}
	}
}

// sign makes the requestState of a pending approval: its id, binding and deadline, MACed.
func (g *Gate) sign(id, binding string, deadline time.Time) string {
	body := id + "." + binding + "." + strconv.FormatInt(deadline.Unix(), 10)
	return "ca1." + base64.RawURLEncoding.EncodeToString([]byte(body)) + "." + base64.RawURLEncoding.EncodeToString(g.mac(body))
}

func (g *Gate) mac(body string) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte("clihost approval state v1\x00"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// verify checks a requestState: signed by this gate, for binding, before its deadline, not used
// (an id an operator refused is returned: the caller answers approval_denied).
func (g *Gate) verify(state, binding string) (string, error) {
	parts := strings.Split(state, ".")
	if len(parts) != 3 || parts[0] != "ca1" {
		return "", errors.New("the request state is not one clihost issued")
	}
	body, err1 := base64.RawURLEncoding.DecodeString(parts[1])
	mac, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || !hmac.Equal(mac, g.mac(string(body))) {
		return "", errors.New("the request state was altered or issued by another daemon run")
	}
	fields := strings.Split(string(body), ".")
	if len(fields) != 3 {
		return "", errors.New("the request state is malformed")
	}
	id, bound, exp := fields[0], fields[1], fields[2]
	if bound != binding {
		return "", errors.New("it was given for a different call (tool, arguments, caller or workspace differ)")
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !g.now().Before(time.Unix(sec, 0)) {
		return "", errors.New("it expired")
	}
	if s, used := g.used[id]; used && s.deniedBy == "" {
		return "", fmt.Errorf("approval %s was already used", id)
	}
	return id, nil
}

// bindingOf is what an approval is bound to: everything that makes two calls the same call.
func bindingOf(req Request, digest string) string {
	runner := ""
	if req.Runner != nil {
		runner = req.Runner()
	}
	b, _ := json.Marshal([]any{req.BundleKey, req.Tool, runner, digest, req.Via, req.User, req.Agent, req.Workspace, req.PeerUID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// inputDigest is the SHA-256 of the input's JSON (object keys sorted, numbers as sent).
func inputDigest(in map[string]any) string {
	b, err := json.Marshal(in)
	if err != nil {
		b = []byte(fmt.Sprintf("%#v", in))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// maxDisplay bounds the arguments shown in a question; maxShown bounds one string in them, so that
// one long value does not push the other arguments out of the question.
const (
	maxDisplay = 2000
	maxShown   = 400
)

// displayInput is the input as JSON for a person to read: keys sorted, a string longer than
// maxShown cut after its quote ("…"…(N bytes more), which JSON never holds), every character a
// person cannot see — controls, format characters (bidi, zero-width, soft hyphen, byte order
// mark, tags), variation selectors, spaces other than U+0020, line and paragraph separators — as
// a \u escape, and the whole shortened.
func displayInput(in map[string]any) string {
	var b strings.Builder
	writeDisplay(&b, in)
	s := escapeInvisible(b.String())
	if len(s) > maxDisplay {
		cut := maxDisplay
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("… (%d bytes more)", len(s)-cut)
	}
	return s
}

// writeDisplay writes v (decoded JSON) as JSON, with long strings cut (see displayInput).
func writeDisplay(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeDisplay(b, k)
			b.WriteByte(':')
			writeDisplay(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeDisplay(b, e)
		}
		b.WriteByte(']')
	case string:
		cut := len(x)
		if cut > maxShown {
			for cut = maxShown; cut > 0 && !utf8Start(x[cut]); cut-- {
			}
		}
		q, _ := json.Marshal(x[:cut])
		b.Write(q)
		if cut < len(x) {
			fmt.Fprintf(b, "…(%d bytes more)", len(x)-cut)
		}
	default:
		q, err := json.Marshal(x)
		if err != nil {
			q = []byte("(unprintable)")
		}
		b.Write(q)
	}
}

// escapeInvisible writes each character of s a person cannot see as a \u escape.
func escapeInvisible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector),
			unicode.Is(unicode.Zs, r) && r != ' ':
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func utf8Start(b byte) bool { return b&0xc0 != 0x80 }

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "ap-" + hex.EncodeToString(b)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (p *Policy) sourceName() string {
	if p == nil || p.Source == "" {
		return "the approval policy file (clihostd --approvals)"
	}
	return p.Source
}
