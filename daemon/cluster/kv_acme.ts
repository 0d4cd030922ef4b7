/**
 * ACME's state in a cluster (`AcmeStorage` of `daemon/tls/acme_storage.ts`), so that a host
 * name's certificate is a cluster fact: ordered by one node, stored once, served by all.
 *
 * - **`<prefix>-certificates`**: key `cert-HOST`, the chain and its private key; key `account`,
 *   the ACME account key. Private keys are encrypted (AES-256-GCM, a fresh 96-bit nonce per
 *   write, a key derived from the cluster key with HKDF-SHA256 under a label of its own, the
 *   bucket and KV key bound in as associated data), one copy per cluster key the writer holds, so
 *   a cluster rotating its key reads them throughout; a node that holds a key the record lacks a
 *   copy for adds one. Every node follows the bucket and serves each certificate.
 * - **`<prefix>-acme`**: entries that expire one TTL (the presence TTL) after their last write.
 *   `lease-HOST` is the right to order HOST, taken with a KV create (of two nodes, one wins) and
 *   rewritten every third of the TTL while the order runs, so a dead node's lease lapses;
 *   `http01-TOKEN` and `alpn-HOST` are the answers of challenges in flight, rewritten the same
 *   way and removed when the challenge ends. Every node follows them, so the CA may check any
 *   node's HTTP or HTTPS port.
 *
 * Both buckets are signed like every bucket of the cluster (`signed_kv.ts`): a record not signed
 * with the cluster key is absent.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import type { AcmeChallenge, AcmeLease, AcmeStorage } from "../tls/acme_storage.ts";
import type { TlsIdentity } from "../../transport/tls/front.ts";
import type { Logger } from "../../util/log.ts";
import { isRevisionConflict, type KvBucket, type KvEntry } from "./nats.ts";
import { keyId } from "./signed_kv.ts";

/** One copy of a secret, encrypted under one cluster key. */
export interface SealedCopy {
  /** The cluster key's name (`keyId`). */
  id: string;
  /** The AES-GCM nonce, base64url. */
  iv: string;
  /** The ciphertext and its 16-byte tag, base64url. */
  data: string;
}

/** More copies than this on one record are not looked at. */
const MAX_COPIES = 8;
const TAG_BYTES = 16;

/**
 * Secrets (private keys) encrypted under keys derived from the cluster keys: sealed with every
 * key held, opened with any.
 */
export class SecretSeal {
  readonly #keys: { id: string; secret: Buffer }[];

  /** Keys from `clusterKeys` (`cluster.key` first; at least one). */
  constructor(clusterKeys: readonly string[]) {
    if (clusterKeys.length === 0) throw new Error("secrets need a cluster key");
    this.#keys = clusterKeys.map((key) => ({
      id: keyId(key),
      secret: Buffer.from(
        hkdfSync("sha256", key, "tunnelmux", "tunnelmux-acme-private-key-v1", 32),
      ),
    }));
  }

  /** `secret` encrypted for `context` (where it is stored), once under each key held. */
  seal(context: string, secret: string): SealedCopy[] {
    return this.#keys.map((key) => encrypt(key, context, secret));
  }

  /** The secret, if a copy under a key held opens for `context`; else undefined. */
  open(context: string, sealed: unknown): string | undefined {
    if (!Array.isArray(sealed)) return undefined;
    for (const copy of sealed.slice(0, MAX_COPIES)) {
      const key = this.#keys.find((k) => k.id === copy?.id);
      if (!key || typeof copy.iv !== "string" || typeof copy.data !== "string") continue;
      try {
        const data = Buffer.from(copy.data, "base64url");
        if (data.length < TAG_BYTES) continue;
        const decipher = createDecipheriv(
          "aes-256-gcm",
          key.secret,
          Buffer.from(copy.iv, "base64url"),
        );
        decipher.setAAD(Buffer.from(context));
        decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
        return Buffer.concat([
          decipher.update(data.subarray(0, data.length - TAG_BYTES)),
          decipher.final(),
        ])
          .toString("utf8");
      } catch {
        // Tampered with, or made for another context: try another copy.
      }
    }
    return undefined;
  }

  /**
   * `sealed` with a copy of `secret` added under each key held that it lacks (copies under keys
   * not held are kept as they are), or undefined when it lacks none.
   */
  complete(context: string, sealed: SealedCopy[], secret: string): SealedCopy[] | undefined {
    const missing = this.#keys.filter((k) => !sealed.some((copy) => copy.id === k.id));
    if (missing.length === 0) return undefined;
    return [...missing.map((key) => encrypt(key, context, secret)), ...sealed].slice(0, MAX_COPIES);
  }
}

