/**
 * Session routes: list (paged), inspect, kick, and reset one stream.
 *
 * @module
 */

import { Hono } from "hono";
import type { ClientSession } from "../client_session.ts";
import type { Daemon } from "../daemon.ts";
import { ResetReason } from "../../tunnel/reset_reasons.ts";
import { ApiError } from "./errors.ts";
import { sessionId, sessionNumber, sessionPage, streamId } from "./params.ts";
import { sessionDetail, sessionSummary } from "./views.ts";

/** The session with a validated `id`, or a 404 ApiError. */
function findSession(daemon: Daemon, id: string | undefined): ClientSession {
  const session = daemon.sessions.get(sessionId(id));
  if (!session) throw new ApiError(404, "not_found", `no session ${id}`);
  return session;
}

/**
 * The id of the session's control stream: the first stream the client opened (client streams
 * have odd ids, and ids only grow). It lives as long as the session, so the lowest odd id open
 * is it. Resetting it would end the whole session, which is what DELETE on the session is for.
 */
function controlStreamId(session: ClientSession): number | undefined {
  let lowest: number | undefined;
  for (const stream of session.session.streams()) {
    if (stream.id % 2 === 1 && (lowest === undefined || stream.id < lowest)) lowest = stream.id;
  }
  return lowest;
}

/** `/v1/sessions` and below. */
export function sessionRoutes(daemon: Daemon): Hono {
  const app = new Hono();

  // Ordered by the number in the id (creation order), so paging is stable while sessions come
  // and go: the cursor is the last id of the previous page, not an offset.
  app.get("/v1/sessions", (c) => {
    const { limit, cursor } = sessionPage(c.req.query());
    const after = cursor === undefined ? 0 : sessionNumber(cursor);
    const ordered = [...daemon.sessions.values()]
      .filter((s) => sessionNumber(s.id) > after)
      .sort((a, b) => sessionNumber(a.id) - sessionNumber(b.id));
    const page = ordered.slice(0, limit);
    const more = ordered.length > limit;
    return c.json({
      sessions: page.map(sessionSummary),
      nextCursor: more ? page[page.length - 1].id : null,
    });
  });

  app.get("/v1/sessions/:id", (c) => c.json(sessionDetail(findSession(daemon, c.req.param("id")))));

  // Kick: GoAway then close. The client sees its session end; with reconnect on it comes back as
  // a new session (and id), which is why this is not a ban: revoking the token is.
  app.delete("/v1/sessions/:id", (c) => {
    const session = findSession(daemon, c.req.param("id"));
    session.close();
    return c.json({ session: session.id, state: "closing" }, 202);
  });

  app.delete("/v1/sessions/:id/streams/:sid", (c) => {
    // Both ids are validated before either is looked up: a malformed one is always a 400.
    const id = streamId(c.req.param("sid"));
    const session = findSession(daemon, c.req.param("id"));
    const stream = session.session.stream(id);
    if (!stream) throw new ApiError(404, "not_found", `no stream ${id} in session ${session.id}`);
    if (id === controlStreamId(session)) {
      throw new ApiError(
        409,
        "conflict",
        `stream ${id} is the session's control stream; DELETE the session instead`,
      );
    }
    // No reset reason means "operator action" here; the protocol has no code of its own for it.
    stream.reset(ResetReason.None);
    daemon.events.publish("stream_reset", {
      session: session.id,
      client: session.client,
      stream: id,
      reason: "admin",
    });
    return c.body(null, 204);
  });

  return app;
}
