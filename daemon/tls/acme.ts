/**
 * Certificates from an ACME CA (RFC 8555, npm `acme-client`) for the names HTTP tunnels hold.
 * A name is ordered when a client first holds it and no certificate serves it; the
 * CA proves it over HTTP-01 (the HTTP front answers `/.well-known/acme-challenge/`) or
 * TLS-ALPN-01 (the HTTPS front answers `acme-tls/1` hellos with the challenge certificate).
 *
 * Kind to the CA and to the daemon's start: issued certificates and the account key are kept by
 * an {@linkcode AcmeStorage} (a single daemon's: `DATA_DIR/acme/`, mode 0600, `acme_files.ts`; a
 * cluster's: its buckets, shared by every node) and served again after a restart without a new
 * order; orders run one at a time, each under the storage's lease of its name (in a cluster, one
 * order of a name at a time across the nodes), at most 20 for new names an hour; a failed order is
 * retried after 1 min, doubling to 6 h, and reported as a `certificate_failed` event; a
 * certificate is renewed once less than a third of its lifetime is left (30 days of Let's
 * Encrypt's 90), while the old one is still served. A certificate another node stores replaces
 * the older one here; a daemon joining a cluster brings its data directory's certificates and
 * account key into the cluster's storage. Loaded only when `http.acme` is configured.
 *
 * @example
 * ```ts ignore
 * const acme = new AcmeCertificates({ config, dataDir, store, log, publish });
 * await acme.load();
 * acme.want("app.tunnels.example.com"); // ordered unless a certificate serves it
 * ```
 *
 * @module
 */

import { readFile } from "node:fs/promises";
import type * as AcmeClient from "acme-client";
import type { AcmeConfig } from "../config/types.ts";
import type { CertificateStore, ServedCertificate } from "./certificates.ts";
import type { TlsIdentity } from "../../transport/tls/front.ts";
import type { Logger } from "../../util/log.ts";
import { alpnChallengeCertificate } from "./acme_alpn_certificate.ts";
import { FileAcmeStorage } from "./acme_files.ts";
import type { AcmeChallenge, AcmeLease, AcmeStorage } from "./acme_storage.ts";

/** What {@linkcode AcmeCertificates} needs. */
export interface AcmeOptions {
  /** The CA and how names are proven. */
  config: AcmeConfig;
  /** The daemon's data directory (certificates go to `acme/` in it, unless `storage` is given). */
  dataDir: string;
  /**
   * Where certificates, the account key, leases and challenges are kept (default: `dataDir`).
   * Given one (a cluster's), what `dataDir` holds is brought into it at load, and nothing is
   * written there.
   */
  storage?: AcmeStorage;
  /** Where issued certificates are served from. */
  store: CertificateStore;
  /** The daemon logger. */
  log: Logger;
  /** Reports issues and failures to the daemon's event feed. */
  publish(
    type: "certificate_issued" | "certificate_failed",
    fields: Record<string, string | number | undefined>,
  ): void;
  /** The first pause after a failed order (default 60 s); it doubles per failure. */
  retryMs?: number;
  /** The longest pause between failed orders (default 6 h). */
  maxRetryMs?: number;
  /**
   * Orders for names without a certificate yet, at most this many an hour (default 20; renewals
   * do not count): a client that may hold any label must not spend the domain's allowance at the
   * CA (Let's Encrypt: 50 certificates a week per registered domain) by cycling through names.
   */
  newOrdersPerHour?: number;
}

/** One name's certificate and its order. */
interface NameState {
  served: ServedCertificate | undefined;
  ordering: boolean;
  failures: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

const HOUR_MS = 60 * 60 * 1000;
/** setTimeout fires at once past 2^31 - 1 ms; longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** When `served` is due for renewal: once less than a third of its lifetime is left. */
function renewAt(served: ServedCertificate): number {
  return served.notAfter - (served.notAfter - served.notBefore) / 3;
}

/** The daemon's ACME certificates; it owns one when `http.acme` is set. */
export class AcmeCertificates {
  readonly #options: AcmeOptions;
  readonly #storage: AcmeStorage;
  /** The data directory's state, when the storage is elsewhere: brought into it. */
  readonly #files: FileAcmeStorage | undefined;
  readonly #names = new Map<string, NameState>();
  /** Orders run one after another. */
  #queue: Promise<void> = Promise.resolve();
  #client: Promise<{ acme: typeof AcmeClient; client: AcmeClient.Client }> | undefined;
  /** When the new-name orders of the last hour started. */
  #newOrders: number[] = [];
  #stopped = false;

