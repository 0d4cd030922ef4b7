/**
 * ACME's state for a single daemon: certificates and the account key in `DATA_DIR/acme/` (mode
 * 0600: `account.key`, `certificates/HOST.crt` and `HOST.key`), leases and challenge answers in
 * memory. One process orders, so a lease is only ever refused to a second order of a name in the
 * same process.
 *
 * @example
 * ```ts ignore
 * const storage = new FileAcmeStorage(dataDir, log);
 * await storage.load((host, identity) => store.add(identity, "acme"));
 * ```
 *
 * @module
 */

import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { TlsIdentity } from "../../transport/tls/front.ts";
import type { Logger } from "../../util/log.ts";
import { writeFileAtomic } from "../../util/files/write_file_atomic.ts";
import type { AcmeChallenge, AcmeLease, AcmeStorage } from "./acme_storage.ts";

/** A file name for a host name (host names are [a-z0-9.-] after validation; `*` just in case). */
const fileName = (host: string) => host.replace(/[^a-z0-9.-]/g, "_");

/** {@linkcode AcmeStorage} in the data directory and in memory. */
export class FileAcmeStorage implements AcmeStorage {
  /** A lease is refused only to this process's own second order, which the queue never makes. */
  readonly leaseWaitMs = 60_000;
  readonly #dir: string;
  readonly #log: Logger;
  /** HTTP-01 key authorizations by token, while their challenges run. */
  readonly #tokens = new Map<string, string>();
  /** TLS-ALPN-01 challenge certificates by host, while their challenges run. */
  readonly #alpn = new Map<string, TlsIdentity>();
  readonly #leases = new Set<string>();

  /** State under `dataDir`/acme; unreadable files are logged to `log`. */
  constructor(dataDir: string, log: Logger) {
    this.#dir = join(dataDir, "acme");
    this.#log = log;
  }

  /** Reads every stored certificate (nothing else writes the directory meanwhile). */
  async load(found: (host: string, identity: TlsIdentity) => void): Promise<void> {
    const dir = join(this.#dir, "certificates");
    const files = await readdir(dir).catch(() => [] as string[]);
    for (const file of files.filter((f) => f.endsWith(".crt")).sort()) {
      const host = file.slice(0, -4);
      try {
        found(host, await this.#read(host));
      } catch (error) {
        this.#log.warn("stored certificate unusable", {
          file: join(dir, file),
          error: (error as Error).message,
        });
      }
    }
  }

  /** The files of `host`, or undefined when they cannot be read. */
  latest(host: string): Promise<TlsIdentity | undefined> {
    return this.#read(host).catch(() => undefined);
  }

  /** Writes the key, then the certificate, each atomically. */
  async save(host: string, identity: TlsIdentity): Promise<void> {
    const dir = join(this.#dir, "certificates");
    await writeFileAtomic(join(dir, `${fileName(host)}.key`), identity.key);
    await writeFileAtomic(join(dir, `${fileName(host)}.crt`), identity.cert);
  }

  /** `account.key` as stored, or undefined when there is none. */
  storedAccountKey(): Promise<string | undefined> {
    return readFile(join(this.#dir, "account.key"), "utf8").catch(() => undefined);
  }

  /** `account.key`, made on first use. */
  async accountKey(create: () => Promise<string>): Promise<string> {
    const keyFile = join(this.#dir, "account.key");
    let accountKey = await this.storedAccountKey();
    if (accountKey === undefined) {
      await mkdir(this.#dir, { recursive: true, mode: 0o700 });
      accountKey = await create();
      await writeFileAtomic(keyFile, accountKey);
    }
    return accountKey;
  }

  /** Held in memory until released. */
  lease(host: string): Promise<AcmeLease | undefined> {
    if (this.#leases.has(host)) return Promise.resolve(undefined);
    this.#leases.add(host);
    return Promise.resolve({
      release: () => {
        this.#leases.delete(host);
        return Promise.resolve();
      },
    });
  }

  /** Answered by this process's own HTTP and HTTPS ports. */
  addChallenge(challenge: AcmeChallenge): Promise<void> {
    if (challenge.type === "http-01") {
      this.#tokens.set(challenge.token, challenge.keyAuthorization);
    } else this.#alpn.set(challenge.host, challenge.identity);
    return Promise.resolve();
  }

  /** No longer answered. */
  removeChallenge(challenge: AcmeChallenge): Promise<void> {
    if (challenge.type === "http-01") this.#tokens.delete(challenge.token);
    else this.#alpn.delete(challenge.host);
    return Promise.resolve();
  }

  /** From memory. */
  httpAnswer(token: string): string | undefined {
    return this.#tokens.get(token);
  }

  /** From memory. */
  alpnIdentity(host: string): TlsIdentity | undefined {
    return this.#alpn.get(host);
  }

  /** Nothing runs in the background. */
  stop(): void {}

  async #read(host: string): Promise<TlsIdentity> {
    const dir = join(this.#dir, "certificates");
    return {
      cert: await readFile(join(dir, `${fileName(host)}.crt`), "utf8"),
      key: await readFile(join(dir, `${fileName(host)}.key`), "utf8"),
    };
  }
}
