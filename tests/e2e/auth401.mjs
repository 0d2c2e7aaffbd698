#!/usr/bin/env node
// Sends an MCP initialize to URL (with "Authorization: Bearer TOKEN" when given) and prints, as one
// JSON object, the HTTP status, the body, and what the TypeScript SDK v2's own parser
// (extractWWWAuthenticateParams) reads from the WWW-Authenticate challenge: how a client that
// follows RFC 6750 sees clihost's 401. Usage: node auth401.mjs URL [TOKEN]
import { extractWWWAuthenticateParams } from "@modelcontextprotocol/client";

const [url, token] = process.argv.slice(2);
const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
if (token !== undefined) headers.authorization = `Bearer ${token}`;
const res = await fetch(url, {
  method: "POST",
  headers,
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "auth401", version: "0" } } }),
});
const { error, errorDescription } = extractWWWAuthenticateParams(res);
process.stdout.write(JSON.stringify({ status: res.status, challenge: res.headers.get("www-authenticate"), error, errorDescription, body: await res.text() }) + "\n");
