// Drives `offstage mcp --http` with the official TypeScript SDK, as the
// README tells a person to try it by hand (a client that keeps one session
// and sends the bearer token): start a background shell, see its output
// resource listed, read it in later calls, wait for it, end the session.
// Prints what it saw as one JSON object. Usage: node http-client.mjs URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const connect = async (bearer) => {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const client = new Client({ name: "offstage-node-http-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = {};
try {
  await connect("not-the-token");
  out.wrongToken = "connected";
} catch (e) {
  out.wrongToken = String(e);
}

const { client, transport } = await connect(token);
let listChanged = 0;
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { listChanged++; });
// callTool validates structuredContent against the tool's outputSchema,
// which listTools caches.
const tools = (await client.listTools()).tools;
out.tools = tools.map((t) => t.name).sort();
out.withoutOutputSchema = tools.filter((t) => !t.outputSchema).map((t) => t.name);
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  return { isError: !!res.isError, structured: !!res.structuredContent, value: JSON.parse(res.content[0].text) };
};

const started = await call("bash", { command: "for i in 1 2 3 4; do echo tick $i; sleep 0.3; done", run_in_background: true });
out.started = started.value;
out.structured = started.structured;
const id = started.value.task_id;
out.listed = (await client.listResources()).resources.map((r) => r.uri);
await sleep(450);
out.first = (await call("task_output", { task_id: id })).value.output;
const waited = await call("task_wait", { task_ids: [id], timeout_seconds: 20 });
out.waited = waited.value.done.map((d) => d.status);
out.result = waited.value.done.map((d) => d.result).join("");
for (let i = 0; i < 100 && listChanged < 2; i++) await sleep(50);
out.listChanged = listChanged;
out.listedAfter = (await client.listResources()).resources.map((r) => r.uri);
out.read = (await client.readResource({ uri: `offstage://task/${id}/output` })).contents[0].text;
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
