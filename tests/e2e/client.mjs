#!/usr/bin/env node
// MCP client on the TypeScript SDK v1 (@modelcontextprotocol/sdk; protocol 2025-11-25) for the Go
// end-to-end tests. See lib.mjs for the arguments, the step script and the report.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { run, elicitAnswer, transport } from "./lib.mjs";

let negotiated;

await run({
  name: "sdk-v1",
  async connect(opts, onclose, report) {
    const t = transport(opts, StdioClientTransport, StreamableHTTPClientTransport);
    // Client.connect hands the negotiated version to the transport; the stdio transport has no
    // setter, so record it here for the report.
    const set = t.setProtocolVersion?.bind(t);
    t.setProtocolVersion = (v) => { negotiated = v; set?.(v); };
    const c = new Client({ name: "clihost-e2e", version: "0" }, opts.elicit ? { capabilities: { elicitation: {} } } : undefined);
    if (opts.elicit) c.setRequestHandler(ElicitRequestSchema, async (req) => elicitAnswer(opts, report, req.params));
    c.onclose = onclose;
    await c.connect(t, { timeout: opts.timeout });
    return c;
  },
  info(c) {
    return {
      protocolVersion: negotiated,
      serverInfo: c.getServerVersion(),
      capabilities: c.getServerCapabilities(),
    };
  },
  list(c, cursor, opts) {
    return c.listTools(cursor ? { cursor } : {}, { timeout: opts.timeout });
  },
  call(c, step, onprogress, opts, signal) {
    return c.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, {
      timeout: step.timeoutMs ?? opts.timeout,
      onprogress,
      signal,
    });
  },
  listPrompts(c, _step, opts) {
    return c.listPrompts({}, { timeout: opts.timeout });
  },
  getPrompt(c, step, opts) {
    return c.getPrompt({ name: step.name, arguments: step.arguments ?? {} }, { timeout: opts.timeout });
  },
  ping(c) {
    return c.ping();
  },
}, process.argv.slice(2));
