/**
 * Token endpoints: mint a scoped, expiring client token, list the minted ones, revoke one. The
 * secret leaves the daemon exactly once, in the mint response; listings never carry a token or
 * its hash.
 *
 * @module
 */

import { Hono } from "hono";
import type { Context } from "hono";
import type { TokenRecord } from "../../tokens/file.ts";
import { TOKEN_ID } from "../../tokens/file.ts";
import { type FieldIssue, parseMintRequest, scopedClient } from "../../tokens/scopes.ts";
import { TokenNameConflict } from "../../tokens/store.ts";
import { ApiError } from "./errors.ts";
import type { TokensApiDeps } from "./deps.ts";

/** Checks a token id (`tok_` and 16 hex digits); throws a 400 ApiError otherwise. */
export function tokenId(value: string | undefined): string {
  if (value === undefined || !TOKEN_ID.test(value)) {
    throw new ApiError(400, "bad_request", "a token id looks like tok_0123456789abcdef");
  }
  return value;
}

/**
 * A minted token as shown: who, what it may do, when, whether it works now, and the ready
 * sessions using it. Built field by field so that the hash can never slip into a response.
 */
export function tokenView(deps: Pick<TokensApiDeps, "registry">, record: TokenRecord) {
  const problem = deps.registry.tokens.problem(record.id);
  return {
    id: record.id,
    name: record.name,
    scopes: record.scopes,
    createdAt: new Date(record.createdAt).toISOString(),
    expiresAt: record.expiresAt === null ? null : new Date(record.expiresAt).toISOString(),
    active: problem === undefined,
    problem: problem ?? null,
    // The name is unique to the token, so the sessions of that client are the token's sessions.
    sessions: deps.registry.sessions()
      .filter((s) => s.client === record.name && s.state === "ready")
      .map((s) => s.id),
  };
}

/** A 400 naming the first bad field, with every issue listed for scripts that fix them all. */
function invalid(c: Context, issues: FieldIssue[]): Response {
  const [first] = issues;
  const message = first.field ? `${first.field}: ${first.message}` : first.message;
  return c.json({ error: { code: "bad_request", message, field: first.field, issues } }, 400);
}

/** `/v1/tokens` and below. */
export function tokensApi(deps: TokensApiDeps): Hono {
  const app = new Hono();

  app.get(
    "/v1/tokens",
    (c) => c.json({ tokens: deps.registry.tokens.list().map((record) => tokenView(deps, record)) }),
  );

  app.get("/v1/tokens/:id", (c) => {
    const id = tokenId(c.req.param("id"));
    const record = deps.registry.tokens.get(id);
    if (!record) throw new ApiError(404, "not_found", `no token ${id}`);
    return c.json(tokenView(deps, record));
  });

  app.post("/v1/tokens", async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      throw new ApiError(400, "bad_request", "the body is not valid JSON");
    }
    const parsed = parseMintRequest(body, Date.now());
    if (!parsed.request) return invalid(c, parsed.errors);
    const { name, scopes, expiresAt } = parsed.request;
    // Validated against the limits in force now; the store re-checks them on every reload.
    const scoped = scopedClient(name, scopes, deps.config.limits);
    if (!scoped.client) return invalid(c, scoped.errors);
    let minted;
    try {
      minted = await deps.registry.tokens.mint(
        scoped.client.name,
        scopes,
        expiresAt,
        deps.config,
      );
    } catch (error) {
      if (error instanceof TokenNameConflict) throw new ApiError(409, "conflict", error.message);
      throw error;
    }
    deps.events.publish("token_minted", { token: minted.record.id, client: minted.record.name });
    return c.json(
      {
        ...tokenView(deps, minted.record),
        token: minted.token,
        limits: scoped.client.limits,
        warnings: scoped.warnings,
      },
      201,
      { "Cache-Control": "no-store" },
    );
  });

  // Revocation is immediate: the token stops authenticating and its sessions are closed before
  // the answer is sent (the file is rewritten after that).
  app.delete("/v1/tokens/:id", async (c) => {
    const id = tokenId(c.req.param("id"));
    const record = deps.registry.tokens.get(id);
    if (!record) throw new ApiError(404, "not_found", `no token ${id}`);
    const sessions = tokenView(deps, record).sessions;
    await deps.registry.tokens.revoke(id);
    deps.events.publish("token_revoked", { token: id, client: record.name });
    return c.json({ id, name: record.name, revoked: true, sessionsClosed: sessions });
  });

  return app;
}
