// A small MCP server on the official TypeScript SDK, over stdio: the
// editor's MCP server in acpserver's tests (the ACP agent connects it,
// offers its tools to the model as mcp__NAME__TOOL and reaps it). It
// starts a grandchild that outlives nothing: closing the session must end
// it too. Usage: node mcp-server.mjs
import { spawn } from "node:child_process";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "offstage-test-server", version: "1.0.0" });
server.registerTool("echo", {
  title: "Echo",
  description: "Echoes text back, after the value of ECHO_PREFIX.",
  inputSchema: { text: z.string() },
  annotations: { readOnlyHint: true },
}, async ({ text }) => ({ content: [{ type: "text", text: (process.env.ECHO_PREFIX ?? "") + text }] }));
server.registerTool("write_note", {
  description: "Writes a note: not read-only, so the user is asked.",
  inputSchema: { note: z.string() },
  annotations: { destructiveHint: false },
}, async ({ note }) => ({ content: [{ type: "text", text: `noted: ${note}` }] }));
server.registerTool("big", {
  description: "Returns n bytes of text.",
  inputSchema: { n: z.number().int() },
  annotations: { readOnlyHint: true },
}, async ({ n }) => ({ content: [{ type: "text", text: "x".repeat(n) }] }));
server.registerTool("fail", {
  description: "Always fails.",
  inputSchema: {},
  annotations: { readOnlyHint: true },
}, async () => ({ isError: true, content: [{ type: "text", text: "it broke on purpose" }] }));

// A grandchild of the agent in the server's process group, holding none
// of its pipes; unref'd, so the server still exits when its input ends.
spawn("sleep", ["1000"], { stdio: "ignore" }).unref();
await server.connect(new StdioServerTransport());
