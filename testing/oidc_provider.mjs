// A local OpenID Connect provider for tests (oidc-provider, which runs under Node): listens on
// 127.0.0.1 at a port of its own choosing, with one confidential client and two test users, and
// the library's development login and consent forms, which a test's browser fills. Started as a
// child `node` process; prints one JSON line ({"issuer": "http://127.0.0.1:PORT"}) once
// listening, and runs until killed.
//
// Usage: node testing/oidc_provider.mjs '{"clientId":"…","clientSecret":"…","redirectUris":[…]}'
import { createServer } from "node:http";
import Provider from "oidc-provider";

const options = JSON.parse(process.argv[2] ?? "{}");

/** The test users: the login is the account id; the password is not checked (dev forms). */
const USERS = {
  alice: { email: "alice@example.com", email_verified: true, groups: ["ops"] },
  mallory: { email: "mallory@evil.test", email_verified: true, groups: ["guests"] },
};

const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: options.clientId,
      client_secret: options.clientSecret,
      redirect_uris: options.redirectUris,
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
    }],
    claims: { openid: ["sub"], email: ["email", "email_verified"], groups: ["groups"] },
    scopes: ["openid", "email", "groups"],
    cookies: { keys: ["test-only-cookie-key-0123456789"] },
    features: { devInteractions: { enabled: true } },
    findAccount: (_ctx, id) => {
      const user = USERS[id];
      if (!user) return undefined;
      return { accountId: id, claims: () => ({ sub: id, ...user }) };
    },
  });
  // The library logs its development-only warnings; the test reads stdout for the issuer only.
  server.on("request", provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
