#!/usr/bin/env node
// `npm start` and `npm test` run this first: `npm ci` only when node_modules does not match
// package-lock.json. A full `npm ci` costs 13–14 s before every start even when nothing changed.
//
// The check compares package-lock.json with node_modules/.package-lock.json, the "hidden
// lockfile" npm itself writes after every install and trusts in place of reading node_modules:
// every package the lockfile names must be there with the same version, source and integrity,
// except optional ones the install skipped (another platform's Deno binary), and nothing else may
// be. It reads two JSON files and no package folder, so it costs milliseconds. What it does not
// see (a file edited by hand inside node_modules) `npm ci` would not be asked to fix either.
//
// `--check` only reports: exit 0 when the install matches, 1 (with the first difference) when not.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

/** The fields of a lockfile entry that say which bytes are installed. */
const FIELDS = ["version", "resolved", "integrity", "link"];

/**
 * Why the install under `root` does not match its package-lock.json, or undefined when it does.
 */
export function installMismatch(root) {
  const read = (path) => {
    try {
      return JSON.parse(readFileSync(join(root, path), "utf8"));
    } catch {
      return undefined;
    }
  };
  const wanted = read("package-lock.json");
  if (!wanted?.packages) return "package-lock.json is missing or unreadable";
  const installed = read(join("node_modules", ".package-lock.json"));
  if (!installed?.packages) return "nothing is installed (no node_modules/.package-lock.json)";
  for (const [path, entry] of Object.entries(wanted.packages)) {
    if (path === "") continue; // the project itself
    const have = installed.packages[path];
    if (!have) {
      if (entry.optional) continue; // skipped on this platform, as npm ci would skip it
      return `${path} is not installed`;
    }
    for (const field of FIELDS) {
      if (have[field] !== entry[field]) return `${path}: ${field} differs from the lockfile`;
    }
  }
  for (const path of Object.keys(installed.packages)) {
    if (!(path in wanted.packages)) return `${path} is installed but not in the lockfile`;
  }
  return undefined;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..");
  const mismatch = installMismatch(root);
  if (process.argv.includes("--check")) {
    if (mismatch) console.error(`install differs: ${mismatch}`);
    process.exit(mismatch ? 1 : 0);
  }
  if (mismatch) {
    console.error(`npm ci: ${mismatch}`);
    const npm = process.env.npm_execpath && existsSync(process.env.npm_execpath)
      ? [process.execPath, process.env.npm_execpath]
      : ["npm"];
    const result = spawnSync(
      npm[0],
      [...npm.slice(1), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
      { cwd: root, stdio: "inherit" },
    );
    process.exit(result.status ?? 1);
  }
}
