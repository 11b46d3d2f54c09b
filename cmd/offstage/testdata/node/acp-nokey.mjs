// Starts `offstage acp` as an editor would with no key set, with the
// official TypeScript ACP SDK: initialize, then session/new, and prints
// what each answered as one JSON object. Usage: node acp-nokey.mjs CWD COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream } from "@agentclientprotocol/sdk";

const [cwd, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], env: process.env });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const out = await client({ name: "offstage-node-test" })
  .connectWith(stream, async (ctx) => {
    const init = await ctx.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    let newSession = null;
    try { await ctx.request("session/new", { cwd, mcpServers: [] }); } catch (e) { newSession = e.message ?? String(e); }
    return { protocolVersion: init.protocolVersion, newSession };
  });
child.stdin.end();
await new Promise((r) => child.on("exit", r));
console.log(JSON.stringify(out));
