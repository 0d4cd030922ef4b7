/**
 * Reverse tunnel and named service endpoints: list them, and close a tunnel; and the HTTPS port's
 * certificates.
 *
 * @module
 */

import { Hono } from "hono";
import { ApiError } from "./errors.ts";
import { tunnelId } from "./params.ts";
import {
  certificateView,
  OPERATOR_CLOSE,
  serviceView,
  tunnelList,
  tunnelView,
} from "../../registry/views.ts";
import { closeRemoteTunnel, clusterListing, scopeOf } from "./cluster.ts";
import type { TunnelsApiDeps } from "./deps.ts";

/** `/v1/tunnels` and below. */
export function tunnelsApi(deps: TunnelsApiDeps): Hono {
  const app = new Hono();

  // `?scope=cluster`: every node's tunnels, each with its node, and the nodes that did not answer.
  app.get("/v1/tunnels", async (c) => {
    const cluster = scopeOf(c, deps);
    const services = deps.registry.services().map(serviceView);
    if (cluster) {
      const { items, missing } = await clusterListing(cluster, "tunnels");
      return c.json({ tunnels: items, services, missing });
    }
    return c.json({ tunnels: tunnelList(deps.registry, deps.certificates), services });
  });

  // A tunnel with every route of its port: in a cluster from the ports bucket (any node), else
  // this node's tunnels on the same address and protocol (a group's UDP members, say; UDP 5353
  // is not TCP 5353's route).
  app.get("/v1/tunnels/:id", (c) => {
    const id = tunnelId(c.req.param("id"));
    const { registry, cluster } = deps;
    const tunnel = registry.tunnel(id);
    if (!tunnel) throw new ApiError(404, "not_found", `no tunnel ${id} on this node`);
    const routes = cluster
      ? cluster.registry.claims().filter((claim) =>
        claim.port === tunnel.port && claim.protocol === tunnel.protocol
      ).map((claim) => ({
        node: claim.node,
        client: claim.client,
        session: claim.session,
        tunnel: claim.tunnel,
        healthy: claim.node === cluster.node
          ? registry.tunnel(claim.tunnel)?.healthy ?? true
          : cluster.registry.routeHealthy(claim.port, claim.node, claim.tunnel, claim.protocol),
      }))
      : registry.tunnels().filter((t) =>
        t.port === tunnel.port && t.bindHost === tunnel.bindHost && t.protocol === tunnel.protocol
      )
        .map((t) => ({
          node: registry.node,
          client: t.client,
          session: registry.tunnelOwner(t.id)?.id ?? null,
          tunnel: t.id,
          healthy: t.healthy,
        }));
    return c.json({
      ...tunnelView(
        tunnel,
        registry.tunnelOwner(id)?.id ?? null,
        tunnel.host === undefined ? undefined : deps.certificates.find(tunnel.host),
      ),
      owner: tunnel.owner,
      routes,
    });
  });

  app.get(
    "/v1/certificates",
    (c) => c.json({ certificates: deps.certificates.list().map(certificateView) }),
  );

  // The owning session closes it (so its bookkeeping and events stay right) and tells the
  // client with `tunnel_closed`. In a cluster, a tunnel held on another node is closed there.
  app.delete("/v1/tunnels/:id", async (c) => {
    const id = tunnelId(c.req.param("id"));
    if (deps.registry.closeTunnel(id, OPERATOR_CLOSE)) return c.body(null, 204);
    if (!deps.cluster) throw new ApiError(404, "not_found", `no tunnel ${id}`);
    await closeRemoteTunnel(deps.cluster, id);
    return c.body(null, 204);
  });

  return app;
}
