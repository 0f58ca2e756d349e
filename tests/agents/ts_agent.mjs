// An agent written with the official TypeScript SDK (@agentclientprotocol/sdk), for doctor's
// interop test: it answers initialize and session/new (its command list follows at once) and
// session/close.
//
//   node ts_agent.mjs SDK_DIR
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir] = process.argv.slice(2);
const acp = await import(pathToFileURL(join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href);

let sessions = 0;
let context = null;
const app = acp.agent({ name: "ts-sdk-agent" })
  .onConnect((connection) => { context = connection.client; })
  .onRequest("initialize", () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false, sessionCapabilities: { close: {} } },
    agentInfo: { name: "ts-sdk-agent", version: "1.0.0" },
  }))
  .onRequest("session/new", () => {
    const sessionId = `ts-${++sessions}`;
    setTimeout(() => context.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "available_commands_update",
                availableCommands: [{ name: "hello", description: "say hello", input: null }] },
    }), 0);
    return { sessionId };
  })
  .onRequest("session/close", () => ({}));

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
