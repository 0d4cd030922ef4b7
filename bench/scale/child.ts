/**
 * A program the scale bench drives: started once, asked over stdin in JSON lines, its output
 * lines counted (rathole reports each control channel on a line of its own). Stopped for sure
 * (SIGTERM, then SIGKILL), and killed if the bench exits first.
 *
 * @module
 */

import { type ChildProcess, spawn } from "node:child_process";
import process from "node:process";
import { createInterface } from "node:readline";

const running = new Set<ChildProcess>();
let exitHook = false;

/** A started program with line-based input and output. */
export class Child {
  /** Its pid, for `/proc` readings. */
  readonly pid: number;
  readonly #child: ChildProcess;
  readonly #name: string;
  readonly #lines: string[] = [];
  readonly #waiters = new Set<() => void>();
  readonly #exited: Promise<void>;
  #exitCode: number | null | undefined;

  /** Starts `argv` with `env` (default: this process's). */
  constructor(argv: string[], env?: Record<string, string>) {
    if (!exitHook) {
      exitHook = true;
      process.on("exit", () => running.forEach((child) => child.kill("SIGKILL")));
    }
    this.#name = argv[0].split("/").pop()!;
    this.#child = spawn(argv[0], argv.slice(1), {
      stdio: ["pipe", "pipe", "pipe"],
      env: env ?? process.env as Record<string, string>,
    });
    running.add(this.#child);
    this.pid = this.#child.pid!;
    this.#child.stdin!.on("error", () => {});
    for (const from of [this.#child.stdout!, this.#child.stderr!]) {
      createInterface({ input: from }).on("line", (line) => {
        this.#lines.push(line);
        if (this.#lines.length > 200_000) this.#lines.splice(0, 100_000);
        for (const wake of this.#waiters) wake();
      });
    }
    this.#exited = new Promise((resolve) =>
      this.#child.on("close", (code) => {
        this.#exitCode = code;
        running.delete(this.#child);
        for (const wake of this.#waiters) wake();
        resolve();
      })
    );
  }

  /** The last few output lines, for error messages. */
  tail(count = 3): string {
    return this.#lines.slice(-count).join(" | ").slice(0, 400);
  }

  /**
   * Resolves once `count` output lines since `from` (a line index; default the start) match
   * `pattern`, with the last match; rejects after `timeoutMs` or if the program exits.
   */
  waitFor(pattern: RegExp, timeoutMs: number, count = 1, from = 0): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      let seen = 0;
      let at = from;
      const check = () => {
        for (; at < this.#lines.length; at++) {
          const match = pattern.exec(this.#lines[at]);
          if (match && ++seen >= count) {
            done();
            return resolve(match);
          }
        }
        if (this.#exitCode !== undefined) {
          done();
          reject(new Error(`${this.#name} exited (${this.#exitCode}): ${this.tail()}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.#name}: ${seen}/${count} of ${pattern} in ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Sends `command` as a JSON line; resolves with the next JSON object line it prints. */
  async request(
    command: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<Record<string, unknown>> {
    const from = this.#lines.length;
    this.#child.stdin!.write(JSON.stringify(command) + "\n");
    const line = await this.waitFor(/^\{.*\}$/, timeoutMs, 1, from);
    const answer = JSON.parse(line[0]) as Record<string, unknown>;
    if (answer.ok !== true) throw new Error(`${this.#name}: ${answer.error ?? line[0]}`);
    return answer;
  }

  /** Ends it: closes stdin, SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.#exitCode !== undefined) return;
    this.#child.stdin!.end();
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }
}
