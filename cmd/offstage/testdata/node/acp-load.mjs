// Lists the sessions `offstage acp` has recorded for CWD, loads the newest
// with the official TypeScript ACP SDK, prompts it once, and prints what it
// saw as one JSON object. Usage: node acp-load.mjs CWD COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [cwd, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const render = (u) => {
  switch (u.sessionUpdate) {
    case "user_message_chunk": return "user " + (u.content.text ?? "");
    case "agent_message_chunk": return "message " + (u.content.text ?? "");
    case "agent_thought_chunk": return "thought " + (u.content.text ?? "");
    case "tool_call": return `tool_call ${u.status} ${u.kind} ${u.title}`;
    case "tool_call_update": return `tool_call_update ${u.status ?? ""} ${(u.content ?? []).map((c) => c.content?.text ?? "").join(" ")}`.trim();
    default: return u.sessionUpdate;
  }
};

const out = await client({ name: "offstage-node-test" })
  .onNotification("session/update", (ctx) => { updates.push(render(ctx.params.update)); })
  .onRequest("session/request_permission", (ctx) => (
    { outcome: { outcome: "selected", optionId: ctx.params.options.find((o) => o.kind === "allow_once").optionId } }))
  .connectWith(stream, async (ctx) => {
    const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const listed = await ctx.request("session/list", { cwd });
    const sessionId = listed.sessions[0].sessionId;
    await ctx.request("session/load", { sessionId, cwd, mcpServers: [] });
    const replayed = updates.length;
    const prompted = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "and now?" }] });
    await ctx.request("session/close", { sessionId });
    return { loadSession: init.agentCapabilities.loadSession, listed: listed.sessions, replayed, stopReason: prompted.stopReason, updates };
  });
child.stdin.end();
await new Promise((r) => child.on("exit", r));
console.log(JSON.stringify(out));
