/**
 * The certificates the HTTPS port terminates with, by the names they serve: the files of
 * `http.certificates` and those ACME issues (`acme.ts`). A certificate serves the DNS
 * names of its subjectAltName; `*.example.com` serves one label under `example.com` (RFC 6125
 * §6.4.3). Where two serve a name, the exact name wins over a wildcard, then the one that
 * expires last (a renewed certificate replaces the old one without a gap).
 *
 * @example
 * ```ts ignore
 * const store = new CertificateStore();
 * store.add({ cert, key }, "file");
 * store.find("app.tunnels.example.com")?.identity; // the wildcard's
 * ```
 *
 * @module
 */

import { nodeBuiltin } from "../../util/host/host.ts";
import type { TlsIdentity } from "../../transport/tls/front.ts";

/** Where a certificate came from. */
export type CertificateSource = "file" | "acme";

/** A certificate the HTTPS port can serve. */
export interface ServedCertificate {
  /** The chain and key, as handed to TLS. */
  readonly identity: TlsIdentity;
  /** The DNS names of its subjectAltName, lower-cased (`*.` wildcards as written). */
  readonly names: readonly string[];
  /** Its notBefore, ms since the epoch. */
  readonly notBefore: number;
  /** Its notAfter, ms since the epoch. */
  readonly notAfter: number;
  /** Where it came from. */
  readonly source: CertificateSource;
}

/** A certificate that cannot be served: unreadable, without DNS names, or not matching its key. */
export class CertificateError extends Error {
  /** `message` says which and why. */
  constructor(message: string) {
    super(message);
    this.name = "CertificateError";
  }
}

/** Reads the names and validity of a PEM chain's first certificate and checks it against its key. */
export function describeCertificate(identity: TlsIdentity): {
  names: string[];
  notBefore: number;
  notAfter: number;
} {
  const { X509Certificate, createPrivateKey } = nodeBuiltin("node:crypto");
  let certificate;
  try {
    certificate = new X509Certificate(identity.cert);
  } catch (error) {
    throw new CertificateError(`not a PEM certificate: ${(error as Error).message}`);
  }
  let key;
  try {
    key = createPrivateKey(identity.key);
  } catch (error) {
    throw new CertificateError(`not a PEM private key: ${(error as Error).message}`);
  }
  if (!certificate.checkPrivateKey(key)) {
    throw new CertificateError("the private key does not belong to the certificate");
  }
  const names = (certificate.subjectAltName ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry.startsWith("DNS:"))
    .map((entry) => entry.slice(4).toLowerCase());
  if (names.length === 0) throw new CertificateError("the certificate names no DNS name");
  return {
    names,
    notBefore: Date.parse(certificate.validFrom),
    notAfter: Date.parse(certificate.validTo),
  };
}

/** The certificates by name; the daemon owns one. */
export class CertificateStore {
  /** Certificates by each name they serve (a wildcard under its `*.` form). */
  readonly #byName = new Map<string, ServedCertificate[]>();
  readonly #all = new Set<ServedCertificate>();

  /** Adds a certificate; throws {@linkcode CertificateError} when it cannot be served. */
  add(identity: TlsIdentity, source: CertificateSource): ServedCertificate {
    const served: ServedCertificate = { identity, source, ...describeCertificate(identity) };
    this.#all.add(served);
    for (const name of served.names) {
      const list = this.#byName.get(name) ?? [];
      list.push(served);
      // The longest-lived first: what find() serves.
      list.sort((a, b) => b.notAfter - a.notAfter);
      this.#byName.set(name, list);
    }
    return served;
  }

  /** Removes a certificate (replaced or expired). */
  remove(served: ServedCertificate): void {
    if (!this.#all.delete(served)) return;
    for (const name of served.names) {
      const list = (this.#byName.get(name) ?? []).filter((s) => s !== served);
      if (list.length > 0) this.#byName.set(name, list);
      else this.#byName.delete(name);
    }
  }

  /**
   * The certificate to serve for `host` (lower-case): one naming it exactly, else a wildcard for
   * its parent; among several the one that expires last. Expired ones are not served.
   */
  find(host: string, now: number = Date.now()): ServedCertificate | undefined {
    const dot = host.indexOf(".");
    const candidates = [host, dot > 0 ? `*${host.slice(dot)}` : undefined];
    for (const name of candidates) {
      if (name === undefined) continue;
      const served = this.#byName.get(name)?.find((s) => s.notAfter > now);
      if (served) return served;
    }
    return undefined;
  }

  /** Every certificate held, in the order added. */
  list(): ServedCertificate[] {
    return [...this.#all];
  }
}
