// Shared driver for client.mjs (TypeScript SDK v1) and client2.mjs (TypeScript SDK v2): argument
// parsing, the JSON step script, and the single JSON report printed on stdout.
//
// Usage: node client.mjs [--script JSON | --script-file PATH] [--timeout MS] [--cwd DIR]
//                        (--url URL | --stdio CMD ARGS...)
// --stdio takes every remaining argument. Without --script/--script-file the script is read from
// stdin. A script is a JSON array of steps (or {"steps":[...]}):
//   {"op":"list"}                                    tools/list, following nextCursor
//   {"op":"call","name":"t","arguments":{...},       tools/call; progress notifications are
//    "progress":true,"timeoutMs":30000,             collected when "progress" is true; with
//    "cancelAfterMs":1000}                          cancelAfterMs the request is aborted then
//                                                   (the step gets "cancelled":true); with
//                                                   "cancelWhenFile":PATH it is aborted once
//                                                   PATH exists (polled every 20 ms)
//   {"op":"prompts"}                                 prompts/list
//   {"op":"prompt","name":"p","arguments":{...}}     prompts/get
//   {"op":"sleep","ms":500}                          wait
//   {"op":"ping"}                                    ping (legacy protocol only)
//   A call step may also carry (SDK v2 only) "manual":true (an input_required result is reported as
//   it is, not fulfilled), and "retryOf":K with "answer":"accept"|"decline" and "alterState":true:
//   the call is sent with step K's requestState (one character changed with alterState) and an
//   elicitation answer to each of step K's inputRequests. "requestState":S with "inputResponses":{...}
//   sends both verbatim (a state kept from an earlier run, an answer of any shape).
// --bearer TOKEN sends "Authorization: Bearer TOKEN" (clihostd's MCP endpoints).
// --elicit accept|decline|cancel declares the elicitation capability and answers every
// elicitation so (accept with {"approve": true}); the questions are reported in "elicitations".
// Report: {"client","protocolVersion","serverInfo","capabilities","steps":[...]} where each step
// result is {"op",...,"result"} or {"op",...,"error":{"code","message","data"}}.
// A JSON-RPC error answering one step is recorded in that step and the script goes on; the exit
// status is non-zero only when connecting fails or the transport breaks (a step times out or the
// connection closes), with a {"fatal":...} report.
import { existsSync, readFileSync } from "node:fs";

