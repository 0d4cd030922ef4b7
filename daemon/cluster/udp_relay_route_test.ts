// UdpRelayRoute on a real loopback UDP port: its relay session is a yamux pair whose far end
// plays the holding node, echoing each relayed flow.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { openUdp, type UdpSocket } from "../../transport/udp.ts";
import { waitFor } from "../../testing/wait.ts";
import { pattern } from "../../util/bytes/bytes.ts";
import { echoClient } from "../tunnels/_echo_client.ts";
import { UdpPort } from "../tunnels/udp_port.ts";
import type { PortClaim } from "../registry/registry.ts";
import { UdpRelayRoute, type UdpRelayRouteOptions } from "./udp_relay_route.ts";

/** A visitor's socket on `hostname` and what it received. */
async function visitor(hostname = "127.0.0.1") {
  const got: Uint8Array[] = [];
  const socket: UdpSocket = await openUdp({ hostname, onMessage: (b) => void got.push(b) });
  return { socket, got };
}

/** A relay route to tunnel `t-7` on node `n2`, alone on a fresh UDP port. */
async function relayed(
  options: Partial<UdpRelayRouteOptions> = {},
  claim: Partial<PortClaim> = {},
) {
  const port = await UdpPort.open({ bindHost: "127.0.0.1", port: 0 });
  const node = echoClient();
  const route = new UdpRelayRoute({
    claim: {
      bindHost: "127.0.0.1",
      port: port.port,
      protocol: "udp",
      tunnel: "t-7",
      session: "s-2",
      client: "alice",
      node: "n2",
      owner: "group:dns",
      shared: true,
      ...claim,
    },
    opener: node.near,
    up: () => true,
    bindHost: "127.0.0.1",
    ...options,
  });
  port.attach(route);
  return {
    port,
    route,
    headers: node.headers,
    close: () => (route.close(), void port.close(), node.near.close(), node.far.close()),
  };
}

describe("UdpRelayRoute", () => {
  it("relays each flow as one udpVisitor stream to the holding node, counted here", async () => {
    const { port, route, headers, close } = await relayed();
    const v = await visitor();
    try {
      for (let i = 0; i < 3; i++) {
        v.socket.send(pattern(8, i), "127.0.0.1", port.port);
        await waitFor(() => v.got.length === i + 1, `echo ${i}`);
      }
      assert.deepEqual(headers, [{
        kind: "udpVisitor",
        tunnel: "t-7",
        remote: `127.0.0.1:${v.socket.local.port}`,
        local: `127.0.0.1:${port.port}`,
      }]);
      assert.equal(route.udp.flows, 1);
      assert.equal(route.active, 1);
      assert.equal(route.udp.datagramsIn, 3);
      assert.equal(route.udp.bytesOut, 24);
      assert.equal(route.local, false, "a relay is one hop more");
    } finally {
      v.socket.close();
      close();
    }
  });

  it("refuses here what the tunnel's rules refuse, and past its flow limit, with no stream", async () => {
    const { port, route, headers, close } = await relayed({ maxFlows: 1 }, {
      policy: { deny: ["127.0.0.3/32"] },
    });
    const denied = await visitor("127.0.0.3");
    const first = await visitor();
    const second = await visitor();
    try {
      denied.socket.send(pattern(4, 1), "127.0.0.1", port.port);
      await waitFor(() => route.udp.drops.refused === 1, "the denied visitor refused");
      first.socket.send(pattern(4, 2), "127.0.0.1", port.port);
      await waitFor(() => first.got.length === 1, "the first flow's echo");
      second.socket.send(pattern(4, 3), "127.0.0.1", port.port);
      await waitFor(() => route.udp.drops.flow_limit === 1, "the second flow past the limit");
      assert.equal(headers.length, 1, "one stream, the first flow's");
    } finally {
      denied.socket.close();
      first.socket.close();
      second.socket.close();
      close();
    }
  });

  it("is not up while its way is down, and ends its flows when it closes", async () => {
    let up = true;
    const { port, route, close } = await relayed({ up: () => up });
    const v = await visitor();
    try {
      v.socket.send(pattern(2, 1), "127.0.0.1", port.port);
      await waitFor(() => v.got.length === 1, "an echo");
      up = false;
      assert.equal(route.healthy, false);
      route.close();
      await waitFor(() => route.udp.flowsOpen === 0, "its flow to end");
      v.socket.send(pattern(2, 2), "127.0.0.1", port.port);
      await waitFor(() => route.udp.drops.refused === 1, "no new flow on a closed relay");
      assert.equal(v.got.length, 1);
    } finally {
      v.socket.close();
      close();
    }
  });
});
