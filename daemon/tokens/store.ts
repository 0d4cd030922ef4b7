/**
 * Minted client tokens: scoped, optionally expiring credentials created through the admin API,
 * kept (as hashes only) in `<dataDir>/tokens.json` across restarts. The store owns the records,
 * their file and their expiry; the daemon asks it for the clients they stand for and merges them
 * with the configured ones, so sessions see one list and authorization stays per request.
 *
 * @module
 */

import type { ClientConfig, Config } from "../config/mod.ts";
import type { Logger } from "../../util/log.ts";
import {
  encodeTokenFile,
  newTokenId,
  readTokenFile,
  tokenFilePath,
  type TokenRecord,
} from "./file.ts";
import { writeFileAtomic } from "../../util/files/write_file_atomic.ts";
import { scopedClient, type TokenScopes } from "./scopes.ts";
import { generateToken, hashToken } from "../config/token_hash.ts";

/** setTimeout's largest delay (about 24.8 days); a later expiry is reached in several steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A mint refused because the name is taken (by a config client or another minted token). */
export class TokenNameConflict extends Error {}

/**
 * Where minted tokens are kept. The store keeps the records in memory and asks its backend to
 * persist each change; a shared backend also reports changes made elsewhere.
 */
export interface TokenBackend {
  /** Reads every stored record. */
  load(): Promise<TokenRecord[]>;
  /**
   * Stores a new record (`all`: every record, the new one included). Rejects with
   * {@linkcode TokenNameConflict} when the name is taken where only the backend can tell (on
   * another node of a cluster).
   */
  add(record: TokenRecord, all: TokenRecord[]): Promise<void>;
  /** Removes a record (`all`: the records left). */
  remove(record: TokenRecord, all: TokenRecord[]): Promise<void>;
  /** Reports records added or removed elsewhere, from now on. */
  follow?(changed: (record: TokenRecord, op: "added" | "removed") => void): void;
}

/** The single-node backend: every change rewrites `<dataDir>/tokens.json` (atomically, in order). */
export function fileBackend(dataDir: string): TokenBackend {
  const path = tokenFilePath(dataDir);
  let writing: Promise<void> = Promise.resolve();
  const persist = (all: TokenRecord[]) => {
    const text = encodeTokenFile(all);
    const write = writing.then(() => writeFileAtomic(path, text));
    writing = write.catch(() => {});
    return write;
  };
  return {
    load: () => readTokenFile(dataDir),
    add: (_record, all) => persist(all),
    remove: (_record, all) => persist(all),
  };
}

/** How to build a {@link TokenStore}. */
export interface TokenStoreOptions {
  /** The data directory; `tokens.json` lives there (unless `backend` says otherwise). */
  dataDir: string;
  /** Where records are kept; default {@linkcode fileBackend} of `dataDir`. */
  backend?: TokenBackend;
  /** Where expiries and file problems are logged. */
  log: Logger;
  /**
   * Called whenever the set of minted tokens changes (mint, revoke, expiry, load), so the daemon
   * can rebuild its verifier and close sessions whose token is gone.
   */
  onChange: () => void;
}

/** A freshly minted token: the secret, shown once, and its record. */
export interface Minted {
  /** The token itself; only its hash is kept. */
  token: string;
  /** What is stored. */
  record: TokenRecord;
}

/**
 * Minted tokens as the daemon's registry offers them: the records (hashes only), what each stands
 * for under the config in force, and mint and revoke. {@linkcode TokenStore} keeps them in the
 * data directory; a cluster keeps them in a shared store, so that a token minted on one node works
 * on every node.
 */
