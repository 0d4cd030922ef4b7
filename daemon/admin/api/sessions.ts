/**
 * Session endpoints: list (paged), inspect, kick, and reset one stream.
 *
 * @module
 */

import { Hono } from "hono";
import type { SessionHandle } from "../../registry/registry.ts";
import { ApiError } from "./errors.ts";
import { sessionId, sessionNumber, sessionPage, streamId } from "./params.ts";
import { sessionDetail, sessionSummary } from "../../registry/views.ts";
import { clusterListing, kickRemote, scopeOf } from "./cluster.ts";
import type { SessionsApiDeps } from "./deps.ts";

/** The session with a validated `id`, or a 404 ApiError. */
function findSession(deps: SessionsApiDeps, id: string | undefined): SessionHandle {
  const session = deps.registry.session(sessionId(id));
  if (!session) throw new ApiError(404, "not_found", `no session ${id}`);
  return session;
}

/** `/v1/sessions` and below. */
export function sessionsApi(deps: SessionsApiDeps): Hono {
  const app = new Hono();

  // Ordered by the number in the id (creation order), so paging is stable while sessions come
  // and go: the cursor is the last id of the previous page, not an offset.
  app.get("/v1/sessions", async (c) => {
    // `?scope=cluster`: every node's sessions (not paged), each with its node, and who was silent.
    const cluster = scopeOf(c, deps);
    if (cluster) {
      const { items, missing } = await clusterListing(cluster, "sessions");
      return c.json({ sessions: items, nextCursor: null, missing });
    }
    const { limit, cursor } = sessionPage(c.req.query());
    const after = cursor === undefined ? 0 : sessionNumber(cursor);
    const ordered = deps.registry.sessions()
      .filter((s) => sessionNumber(s.id) > after)
      .sort((a, b) => sessionNumber(a.id) - sessionNumber(b.id));
    const page = ordered.slice(0, limit);
    const more = ordered.length > limit;
    return c.json({
      sessions: page.map(sessionSummary),
      nextCursor: more ? page[page.length - 1].id : null,
    });
  });

  app.get("/v1/sessions/:id", (c) => c.json(sessionDetail(findSession(deps, c.req.param("id")))));

  // Kick: GoAway then close. The client sees its session end; with reconnect on it comes back as
  // a new session (and id), which is why this is not a ban: revoking the token is.
  app.delete("/v1/sessions/:id", async (c) => {
    // `?node=NAME` kicks a session held on another node of the cluster.
    const node = c.req.query("node");
    const cluster = deps.cluster;
    if (node !== undefined && cluster && node !== cluster.node) {
      const id = sessionId(c.req.param("id"));
      await kickRemote(cluster, node, id);
      return c.json({ session: id, node, state: "closing" }, 202);
    }
    const session = findSession(deps, c.req.param("id"));
    session.close();
    return c.json({ session: session.id, state: "closing" }, 202);
  });

  app.delete("/v1/sessions/:id/streams/:sid", (c) => {
    // Both ids are validated before either is looked up: a malformed one is always a 400.
    const id = streamId(c.req.param("sid"));
    const session = findSession(deps, c.req.param("id"));
    // Resetting the control stream would end the whole session: DELETE on the session is for that.
    switch (session.resetStream(id)) {
      case "not_found":
        throw new ApiError(404, "not_found", `no stream ${id} in session ${session.id}`);
      case "control_stream":
        throw new ApiError(
          409,
          "conflict",
          `stream ${id} is the session's control stream; DELETE the session instead`,
        );
    }
    deps.events.publish("stream_reset", {
      session: session.id,
      client: session.client,
      stream: id,
      reason: "admin",
    });
    return c.body(null, 204);
  });

  return app;
}
