// drive.mjs runs one third-party MCP client against an MCP endpoint, as
// the Go test (internal/interop) tells it on stdin, one JSON line per
// command, and answers one JSON line per command on stdout:
//
//   node drive.mjs ts-sdk|openai-agents URL
//   {"op":"call","ids":["a0"],"pace_ms":20}  store_note for each id, started
//                                   pace_ms apart, concurrently; one
//                                   "result" line each, then "done"
//   {"op":"list"}                    tools/list
//   {"op":"close"}                   close the client and exit
//
// The client is connected once and kept for the whole run: what is tested
// is whether that one session survives the agent's restarts.
import { createInterface } from "node:readline";

const [kind, url] = process.argv.slice(2);
if (!kind || !url) {
  console.error("usage: node drive.mjs ts-sdk|openai-agents URL");
  process.exit(2);
}

async function tsSDK() {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const client = new Client({ name: "interop-ts-sdk", version: "0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return {
    session: () => transport.sessionId,
    list: async () => (await client.listTools()).tools.length,
    call: async (name, args) => {
      const r = await client.callTool({ name, arguments: args });
      if (r.isError) throw new Error("tool error: " + JSON.stringify(r.content));
    },
    close: () => client.close(),
  };
}

async function openaiAgents() {
  const { MCPServerStreamableHttp } = await import("@openai/agents");
  const server = new MCPServerStreamableHttp({ url, name: "packrat", cacheToolsList: false });
  await server.connect();
  return {
    session: () => server.sessionId,
    list: async () => (await server.listTools()).length,
    call: async (name, args) => {
      const r = await server.callToolResult(name, args);
      if (r.isError) throw new Error("tool error: " + JSON.stringify(r.content));
    },
    close: () => server.close(),
  };
}

const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const describe = (e) => {
  const parts = [e?.name, e?.code, e?.message].filter((p) => p !== undefined && p !== "");
  return parts.join(": ") || String(e);
};

let c;
try {
  c = kind === "ts-sdk" ? await tsSDK() : kind === "openai-agents" ? await openaiAgents() : null;
  if (!c) throw new Error("unknown client " + kind);
} catch (e) {
  out({ op: "ready", error: describe(e) });
  process.exit(1);
}
out({ op: "ready", session: c.session() });

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const cmd = JSON.parse(line);
  if (cmd.op === "close") {
    await c.close();
    out({ op: "close" });
    break;
  }
  if (cmd.op === "list") {
    try {
      out({ op: "list", tools: await c.list(), session: c.session() });
    } catch (e) {
      out({ op: "list", error: describe(e), session: c.session() });
    }
    continue;
  }
  if (cmd.op === "call") {
    // One call per id, started pace_ms apart (0: all at once), none waiting
    // for another; each result is a line as it comes, then "done".
    const pending = [];
    for (const id of cmd.ids) {
      pending.push(
        c.call("store_note", { text: "interop note " + id, tags: [id] }).then(
          () => out({ op: "result", id, ok: true }),
          (e) => out({ op: "result", id, ok: false, error: describe(e) }),
        ),
      );
      if (cmd.pace_ms) await new Promise((r) => setTimeout(r, cmd.pace_ms));
    }
    await Promise.all(pending);
    out({ op: "done", session: c.session() });
    continue;
  }
  out({ op: cmd.op, error: "unknown op" });
}
process.exit(0);
