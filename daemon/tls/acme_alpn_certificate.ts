/**
 * The certificate that answers an ACME TLS-ALPN-01 challenge (RFC 8737 §3): self-signed for the
 * name being validated, with the critical `acmeIdentifier` extension holding the SHA-256 of the
 * key authorization. Made here (with `@peculiar/x509` and WebCrypto) because acme-client's own
 * is a CA certificate with no validity window and no digitalSignature usage, which Deno's and
 * Bun's TLS servers refuse to serve.
 *
 * @example
 * ```ts ignore
 * const identity = await alpnChallengeCertificate("app.example.com", keyAuthorization);
 * // serve it to hellos offering only "acme-tls/1" for app.example.com
 * ```
 *
 * @module
 */

import * as x509 from "@peculiar/x509";
import type { TlsIdentity } from "../../transport/tls/front.ts";

/** id-pe-acmeIdentifier (RFC 8737 §6.1). */
const ACME_IDENTIFIER = "1.3.6.1.5.5.7.1.31";
const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

/** A fresh key and the challenge certificate for `host` and `keyAuthorization`. */
export async function alpnChallengeCertificate(
  host: string,
  keyAuthorization: string,
): Promise<TlsIdentity> {
  const keys = await crypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"]);
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(keyAuthorization),
  );
  // The extension's value: Authorization ::= OCTET STRING (SIZE (32)), DER-encoded.
  const value = new Uint8Array(34);
  value.set([0x04, 32]);
  value.set(new Uint8Array(digest), 2);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${host}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 7 * 24 * 3600 * 1000),
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: host }]),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.Extension(ACME_IDENTIFIER, true, value),
    ],
  }, crypto);
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    cert: certificate.toString("pem"),
    key: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"),
  };
}