  /** Keeps certificates for `options.store`; {@linkcode load} what is stored first. */
  constructor(options: AcmeOptions) {
    this.#options = options;
    const files = new FileAcmeStorage(options.dataDir, options.log);
    this.#storage = options.storage ?? files;
    this.#files = options.storage ? files : undefined;
  }

  /**
   * Serves the certificates stored by earlier runs (no order is made for them), and from then on
   * those other nodes store.
   */
  async load(): Promise<void> {
    await this.#storage.load((host, identity) => this.#stored(host, identity));
    if (this.#files) await this.#bring(this.#files);
  }

  /**
   * A daemon that joins a cluster brings the certificates its data directory holds: each one
   * that expires later than what the storage holds for its name is stored there, so that it is
   * not ordered again.
   */
  async #bring(files: FileAcmeStorage): Promise<void> {
    const found: [string, TlsIdentity][] = [];
    await files.load((host, identity) => found.push([host, identity]));
    for (const [host, identity] of found) {
      const before = this.#state(host).served;
      const served = this.#tryAdopt(host, identity);
      if (!served) continue;
      if (served === before || served.notAfter <= Date.now()) continue;
      const fields = { host, expires: new Date(served.notAfter).toISOString() };
      try {
        await this.#storage.save(host, identity);
        this.#options.log.info("certificate brought from the data directory", fields);
      } catch (error) {
        // Served here meanwhile; brought at the next start.
        this.#options.log.warn("certificate not brought from the data directory", {
          ...fields,
          error: (error as Error).message,
        });
      }
    }
  }

  /**
   * A tunnel holds `host`: makes sure a certificate serves it, ordering one unless a valid one
   * is held (from a file or an earlier order), and keeps it renewed while the daemon runs.
   */
  want(host: string): void {
    if (this.#stopped) return;
    const served = this.#options.store.find(host);
    if (served?.source === "file") return;
    const state = this.#state(host);
    if (state.ordering || state.timer !== undefined) return;
    this.#schedule(host, state);
  }

  /** The key authorization for an HTTP-01 `token` being validated, or undefined. */
  httpAnswer(token: string): string | undefined {
    return this.#storage.httpAnswer(token);
  }

  /** The TLS-ALPN-01 certificate for `host` being validated, or undefined. */
  alpnIdentity(host: string): TlsIdentity | undefined {
    return this.#storage.alpnIdentity(host);
  }

  /** Stops renewing and retrying; an order in flight finishes, and is kept. */
  stop(): void {
    this.#stopped = true;
    for (const state of this.#names.values()) clearTimeout(state.timer);
    this.#storage.stop();
  }

  #state(host: string): NameState {
    let state = this.#names.get(host);
    if (!state) {
      state = { served: undefined, ordering: false, failures: 0, timer: undefined };
      this.#names.set(host, state);
    }
    return state;
  }

  /**
   * Serves `identity` for `host` in place of the certificate served before, unless that one
   * expires as late (an older copy arriving late); resolves with what is served for `host` now.
   * Throws {@linkcode CertificateError} when `identity` cannot be served.
   */
  #adopt(host: string, identity: TlsIdentity): ServedCertificate {
    const state = this.#state(host);
    const before = state.served;
    if (before?.identity.cert === identity.cert) return before;
    const served = this.#options.store.add(identity, "acme");
    if (before && before.notAfter >= served.notAfter) {
      this.#options.store.remove(served);
      return before;
    }
    if (before) this.#options.store.remove(before);
    state.served = served;
    return served;
  }

  /** {@linkcode #adopt}, or undefined (logged) when the certificate cannot be served. */
  #tryAdopt(host: string, identity: TlsIdentity): ServedCertificate | undefined {
    try {
      return this.#adopt(host, identity);
    } catch (error) {
      this.#options.log.warn("stored certificate unusable", {
        host,
        error: (error as Error).message,
      });
      return undefined;
    }
  }

  /** A certificate found in the storage: at load, or stored by another node since. */
  #stored(host: string, identity: TlsIdentity): void {
    const state = this.#state(host);
    const before = state.served;
    const served = this.#tryAdopt(host, identity);
    if (!served || served === before) return;
    this.#options.log.info("certificate loaded", {
      host,
      expires: new Date(served.notAfter).toISOString(),
    });
    // A name this node keeps: wait for the new one's renewal rather than for what was planned.
    if (state.timer !== undefined && !state.ordering) {
      clearTimeout(state.timer);
      state.timer = undefined;
      state.failures = 0;
      this.#schedule(host, state);
    }
  }

  /** Orders now, or sets a timer for when the certificate held is due for renewal. */
  #schedule(host: string, state: NameState): void {
    const served = state.served;
    const now = Date.now();
    if (!served || served.notAfter <= now) return this.#order(host, state);
    const at = renewAt(served);
    if (at <= now) return this.#order(host, state);
    this.#wait(at - now, host, state, () => this.#order(host, state));
  }

  #wait(ms: number, host: string, state: NameState, then: () => void): void {
    if (this.#stopped) return;
    state.timer = setTimeout(() => {
      state.timer = undefined;
      if (ms > MAX_TIMER_MS) this.#wait(ms - MAX_TIMER_MS, host, state, then);
      else then();
    }, Math.min(ms, MAX_TIMER_MS));
  }

  #order(host: string, state: NameState): void {
    if (this.#stopped || state.ordering) return;
    state.ordering = true;
    this.#queue = this.#queue.then(() => this.#issue(host, state));
  }

  /**
   * The pause before a new name may be ordered (`newOrdersPerHour`), reported; or undefined, and
   * the order counted.
   */
  #deferral(host: string): number | undefined {
    const now = Date.now();
    this.#newOrders = this.#newOrders.filter((t) => now - t < HOUR_MS);
    const limit = this.#options.newOrdersPerHour ?? 20;
    if (this.#newOrders.length < limit) {
      this.#newOrders.push(now);
      return undefined;
    }
    const retryMs = this.#newOrders[0] + HOUR_MS - now;
    this.#options.log.warn("certificate order deferred", { host, limit, retryMs });
    this.#options.publish("certificate_failed", {
      host,
      error: `${limit} new names an hour ordered already`,
      retryMs,
    });
    return retryMs;
  }

  async #issue(host: string, state: NameState): Promise<void> {
    const again = () => this.#order(host, state);
    let lease: AcmeLease | undefined;
    try {
      lease = await this.#storage.lease(host);
      if (lease === undefined) {
        // Another order of this name runs (another node's): its certificate arrives by load's
        // follow, which sets the renewal instead; else ask again.
        state.ordering = false;
        return this.#wait(this.#storage.leaseWaitMs, host, state, again);
      }
      // Another node may have stored a newer certificate than this node has seen yet.
      const latest = await this.#storage.latest(host);
      if (latest) {
        try {
          this.#adopt(host, latest);
        } catch {
          // Unusable: ordered anew below.
        }
      }
      if (
        state.served && state.served.notAfter > Date.now() && renewAt(state.served) > Date.now()
      ) {
        state.ordering = false;
        return this.#schedule(host, state);
      }
      if (state.served === undefined) {
        const retryMs = this.#deferral(host);
        if (retryMs !== undefined) {
          state.ordering = false;
          return this.#wait(retryMs, host, state, again);
        }
      }
      await this.#renew(host, state);
    } catch (error) {
      state.failures++;
      const retryMs = Math.min(
        (this.#options.retryMs ?? 60_000) * 2 ** (state.failures - 1),
        this.#options.maxRetryMs ?? 6 * 60 * 60 * 1000,
      );
      const message = (error as Error).message;
      this.#options.log.warn("certificate order failed", { host, error: message, retryMs });
      this.#options.publish("certificate_failed", { host, error: message, retryMs });
      state.ordering = false;
      this.#wait(retryMs, host, state, again);
    } finally {
      await lease?.release().catch(() => {});
    }
  }

  /** Orders `host`'s certificate, stores it and serves it; then sets its renewal. */
  async #renew(host: string, state: NameState): Promise<void> {
    const renewal = state.served !== undefined;
    const started = Date.now();
    const identity = await this.#obtain(host);
    await this.#storage.save(host, identity);
    const served = this.#adopt(host, identity);
    state.failures = 0;
    const expires = new Date(served.notAfter).toISOString();
    this.#options.log.info(renewal ? "certificate renewed" : "certificate issued", {
      host,
      expires,
      ms: Date.now() - started,
    });
    this.#options.publish("certificate_issued", { host, expires, renewal: String(renewal) });
    state.ordering = false;
    this.#schedule(host, state);
  }

  /** One order for `host`, start to finish; resolves with the certificate and its new key. */
  async #obtain(host: string): Promise<TlsIdentity> {
    // A failed start (the CA or the storage unreachable) is tried again at the next order.
    const { acme, client } = await (this.#client ??= this.#connect().catch((error) => {
      this.#client = undefined;
      throw error;
    }));
    const [key, csr] = await acme.crypto.createCsr(
      { altNames: [host] },
      await acme.crypto.createPrivateEcdsaKey(),
    );
    const config = this.#options.config;
    /** The challenges answered for this order, by token (what acme-client removes by). */
    const answered = new Map<string, AcmeChallenge>();
    const cert = await client.auto({
      csr,
      // The CA checks from where it stands; a check from here through DNS proves little.
      skipChallengeVerification: true,
      challengePriority: [config.challenge],
      challengeCreateFn: async (authz, challenge, keyAuthorization) => {
        // acme-client's types know http-01 and dns-01 only; it does TLS-ALPN-01 too.
        const type: string = challenge.type;
        let answer: AcmeChallenge | undefined;
        if (type === "http-01") {
          answer = { type: "http-01", token: challenge.token, keyAuthorization };
        } else if (type === "tls-alpn-01") {
          const name = authz.identifier.value;
          answer = {
            type: "tls-alpn-01",
            host: name,
            identity: await alpnChallengeCertificate(name, keyAuthorization),
          };
        }
        if (answer === undefined) return;
        answered.set(challenge.token, answer);
        await this.#storage.addChallenge(answer);
      },
      challengeRemoveFn: async (_authz, challenge) => {
        const answer = answered.get(challenge.token);
        answered.delete(challenge.token);
        if (answer) await this.#storage.removeChallenge(answer);
      },
    });
    return { cert, key: key.toString() };
  }

  /** Loads acme-client and the account key (made on first use, kept by the storage). */
  async #connect(): Promise<{ acme: typeof AcmeClient; client: AcmeClient.Client }> {
    const acme = await import("acme-client");
    const config = this.#options.config;
    if (config.caCerts !== null) {
      const [{ Agent }, { rootCertificates }] = await Promise.all([
        import("node:https"),
        import("node:tls"),
      ]);
      const ca = await readFile(config.caCerts, "utf8");
      acme.axios.defaults.httpsAgent = new Agent({ ca: [...rootCertificates, ca] });
    }
    // A new account key, unless the data directory has one to bring along (into a cluster).
    const accountKey = await this.#storage.accountKey(async () =>
      await this.#files?.storedAccountKey() ??
        (await acme.crypto.createPrivateEcdsaKey()).toString()
    );
    const client = new acme.Client({ directoryUrl: config.directory, accountKey });
    // The account of this key, if the CA has one; else a new one. (acme-client's own way sends
    // the creation fields again as an update, which CAs refuse as an empty update.)
    try {
      await client.createAccount({ onlyReturnExisting: true });
    } catch {
      await client.createAccount({
        termsOfServiceAgreed: true,
        contact: config.email === null ? undefined : [`mailto:${config.email}`],
      });
    }
    return { acme, client };
  }
}
