/**
 * The minted-token file, `<dataDir>/tokens.json`: its format, and reading it. Only token hashes
 * are stored. The store writes it atomically (`util/files/write_file_atomic.ts`: a new file,
 * synced, renamed over the old one), so a crash mid-write leaves the previous file intact rather
 * than a truncated one that would lose every token, or worse, a revocation.
 *
 * @module
 */

import { randomHex } from "../../util/crypto/random.ts";
import { joinHostPath, readHostTextFile } from "../../util/host/host.ts";
import { isObject } from "../../util/parse/is_object.ts";
import { isTokenHash } from "../config/token_hash.ts";
import type { TokenScopes } from "./scopes.ts";

/** The file's name inside the data directory. */
export const TOKEN_FILE = "tokens.json";

/** The format version written; a file of another version is refused rather than misread. */
export const TOKEN_FILE_VERSION = 1;

/** A minted token as stored: no secret, only its hash. Times are ms since the epoch. */
export interface TokenRecord {
  /** Stable id, `tok_` and 16 hex digits; what the admin API names it by. */
  id: string;
  /** The client name it authenticates as. */
  name: string;
  /** `sha256:<hex>` of the token. */
  hash: string;
  /** Its permissions, as given at mint time. */
  scopes: TokenScopes;
  /** When it was minted. */
  createdAt: number;
  /** When it expires, or null for never. */
  expiresAt: number | null;
}

/** Matches a token id. */
export const TOKEN_ID = /^tok_[0-9a-f]{16}$/;

/** A fresh random token id. */
export function newTokenId(): string {
  return "tok_" + randomHex(8);
}

/** Where the token file of `dataDir` is. */
export function tokenFilePath(dataDir: string): string {
  return joinHostPath(dataDir, TOKEN_FILE);
}

/** The file's JSON text for `records`. */
export function encodeTokenFile(records: readonly TokenRecord[]): string {
  const tokens = records.map((r) => ({
    id: r.id,
    name: r.name,
    hash: r.hash,
    scopes: r.scopes,
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: r.expiresAt === null ? null : new Date(r.expiresAt).toISOString(),
  }));
  return JSON.stringify({ version: TOKEN_FILE_VERSION, tokens }, null, 2) + "\n";
}

/**
 * Parses the file's text; throws with the offending entry named. A damaged file stops the daemon
 * from starting instead of being skipped, since skipping it would lose every minted token
 * without anyone noticing.
 */
export function decodeTokenFile(text: string, path: string): TokenRecord[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path}: not valid JSON (${(error as Error).message})`);
  }
  if (!isObject(doc) || doc.version !== TOKEN_FILE_VERSION || !Array.isArray(doc.tokens)) {
    throw new Error(`${path}: expected { "version": ${TOKEN_FILE_VERSION}, "tokens": [...] }`);
  }
  const seen = new Set<string>();
  return doc.tokens.map((entry, i) => {
    const bad = (what: string) => new Error(`${path}: tokens[${i}]: ${what}`);
    if (!isObject(entry)) throw bad("not an object");
    const { id, name, hash, scopes, createdAt, expiresAt } = entry;
    if (typeof id !== "string" || !TOKEN_ID.test(id)) throw bad("bad id");
    if (seen.has(id)) throw bad(`duplicate id ${id}`);
    seen.add(id);
    if (typeof name !== "string" || name === "") throw bad("bad name");
    if (typeof hash !== "string" || !isTokenHash(hash)) throw bad("bad hash");
    if (!isObject(scopes)) throw bad("bad scopes");
    const created = typeof createdAt === "string" ? Date.parse(createdAt) : NaN;
    if (Number.isNaN(created)) throw bad("bad createdAt");
    const expires = expiresAt === null
      ? null
      : typeof expiresAt === "string"
      ? Date.parse(expiresAt)
      : NaN;
    if (expires !== null && Number.isNaN(expires)) throw bad("bad expiresAt");
    return {
      id,
      name,
      hash,
      scopes: scopes as TokenScopes,
      createdAt: created,
      expiresAt: expires,
    };
  });
}

/** Reads the token file of `dataDir`; a missing file is an empty list. */
export async function readTokenFile(dataDir: string): Promise<TokenRecord[]> {
  const path = tokenFilePath(dataDir);
  let text: string;
  try {
    text = await readHostTextFile(path);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return [];
    throw error;
  }
  return decodeTokenFile(text, path);
}