export interface TokenRegistry {
  /** Reads the stored records; rejects on damage, so the daemon does not start without them. */
  load(): Promise<void>;
  /** The records, oldest first. */
  list(): TokenRecord[];
  /** One record, by id. */
  get(id: string): TokenRecord | undefined;
  /** Why the record gives no usable client at the moment, or undefined when it does. */
  problem(id: string): string | undefined;
  /** The clients the live minted tokens stand for under `config`. */
  clients(config: Config): ClientConfig[];
  /** Mints a token for client `name`; rejects with {@linkcode TokenNameConflict} on a taken name. */
  mint(
    name: string,
    scopes: TokenScopes,
    expiresAt: number | null,
    config: Config,
  ): Promise<Minted>;
  /** Revokes a token; resolves with its record, or undefined if unknown. */
  revoke(id: string): Promise<TokenRecord | undefined>;
  /** Stops timers. Idempotent. */
  close(): void;
}

/** The minted tokens of a daemon, kept in `<dataDir>/tokens.json`. */
export class TokenStore implements TokenRegistry {
  readonly #records = new Map<string, TokenRecord>();
  readonly #backend: TokenBackend;
  readonly #path: string;
  readonly #log: Logger;
  readonly #onChange: () => void;
  /** Why a record gives no client under the config last resolved, by id. */
  #problems = new Map<string, string>();
  #writing: Promise<void> = Promise.resolve();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  /** Creates an empty store; {@link load} reads the file. */
  constructor(options: TokenStoreOptions) {
    this.#backend = options.backend ?? fileBackend(options.dataDir);
    this.#path = tokenFilePath(options.dataDir);
    this.#log = options.log;
    this.#onChange = options.onChange;
  }

  /** Where the records are kept. */
  get path(): string {
    return this.#path;
  }

