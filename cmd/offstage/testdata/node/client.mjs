// Drives `offstage mcp` with the official TypeScript SDK and prints what it
// saw as one JSON object. Usage: node client.mjs COMMAND [ARGS...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "offstage-node-test", version: "1.0.0" });
await client.connect(transport);

const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  return { isError: !!res.isError, value: JSON.parse(res.content[0].text) };
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = {};
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const started = await call("bash", { command: "for i in 1 2 3 4; do echo tick $i; sleep 0.3; done", run_in_background: true });
out.started = started.value;
await sleep(450);
out.first = (await call("task_output", { task_id: started.value.task_id })).value.output;
await sleep(600);
out.second = (await call("task_output", { task_id: started.value.task_id })).value.output;
const waited = await call("task_wait", { task_ids: [started.value.task_id], timeout_seconds: 20 });
out.waited = waited.value.done.map((d) => d.status);
const other = await call("bash", { command: "sleep 100", run_in_background: true });
out.cancel = (await call("task_cancel", { task_id: other.value.task_id })).value;
const gone = await call("task_wait", { task_ids: [other.value.task_id], timeout_seconds: 20 });
out.cancelled = gone.value.done.map((d) => d.status);
out.bad = await call("task_output", { task_id: "shell:99" });
await client.close();
console.log(JSON.stringify(out));
