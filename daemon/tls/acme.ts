/**
 * Certificates from an ACME CA (RFC 8555, npm `acme-client`) for the names HTTP tunnels hold.
 * A name is ordered when a client first holds it and no certificate serves it; the
 * CA proves it over HTTP-01 (the HTTP front answers `/.well-known/acme-challenge/`) or
 * TLS-ALPN-01 (the HTTPS front answers `acme-tls/1` hellos with the challenge certificate).
 *
 * Kind to the CA and to the daemon's start: issued certificates and the account key are kept in
 * `DATA_DIR/acme/` (mode 0600) and served again after a restart without a new order; orders run
 * one at a time, at most 20 for new names an hour; a failed order is retried after 1 min,
 * doubling to 6 h, and reported as a `certificate_failed` event; a certificate is renewed once less than a third of its lifetime is
 * left (30 days of Let's Encrypt's 90), while the old one is still served. Loaded only when
 * `http.acme` is configured.
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

import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type * as AcmeClient from "acme-client";
import type { AcmeConfig } from "../config/types.ts";
import type { CertificateStore, ServedCertificate } from "./certificates.ts";
import type { TlsIdentity } from "../../transport/tls/front.ts";
import type { Logger } from "../../util/log.ts";
import { writeFileAtomic } from "../../util/write_file_atomic.ts";
import { alpnChallengeCertificate } from "./acme_alpn_certificate.ts";

/** What {@linkcode AcmeCertificates} needs. */
export interface AcmeOptions {
  /** The CA and how names are proven. */
  config: AcmeConfig;
  /** The daemon's data directory (certificates go to `acme/` in it). */
  dataDir: string;
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
/** A file name for a host name (host names are [a-z0-9.-] after validation; `*` just in case). */
const fileName = (host: string) => host.replace(/[^a-z0-9.-]/g, "_");

/** The daemon's ACME certificates; it owns one when `http.acme` is set. */
export class AcmeCertificates {
  readonly #options: AcmeOptions;
  readonly #dir: string;
  readonly #names = new Map<string, NameState>();
  /** HTTP-01 key authorizations by token, while their challenges run. */
  readonly #tokens = new Map<string, string>();
  /** TLS-ALPN-01 challenge certificates by host, while their challenges run. */
  readonly #alpn = new Map<string, TlsIdentity>();
  /** Orders run one after another. */
  #queue: Promise<void> = Promise.resolve();
  #client: Promise<{ acme: typeof AcmeClient; client: AcmeClient.Client }> | undefined;
  /** When the new-name orders of the last hour started. */
  #newOrders: number[] = [];
  #stopped = false;

  /** Keeps certificates for `options.store`; {@linkcode load} what is stored first. */
  constructor(options: AcmeOptions) {
    this.#options = options;
    this.#dir = join(options.dataDir, "acme");
  }

