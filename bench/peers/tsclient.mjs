// The TypeScript SDK's client, driven by peers_test.go (BenchmarkPeers,
// variant ts-sdk). It opens one session on the URL given as argument (as a
// program holding one client would), then for each line "N CONC" on stdin
// makes N tools/call requests from CONC concurrent workers on that session,
// timing them here in node, and writes one line of JSON back:
// {"n":N,"ns":elapsed,"errors":count,"first":"message of the first"}.
// It closes the session and exits when stdin ends.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node tsclient.mjs URL");
  process.exit(2);
}
const client = new Client({ name: "bench-ts", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const call = () => client.callTool({ name: "echo", arguments: { id: "bench", text: "x" } });
await call(); // the first call outside the timing, as the Go variants do

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const [n, conc] = line.trim().split(/\s+/).map(Number);
  if (!(n > 0) || !(conc > 0)) {
    console.error(`tsclient: bad command ${JSON.stringify(line)}: want "N CONC"`);
    process.exit(2);
  }
  let next = 0, errors = 0, first = "";
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: Math.min(conc, n) }, async () => {
    while (next < n) {
      next++;
      try {
        const res = await call();
        if (res.isError) throw new Error("tool error: " + JSON.stringify(res.content));
      } catch (e) {
        errors++;
        if (!first) first = String(e?.message ?? e);
      }
    }
  }));
  const ns = process.hrtime.bigint() - start;
  process.stdout.write(JSON.stringify({ n, ns: Number(ns), errors, first }) + "\n");
}
await client.close();
