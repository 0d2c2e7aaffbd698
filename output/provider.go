package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The output formats of agent CLIs used as providers (the CLI provider adapter protocol).
const (
	ProviderText       = "text"        // the whole output is the answer
	ProviderJSON       = "json"        // one JSON object; the answer is in a content field
	ProviderStreamJSON = "stream-json" // JSON Lines events; the answer is accumulated from them
)

// Usage is a provider call's token count.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// ProviderResult is what an agent CLI answered.
type ProviderResult struct {
	// Content is the answer text, with metadata events and echoed prompts left out.
	Content string `json:"content"`
	// Usage is taken from the output (Anthropic's usage.input_tokens/output_tokens, OpenAI's
	// prompt_tokens/completion_tokens, Gemini's stats); when the output has none it is estimated.
	Usage Usage `json:"usage"`
	// Estimated says Usage was estimated as ceil(characters/4) (see EstimateTokens): output tokens
	// from Content; input tokens are 0 until the caller fills them in from the prompt.
	Estimated bool `json:"estimated"`
	// Error is the text of an error the output reports (a stream's error event, a JSON error object,
	// a result flagged is_error), empty when there is none. A result can carry content and an error.
	Error string `json:"error,omitempty"`
	// Retries are the notices of the CLI's own retries (Claude Code's system/api_retry events,
	// Codex's "Reconnecting..." error events), oldest first: they are not the call's errors (the
	// CLI went on), but they say why a call that ran out of time was still waiting.
	Retries []string `json:"retries,omitempty"`
}

// EstimateTokens is the protocol's estimate for text without a reported count: ceil(characters/4).
func EstimateTokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// ParseProvider extracts the answer of an agent CLI from its output in format (text, json or
// stream-json) after stripping ANSI escapes:
//
//   - text: the trimmed output.
//   - json: one object (or an array of stream events, Qwen Code's json, read as stream-json); the first of content, text, response, message, output, result that is a
//     string, else Anthropic content blocks (content[].text), else OpenAI choices
//     (choices[0].message.content, choices[0].text), else message.content / message.text. Output
//     that is not JSON is taken as text.
//   - stream-json: one event per line; see parseStream for the event shapes. Lines that are not
//     JSON objects are ignored when any line is one, and the output is taken as text otherwise.
//
// It fails only for an unknown format.
func ParseProvider(format string, data []byte) (ProviderResult, error) {
	s := strings.ToValidUTF8(StripANSI(string(data)), "\uFFFD")
	var r ProviderResult
	var found bool
	switch format {
	case ProviderText, "":
		r.Content = strings.TrimSpace(s)
	case ProviderJSON:
		if lines, ok := messageArray(s); ok { // Qwen Code's json: the stream's messages as one array
			r, found = parseStream(lines)
			break
		}
		v, ok := decodeObject(strings.TrimSpace(s))
		if !ok {
			if !json.Valid([]byte(s)) { // not JSON: the text is the answer; other JSON values hold none
				r.Content = strings.TrimSpace(s)
			}
			break
		}
		r.Content = jsonContent(v)
		r.Error = jsonError(v)
		r.Usage, found = usageOf(v)
	case ProviderStreamJSON:
		r, found = parseStream(s)
	default:
		return ProviderResult{}, fmt.Errorf("unknown provider output format %q (want text, json or stream-json)", format)
	}
	if !found {
		r.Usage = Usage{OutputTokens: EstimateTokens(r.Content)}
		r.Estimated = true
	}
	return r, nil
}

// messageArray turns a JSON array of objects (Qwen Code's --output-format json: [{"type":"system",…},
// {"type":"assistant",…}, {"type":"result",…}]) into JSON Lines, one object a line.
func messageArray(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") {
		return "", false
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal([]byte(s), &msgs); err != nil || len(msgs) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, m := range msgs {
		var c bytes.Buffer
		if json.Compact(&c, m) != nil || !bytes.HasPrefix(c.Bytes(), []byte("{")) {
			return "", false
		}
		b.Write(c.Bytes())
		b.WriteByte('\n')
	}
	return b.String(), true
}

