// Command fakeprovider stands in for an agent CLI in the provider tests. Its behaviour comes from
// the environment the bundle sets:
//
//	FAKE_ID      names the provider (in answers and in the attempt counter's file name)
//	FAKE_FAIL    the error class to fail with (quota, rate_limit, …, sleep, json_error), empty: none;
//	             also partial (print part of the answer, then hang), stalled (print Codex's
//	             "Reconnecting... waiting for network" notices, then hang) and eacces (a config
//	             folder it may not create)
//	FAKE_FAILS   fail only the first N calls (counted in .fake-FAKE_ID in the working directory)
//	FAKE_FORMAT  the success output: text, json, claude, codex, gemini, ax
//
// --version prints "fakeprovider 1.0.0"; otherwise the last argument is the prompt, and
// "--model M" before it names the model (the answer says which).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

var failures = map[string]string{
	"quota":          "Error: insufficient_quota: You exceeded your current quota",
	"rate_limit":     "Error: 429 rate_limit_error: slow down; retry after 20ms",
	"authentication": "Error: 401 invalid_api_key",
	"validation":     "Error: 400 invalid_request: prompt is too long",
	"network":        "Error: connect ECONNREFUSED 10.0.0.1:443",
	"server":         "Error: 503 service_unavailable",
	"timeout":        "Error: request timed_out",
	"eacces":         "Error: EACCES: permission denied, mkdir '/home/agent/.fake'",
	"not_found":      "Error: model_not_found: no such model",
	"configuration":  "Error: not_configured: run setup first",
	"unknown":        "Error: the flux capacitor is misaligned",
}

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("fakeprovider 1.0.0")
		return
	}
	prompt := ""
	if len(args) > 0 {
		prompt = args[len(args)-1]
	}
	model := ""
	for i, a := range args[:max(len(args)-1, 0)] {
		if a == "--model" && i+1 < len(args)-1 {
			model = args[i+1]
		}
	}
	id := os.Getenv("FAKE_ID")
	if model != "" {
		id += " (" + model + ")"
	}
	if fail := os.Getenv("FAKE_FAIL"); fail != "" && failing(os.Getenv("FAKE_ID")) {
		switch fail {
		case "sleep":
			time.Sleep(time.Minute)
		case "partial":
			fmt.Println(`{"type":"system","subtype":"init"}`)
			fmt.Println(`{"type":"assistant","message":{"model":"fake","content":[{"type":"text","text":"partial answer from ` + id + `"}]}}`)
			time.Sleep(time.Minute)
		case "stalled":
			fmt.Println(`{"type":"thread.started","thread_id":"t"}`)
			for range 2 {
				fmt.Println(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`)
			}
			time.Sleep(time.Minute)
		case "json_error":
			fmt.Println(`{"type":"system","subtype":"init"}`)
			fmt.Println(`{"type":"result","is_error":true,"result":"Invalid API key · Please run /login"}`)
			return
		}
		fmt.Fprintln(os.Stderr, failures[fail])
		os.Exit(1)
	}
	answer := fmt.Sprintf("answer from %s: %s", id, prompt)
	half := len(answer) / 2
	line := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	switch os.Getenv("FAKE_FORMAT") {
	case "json":
		line(map[string]any{"result": answer, "usage": map[string]int{"input_tokens": 11, "output_tokens": 7}})
	case "claude":
		line(map[string]any{"type": "system", "subtype": "init"})
		line(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]string{"type": "text", "text": answer}}}})
		line(map[string]any{"type": "result", "is_error": false, "result": answer, "usage": map[string]int{"input_tokens": 21, "output_tokens": 9}})
	case "codex":
		line(map[string]any{"type": "thread.started", "thread_id": "t"})
		line(map[string]any{"type": "item.completed", "item": map[string]string{"type": "reasoning", "text": "thinking"}})
		line(map[string]any{"type": "item.completed", "item": map[string]string{"type": "agent_message", "text": answer}})
		line(map[string]any{"type": "turn.completed", "usage": map[string]int{"input_tokens": 31, "output_tokens": 5}})
	case "gemini":
		line(map[string]any{"type": "init", "session_id": "s"})
		line(map[string]any{"type": "message", "role": "user", "content": prompt})
		line(map[string]any{"type": "message", "role": "assistant", "content": answer[:half], "delta": true})
		line(map[string]any{"type": "message", "role": "assistant", "content": answer[half:], "delta": true})
		line(map[string]any{"type": "result", "status": "success", "stats": map[string]int{"input_tokens": 41, "output_tokens": 6}})
	case "ax":
		line(map[string]any{"role": "user", "content": prompt})
		line(map[string]any{"role": "assistant", "content": answer})
	default:
		fmt.Println("\x1b[32m" + answer + "\x1b[0m")
	}
}

// failing counts this call and says whether it is one of the first FAKE_FAILS (all when unset).
func failing(id string) bool {
	limit, err := strconv.Atoi(os.Getenv("FAKE_FAILS"))
	if err != nil {
		return true
	}
	name := ".fake-" + strings.ReplaceAll(id, "/", "_")
	data, _ := os.ReadFile(name)
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	n++
	if err := os.WriteFile(name, []byte(strconv.Itoa(n)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "fakeprovider: counter:", err)
		os.Exit(3)
	}
	return n <= limit
}
