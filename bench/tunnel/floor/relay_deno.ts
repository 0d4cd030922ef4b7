/**
 * One plain TCP relay on Deno's native sockets, half of the Deno floor row (`jsrelay-deno`): two
 * of them chained (visitor -> relay -> relay -> backend) are what two JavaScript processes on Deno
 * cost with no multiplexing, no auth and no policy.
 *
 * Usage: `deno run -A bench/tunnel/floor/relay_deno.ts LISTEN TARGET` (`HOST:PORT` each; port 0
 * picks one). Prints `relay on HOST:PORT -> TARGET` once listening; exits when stdin closes or on
 * SIGTERM.
 *
 * @module
 */

const [listen, target] = Deno.args;
const hostPort = (a: string) => ({
  hostname: a.slice(0, a.lastIndexOf(":")),
  port: Number(a.slice(a.lastIndexOf(":") + 1)),
});
const close = (conn: Deno.Conn) => {
  try {
    conn.close();
  } catch { /* closed already */ }
};

/** Copies `from` to `to` through one reused buffer, then passes the FIN on; false on an error. */
async function copy(from: Deno.TcpConn, to: Deno.TcpConn): Promise<boolean> {
  const buffer = new Uint8Array(64 * 1024);
  try {
    for (let n: number | null; (n = await from.read(buffer)) !== null;) {
      for (let off = 0; off < n;) off += await to.write(buffer.subarray(off, n));
    }
    await to.closeWrite();
    return true;
  } catch {
    return false;
  }
}

async function relay(visitor: Deno.TcpConn): Promise<void> {
  visitor.setNoDelay(true);
  let upstream: Deno.TcpConn;
  try {
    upstream = await Deno.connect(hostPort(target));
  } catch {
    return close(visitor);
  }
  upstream.setNoDelay(true);
  const both = () => (close(visitor), close(upstream));
  // A failed direction (a reset) ends both at once; otherwise each ends with its own FIN.
  const ends = [copy(visitor, upstream), copy(upstream, visitor)];
  for (const end of ends) void end.then((ok) => ok || both());
  await Promise.all(ends);
  both();
}

Deno.addSignalListener("SIGTERM", () => Deno.exit(0));
const listener = Deno.listen(hostPort(listen));
const { hostname, port } = listener.addr;
console.log(`relay on ${hostname}:${port} -> ${target}`);
(async () => {
  for await (const _ of Deno.stdin.readable) { /* until the harness closes stdin */ }
  Deno.exit(0);
})();
for await (const visitor of listener) void relay(visitor);
