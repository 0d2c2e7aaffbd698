#!/usr/bin/env node
// MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client; protocol 2026-07-28 with
// versionNegotiation "auto", falling back to 2025-11-25) for the Go end-to-end tests. See lib.mjs
// for the arguments, the step script and the report.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { run, elicitAnswer, transport, retryParams } from "./lib.mjs";

await run({
  name: "sdk-v2",
  async connect(opts, onclose, report) {
    const t = transport(opts, StdioClientTransport, StreamableHTTPClientTransport);
    const copts = { versionNegotiation: { mode: "auto" } };
    if (opts.elicit) copts.capabilities = { elicitation: { form: {} } };
    const c = new Client({ name: "clihost-e2e2", version: "0" }, copts);
    if (opts.elicit) c.setRequestHandler("elicitation/create", async (req) => elicitAnswer(opts, report, req.params));
    c.onclose = onclose;
    await c.connect(t, { timeout: opts.timeout });
    return c;
  },
  info(c) {
    return {
      protocolVersion: c.getNegotiatedProtocolVersion(),
      serverInfo: c.getServerVersion(),
      capabilities: c.getServerCapabilities(),
    };
  },
  list(c, cursor, opts) {
    // Always go to the server (refresh the response cache) so every run sees the live list.
    return c.listTools(cursor ? { cursor } : undefined, { timeout: opts.timeout, cacheMode: "refresh" });
  },
  call(c, step, onprogress, opts, signal, steps) {
    let params = step.retryOf !== undefined ? retryParams(step, steps) : { name: step.name, arguments: step.arguments ?? {} };
    if (step.requestState !== undefined) params = { ...params, requestState: step.requestState, inputResponses: step.inputResponses ?? {} };
    return c.callTool(params, {
      timeout: step.timeoutMs ?? opts.timeout,
      onprogress,
      signal,
      ...(step.manual || step.retryOf !== undefined || step.requestState !== undefined ? { allowInputRequired: true } : {}),
    });
  },
  listPrompts(c, _step, opts) {
    return c.listPrompts(undefined, { timeout: opts.timeout, cacheMode: "refresh" });
  },
  getPrompt(c, step, opts) {
    return c.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, { timeout: opts.timeout });
  },
  ping(c) {
    return c.ping();
  },
}, process.argv.slice(2));
