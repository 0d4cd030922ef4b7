import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  identityProviderProblem,
  isAllowedIdentityProvider,
  outsideIdentityProviders,
} from "./identity_providers.ts";

const jwt = (jwksUrl: string) => ({ jwt: { jwksUrl, issuer: "i", audience: "a" } });
const oidc = (issuer: string) => ({ oidc: { issuer, clientId: "c" } });

describe("identity providers", () => {
  it("a URL lies within an entry by origin and path, never by a prefix of a name", () => {
    const allowed = ["https://login.example.com/realms/a", "http://127.0.0.1:8080"];
    for (
      const inside of [
        "https://login.example.com/realms/a",
        "https://login.example.com/realms/a/protocol/certs",
        "http://127.0.0.1:8080/jwks",
      ]
    ) assert.ok(isAllowedIdentityProvider(inside, allowed), inside);
    for (
      const outside of [
        "https://login.example.com/realms/ab", // a sibling, not below
        "https://login.example.com/realms",
        "https://login.example.com.evil.test/realms/a",
        "http://login.example.com/realms/a", // another scheme
        "https://login.example.com:8443/realms/a", // another port
        "http://127.0.0.1:8081/jwks",
        "http://127.0.0.1/jwks",
        "not a url",
      ]
    ) assert.ok(!isAllowedIdentityProvider(outside, allowed), outside);
  });

  it("refuses a client's URL outside the list, naming the field; none listed refuses all", () => {
    const allowed = ["https://idp.example.com"];
    assert.equal(
      outsideIdentityProviders(jwt("https://idp.example.com/keys"), undefined, allowed),
      undefined,
    );
    assert.match(
      outsideIdentityProviders(jwt("http://169.254.169.254/latest"), undefined, allowed)!,
      /^policy\.http\.jwt\.jwksUrl: http:\/\/169\.254\.169\.254\/latest is not within/,
    );
    assert.match(
      outsideIdentityProviders(oidc("https://idp.example.com.evil.test"), undefined, allowed)!,
      /^policy\.http\.oidc\.issuer: /,
    );
    assert.match(
      outsideIdentityProviders(jwt("https://idp.example.com/keys"), undefined, [])!,
      /\(none are listed\)$/,
    );
    assert.equal(outsideIdentityProviders({ pathPrefix: "/a" }, undefined, []), undefined);
    assert.equal(outsideIdentityProviders(undefined, undefined, []), undefined);
  });

  it("leaves the operator's own rules alone: they take the client's place", () => {
    const operator = jwt("http://10.0.0.5/keys");
    assert.equal(outsideIdentityProviders(jwt("http://evil.test/k"), operator, []), undefined);
    assert.equal(outsideIdentityProviders(undefined, oidc("http://10.0.0.5"), []), undefined);
    assert.ok(outsideIdentityProviders(oidc("http://evil.test"), operator, []));
  });

  it("says what is wrong with an entry of the list", () => {
    assert.equal(identityProviderProblem("https://idp.example.com/realms/a"), undefined);
    assert.equal(identityProviderProblem("idp.example.com"), "must be a URL");
    assert.equal(identityProviderProblem("ftp://idp.example.com"), "must be an https URL");
    assert.equal(
      identityProviderProblem("https://u:p@idp.example.com"),
      "must not hold credentials",
    );
    assert.equal(
      identityProviderProblem("https://idp.example.com/?a=1"),
      "must have no query or fragment",
    );
  });
});
