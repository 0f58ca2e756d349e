// A client written with the official TypeScript SDK (@agentclientprotocol/sdk), for the
// replay interop test: it starts the agent command given after the prompts file, runs
// initialize, session/new and each prompt of PROMPTS.json, answers permission requests
// with the first option, and prints {"sessionId", "stopReasons", "updates"} as JSON.
//
//   node ts_client.mjs SDK_DIR PROMPTS.json -- AGENT [ARG...]
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, promptsFile, dashes, command, ...args] = process.argv.slice(2);
if (dashes !== "--") throw new Error("usage: ts_client.mjs SDK_DIR PROMPTS.json -- AGENT [ARG...]");
const acp = await import(pathToFileURL(join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href);
const prompts = JSON.parse(readFileSync(promptsFile, "utf8"));

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const app = acp.client({ name: "ts-replay-client" })
  .onNotification("session/update", ({ params }) => { updates.push([params.sessionId, params.update]); })
  .onRequest("session/request_permission", ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId } }));

const result = await app.connectWith(stream, async (ctx) => {
  await ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  const session = await ctx.request("session/new", { cwd: "/tmp", mcpServers: [] });
  const stopReasons = [];
  for (const text of prompts) {
    const reply = await ctx.request("session/prompt", {
      sessionId: session.sessionId, prompt: [{ type: "text", text }] });
    stopReasons.push(reply.stopReason);
  }
  return { sessionId: session.sessionId, stopReasons };
});
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify({ ...result, updates }) + "\n");
