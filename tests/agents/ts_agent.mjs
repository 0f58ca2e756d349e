// An agent written with the official TypeScript SDK (@agentclientprotocol/sdk), for doctor's
// interop test and the proxy-chain tests: it answers initialize and session/new (its command
// list follows at once) and session/close; on session/prompt it asks the client's permission
// to run a tool, says which option the client chose, and ends the turn.
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
  .onRequest("session/close", () => ({}))
  .onRequest("session/prompt", async ({ params }) => {
    const { sessionId } = params;
    const answer = await context.request("session/request_permission", {
      sessionId,
      toolCall: { toolCallId: "call-1", title: "Run the tests", kind: "execute", status: "pending" },
      options: [{ optionId: "allow", name: "Allow", kind: "allow_once" },
                { optionId: "reject", name: "Reject", kind: "reject_once" }],
    });
    const chosen = answer.outcome.outcome === "selected" ? answer.outcome.optionId : answer.outcome.outcome;
    await context.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `permission: ${chosen}` } },
    });
    return { stopReason: "end_turn" };
  });

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
