/**
 * A small reader of the root `Dockerfile`, just enough for `dockerfile_test.ts` to run the image's
 * command line on the host: instructions (continuations joined, comments dropped), `ENV` pairs,
 * and the JSON (exec) form of `ENTRYPOINT`, `CMD` and `HEALTHCHECK CMD`. Not a general parser:
 * it refuses what our Dockerfile does not use (shell forms, quoted ENV values), so a change there
 * fails loudly instead of being misread.
 *
 * @module
 */

/** One instruction of the final stage. */
export interface Instruction {
  /** The keyword, upper case (`FROM`, `ENV`, ...). */
  keyword: string;
  /** Everything after it, continuations joined with a space. */
  args: string;
}

/** What the test needs of the image. */
export interface ImageSpec {
  /** The final stage's base image. */
  from: string;
  /** Its working directory. */
  workdir: string;
  /** `ENV` of the final stage, in order. */
  env: Record<string, string>;
  /** `ENTRYPOINT`, exec form. */
  entrypoint: string[];
  /** `CMD`, exec form. */
  cmd: string[];
  /** `HEALTHCHECK ... CMD`, exec form. */
  healthcheck: string[];
  /** `EXPOSE`d ports. */
  expose: number[];
  /** `VOLUME`s. */
  volumes: string[];
  /** `USER` of the final stage. */
  user: string;
  /** Sources of the final stage's `COPY`s from the build context (not `--from` a stage). */
  copied: string[];
}

/** Splits a Dockerfile into instructions: `#` comment lines dropped, `\` continuations joined. */
export function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trimEnd();
    if (line.trimStart().startsWith("#")) continue;
    if (line.endsWith("\\")) {
      pending += line.slice(0, -1).trim() + " ";
      continue;
    }
    const whole = (pending + line.trim()).trim();
    pending = "";
    if (whole === "") continue;
    const space = whole.search(/\s/);
    out.push({
      keyword: (space < 0 ? whole : whole.slice(0, space)).toUpperCase(),
      args: space < 0 ? "" : whole.slice(space + 1).trim(),
    });
  }
  return out;
}

function execForm(keyword: string, args: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    throw new Error(`${keyword} must use the JSON (exec) form, got: ${args}`);
  }
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === "string")) {
    throw new Error(`${keyword} must be a JSON array of strings`);
  }
  return parsed;
}

/** `K=V K2=V2` pairs of an ENV instruction (unquoted values only). */
function envPairs(args: string): [string, string][] {
  return args.split(/\s+/).map((pair) => {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=([^"'\s]*)$/.exec(pair);
    if (!match) throw new Error(`ENV: expected unquoted KEY=VALUE pairs, got "${pair}"`);
    return [match[1], match[2]];
  });
}

/** Reads the final stage of a Dockerfile into an {@linkcode ImageSpec}. */
export function parseDockerfile(text: string): ImageSpec {
  const all = instructions(text);
  const lastFrom = all.findLastIndex((i) => i.keyword === "FROM");
  if (lastFrom < 0) throw new Error("no FROM");
  const spec: ImageSpec = {
    from: all[lastFrom].args.split(/\s+/)[0],
    workdir: "/",
    env: {},
    entrypoint: [],
    cmd: [],
    healthcheck: [],
    expose: [],
    volumes: [],
    user: "root",
    copied: [],
  };
  for (const { keyword, args } of all.slice(lastFrom + 1)) {
    if (keyword === "WORKDIR") spec.workdir = args;
    else if (keyword === "ENV") Object.assign(spec.env, Object.fromEntries(envPairs(args)));
    else if (keyword === "ENTRYPOINT") spec.entrypoint = execForm(keyword, args);
    else if (keyword === "CMD") spec.cmd = execForm(keyword, args);
    else if (keyword === "USER") spec.user = args;
    else if (keyword === "COPY" && !/(^|\s)--from=/.test(args)) {
      const words = args.split(/\s+/).filter((w) => !w.startsWith("--"));
      spec.copied.push(...words.slice(0, -1).map((w) => w.replace(/^\.\//, "").replace(/\/$/, "")));
    } else if (keyword === "EXPOSE") spec.expose.push(...args.split(/\s+/).map((p) => parseInt(p)));
    else if (keyword === "VOLUME") spec.volumes.push(...execForm(keyword, args));
    else if (keyword === "HEALTHCHECK") {
      const at = args.indexOf("CMD ");
      if (at < 0) throw new Error("HEALTHCHECK without CMD");
      spec.healthcheck = execForm(keyword, args.slice(at + 4).trim());
    }
  }
  return spec;
}

/**
 * Rewrites one argument or environment value for running on the host: every path component
 * equal to or under a key of `paths` (in `--allow-read=/a,/b` lists too) is mapped to its value.
 */
export function mapPaths(value: string, paths: Record<string, string>): string {
  const mapOne = (part: string) => {
    for (const [from, to] of Object.entries(paths)) {
      if (part === from) return to;
      if (part.startsWith(from + "/")) return to + part.slice(from.length);
    }
    return part;
  };
  const eq = value.indexOf("=");
  if (value.startsWith("--") && eq > 0) {
    return value.slice(0, eq + 1) + value.slice(eq + 1).split(",").map(mapOne).join(",");
  }
  return mapOne(value);
}