function encrypt(key: { id: string; secret: Buffer }, context: string, secret: string): SealedCopy {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key.secret, iv);
  cipher.setAAD(Buffer.from(context));
  const data = Buffer.concat([cipher.update(secret, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return { id: key.id, iv: iv.toString("base64url"), data: data.toString("base64url") };
}

/** A certificate as stored under `cert-HOST`. */
interface CertificateRecord {
  host: string;
  /** The chain (PEM). */
  cert: string;
  /** The private key (PEM), sealed. */
  key: SealedCopy[];
  /** The node that stored it, and when (ms since the epoch): for people reading the bucket. */
  node: string;
  at: number;
}

/** What {@linkcode KvAcmeStorage} needs. */
export interface KvAcmeOptions {
  /** `<prefix>-certificates`: certificates and the account key. */
  certificates: KvBucket;
  /** Its name in NATS (bound into every sealed key with the record's KV key). */
  certificatesName: string;
  /** `<prefix>-acme`: leases and challenge answers, each expiring `ttlMs` after its last write. */
  orders: KvBucket;
  /** The orders bucket's TTL, ms. */
  ttlMs: number;
  /** The cluster keys, `cluster.key` first. */
  keys: readonly string[];
  /** This node's name. */
  node: string;
  /** Logger. */
  log: Logger;
}

/** An entry of the orders bucket this node keeps alive: a lease, or a challenge's answer. */
interface Held {
  key: string;
  value: string;
  revision: number;
  /** Writes of this entry, one after another. */
  chain: Promise<void>;
  /** A lease whose entry another node took (it had lapsed). */
  lost: boolean;
}

/** How long a challenge's answer waits to be seen by this node's own watch, at most. */
const DELIVERY_WAIT_MS = 2_000;

const certificateKey = (host: string) => `cert-${host}`;
const ACCOUNT_KEY = "account";

/** {@linkcode AcmeStorage} over the cluster's buckets (see the module's comment). */
export class KvAcmeStorage implements AcmeStorage {
  /** A lease held elsewhere lapses within a TTL, or is given back sooner. */
  readonly leaseWaitMs: number;
  readonly #options: KvAcmeOptions;
  readonly #seal: SecretSeal;
  /** This run of the node (in leases: a restarted node is another run). */
  readonly #run = randomBytes(6).toString("hex");
  /** HTTP-01 key authorizations by token, as the orders bucket holds them. */
  readonly #tokens = new Map<string, string>();
  /** TLS-ALPN-01 challenge certificates by host, as the orders bucket holds them. */
  readonly #alpn = new Map<string, TlsIdentity>();
  /** Each certificate record last seen (its revision) and the chain last handed to `found`. */
  readonly #revisions = new Map<string, { revision: number; cert?: string }>();
  /** Answers this node removed, by KV key, with the last revision it wrote of each. */
  readonly #removed = new Map<string, number>();
  /**
   * The keys of answers delivered since the last {@linkcode refollow} began, each with the
   * highest revision delivered.
   */
  #answered = new Map<string, number>();
  /** Leases and challenge answers this node keeps alive, by KV key. */
  readonly #held = new Map<string, Held>();
  #found: ((host: string, identity: TlsIdentity) => void) | undefined;
  #watches: { stop(): void }[] = [];
  /** The highest revision of the orders bucket this node's watch delivered, and who waits. */
  #delivered = 0;
  #waiters: { revision: number; resolve: () => void }[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;
  #stopped = false;

  /** State in `options`' buckets, private keys sealed with `options.keys`. */
  constructor(options: KvAcmeOptions) {
    this.#options = options;
    this.#seal = new SecretSeal(options.keys);
    this.leaseWaitMs = options.ttlMs;
  }

  /** Reads every certificate, then follows the bucket (and the challenges) until stopped. */
  async load(found: (host: string, identity: TlsIdentity) => void): Promise<void> {
    this.#found = found;
    await this.refollow();
  }

  /**
   * (Re)starts the watches of both buckets and reads them whole: after NATS came back, a watch
   * may not have survived the failover.
   */
  async refollow(): Promise<void> {
    if (this.#found === undefined || this.#stopped) return;
    for (const watch of this.#watches) watch.stop();
    const { certificates, orders } = this.#options;
    const [certs, answers] = await Promise.all([
      certificates.watch({ include: "updates" }),
      orders.watch({ include: "updates" }),
    ]);
    this.#watches = [certs, answers];
    this.#answered = new Map();
    (async () => {
      for await (const entry of certs) this.#certificate(entry);
    })().catch(() => {});
    (async () => {
      for await (const entry of answers) this.#answer(entry);
    })().catch(() => {});
    // One pass over each bucket with its values, not a listing and then a read per key. What
    // a pass gives may be older than what the watch delivered meanwhile: each record keeps the
    // newest revision it was given (#certificate, #answer).
    const [certified, answered] = await Promise.all([certificates.latest(), orders.latest()]);
    for await (const entry of certified) this.#certificate(entry);
    for await (const entry of answered) this.#answer(entry);
    // Answers removed while the watch was away are gone (this node's own stay).
    const gone = (key: string) => !this.#answered.has(key) && !this.#held.has(key);
    for (const token of this.#tokens.keys()) {
      if (gone(`http01-${token}`)) this.#tokens.delete(token);
    }
    for (const host of this.#alpn.keys()) if (gone(`alpn-${host}`)) this.#alpn.delete(host);
  }

  /** The record of `cert-HOST`, read now. */
  async latest(host: string): Promise<TlsIdentity | undefined> {
    const entry = await this.#options.certificates.get(certificateKey(host));
    return entry ? this.#open(entry)?.identity : undefined;
  }

  /** Written in place of the record before (the lease makes this node its only writer now). */
  async save(host: string, identity: TlsIdentity): Promise<void> {
    const key = certificateKey(host);
    const record: CertificateRecord = {
      host,
      cert: identity.cert,
      key: this.#seal.seal(this.#context(key), identity.key),
      node: this.#options.node,
      at: Date.now(),
    };
    await this.#options.certificates.put(key, JSON.stringify(record));
  }

  /** The `account` record's key; else `create()`'s, unless another node stores one first. */
  async accountKey(create: () => Promise<string>): Promise<string> {
    const bucket = this.#options.certificates;
    const context = this.#context(ACCOUNT_KEY);
    const entry = await bucket.get(ACCOUNT_KEY);
    const stored = entry?.operation === "PUT" ? this.#openAccount(entry) : undefined;
    if (stored !== undefined) return stored;
    const key = await create();
    const value = JSON.stringify({
      key: this.#seal.seal(context, key),
      node: this.#options.node,
      at: Date.now(),
    });
    try {
      // A record that does not open here (sealed under keys this node does not hold) is
      // replaced, at the revision read; else created, if no node did meanwhile.
      if (entry?.operation === "PUT") await bucket.update(ACCOUNT_KEY, value, entry.revision);
      else await bucket.create(ACCOUNT_KEY, value);
      this.#options.log.info("ACME account key stored for the cluster");
      return key;
    } catch (error) {
      if (!isRevisionConflict(error)) throw error;
      const again = await bucket.get(ACCOUNT_KEY);
      const theirs = again?.operation === "PUT" ? this.#openAccount(again) : undefined;
      if (theirs === undefined) throw error;
      return theirs;
    }
  }

  /** `lease-HOST`, created if absent, kept alive until released. */
  async lease(host: string): Promise<AcmeLease | undefined> {
    const key = `lease-${host}`;
    const value = JSON.stringify({
      host,
      node: this.#options.node,
      run: this.#run,
      at: Date.now(),
    });
    let revision;
    try {
      revision = await this.#options.orders.create(key, value);
    } catch (error) {
      if (!isRevisionConflict(error)) throw error;
      const holder = await this.#options.orders.get(key).then(parse, () => undefined);
      this.#options.log.info("certificate ordered by another node", {
        host,
        holder: typeof holder?.node === "string" ? holder.node : undefined,
      });
      return undefined;
    }
    const held = this.#hold(key, value, revision);
    return { release: () => this.#release(held) };
  }

  /** `http01-TOKEN` or `alpn-HOST`, kept alive until removed; resolves once this node sees it. */
  async addChallenge(challenge: AcmeChallenge): Promise<void> {
    const node = this.#options.node;
    let key, value;
    if (challenge.type === "http-01") {
      key = `http01-${challenge.token}`;
      value = { type: challenge.type, token: challenge.token, answer: challenge.keyAuthorization };
      this.#tokens.set(challenge.token, challenge.keyAuthorization);
    } else {
      // The challenge certificate's key is no secret: it proves nothing but that the certificate
      // was served, and its acmeIdentifier holds the digest of a public key authorization.
      key = `alpn-${challenge.host}`;
      value = { type: challenge.type, host: challenge.host, ...challenge.identity };
      this.#alpn.set(challenge.host, challenge.identity);
    }
    const text = JSON.stringify({ ...value, node });
    const revision = await this.#options.orders.put(key, text);
    this.#hold(key, text, revision);
    // Every node's watch is sent the entry at once; this node's having it shows it was sent,
    // before the CA is told to check (it may check any node).
    await this.#shown(revision);
  }

  /** Deletes the answer (at the revision this node last wrote). */
  async removeChallenge(challenge: AcmeChallenge): Promise<void> {
    const key = challenge.type === "http-01"
      ? `http01-${challenge.token}`
      : `alpn-${challenge.host}`;
    const forget = () => {
      if (challenge.type === "http-01") this.#tokens.delete(challenge.token);
      else this.#alpn.delete(challenge.host);
    };
    forget();
    const held = this.#held.get(key);
    if (!held) return;
    this.#held.delete(key);
    await held.chain;
    // This node's own writes of it that its watch has yet to deliver are not answers any more.
    this.#removed.set(key, held.revision);
    forget();
    // Not removed (NATS away): it lapses within a TTL.
    await this.#release(held).catch(() => {});
  }

  /** Any node's answer, as the bucket holds it. */
  httpAnswer(token: string): string | undefined {
    return this.#tokens.get(token);
  }

  /** Any node's challenge certificate, as the bucket holds it. */
  alpnIdentity(host: string): TlsIdentity | undefined {
    return this.#alpn.get(host);
  }

  /** Stops the watches and keeping entries alive (they lapse within a TTL). */
  stop(): void {
    this.#stopped = true;
    for (const watch of this.#watches) watch.stop();
    this.#watches = [];
    clearInterval(this.#timer);
    this.#timer = undefined;
    for (const waiter of this.#waiters) waiter.resolve();
    this.#waiters = [];
  }

  #context(key: string): string {
    return `${this.#options.certificatesName}\n${key}`;
  }

  /** A certificate record, opened: undefined (logged) when it is not one or its key does not open. */
  #open(
    entry: KvEntry,
  ): { host: string; identity: TlsIdentity; record: CertificateRecord } | undefined {
    if (entry.operation !== "PUT") return undefined;
    const record = parse(entry) as Partial<CertificateRecord> | undefined;
    const host = entry.key.slice("cert-".length);
    if (record?.host !== host || typeof record.cert !== "string") {
      this.#options.log.warn("stored certificate unusable", {
        host,
        error: "not a certificate record",
      });
      return undefined;
    }
    const key = this.#seal.open(this.#context(entry.key), record.key);
    if (key === undefined) {
      this.#options.log.warn("stored certificate unusable", {
        host,
        error: "its private key does not open with the cluster key",
      });
      return undefined;
    }
    return { host, identity: { cert: record.cert, key }, record: record as CertificateRecord };
  }

  #openAccount(entry: KvEntry): string | undefined {
    const record = parse(entry);
    const key = this.#seal.open(this.#context(ACCOUNT_KEY), record?.key);
    if (key === undefined) {
      this.#options.log.warn("the cluster's ACME account key does not open with the cluster key");
      return undefined;
    }
    const sealed = this.#seal.complete(
      this.#context(ACCOUNT_KEY),
      record!.key as SealedCopy[],
      key,
    );
    if (sealed) {
      const value = JSON.stringify({ ...record, key: sealed });
      this.#options.certificates.update(ACCOUNT_KEY, value, entry.revision).catch(() => {});
    }
    return key;
  }

  /** A certificate record from the bucket: handed to `found` once per revision. */
  #certificate(entry: KvEntry): void {
    if (this.#stopped || !entry.key.startsWith("cert-")) return;
    const last = this.#revisions.get(entry.key);
    if ((last?.revision ?? 0) >= entry.revision) return;
    this.#revisions.set(entry.key, { revision: entry.revision, cert: last?.cert });
    const opened = this.#open(entry);
    if (!opened) return;
    // The same chain rewritten (another key's copy added) is nothing new.
    if (last?.cert !== opened.identity.cert) this.#found?.(opened.host, opened.identity);
    this.#revisions.set(entry.key, { revision: entry.revision, cert: opened.identity.cert });
    // Sealed under fewer keys than this node holds (written before a key was added): add the
    // copies, so the record still opens once the older key is dropped. At the revision read, so
    // that of several nodes doing so one writes.
    const context = this.#context(entry.key);
    const sealed = this.#seal.complete(context, opened.record.key, opened.identity.key);
    if (sealed) {
      const value = JSON.stringify({ ...opened.record, key: sealed });
      this.#options.certificates.update(entry.key, value, entry.revision).catch(() => {});
    }
  }

  /** An entry of the orders bucket: a challenge's answer written or gone (leases are ignored). */
  #answer(entry: KvEntry): void {
    if (entry.revision > this.#delivered) {
      this.#delivered = entry.revision;
      this.#waiters = this.#waiters.filter((waiter) => {
        if (waiter.revision > entry.revision) return true;
        waiter.resolve();
        return false;
      });
    }
    const removed = this.#removed.get(entry.key);
    if (removed !== undefined) {
      if (entry.revision <= removed) return;
      this.#removed.delete(entry.key);
    }
    // The watch delivered a newer one of this key while the bucket was read whole: keep it.
    if ((this.#answered.get(entry.key) ?? 0) >= entry.revision) return;
    this.#answered.set(entry.key, entry.revision);
    const put = entry.operation === "PUT";
    const record = put ? parse(entry) : undefined;
    if (entry.key.startsWith("http01-")) {
      const token = entry.key.slice("http01-".length);
      if (record?.token === token && typeof record.answer === "string") {
        this.#tokens.set(token, record.answer);
      } else this.#tokens.delete(token);
    } else if (entry.key.startsWith("alpn-")) {
      const host = entry.key.slice("alpn-".length);
      if (
        record?.host === host && typeof record.cert === "string" && typeof record.key === "string"
      ) {
        this.#alpn.set(host, { cert: record.cert, key: record.key });
      } else this.#alpn.delete(host);
    }
  }

  /** Resolves once this node's watch of the orders bucket delivered `revision` (bounded). */
  #shown(revision: number): Promise<void> {
    if (this.#delivered >= revision || this.#watches.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, DELIVERY_WAIT_MS);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#waiters.push({ revision, resolve: done });
    });
  }

  /** Keeps `key` of the orders bucket alive from `revision` on: rewritten every third of the TTL. */
  #hold(key: string, value: string, revision: number): Held {
    const held: Held = { key, value, revision, chain: Promise.resolve(), lost: false };
    this.#held.set(key, held);
    this.#timer ??= setInterval(() => this.#refresh(), Math.max(100, this.#options.ttlMs / 3));
    return held;
  }

  /** Rewrites each held entry at the revision this node wrote, before it expires. */
  #refresh(): void {
    if (this.#stopped) return;
    const { orders, log } = this.#options;
    for (const held of this.#held.values()) {
      held.chain = held.chain.then(async () => {
        if (held.lost || this.#held.get(held.key) !== held) return;
        try {
          held.revision = await orders.update(held.key, held.value, held.revision);
        } catch (error) {
          if (!isRevisionConflict(error)) return; // NATS away: try at the next round
          held.lost = true;
          this.#held.delete(held.key);
          log.warn("an ACME entry of this node lapsed and was taken", { key: held.key });
        }
      });
    }
  }

  /** Stops keeping `held` alive and deletes it, unless another node wrote it since. */
  async #release(held: Held): Promise<void> {
    if (this.#held.get(held.key) === held) this.#held.delete(held.key);
    if (this.#held.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
    await held.chain;
    if (held.lost) return;
    held.lost = true;
    try {
      await this.#options.orders.delete(held.key, { previousSeq: held.revision });
    } catch (error) {
      if (!isRevisionConflict(error)) throw error;
    }
  }
}

// deno-lint-ignore no-explicit-any
function parse(entry: KvEntry | null): Record<string, any> | undefined {
  if (entry?.operation !== "PUT") return undefined;
  try {
    const value = JSON.parse(entry.string());
    return typeof value === "object" && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}