func decodeObject(s string) (map[string]any, bool) {
	if !strings.HasPrefix(s, "{") {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil, false
	}
	return v, true
}

// metadataEvents carry no answer text: session and turn bookkeeping (Claude Code, Codex, Gemini,
// OpenCode), tool traffic, and Claude's final result (which repeats the assistant's text). Their
// usage is still read.
var metadataEvents = map[string]bool{
	"system": true, "init": true, "result": true, "thread.started": true, "turn.started": true,
	"turn.completed": true, "step_start": true, "step_finish": true, "item.started": true,
	"item.updated": true, "tool_use": true, "tool_result": true, "user": true, "stream_event": true,
	"ping": true, "message_start": true, "message_stop": true, "content_block_start": true,
	"content_block_stop": true, "session.started": true, "session.completed": true,
}

// parseStream accumulates the answer from JSON Lines events:
//
//   - Claude (protocol form) {"type":"content","content":"…"}: deltas, joined as they come.
//   - Claude Code {"type":"assistant","message":{"content":[{"type":"text","text":"…"},…]}}: whole
//     messages; a "<synthetic>" model's message is Claude Code's report of a failed request, not
//     an answer.
//   - Codex {"type":"item.completed","item":{"type":"agent_message","text":"…"}} (or
//     item.agent_message.text); other item types (reasoning, commands) are skipped.
//   - Gemini {"type":"message","role":"assistant","content":"…","delta":true}.
//   - ax-glm / ax-grok {"role":"assistant","content":"…"}; {"role":"user",…} is the echoed prompt.
//   - OpenAI chunks {"choices":[{"delta":{"content":"…"}}]}, Anthropic
//     {"type":"content_block_delta","delta":{"text":"…"}} and any other event by the json rules.
//
// Claude Code's final {"type":"result","result":"…"} (also Qwen Code's) is the answer when it
// carries one and is not an error: the assistant events before it split the same text into one
// event per content block, and joining those adds separators the answer does not have.
//
// Metadata events are skipped. Usage is the last one an event reports (turn.completed and
// result usage, Gemini's result stats). Errors come from error events, turn.failed, a result
// with is_error or status "error", and {"error":…}; the CLI's own retry notices (see
// retryNotice) are collected in Retries, not as errors.
func parseStream(s string) (r ProviderResult, usageFound bool) {
	var b strings.Builder
	var errs []string
	jsonLines := 0
	resultText := "" // Claude Code's final result: the answer, when the stream has one
	haveResult := false
	lastWhole := false // the previous chunk was a whole message: separate the next one
	add := func(text string, whole bool) {
		if text == "" {
			return
		}
		if b.Len() > 0 && (whole || lastWhole) && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString(text)
		lastWhole = whole
	}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		v, ok := decodeObject(line)
		if !ok {
			continue
		}
		jsonLines++
		if u, ok := usageOf(v); ok {
			r.Usage, usageFound = u, true
		}
		if n := retryNotice(v); n != "" {
			r.Retries = append(r.Retries, n)
			continue
		}
		if e := jsonError(v); e != "" {
			errs = append(errs, e)
		}
		typ, _ := v["type"].(string)
		role, _ := v["role"].(string)
		if isErr, _ := v["is_error"].(bool); typ == "result" && !isErr {
			if t, ok := v["result"].(string); ok {
				resultText, haveResult = t, true
			}
		}
		switch {
		case typ == "error" || typ == "turn.failed":
			continue
		case typ == "assistant":
			if m, ok := v["message"].(map[string]any); ok {
				if str(m["model"]) == "<synthetic>" { // Claude Code's own text for a failed request ("API Error: …")
					continue
				}
				add(blocksText(m["content"]), true)
			} else {
				add(str(v["content"]), true)
			}
		case typ == "item.completed":
			item, _ := v["item"].(map[string]any)
			it, _ := item["type"].(string)
			if am, ok := item["agent_message"].(map[string]any); ok {
				add(str(am["text"]), true)
			} else if it == "agent_message" || it == "" {
				add(str(item["text"]), true)
			}
		case typ == "content_block_delta":
			d, _ := v["delta"].(map[string]any)
			add(str(d["text"]), false)
		case metadataEvents[typ]:
		case role == "user" || role == "system" || role == "tool":
		case role == "assistant":
			delta, _ := v["delta"].(bool)
			text := str(v["content"])
			if text == "" {
				text = blocksText(v["content"])
			}
			add(text, !delta)
		case typ == "content":
			add(str(v["content"]), false)
		default:
			if ch := choice(v); ch != nil {
				if d, ok := ch["delta"].(map[string]any); ok {
					add(str(d["content"]), false)
					continue
				}
			}
			add(jsonContent(v), true)
		}
	}
	if jsonLines == 0 {
		return ProviderResult{Content: strings.TrimSpace(s)}, false
	}
	r.Content = strings.TrimSpace(b.String())
	if haveResult && strings.TrimSpace(resultText) != "" {
		r.Content = strings.TrimSpace(resultText)
	}
	r.Error = strings.Join(errs, "\n")
	return r, usageFound
}

