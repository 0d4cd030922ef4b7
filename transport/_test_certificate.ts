/**
 * Self-signed certificates for tests, made with openssl (present on our machines; tests that need
 * one skip with a reason when it is missing).
 *
 * @module
 */

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A PEM certificate and its key. */
export interface TestIdentity {
  /** The certificate (also what a client must trust). */
  cert: string;
  /** The private key. */
  key: string;
}

/** Whether openssl can be run here. */
export const hasOpenssl: boolean = spawnSync("openssl", ["version"]).status === 0;

/**
 * A self-signed server certificate for `subjectAltName`, valid for a day. CA:FALSE because Deno's
 * rustls refuses a server certificate that says CA:TRUE (CaUsedAsEndEntity), which
 * `openssl req -x509` sets by default.
 */
export function makeTestIdentity(
  name = "localhost",
  subjectAltName = "IP:127.0.0.1,DNS:localhost",
): TestIdentity {
  const dir = mkdtempSync(join(tmpdir(), "tunnelmux-cert-"));
  try {
    const made = spawnSync("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      `/CN=${name}`,
      "-addext",
      `subjectAltName=${subjectAltName}`,
      "-addext",
      "basicConstraints=critical,CA:FALSE",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ]);
    if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
    return {
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
      key: readFileSync(join(dir, "key.pem"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
