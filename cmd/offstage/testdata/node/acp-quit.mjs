// Starts a session with the official TypeScript ACP SDK, prompts it once,
// and quits without closing it (the editor goes away), printing the
// session's id as JSON. Usage: node acp-quit.mjs CWD PROMPT COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [cwd, prompt, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const out = await client({ name: "offstage-node-test" })
  .onNotification("session/update", () => {})
  .onRequest("session/request_permission", (ctx) => (
    { outcome: { outcome: "selected", optionId: ctx.params.options.find((o) => o.kind === "allow_once").optionId } }))
  .connectWith(stream, async (ctx) => {
    await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });
    const prompted = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: prompt }] });
    return { sessionId, stopReason: prompted.stopReason };
  });
child.stdin.end(); // the editor quits: no session/close
await new Promise((r) => child.on("exit", r));
console.log(JSON.stringify(out));