// jsonContent applies the content-field priority to one JSON object.
func jsonContent(v map[string]any) string {
	for _, k := range []string{"content", "text", "response", "message", "output", "result"} {
		if s, ok := v[k].(string); ok {
			return s
		}
	}
	if t := blocksText(v["content"]); t != "" {
		return t
	}
	if ch := choice(v); ch != nil {
		if m, ok := ch["message"].(map[string]any); ok {
			if s := str(m["content"]); s != "" {
				return s
			}
			if t := blocksText(m["content"]); t != "" {
				return t
			}
		}
		if s := str(ch["text"]); s != "" {
			return s
		}
	}
	for _, k := range []string{"message", "response", "output", "result"} {
		if m, ok := v[k].(map[string]any); ok {
			if s := str(m["content"]); s != "" {
				return s
			}
			if s := str(m["text"]); s != "" {
				return s
			}
			if t := blocksText(m["content"]); t != "" {
				return t
			}
		}
	}
	return ""
}

// blocksText joins the text of Anthropic-style content blocks ([{"type":"text","text":"…"}, …]);
// other block types (tool_use, thinking, images) are skipped.
func blocksText(v any) string {
	blocks, ok := v.([]any)
	if !ok {
		return ""
	}
	var parts []string
	for _, x := range blocks {
		switch b := x.(type) {
		case string:
			parts = append(parts, b)
		case map[string]any:
			if t, _ := b["type"].(string); t != "" && t != "text" && t != "output_text" {
				continue
			}
			if s := str(b["text"]); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "")
}

func choice(v map[string]any) map[string]any {
	chs, _ := v["choices"].([]any)
	if len(chs) == 0 {
		return nil
	}
	ch, _ := chs[0].(map[string]any)
	return ch
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// retryNoticePattern is how Codex announces a retry of its own in an error event:
// "Reconnecting... 2/5 (stream disconnected before completion: …)", "Reconnecting... waiting for
// network (Connection failed: error sending request)".
var retryNoticePattern = regexp.MustCompile(`^(?i:reconnecting\.\.\.)`)

// retryNotice is the text of an event that announces one of the CLI's own retries, "" for any
// other event: Claude Code's {"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,
// "error_status":502,"error":"server_error"} (an attempt without a response, error_status null,
// reads "connection failed"), and Codex's {"type":"error","message":"Reconnecting... …"}.
func retryNotice(v map[string]any) string {
	typ, _ := v["type"].(string)
	switch {
	case typ == "system" && str(v["subtype"]) == "api_retry":
		attempt, _ := num(v["attempt"])
		max, _ := num(v["max_retries"])
		what := str(v["error"])
		if status, ok := num(v["error_status"]); ok {
			what = fmt.Sprintf("%s (HTTP %d)", what, status)
		} else {
			what += " (connection failed: no response)"
		}
		return fmt.Sprintf("API retry %d/%d: %s", attempt, max, what)
	case typ == "error" && retryNoticePattern.MatchString(str(v["message"])):
		return str(v["message"])
	}
	return ""
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// jsonError is the error an object reports: {"type":"error","message":…} (Gemini's severity
// "warning" is not one), {"type":"turn.failed","error":{"message":…}}, {"error":"…"} or
// {"error":{"message":…}}, and a result with is_error true or status "error".
func jsonError(v map[string]any) string {
	typ, _ := v["type"].(string)
	if typ == "system" { // Claude Code's bookkeeping (init, api_retry, …) reports no error of the call
		return ""
	}
	if sev, _ := v["severity"].(string); typ == "error" && sev != "" && sev != "error" {
		return ""
	}
	if e := errorText(v["error"]); e != "" {
		return e
	}
	if typ == "error" {
		if s := str(v["message"]); s != "" {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	isErr, _ := v["is_error"].(bool)
	if isErr || str(v["status"]) == "error" {
		if s := jsonContent(v); s != "" {
			return s
		}
		if errs := stringList(v["errors"]); len(errs) > 0 { // Claude Code's error_during_execution
			return strings.Join(errs, "\n")
		}
		if s := str(v["subtype"]); s != "" {
			return s
		}
		return "the provider reported an error"
	}
	return ""
}

func errorText(e any) string {
	switch t := e.(type) {
	case string:
		return t
	case map[string]any:
		msg := str(t["message"])
		for _, k := range []string{"type", "code", "status"} {
			if c := fmt.Sprint(t[k]); t[k] != nil && c != "" && !strings.Contains(msg, c) {
				msg = strings.TrimSpace(c + ": " + msg)
			}
		}
		if msg == "" {
			b, _ := json.Marshal(t)
			msg = string(b)
		}
		return msg
	}
	return ""
}

// usageOf reads a token count: usage.{input_tokens,output_tokens} (Anthropic, Codex),
// usage.{prompt_tokens,completion_tokens} (OpenAI), stats.{input_tokens,output_tokens} (Gemini
// stream-json), usageMetadata.{promptTokenCount,candidatesTokenCount} (Gemini API) and the summed
// stats.models.*.tokens.{prompt,candidates} of Gemini's json output.
func usageOf(v map[string]any) (Usage, bool) {
	pair := func(m map[string]any, in, out string) (Usage, bool) {
		i, iok := num(m[in])
		o, ook := num(m[out])
		return Usage{InputTokens: i, OutputTokens: o}, iok || ook
	}
	for _, k := range []string{"usage", "stats"} {
		if m, ok := v[k].(map[string]any); ok {
			if u, ok := pair(m, "input_tokens", "output_tokens"); ok {
				return u, true
			}
			if u, ok := pair(m, "prompt_tokens", "completion_tokens"); ok {
				return u, true
			}
		}
	}
	if m, ok := v["usageMetadata"].(map[string]any); ok {
		if u, ok := pair(m, "promptTokenCount", "candidatesTokenCount"); ok {
			return u, true
		}
	}
	if st, ok := v["stats"].(map[string]any); ok {
		if models, ok := st["models"].(map[string]any); ok {
			var sum Usage
			found := false
			for _, mv := range models {
				mm, _ := mv.(map[string]any)
				tok, _ := mm["tokens"].(map[string]any)
				if u, ok := pair(tok, "prompt", "candidates"); ok {
					sum.InputTokens += u.InputTokens
					sum.OutputTokens += u.OutputTokens
					found = true
				}
			}
			return sum, found
		}
	}
	return Usage{}, false
}

func num(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseFloat(string(n), 64)
		return int(i), err == nil
	case float64:
		return int(n), true
	}
	return 0, false
}

// ProviderError is a failed provider call classified by the protocol: its category and whether
// to retry the same provider (after RetryAfterMS when set) or fall back to the next one.
type ProviderError struct {
	Category       string `json:"category"`
	ShouldRetry    bool   `json:"should_retry"`
	ShouldFallback bool   `json:"should_fallback"`
	RetryAfterMS   int64  `json:"retry_after_ms,omitempty"`
	// Message is the text that was classified, at most MaxProviderMessage characters.
	Message string `json:"message,omitempty"`
}

// MaxProviderMessage bounds ProviderError.Message (in characters).
const MaxProviderMessage = 500

// ClassifyProvider classifies a failed provider call from its output (stderr, stdout or both) and
// exit code, as the protocol classifies a spawn result: an error the output reports as JSON (an
// error event, {"error":…}, a result with is_error) takes precedence over the rest of the text;
// when the JSON reports none, the CLI's last retry notice does (Claude Code's api_retry events,
// Codex's "Reconnecting..."; see retryNotice), and the notices are never read as errors
// themselves. Empty output is classified as "Exit code: N".
//
// A local failure (see CategoryLocal: a file the CLI could not use, the egress proxy's policy
// refusal) takes the place of the categories its words would otherwise match (authentication for
// "permission denied" and the proxy's 403, not_found for ENOENT, configuration, validation,
// unknown); a provider's quota, rate limit, network, server or timeout error in the same text
// keeps its own category. The other categories are checked in the protocol's order (see
// Classify). When the text matches no category, exit 124 (timeout(1)) is timeout and exit 127
// (the shell's "command not found") is not_found.
func ClassifyProvider(text string, exitCode int) ProviderError {
	text = strings.TrimSpace(StripANSI(text))
	if e, retries := jsonErrors(text); e != "" {
		text = e
	} else if len(retries) > 0 {
		text = retries[len(retries)-1]
	}
	if text == "" {
		text = fmt.Sprintf("Exit code: %d", exitCode)
	}
	cl := Classify(text)
	if localMasks[cl.Category] && localFailure.MatchString(text) {
		cl = localClass
	}
	if cl.Category == CategoryUnknown {
		switch exitCode {
		case 124:
			cl = Classify("timed out")
		case 127:
			cl = Classify("command not found")
		}
	}
	return providerError(cl, text)
}

// ClassifyTimeout classifies a provider call stopped at its deadline from what it printed before
// (its partial stdout and stderr): the CLI's last error or retry notice says what it was waiting
// for ("Reconnecting... waiting for network" is network, an api_retry with HTTP 502 is server).
// When the output names nothing, the category is timeout. Either way the call is not retried
// (its time is used up) and falls back to the next provider.
func ClassifyTimeout(stdout, stderr string) ProviderError {
	pe := ProviderError{Category: CategoryUnknown}
	for _, text := range []string{stdout, stderr} {
		text = strings.TrimSpace(StripANSI(text))
		e, retries := jsonErrors(text)
		if e == "" && len(retries) > 0 {
			e = retries[len(retries)-1]
		}
		if e == "" && text != "" && !strings.HasPrefix(text, "{") {
			e = lastLines(text, 5)
		}
		if e == "" {
			continue
		}
		if pe = ClassifyProvider(e, 0); pe.Category != CategoryUnknown {
			break
		}
	}
	if pe.Category == CategoryUnknown {
		cl := Classify("timed out")
		pe = providerError(cl, "the call ran out of time")
	} else {
		pe.Message = "the call ran out of time; " + pe.Message
		if r := []rune(pe.Message); len(r) > MaxProviderMessage {
			pe.Message = string(r[:MaxProviderMessage])
		}
	}
	pe.ShouldRetry, pe.ShouldFallback, pe.RetryAfterMS = false, true, 0
	return pe
}

func providerError(cl Class, text string) ProviderError {
	if r := []rune(text); len(r) > MaxProviderMessage {
		text = string(r[:MaxProviderMessage])
	}
	return ProviderError{Category: cl.Category, ShouldRetry: cl.Retryable, ShouldFallback: cl.Fallback, RetryAfterMS: cl.RetryAfterMS, Message: text}
}

// jsonErrors collects the errors that the JSON objects among text's lines (or text as one
// object) report, and the CLI's retry notices among them.
func jsonErrors(text string) (errText string, retries []string) {
	var errs []string
	visit := func(v map[string]any) {
		if n := retryNotice(v); n != "" {
			retries = append(retries, n)
		} else if e := jsonError(v); e != "" {
			errs = append(errs, e)
		}
	}
	if v, ok := decodeObject(text); ok && json.Valid([]byte(text)) { // one object, maybe indented
		visit(v)
		return strings.Join(errs, "\n"), retries
	}
	for _, line := range bytes.Split([]byte(text), []byte("\n")) {
		if v, ok := decodeObject(string(bytes.TrimSpace(line))); ok {
			visit(v)
		}
	}
	return strings.Join(errs, "\n"), retries
}
