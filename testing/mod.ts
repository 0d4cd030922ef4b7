/**
 * Test support shared by the end-to-end tests, the deploy checks, the interop tests and unit tests:
 * processes ({@linkcode startDaemon}, {@linkcode startClient}, {@linkcode startCommand}), fake
 * services, visitors, bytes and bounded waits, all torn down by {@linkcode cleanup}. Never imported
 * by shipped code.
 *
 * @module
 */

export * from "./bytes.ts";
export * from "./cleanup.ts";
export * from "./command.ts";
export * from "./fake_servers.ts";
export * from "./process.ts";
export * from "./random_sequence.ts";
export * from "./visitors.ts";
export * from "./wait.ts";
