import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  checkIdentityProviders,
  isAllowedProvider,
  parseIdentityProvider,
} from "./identity_providers.ts";

describe("identityProviders", () => {
  it("keeps an entry's origin and path, and refuses what is not an http(s) URL", () => {
    assert.deepEqual(parseIdentityProvider("HTTPS://IdP.example.com:443/realms/a"), {
      ok: true,
      url: "https://idp.example.com/realms/a",
    });
    for (const bad of [7, "idp.example.com", "file:///etc/passwd", "https://u:p@idp.test/"]) {
      assert.equal(parseIdentityProvider(bad).ok, false, String(bad));
    }
  });

  it("admits a URL of the same origin under the entry's path, at a segment boundary", () => {
    const allowed = ["https://idp.test/realms/a", "http://127.0.0.1:8080/"];
    assert.equal(isAllowedProvider("https://idp.test/realms/a", allowed), true);
    assert.equal(isAllowedProvider("https://idp.test/realms/a/jwks", allowed), true);
    assert.equal(isAllowedProvider("http://127.0.0.1:8080/anything", allowed), true);
    for (
      const refused of [
        "https://idp.test/realms/ab",
        "https://idp.test/realms",
        "https://idp.test.evil.example/realms/a",
        "http://idp.test/realms/a",
        "http://127.0.0.1:8081/",
        "https://idp.test/realms/a/../../admin",
        "not a url",
      ]
    ) assert.equal(isAllowedProvider(refused, allowed), false, refused);
  });

  it("checks only the URLs the client brings, not the operator's own", () => {
    const jwt = { jwksUrl: "http://10.0.0.1/keys", issuer: "i", audience: "a" };
    const client = { http: { jwt } };
    assert.match(checkIdentityProviders({}, client, [])!, /jwksUrl: http:\/\/10\.0\.0\.1\/keys/);
    assert.equal(checkIdentityProviders({}, client, ["http://10.0.0.1/"]), undefined);
    // The operator's JWT rule replaces the client's: nothing of the client's is fetched.
    assert.equal(checkIdentityProviders(client, client, []), undefined);
    const oidc = { http: { oidc: { issuer: "http://169.254.169.254/latest", clientId: "c" } } };
    assert.match(checkIdentityProviders({}, oidc, [])!, /oidc\.issuer/);
    assert.equal(checkIdentityProviders({}, {}, []), undefined);
  });
});
