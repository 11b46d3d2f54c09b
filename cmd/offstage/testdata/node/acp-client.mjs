// Drives `offstage acp` with the official TypeScript ACP SDK and prints what
// it saw as one JSON object. Usage: node acp-client.mjs CWD COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [cwd, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
let changed = () => {};
const render = (u) => {
  switch (u.sessionUpdate) {
    case "agent_message_chunk": return "message " + (u.content.text ?? "");
    case "agent_thought_chunk": return "thought " + (u.content.text ?? "");
    case "tool_call": return `tool_call ${u.status} ${u.kind} ${u.title}`;
    case "tool_call_update": return `tool_call_update ${u.status ?? ""} ${(u.content ?? []).map((c) => c.content?.text ?? "").join(" ")}`.trim();
    case "available_commands_update": return "commands " + u.availableCommands.map((c) => c.name).join(" ");
    default: return u.sessionUpdate;
  }
};
const waitFor = (pred, ms) => new Promise((resolve) => {
  const deadline = setTimeout(() => resolve(false), ms);
  const check = () => { if (pred()) { clearTimeout(deadline); resolve(true); } };
  changed = check;
  check();
});
const asked = [];

const out = await client({ name: "offstage-node-test" })
  .onNotification("session/update", (ctx) => { updates.push(render(ctx.params.update)); changed(); })
  .onRequest("session/request_permission", (ctx) => {
    asked.push(ctx.params.toolCall.title);
    return { outcome: { outcome: "selected", optionId: ctx.params.options.find((o) => o.kind === "allow_once").optionId } };
  })
  .connectWith(stream, async (ctx) => {
    const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });
    const prompted = await ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "build it" }] });
    const atPromptEnd = updates.length;
    const said = () => updates.filter((u) => u.startsWith("message ")).map((u) => u.slice(8)).join("");
    const idle = await waitFor(() => said().includes("The build finished."), 20000);
    let badCwd = null;
    try { await ctx.request("session/new", { cwd: "relative", mcpServers: [] }); } catch (e) { badCwd = e.message ?? String(e); }
    await ctx.request("session/close", { sessionId });
    return { capabilities: init.agentCapabilities, stopReason: prompted.stopReason, atPromptEnd, idle, updates, asked, badCwd };
  });
child.stdin.end();
await new Promise((r) => child.on("exit", r));
console.log(JSON.stringify(out));
