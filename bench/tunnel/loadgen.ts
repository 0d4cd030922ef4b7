/**
 * Builds the tunnel benchmark's load generator and backend (`bench/tunnel/loadgen`, Go, stdlib
 * only) into `.cache/bench/`, once per source change, as the Go yamux peers are built. Go serves
 * both sides because it is cheap in CPU: on a 2-core machine the load and the backend share the
 * cores with the daemon and the client under test.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildGoProgram } from "../../util/host/go_build.ts";

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "loadgen");

/** The load generator's binary path, built first if its sources or `go version` changed. */
export function buildLoadgen(): Promise<string> {
  return buildGoProgram({
    name: "loadgen",
    packageDir: SOURCE,
    sourceDirs: [SOURCE],
    cacheDir: join(dirname(dirname(dirname(SOURCE))), ".cache", "bench"),
  });
}
