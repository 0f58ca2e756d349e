// @thinkwell/conductor (the sacp dialect) on this process's stdin/stdout, for the chain tests:
//   node tests/chain/thinkwell.mjs '[["proxy", "arg"], ["agent", "arg"]]'
// The argument is one JSON array of argv arrays, the proxies then the agent. The package is
// looked up in .conductor/ (see .ci/run), or in THINKWELL_CONDUCTOR (its dist/index.js).
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const entry = process.env.THINKWELL_CONDUCTOR
  ?? join(root, ".conductor", "node_modules", "@thinkwell", "conductor", "dist", "index.js");
const { Conductor, fromCommands } = await import(pathToFileURL(entry).href);

// The package's connectors start a subprocess or pair in-process channels; none reads this
// process's own stdio, so this one does: one JSON message a line each way.
const client = {
  async connect() {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return {
      send(message) { process.stdout.write(JSON.stringify(message) + "\n"); },
      messages: (async function* () {
        for await (const line of lines) {
          if (!line.trim()) continue;
          try { yield JSON.parse(line); } catch { console.error(`thinkwell.mjs: not JSON, dropped: ${line.slice(0, 200)}`); }
        }
      })(),
      async close() { lines.close(); },
    };
  },
};

const commands = JSON.parse(process.argv[2]).map(([command, ...args]) => ({ command, args }));
const conductor = new Conductor({ instantiator: fromCommands(commands) });
await conductor.connect(client);