  /**
   * Reads the token file (missing = none) and drops the tokens that expired while the daemon was
   * down. Rejects on a damaged file, so the daemon does not start without its tokens.
   */
  async load(): Promise<void> {
    const records = await this.#backend.load();
    this.#records.clear();
    for (const record of records) this.#records.set(record.id, record);
    this.#backend.follow?.((record, op) => {
      if (op === "added") this.#records.set(record.id, record);
      else if (!this.#records.delete(record.id)) return;
      this.#log.info(op === "added" ? "token minted elsewhere" : "token revoked elsewhere", {
        token: record.id,
        client: record.name,
      });
      this.#schedule();
      this.#onChange();
    });
    this.#expire();
    this.#onChange();
  }

  /** The records, oldest first. */
  list(): TokenRecord[] {
    return [...this.#records.values()].sort((a, b) => a.createdAt - b.createdAt);
  }

  /** One record, by id. */
  get(id: string): TokenRecord | undefined {
    return this.#records.get(id);
  }

  /** Why the record gives no usable client at the moment, or undefined when it does. */
  problem(id: string): string | undefined {
    return this.#problems.get(id);
  }

  /**
   * The clients the live minted tokens stand for under `config`: their scopes parsed against its
   * limits (a reload may lower them). A token whose name a config client has taken since, whose
   * scopes no longer validate, or which expired is left out, and the reason is kept for
   * {@link problem}: the config always wins, so a minted token can never borrow a configured
   * client's permissions.
   */
  clients(config: Config): ClientConfig[] {
    const now = Date.now();
    const configured = new Set(config.clients.map((c) => c.name));
    const hashes = new Set(config.clients.map((c) => c.tokenHash));
    if (config.adminTokenHash) hashes.add(config.adminTokenHash);
    const problems = new Map<string, string>();
    const clients: ClientConfig[] = [];
    for (const record of this.list()) {
      if (record.expiresAt !== null && record.expiresAt <= now) {
        problems.set(record.id, "expired");
        continue;
      }
      if (configured.has(record.name)) {
        problems.set(record.id, `the config now has a client named ${record.name}`);
        continue;
      }
      if (hashes.has(record.hash)) {
        problems.set(record.id, "the config now uses the same token");
        continue;
      }
      const parsed = scopedClient(record.name, record.scopes, config.limits);
      if (!parsed.client) {
        const first = parsed.errors[0];
        problems.set(record.id, `scopes no longer valid: ${first?.field}: ${first?.message}`);
        continue;
      }
      // The daemon-wide visitor rules hold for a minted client's tunnels, as for a configured
      // client that sets none.
      clients.push({ ...parsed.client, tokenHash: record.hash, visitors: config.visitors });
    }
    for (const [id, why] of problems) {
      if (this.#problems.get(id) !== why) {
        this.#log.warn("minted token unusable", { token: id, reason: why });
      }
    }
    this.#problems = problems;
    return clients;
  }

  /**
   * Mints a token for client `name` with `scopes` (already validated by the caller against
   * `config`). The name must be free among `config`'s clients and the minted tokens; it is
   * reserved at once, so two concurrent mints of one name cannot both succeed. Resolves once the
   * file is written; on a write failure nothing was minted.
   */
  async mint(
    name: string,
    scopes: TokenScopes,
    expiresAt: number | null,
    config: Config,
  ): Promise<Minted> {
    if (config.clients.some((c) => c.name === name)) {
      throw new TokenNameConflict(`a configured client is named ${name}`);
    }
    if ([...this.#records.values()].some((r) => r.name === name)) {
      throw new TokenNameConflict(`a minted token is named ${name}`);
    }
    const token = generateToken();
    let id = newTokenId();
    while (this.#records.has(id)) id = newTokenId();
    const record: TokenRecord = {
      id,
      name,
      hash: hashToken(token),
      scopes,
      createdAt: Date.now(),
      expiresAt,
    };
    this.#records.set(id, record);
    try {
      await this.#track(this.#backend.add(record, this.list()));
    } catch (error) {
      this.#records.delete(id);
      throw error;
    }
    this.#schedule();
    this.#onChange();
    this.#log.info("token minted", { token: id, client: name, expiresAt: iso(expiresAt) });
    return { token, record };
  }

  /**
   * Revokes a token: it stops authenticating and its sessions are closed at once (through
   * `onChange`), then the file is rewritten. Resolves with the record, or undefined if unknown;
   * rejects if the file could not be written (the token is revoked in memory regardless).
   */
  async revoke(id: string): Promise<TokenRecord | undefined> {
    const record = this.#records.get(id);
    if (!record) return undefined;
    this.#records.delete(id);
    this.#schedule();
    this.#onChange();
    this.#log.info("token revoked", { token: id, client: record.name });
    await this.#track(this.#backend.remove(record, this.list()));
    return record;
  }

  /** Resolves once every write begun so far has finished (succeeded or not). */
  settled(): Promise<void> {
    return this.#writing;
  }

  /** Stops the expiry timer; the records stay. Idempotent. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  /** Remembers a backend write, so {@linkcode settled} can wait for it. */
  #track(write: Promise<void>): Promise<void> {
    this.#writing = Promise.all([this.#writing, write.catch(() => {})]).then(() => {});
    return write;
  }

  /** Drops expired records (logging each) and re-arms the timer; true when one was dropped. */
  #expire(): boolean {
    const now = Date.now();
    let dropped = false;
    for (const record of [...this.#records.values()]) {
      if (record.expiresAt === null || record.expiresAt > now) continue;
      this.#records.delete(record.id);
      this.#log.info("token expired", { token: record.id, client: record.name });
      dropped = true;
      this.#track(this.#backend.remove(record, this.list())).catch((error) =>
        this.#log.error("could not store the token expiry", { detail: String(error) })
      );
    }
    this.#schedule();
    return dropped;
  }

  /**
   * One timer, for the nearest expiry: a timer per token would cost as many handles as tokens.
   * A timer that fires a little early finds nothing expired and simply re-arms.
   */
  #schedule(): void {
    // Only when armed: a first timer call loads Deno's timers module, a few ms of every start.
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#closed) return;
    let next = Infinity;
    for (const record of this.#records.values()) {
      if (record.expiresAt !== null && record.expiresAt < next) next = record.expiresAt;
    }
    if (next === Infinity) return;
    const delay = Math.min(Math.max(next - Date.now(), 0), MAX_TIMER_MS);
    this.#timer = setTimeout(() => {
      if (this.#expire()) this.#onChange();
    }, delay);
  }
}

function iso(time: number | null): string | undefined {
  return time === null ? undefined : new Date(time).toISOString();
}