export function parseArgs(argv) {
  const opts = { timeout: 60000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    switch (a) {
      case "--script": opts.script = argv[++i]; break;
      case "--script-file": opts.script = readFileSync(argv[++i], "utf8"); break;
      case "--timeout": opts.timeout = Number(argv[++i]); break;
      case "--cwd": opts.cwd = argv[++i]; break;
      case "--url": opts.url = argv[++i]; break;
      case "--elicit": opts.elicit = argv[++i]; break;
      case "--bearer": opts.bearer = argv[++i]; break;
      case "--stdio":
        opts.command = argv[i + 1];
        opts.args = argv.slice(i + 2);
        i = argv.length;
        break;
      default:
        usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (!opts.url === !opts.command) usage("give exactly one of --url URL or --stdio CMD ARGS...");
  if (opts.elicit !== undefined && !["accept", "decline", "cancel"].includes(opts.elicit)) usage("--elicit takes accept, decline or cancel");
  if (opts.script === undefined) opts.script = readFileSync(0, "utf8");
  let steps;
  try {
    steps = JSON.parse(opts.script);
  } catch (e) {
    usage(`script is not JSON: ${e.message}`);
  }
  if (steps && !Array.isArray(steps)) steps = steps.steps;
  if (!Array.isArray(steps)) usage("script must be a JSON array of steps or {\"steps\":[...]}");
  opts.steps = steps;
  return opts;
}

function usage(msg) {
  process.stderr.write(`${msg}\nusage: node client.mjs [--script JSON | --script-file PATH] [--timeout MS] [--cwd DIR] (--url URL | --stdio CMD ARGS...)\n`);
  process.exit(2);
}

// errorInfo turns a thrown value into the report's error object.
export function errorInfo(e) {
  if (e && typeof e === "object") {
    const out = { message: String(e.message ?? e) };
    if (e.code !== undefined) out.code = e.code;
    if (e.data !== undefined) out.data = e.data;
    if (e.name && e.name !== "Error") out.name = e.name;
    return out;
  }
  return { message: String(e) };
}

// isTransportFailure reports whether an error means the connection or the protocol failed, as
// opposed to a JSON-RPC error response to one request or the client refusing one step.
function isTransportFailure(e, closed) {
  if (closed) return true;
  if (!e || typeof e !== "object") return true;
  const c = e.code;
  // -32000 ConnectionClosed and -32001 RequestTimeout are the SDKs' own transport codes.
  if (typeof c === "number") return c >= 0 || c === -32000 || c === -32001;
  // SDK v2 client-side refusals (a method the negotiated version lacks, a missing capability).
  if (c === "METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION" || c === "CAPABILITY_NOT_SUPPORTED") return false;
  return true; // fetch/HTTP errors, REQUEST_TIMEOUT, CONNECTION_CLOSED, INVALID_RESULT, ...
}

// elicitAnswer is the answer --elicit gives to an elicitation with params p; the question is
// recorded in report.elicitations.
export function elicitAnswer(opts, report, p) {
  (report.elicitations ??= []).push({ message: p.message, requestedSchema: p.requestedSchema });
  return opts.elicit === "accept" ? { action: "accept", content: { approve: true } } : { action: opts.elicit };
}

// httpOptions are the HTTP transport's options: the bearer token's header.
function httpOptions(opts) {
  return opts.bearer ? { requestInit: { headers: { Authorization: `Bearer ${opts.bearer}` } } } : undefined;
}

// transport is the transport opts ask for, made with an SDK's two client transport classes:
// streamable HTTP to --url, or --stdio's command as a child (this process's environment, its
// stderr inherited).
export function transport(opts, Stdio, HTTP) {
  if (opts.url) return new HTTP(new URL(opts.url), httpOptions(opts));
  return new Stdio({ command: opts.command, args: opts.args, cwd: opts.cwd, env: { ...process.env }, stderr: "inherit" });
}

// retryParams builds the params of a "retryOf" call step from the earlier step's input_required
// result.
export function retryParams(step, steps) {
  const prev = steps[step.retryOf]?.result ?? {};
  let state = prev.requestState ?? "";
  if (step.alterState && state.length > 10) {
    const i = state.length - 5;
    state = state.slice(0, i) + (state[i] === "A" ? "B" : "A") + state.slice(i + 1);
  }
  const answer = step.answer === "accept" ? { action: "accept", content: { approve: true } } : { action: step.answer ?? "decline" };
  const inputResponses = {};
  for (const k of Object.keys(prev.inputRequests ?? {})) inputResponses[k] = answer;
  return { name: step.name, arguments: step.arguments ?? {}, inputResponses, requestState: state };
}

// run connects with adapter.connect(), executes the steps and prints the report.
// adapter: {name, connect(opts) -> client, list(client, cursor), call(client, step, onprogress, opts, signal),
//           ping(client), info(client) -> {protocolVersion, serverInfo, capabilities}}
export async function run(adapter, argv) {
  const opts = parseArgs(argv);
  const report = { client: adapter.name, steps: [] };
  let client;
  let closed = false;
  const finish = (code) => {
    process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(code));
  };
  try {
    client = await adapter.connect(opts, () => { closed = true; }, report);
    Object.assign(report, adapter.info(client));
  } catch (e) {
    report.fatal = { phase: "connect", ...errorInfo(e) };
    return finish(1);
  }
  for (const step of opts.steps) {
    const out = { ...step };
    try {
      switch (step.op) {
        case "list": {
          const tools = [];
          let cursor;
          let pages = 0;
          do {
            const r = await adapter.list(client, cursor, opts);
            pages++;
            tools.push(...(r.tools ?? []));
            cursor = r.nextCursor;
            if (r.ttlMs !== undefined) out.ttlMs = r.ttlMs;
            if (r.cacheScope !== undefined) out.cacheScope = r.cacheScope;
            if (pages > 1000) throw new Error("tools/list: more than 1000 pages");
          } while (cursor);
          out.pages = pages;
          out.result = { tools };
          break;
        }
        case "call": {
          const progress = [];
          const onprogress = step.progress ? (p) => progress.push(p) : undefined;
          let signal;
          let poll;
          if (step.cancelAfterMs !== undefined || step.cancelWhenFile !== undefined) {
            const ac = new AbortController();
            const cancel = () => ac.abort(new Error("cancelled by the test script"));
            if (step.cancelAfterMs !== undefined) setTimeout(cancel, step.cancelAfterMs);
            if (step.cancelWhenFile !== undefined) {
              poll = setInterval(() => {
                if (existsSync(step.cancelWhenFile)) {
                  clearInterval(poll);
                  cancel();
                }
              }, 20);
            }
            signal = ac.signal;
          }
          try {
            out.result = await adapter.call(client, step, onprogress, opts, signal, report.steps);
          } catch (e) {
            if (signal?.aborted) {
              out.cancelled = true;
              out.error = errorInfo(e);
              break;
            }
            throw e;
          } finally {
            clearInterval(poll);
            if (step.progress) out.progressNotifications = progress;
          }
          break;
        }
        case "prompts":
        case "prompt": {
          const fn = step.op === "prompts" ? adapter.listPrompts : adapter.getPrompt;
          if (!fn) throw Object.assign(new Error(`${adapter.name} has no ${step.op} step`), { code: "bad_script" });
          out.result = await fn(client, step, opts);
          break;
        }
        case "sleep":
          await new Promise((r) => setTimeout(r, step.ms ?? 0));
          break;
        case "ping":
          out.result = await adapter.ping(client);
          break;
        default:
          throw Object.assign(new Error(`unknown step op ${JSON.stringify(step.op)}`), { code: "bad_script" });
      }
    } catch (e) {
      out.error = errorInfo(e);
      if (e?.code === "bad_script") {
        report.steps.push(out);
        report.fatal = { phase: "script", ...out.error };
        return finish(2);
      }
      if (isTransportFailure(e, closed)) {
        report.steps.push(out);
        report.fatal = { phase: "step", ...out.error };
        return finish(1);
      }
    }
    report.steps.push(out);
  }
  try {
    await client.close();
  } catch (e) {
    report.closeError = errorInfo(e);
  }
  finish(0);
}
