/**
 * Where ACME (`acme.ts`) keeps what outlives one order: issued certificates and their keys, the
 * account key, the right to order a name, and the answers of challenges in flight. A single
 * daemon keeps them in its data directory and in memory (`acme_files.ts`); a cluster gives ACME
 * an implementation over its buckets (`daemon/cluster/kv_acme.ts`), so that every node serves the
 * certificates, answers the challenges, and orders under one account, one order per name at a
 * time. This folder defines the interface; the cluster, which sits above it, implements it.
 *
 * @module
 */

import type { TlsIdentity } from "../../transport/tls/front.ts";

/** A challenge whose answer must be served while the CA checks it. */
export type AcmeChallenge =
  /** HTTP-01: `GET /.well-known/acme-challenge/TOKEN` on the HTTP port answers the key authorization. */
  | { type: "http-01"; token: string; keyAuthorization: string }
  /** TLS-ALPN-01: an `acme-tls/1` hello for `host` on the HTTPS port gets this certificate. */
  | { type: "tls-alpn-01"; host: string; identity: TlsIdentity };

/** The right to order one name, held while its order runs. */
export interface AcmeLease {
  /** Gives the right back (after the certificate is stored, or the order failed). */
  release(): Promise<void>;
}

/** ACME's state, kept in files or in a cluster (see the module's comment). */
export interface AcmeStorage {
  /** How long to wait before asking again for a lease another order holds, ms. */
  readonly leaseWaitMs: number;
  /**
   * Calls `found` with every certificate stored and resolves once each was; then keeps calling it
   * with each certificate stored later by another process (a cluster's other nodes) until
   * {@linkcode stop}.
   */
  load(found: (host: string, identity: TlsIdentity) => void): Promise<void>;
  /** The certificate stored for `host`, read now (another node may have stored a newer one). */
  latest(host: string): Promise<TlsIdentity | undefined>;
  /** Stores `identity` as `host`'s certificate, in place of the one stored before. */
  save(host: string, identity: TlsIdentity): Promise<void>;
  /** The account key (PEM): the one stored, else `create()`'s, stored first. */
  accountKey(create: () => Promise<string>): Promise<string>;
  /** The right to order `host` now, or undefined while another order of it runs. */
  lease(host: string): Promise<AcmeLease | undefined>;
  /** Answers `challenge` wherever the CA may check it, until {@linkcode removeChallenge}. */
  addChallenge(challenge: AcmeChallenge): Promise<void>;
  /** Stops answering `challenge`. */
  removeChallenge(challenge: AcmeChallenge): Promise<void>;
  /** The key authorization for HTTP-01 `token` while its challenge runs, else undefined. */
  httpAnswer(token: string): string | undefined;
  /** The TLS-ALPN-01 certificate for `host` while its challenge runs, else undefined. */
  alpnIdentity(host: string): TlsIdentity | undefined;
  /** Stops following other processes' writes and keeping leases and challenges alive. */
  stop(): void;
}
