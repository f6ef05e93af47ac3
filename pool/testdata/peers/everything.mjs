// Runs @modelcontextprotocol/server-everything's Streamable HTTP server for
// the pool's tests, on 127.0.0.1 only, and reports its port on file
// descriptor 3 ("LISTENING <port>\n"). PORT=0 picks a free port; a restart
// passes the port it had.
import fs from "node:fs";
import http from "node:http";

const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (port, ...rest) {
  const cb = rest.find((a) => typeof a === "function");
  this.once("listening", () => fs.writeSync(3, `LISTENING ${this.address().port}\n`));
  return listen.call(this, Number(port), "127.0.0.1", cb);
};
await import("./node_modules/@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js");