  /** Serves the certificates stored by earlier runs (no order is made for them). */
  async load(): Promise<void> {
    const dir = join(this.#dir, "certificates");
    const files = await readdir(dir).catch(() => [] as string[]);
    for (const file of files.filter((f) => f.endsWith(".crt")).sort()) {
      const host = file.slice(0, -4);
      try {
        const identity = {
          cert: await readFile(join(dir, file), "utf8"),
          key: await readFile(join(dir, `${host}.key`), "utf8"),
        };
        const served = this.#options.store.add(identity, "acme");
        this.#state(host).served = served;
        this.#options.log.info("certificate loaded", {
          host,
          expires: new Date(served.notAfter).toISOString(),
        });
      } catch (error) {
        this.#options.log.warn("stored certificate unusable", {
          file: join(dir, file),
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
    return this.#tokens.get(token);
  }

  /** The TLS-ALPN-01 certificate for `host` being validated, or undefined. */
  alpnIdentity(host: string): TlsIdentity | undefined {
    return this.#alpn.get(host);
  }

  /** Stops renewing and retrying; an order in flight finishes, and is kept. */
  stop(): void {
    this.#stopped = true;
    for (const state of this.#names.values()) clearTimeout(state.timer);
  }

  #state(host: string): NameState {
    let state = this.#names.get(host);
    if (!state) {
      state = { served: undefined, ordering: false, failures: 0, timer: undefined };
      this.#names.set(host, state);
    }
    return state;
  }

  /** Orders now, or sets a timer for when the certificate held is due for renewal. */
  #schedule(host: string, state: NameState): void {
    const served = state.served;
    const now = Date.now();
    if (!served || served.notAfter <= now) return this.#order(host, state);
    const renewAt = served.notAfter - (served.notAfter - served.notBefore) / 3;
    if (renewAt <= now) return this.#order(host, state);
    this.#wait(renewAt - now, host, state, () => this.#order(host, state));
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
    if (state.served === undefined) {
      const now = Date.now();
      this.#newOrders = this.#newOrders.filter((t) => now - t < HOUR_MS);
      const limit = this.#options.newOrdersPerHour ?? 20;
      if (this.#newOrders.length >= limit) {
        const retryMs = this.#newOrders[0] + HOUR_MS - now;
        this.#options.log.warn("certificate order deferred", { host, limit, retryMs });
        this.#options.publish("certificate_failed", {
          host,
          error: `${limit} new names an hour ordered already`,
          retryMs,
        });
        return this.#wait(retryMs, host, state, () => this.#order(host, state));
      }
      this.#newOrders.push(now);
    }
    state.ordering = true;
    this.#queue = this.#queue.then(() => this.#issue(host, state));
  }

  async #issue(host: string, state: NameState): Promise<void> {
    const renewal = state.served !== undefined;
    const started = Date.now();
    try {
      const identity = await this.#obtain(host);
      const dir = join(this.#dir, "certificates");
      await writeFileAtomic(join(dir, `${fileName(host)}.key`), identity.key);
      await writeFileAtomic(join(dir, `${fileName(host)}.crt`), identity.cert);
      const served = this.#options.store.add(identity, "acme");
      if (state.served) this.#options.store.remove(state.served);
      state.served = served;
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
      this.#wait(retryMs, host, state, () => this.#order(host, state));
    }
  }

  /** One order for `host`, start to finish; resolves with the certificate and its new key. */
  async #obtain(host: string): Promise<TlsIdentity> {
    const { acme, client } = await (this.#client ??= this.#connect());
    const [key, csr] = await acme.crypto.createCsr(
      { altNames: [host] },
      await acme.crypto.createPrivateEcdsaKey(),
    );
    const config = this.#options.config;
    const cert = await client.auto({
      csr,
      // The CA checks from where it stands; a check from here through DNS proves little.
      skipChallengeVerification: true,
      challengePriority: [config.challenge],
      challengeCreateFn: async (authz, challenge, keyAuthorization) => {
        // acme-client's types know http-01 and dns-01 only; it does TLS-ALPN-01 too.
        const type: string = challenge.type;
        if (type === "http-01") this.#tokens.set(challenge.token, keyAuthorization);
        else if (type === "tls-alpn-01") {
          const host = authz.identifier.value;
          this.#alpn.set(host, await alpnChallengeCertificate(host, keyAuthorization));
        }
      },
      challengeRemoveFn: (authz, challenge) => {
        this.#tokens.delete(challenge.token);
        if ((challenge.type as string) === "tls-alpn-01") this.#alpn.delete(authz.identifier.value);
        return Promise.resolve();
      },
    });
    return { cert, key: key.toString() };
  }

  /** Loads acme-client and the account key (made on first use, kept in the data dir). */
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
    const keyFile = join(this.#dir, "account.key");
    let accountKey = await readFile(keyFile, "utf8").catch(() => undefined);
    if (accountKey === undefined) {
      await mkdir(this.#dir, { recursive: true, mode: 0o700 });
      accountKey = (await acme.crypto.createPrivateEcdsaKey()).toString();
      await writeFileAtomic(keyFile, accountKey);
    }
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
