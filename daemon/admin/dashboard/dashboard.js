// @ts-check
/// <reference lib="dom" />
/**
 * The admin dashboard's script, served as-is at GET /dashboard.js by pages.ts: plain ES2020 in
 * one IIFE, no build step, type-checked by `deno check` through the JSDoc types below. It polls
 * `/v1/sessions`, `/v1/tunnels` and `/v1/tokens` (throughput is the difference of the byte
 * counters between polls), `/v1/info` for the header's facts, and reads `/v1/events` through
 * `fetch` (EventSource cannot send an Authorization header), from the start of the daemon's event
 * ring, to refresh at once when a session or tunnel comes or goes. Histories are bounded to
 * `HISTORY` points. Destructive actions (kick, reset, close, revoke) take a second click on a
 * confirmation that disarms by itself.
 *
 * Every dynamic piece of the page is built with `textContent` and DOM calls, never `innerHTML`:
 * client names and addresses come from the network. No inline styles either (SVG presentation
 * attributes only), so the page runs under a CSP without `'unsafe-inline'`.
 *
 * The types below are the admin API's JSON shapes as this script reads them (the full shapes are
 * in daemon/admin/api/views.ts, tokens.ts and system.ts); the script cannot import them, since the
 * browser loads it as it is.
 */

/**
 * A session as `/v1/sessions` lists it.
 * @typedef {object} Session
 * @property {string} id
 * @property {string | null} client
 * @property {string} transport
 * @property {string} remoteAddress
 * @property {number | null} rttMs  null until the first keepalive ping was answered
 * @property {number} bytesIn
 * @property {number} bytesOut
 * @property {number} streamCount
 */

/**
 * One stream of a session, as `/v1/sessions/:id` shows it.
 * @typedef {object} StreamInfo
 * @property {number} id
 * @property {string} state
 * @property {number} bytesIn
 * @property {number} bytesOut
 */

/**
 * A reverse tunnel as `/v1/tunnels` lists it.
 * @typedef {object} Tunnel
 * @property {string} id
 * @property {string} client
 * @property {string} bind
 * @property {string | undefined} protocol  tcp, udp, http or tls (older daemons: none)
 * @property {{ drops: Record<string, number> } | null | undefined} udp  a UDP tunnel's counters
 * @property {string | null} host  an HTTP or TLS tunnel's name
 * @property {string[] | undefined} urls  an HTTP tunnel's every URL (HTTP and HTTPS ports)
 * @property {boolean} passthrough
 * @property {{ notAfter: string } | null} certificate
 * @property {string | null} label
 * @property {number} connections
 * @property {number} active
 * @property {number} bytesFromVisitors
 * @property {number} bytesToVisitors
 * @property {VisitorPolicy | undefined} policy  its visitor rules in force (older daemons: none)
 */

/**
 * A tunnel's visitor policy as `/v1/tunnels` shows it (docs/policy.md).
 * @typedef {object} VisitorPolicy
 * @property {string[] | undefined} allow
 * @property {string[] | undefined} deny
 * @property {number | undefined} connectionsPerSecond
 * @property {number | undefined} tunnelConnectionsPerSecond
 * @property {number | undefined} connectionsPerVisitor
 * @property {{ in?: number, out?: number } | undefined} bandwidth
 * @property {object | undefined} http
 */

/**
 * A minted token as `/v1/tokens` lists it (never its secret).
 * @typedef {object} Token
 * @property {string} id
 * @property {string} name
 * @property {string} createdAt
 * @property {string | null} expiresAt
 * @property {boolean} active
 * @property {string | null} problem
 * @property {string[]} sessions
 */

/**
 * The daemon's facts, from `/v1/info`.
 * @typedef {object} Info
 * @property {string} version
 * @property {{ name: string, version: string }} runtime
 * @property {string} state
 * @property {number} uptimeMs
 * @property {Record<string, string | undefined>} listeners
 * @property {boolean} tls
 * @property {{ sessions?: number, streamsPerSession?: number, tunnelsPerClient?: number }} limits
 * @property {unknown[]} clients
 * @property {{ mintedTokens: number }} counts
 */

/**
 * One sample of `/v1/metrics/recent` (rates in bytes per second).
 * @typedef {object} RecentSample
 * @property {number} bytesIn
 * @property {number} bytesOut
 * @property {number} sessions
 * @property {number} streams
 */

/** @typedef {"sessions" | "tunnels" | "tokens"} TableName */
/** @typedef {{ label: string, values: number[] }} Series */
/** @typedef {{ id: string, sid?: string }} Target  what a button acts on; sid: a stream's id */

"use strict";
(function () {
  const KEY = "tunnelmux.adminToken";
  const HISTORY = 60;
  const POLL_MS = 2000;
  const INFO_MS = 10000;
  const RECONNECT_MS = 2000;
  const MAX_EVENTS = 50;
  const CONFIRM_MS = 5000;
  const SVG = "http://www.w3.org/2000/svg";

  tokenFromLink();
  let token = sessionStorage.getItem(KEY);
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let pollTimer;
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let infoTimer;
  /** @type {AbortController | null} */
  let feed = null;
  /** @type {string | null} */
  let lastEventId = null;
  let busy = false;
  let again = false;
  /** @type {{ body: Info, at: number } | null} */
  let info = null;
  /** @type {Map<string, { t: number, bytesIn: number, bytesOut: number }>} session id -> */
  const previous = new Map();
  /** @type {Map<string, number[]>} session id -> bytes/s per poll */
  const rates = new Map();
  /** @type {{ in: number[], out: number[], sessions: number[], streams: number[] }} */
  const history = { in: [], out: [], sessions: [], streams: [] };
  /** @type {{ sessions: Session[], tunnels: Tunnel[], tokens: Token[] }} */
  const data = { sessions: [], tunnels: [], tokens: [] };
  /** @type {Record<TableName, { key: string, dir: number }>} */
  const sorting = {
    sessions: { key: "id", dir: 1 },
    tunnels: { key: "id", dir: 1 },
    tokens: { key: "createdAt", dir: -1 },
  };
  /**
   * A destructive action awaiting confirmation.
   * @type {{ action: string, id: string, sid: string | undefined, until: number } | null}
   */
  let armed = null;
  let tokensAvailable = true;
  /** @type {Set<string>} sessions whose stream list is shown */
  const open = new Set();

  /**
   * The page's element with this id. A missing one fails here, by name, rather than as a null
   * dereference further on: the page and this script must agree.
   * @param {string} id
   * @returns {HTMLElement}
   */
  function $(id) {
    const node = document.getElementById(id);
    if (!node) throw new Error("the page has no #" + id);
    return node;
  }

  /**
   * The page's input with this id.
   * @param {string} id
   * @returns {HTMLInputElement}
   */
  function input(id) {
    const node = $(id);
    if (!(node instanceof HTMLInputElement)) throw new Error("#" + id + " is not an input");
    return node;
  }

  /**
   * The body of one of the page's tables, where its rows go.
   * @param {TableName} table
   * @returns {HTMLTableSectionElement}
   */
  function tbody(table) {
    const body = $(table).querySelector("tbody");
    if (!body) throw new Error("#" + table + " has no tbody");
    return body;
  }

  /**
   * A new element holding `text` as text (never as markup), with a class.
   * @template {keyof HTMLElementTagNameMap} K
   * @param {K} tag
   * @param {unknown} [text]  none when undefined or null
   * @param {string} [cls]
   * @returns {HTMLElementTagNameMap[K]}
   */
  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  /**
   * A new SVG element with attributes and text.
   * @param {string} tag
   * @param {Record<string, string | number>} attrs
   * @param {string} [text]
   * @returns {SVGElement}
   */
  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) {
      node.setAttribute(k, String(attrs[k]));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /**
   * A byte count in binary units.
   * @param {number} n
   * @returns {string}
   */
  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(1)) + " " + units[i];
  }

  /**
   * @param {number} n bytes per second
   * @returns {string}
   */
  function rate(n) {
    return bytes(n) + "/s";
  }

  /**
   * @param {number} n
   * @returns {string}
   */
  function count(n) {
    return String(Math.round(n));
  }

  /**
   * A duration in its two largest units.
   * @param {number} ms
   * @returns {string}
   */
  function duration(ms) {
    const s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + (s % 60) + "s";
    return (s % 60) + "s";
  }

  /**
   * Appends to a history, dropping the oldest points beyond HISTORY.
   * @param {number[]} list
   * @param {number} value
   */
  function push(list, value) {
    list.push(value);
    if (list.length > HISTORY) list.splice(0, list.length - HISTORY);
  }

  /**
   * A polyline of values scaled to max, right-aligned on a HISTORY-point x axis.
   * @param {number[]} values
   * @param {number} x0
   * @param {number} y0
   * @param {number} width
   * @param {number} height
   * @param {number} max
   * @param {string} cls
   * @returns {SVGElement}
   */
  function line(values, x0, y0, width, height, max, cls) {
    const step = width / (HISTORY - 1);
    const offset = (HISTORY - values.length) * step;
    const points = values.map(function (v, i) {
      return (x0 + offset + i * step).toFixed(1) + "," +
        (y0 + height - (v / max) * height).toFixed(1);
    });
    /** @type {Record<string, string>} */
    const attrs = { points: points.join(" ") };
    if (cls) attrs["class"] = cls;
    return svgEl("polyline", attrs);
  }

  /**
   * A round upper bound for an axis: 1, 2 or 5 times a power of ten (of 1024 for bytes).
   * @param {number} max
   * @param {number} base  10, or 1024 for bytes
   * @returns {number}
   */
  function ceiling(max, base) {
    if (max <= 0) return 1;
    const power = Math.pow(base, Math.floor(Math.log(max) / Math.log(base)));
    const steps = base === 1024 ? [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] : [1, 2, 5, 10];
    for (let i = 0; i < steps.length; i++) if (steps[i] * power >= max) return steps[i] * power;
    return base * power;
  }

  /**
   * A chart with axes: y from 0 to a round maximum with three labelled ticks in the series'
   * unit, x over the last HISTORY polls (two minutes) labelled in time, and a legend.
   * @param {Series[]} series
   * @param {(n: number) => string} format
   * @param {number} base  10, or 1024 for bytes
   * @returns {SVGElement}
   */
  function chart(series, format, base) {
    const W = 320, H = 130, left = 62, right = 8, top = 16, bottom = 20;
    const w = W - left - right, h = H - top - bottom;
    let max = 0;
    series.forEach(function (s) {
      s.values.forEach(function (v) {
        if (v > max) max = v;
      });
    });
    // Bytes start at 1 KiB/s, counts at 2: an idle axis still reads in round units.
    max = Math.max(ceiling(max, base), base === 1024 ? 1024 : 2);
    const svg = svgEl("svg", {
      "class": "chart",
      width: W,
      height: H,
      viewBox: "0 0 " + W + " " + H,
      role: "img",
    });
    for (let i = 0; i <= 2; i++) {
      const y = top + h - (i / 2) * h;
      svg.appendChild(
        svgEl("line", { "class": i === 0 ? "axis" : "grid", x1: left, x2: left + w, y1: y, y2: y }),
      );
      svg.appendChild(
        svgEl("text", { x: left - 4, y: y + 3, "text-anchor": "end" }, format(max * i / 2)),
      );
    }
    svg.appendChild(svgEl("line", { "class": "axis", x1: left, x2: left, y1: top, y2: top + h }));
    const seconds = HISTORY * POLL_MS / 1000;
    /** @type {Array<[number, string]>} where on the x axis (0 to 1), and its label */
    const ticks = [
      [0, "-" + Math.round(seconds / 60) + " min"],
      [0.5, "-" + Math.round(seconds / 120) + " min"],
      [1, "now"],
    ];
    ticks.forEach(function (tick) {
      svg.appendChild(
        svgEl("text", {
          x: left + tick[0] * w,
          y: H - 4,
          "text-anchor": tick[0] === 0 ? "start" : tick[0] === 1 ? "end" : "middle",
        }, tick[1]),
      );
    });
    let legendX = left;
    series.forEach(function (s, index) {
      svg.appendChild(line(s.values, left, top, w, h, max, index === 1 ? "second" : ""));
      if (series.length > 1) {
        const label = s.label + " " + format(s.values.length ? s.values[s.values.length - 1] : 0);
        svg.appendChild(
          svgEl("text", {
            "class": "legend " + (index === 1 ? "second" : "first"),
            x: legendX,
            y: 11,
          }, label),
        );
        legendX += 8 + label.length * 6;
      }
    });
    const desc = series.map(function (s) {
      return s.label + " " + format(s.values.length ? s.values[s.values.length - 1] : 0);
    }).join(", ");
    svg.setAttribute("aria-label", desc);
    return svg;
  }

  /**
   * A small chart without axes, scaled to its own maximum.
   * @param {number[]} values
   * @param {number} width
   * @param {number} height
   * @returns {SVGElement}
   */
  function sparkline(values, width, height) {
    let max = 1;
    values.forEach(function (v) {
      if (v > max) max = v;
    });
    const svg = svgEl("svg", {
      "class": "spark",
      width: width,
      height: height,
      viewBox: "0 0 " + width + " " + height,
    });
    svg.appendChild(line(values, 0, 1, width, height - 2, max, ""));
    return svg;
  }

  /**
   * Shows a message under the header: a failure, or with `ok` a success.
   * @param {string} [text]
   * @param {boolean} [ok]
   */
  function notice(text, ok) {
    $("notice").textContent = text || "";
    $("notice").className = ok ? "ok" : "";
  }

  /**
   * The headers of an API call: the bearer token and `extra`.
   * @param {Record<string, string>} [extra]
   * @returns {Record<string, string>}
   */
  function headers(extra) {
    /** @type {Record<string, string>} */
    const h = { authorization: "Bearer " + token };
    const more = extra || {};
    Object.keys(more).forEach(function (k) {
      h[k] = more[k];
    });
    return h;
  }

  // Every call goes through here: a 401 means the token is wrong (or was rotated), so forget it.
  /**
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]  sent as JSON
   * @returns {Promise<Response>}
   */
  function api(method, path, body) {
    /** @type {RequestInit} */
    const init = { method: method, headers: headers(), cache: "no-store" };
    if (body !== undefined) {
      init.headers = headers({ "content-type": "application/json" });
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (r) {
      if (r.status === 401) {
        logout("The admin token was refused.");
        throw new Error("unauthorized");
      }
      return r;
    });
  }

  /**
   * What a failed API call says went wrong.
   * @param {Response} r
   * @returns {Promise<string>}
   */
  function failure(r) {
    return r.json().then(function (body) {
      return (body && body.error && body.error.message) || ("HTTP " + r.status);
    }, function () {
      return "HTTP " + r.status;
    });
  }

  /** @param {boolean} connected */
  function show(connected) {
    $("login").hidden = connected;
    $("main").hidden = !connected;
    $("logout").hidden = !connected;
  }

  /**
   * @param {string} text
   * @param {boolean} live  the event feed is connected
   */
  function status(text, live) {
    const node = $("status");
    node.textContent = text;
    node.className = live ? "live" : "";
  }

  /** @param {string} message  why, shown on the login form */
  function logout(message) {
    stop();
    token = null;
    sessionStorage.removeItem(KEY);
    show(false);
    status("not connected", false);
    $("login-error").textContent = message || "";
  }

  function stop() {
    clearInterval(pollTimer);
    clearInterval(infoTimer);
    pollTimer = infoTimer = undefined;
    if (feed) feed.abort();
    feed = null;
  }

  function start() {
    show(true);
    $("login-error").textContent = "";
    loadInfo();
    // The charts start with the daemon's recent history; the polls continue it.
    loadRecent().then(function () {
      if (!token || pollTimer !== undefined) return; // logged out, or in again, meanwhile
      refresh();
      pollTimer = setInterval(refresh, POLL_MS);
    });
    infoTimer = setInterval(loadInfo, INFO_MS);
    openFeed();
  }

  /**
   * Fills the charts' history from `/v1/metrics/recent` (the daemon samples as often as we poll).
   * Never rejects: without it (an older daemon, a failed call) the charts start empty.
   * @returns {Promise<void>}
   */
  function loadRecent() {
    return api("GET", "/v1/metrics/recent").then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (/** @type {{ samples: RecentSample[] } | null} */ body) {
      if (!body) return;
      // Instead of what an earlier login of this page had drawn.
      history.in.length =
        history.out.length =
        history.sessions.length =
        history.streams.length =
          0;
      body.samples.slice(-HISTORY).forEach(function (sample) {
        push(history.in, sample.bytesIn);
        push(history.out, sample.bytesOut);
        push(history.sessions, sample.sessions);
        push(history.streams, sample.streams);
      });
    }).catch(function () {});
  }

  // ---- the header: the daemon's facts ----

  function loadInfo() {
    api("GET", "/v1/info").then(function (r) {
      return r.ok ? r.json() : null;
    })
      .then(function (/** @type {Info | null} */ body) {
        if (body) {
          info = { body: body, at: Date.now() };
          renderFacts();
        }
      })
      .catch(function () {});
  }

  function renderFacts() {
    if (!info) return;
    const b = info.body;
    const uptime = b.uptimeMs + (Date.now() - info.at);
    const listeners = ["tcp", "websocket", "http", "https", "admin"].map(function (k) {
      return k + " " + (b.listeners[k] || "off");
    }).join(", ");
    const limits = b.limits || {};
    const facts = [
      ["version", b.version + " (" + b.runtime.name + " " + b.runtime.version + ")"],
      ["state", b.state],
      ["up", duration(uptime)],
      ["listeners", listeners + (b.tls ? " (TLS)" : "")],
      [
        "limits",
        (limits.sessions === undefined ? "" : limits.sessions + " sessions, ") +
        (limits.streamsPerSession === undefined
          ? ""
          : limits.streamsPerSession + " streams each, ") +
        (limits.tunnelsPerClient === undefined
          ? ""
          : limits.tunnelsPerClient + " tunnels per client"),
      ],
      ["clients", String(b.clients.length) + " configured, " + b.counts.mintedTokens + " minted"],
    ];
    const nodes = facts.map(function (f) {
      const div = el("div");
      div.appendChild(el("dt", f[0]));
      const dd = el("dd", f[1]);
      dd.dataset.fact = f[0];
      div.appendChild(dd);
      return div;
    });
    $("facts").replaceChildren(...nodes);
  }

  // ---- polling ----

  // One refresh at a time; a request for another while one runs is remembered, not dropped.
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    const calls = [api("GET", "/v1/sessions?limit=1000"), api("GET", "/v1/tunnels")];
    if (tokensAvailable) calls.push(api("GET", "/v1/tokens"));
    Promise.all(calls)
      .then(function (rs) {
        if (!rs[0].ok || !rs[1].ok) throw new Error("HTTP " + rs[0].status + "/" + rs[1].status);
        if (rs[2] && rs[2].status === 404) {
          tokensAvailable = false;
          $("tokens-section").hidden = true;
        }
        return Promise.all(rs.map(function (r) {
          return r.ok ? r.json() : null;
        }));
      })
      .then(function (bodies) {
        data.sessions = bodies[0].sessions;
        data.tunnels = bodies[1].tunnels;
        if (bodies[2]) data.tokens = bodies[2].tokens;
        measure(data.sessions);
        render();
      })
      .catch(function (e) {
        if (token) notice("Refresh failed: " + e.message);
      })
      .then(function () {
        busy = false;
        if (again && token) {
          again = false;
          refresh();
        }
      });
  }

  function render() {
    if (armed && Date.now() > armed.until) armed = null;
    renderFacts();
    renderSessions();
    renderTunnels();
    renderTokens();
    markSorted();
  }

  // Rates from counter differences; a session seen for the first time contributes nothing yet,
  // and one that left just drops out (its counters do not go negative).
  /** @param {Session[]} sessions */
  function measure(sessions) {
    const now = performance.now();
    let sumIn = 0, sumOut = 0, streams = 0;
    /** @type {Set<string>} */
    const seen = new Set();
    sessions.forEach(function (s) {
      seen.add(s.id);
      streams += s.streamCount;
      const before = previous.get(s.id);
      const list = rates.get(s.id) || [];
      if (before && now > before.t) {
        const dt = (now - before.t) / 1000;
        const rin = Math.max(0, s.bytesIn - before.bytesIn) / dt;
        const rout = Math.max(0, s.bytesOut - before.bytesOut) / dt;
        sumIn += rin;
        sumOut += rout;
        push(list, rin + rout);
      }
      rates.set(s.id, list);
      previous.set(s.id, { t: now, bytesIn: s.bytesIn, bytesOut: s.bytesOut });
    });
    Array.from(previous.keys()).forEach(function (id) {
      if (!seen.has(id)) {
        previous.delete(id);
        rates.delete(id);
      }
    });
    push(history.in, sumIn);
    push(history.out, sumOut);
    push(history.sessions, sessions.length);
    push(history.streams, streams);
    $("rate-now").textContent = "in " + rate(sumIn) + ", out " + rate(sumOut);
    $("chart-throughput").replaceChildren(chart(
      [
        { label: "in", values: history.in },
        { label: "out", values: history.out },
      ],
      rate,
      1024,
    ));
    $("chart-sessions").replaceChildren(
      chart([{ label: "sessions", values: history.sessions }], count, 10),
    );
    $("chart-streams").replaceChildren(
      chart([{ label: "streams", values: history.streams }], count, 10),
    );
  }

  // ---- tables ----

  /**
   * @param {string} id
   * @returns {id is TableName}
   */
  function isTable(id) {
    return id === "sessions" || id === "tunnels" || id === "tokens";
  }

  /**
   * What a row is sorted by in the column `key`.
   * @param {Record<string, unknown>} row
   * @param {string} key
   * @returns {unknown}
   */
  function sortValue(row, key) {
    if (key === "rate") {
      const list = rates.get(String(row.id)) || [];
      return list.length ? list[list.length - 1] : 0;
    }
    if (key === "sessions") return Array.isArray(row.sessions) ? row.sessions.length : 0;
    const v = row[key];
    return v === null || v === undefined ? "" : v;
  }

  /**
   * The rows of a table in its current order.
   * @template {Record<string, unknown>} R
   * @param {TableName} table
   * @param {R[]} rows
   * @returns {R[]}
   */
  function sorted(table, rows) {
    const s = sorting[table];
    return rows.slice().sort(function (a, b) {
      const x = sortValue(a, s.key), y = sortValue(b, s.key);
      if (typeof x === "number" && typeof y === "number") return (x - y) * s.dir;
      return String(x).localeCompare(String(y), undefined, { numeric: true }) * s.dir;
    });
  }

  function markSorted() {
    /** @type {TableName[]} */
    const tables = ["sessions", "tunnels", "tokens"];
    tables.forEach(function (table) {
      $(table).querySelectorAll("th[data-sort]").forEach(function (th) {
        if (th.getAttribute("data-sort") === sorting[table].key) {
          th.setAttribute("aria-sort", sorting[table].dir > 0 ? "ascending" : "descending");
        } else th.removeAttribute("aria-sort");
      });
    });
  }

  /**
   * A button for `action` on `target`; the click handler reads both from its data attributes.
   * @param {string} label
   * @param {string} action
   * @param {Target} [target]
   * @param {string} [cls]
   * @returns {HTMLButtonElement}
   */
  function button(label, action, target, cls) {
    const b = el("button", label, cls);
    b.type = "button";
    b.dataset.action = action;
    if (target) {
      b.dataset.id = target.id;
      if (target.sid !== undefined) b.dataset.sid = target.sid;
    }
    return b;
  }

  /**
   * Whether `action` on this target awaits its confirmation (`sid` undefined: any stream).
   * @param {string} action
   * @param {string} id
   * @param {string | undefined} sid
   * @returns {boolean}
   */
  function isArmed(action, id, sid) {
    return armed !== null && armed.action === action && armed.id === id &&
      (sid === undefined || armed.sid === sid) && Date.now() <= armed.until;
  }

  /**
   * A destructive action's button, or its confirmation and a cancel while armed.
   * @param {string} label
   * @param {string} action
   * @param {Target} target
   * @param {string} question
   * @returns {DocumentFragment}
   */
  function destructive(label, action, target, question) {
    const wrap = document.createDocumentFragment();
    if (isArmed(action, target.id, target.sid)) {
      wrap.appendChild(button(question, action, target, "confirm"));
      wrap.appendChild(button("Cancel", "cancel"));
    } else wrap.appendChild(button(label, action, target, "danger"));
    return wrap;
  }

  /**
   * The last cell of a row: its action buttons, spaced.
   * @param {HTMLTableRowElement} row
   * @param {Node[]} nodes
   */
  function actionCell(row, nodes) {
    const actions = el("span", null, "actions");
    nodes.forEach(function (node) {
      actions.appendChild(node);
    });
    row.appendChild(el("td")).appendChild(actions);
  }

  /**
   * Appends a cell per value: its text, and a class.
   * @param {HTMLTableRowElement} row
   * @param {Array<[unknown] | [unknown, string]>} values
   */
  function cells(row, values) {
    values.forEach(function (v) {
      row.appendChild(el("td", v[0], v[1]));
    });
  }

  function renderSessions() {
    const body = tbody("sessions");
    /** @type {HTMLTableRowElement[]} */
    const rows = [];
    sorted("sessions", data.sessions).forEach(function (s) {
      const tr = el("tr");
      tr.dataset.session = s.id;
      const list = rates.get(s.id) || [];
      cells(tr, [
        [s.id],
        [s.client === null ? "-" : s.client],
        [s.transport],
        [s.remoteAddress],
        [s.rttMs === null ? "-" : s.rttMs.toFixed(1) + " ms", "num"],
        [bytes(s.bytesIn), "num"],
        [bytes(s.bytesOut), "num"],
        [s.streamCount, "num"],
      ]);
      const spark = el("td", null, "num");
      spark.appendChild(el("span", rate(list.length ? list[list.length - 1] : 0)));
      spark.appendChild(sparkline(list, 120, 24));
      tr.appendChild(spark);
      actionCell(tr, [
        button(open.has(s.id) ? "Hide streams" : "Streams", "streams", { id: s.id }),
        destructive("Kick", "kick", { id: s.id }, "Kick " + s.id + "?"),
      ]);
      rows.push(tr);
      if (open.has(s.id)) {
        const detail = el("tr", null, "streams");
        detail.dataset.streamsOf = s.id;
        const td = el("td", "loading streams…");
        td.colSpan = 10;
        detail.appendChild(td);
        rows.push(detail);
        loadStreams(s.id, td);
      }
    });
    body.replaceChildren(...rows);
    $("session-count").textContent = "(" + data.sessions.length + ")";
  }

  /**
   * Fills `td` with the streams of session `id`, each with its Reset button.
   * @param {string} id
   * @param {HTMLTableCellElement} td
   */
  function loadStreams(id, td) {
    api("GET", "/v1/sessions/" + encodeURIComponent(id)).then(function (r) {
      if (!r.ok) {
        return failure(r).then(function (m) {
          td.textContent = m;
        });
      }
      return r.json().then(function (/** @type {{ streams: StreamInfo[] }} */ detail) {
        const list = el("ul");
        detail.streams.forEach(function (st) {
          const li = el(
            "li",
            "stream " + st.id + " " + st.state + ", in " + bytes(st.bytesIn) +
              ", out " + bytes(st.bytesOut) + " ",
          );
          const actions = el("span", null, "actions");
          actions.appendChild(
            destructive(
              "Reset",
              "reset",
              { id: id, sid: String(st.id) },
              "Reset stream " + st.id + "?",
            ),
          );
          li.appendChild(actions);
          list.appendChild(li);
        });
        td.replaceChildren(detail.streams.length ? list : el("span", "no streams"));
      });
    }).catch(function () {});
  }

  /**
   * A port's address; an HTTP or TLS tunnel's name, and when its certificate expires.
   * @param {Tunnel} t
   * @returns {string}
   */
  function bindText(t) {
    if (!t.host) return t.bind;
    if (t.passthrough) return t.host + " (TLS passed through)";
    // Every way in (the HTTP and the HTTPS port); a daemon of an older version lists none.
    const where = t.urls && t.urls.length > 0 ? t.urls.join(" ") : t.bind;
    if (!t.certificate) return where;
    return where + " (certificate until " +
      new Date(t.certificate.notAfter).toLocaleDateString() + ")";
  }

  /**
   * A tunnel's visitor rules in a few words ("" when it has none).
   * @param {VisitorPolicy | undefined} p
   * @returns {string}
   */
  function policyText(p) {
    if (!p) return "";
    const parts = [];
    if (p.allow) parts.push("allow " + p.allow.join(" "));
    if (p.deny) parts.push("deny " + p.deny.join(" "));
    if (p.connectionsPerSecond) parts.push(p.connectionsPerSecond + "/s per visitor");
    if (p.tunnelConnectionsPerSecond) parts.push(p.tunnelConnectionsPerSecond + "/s in all");
    if (p.connectionsPerVisitor) parts.push(p.connectionsPerVisitor + " at once per visitor");
    if (p.bandwidth && p.bandwidth.in) parts.push("in " + bytes(p.bandwidth.in) + "/s");
    if (p.bandwidth && p.bandwidth.out) parts.push("out " + bytes(p.bandwidth.out) + "/s");
    if (p.http) parts.push("HTTP rules");
    return parts.join(", ");
  }

  /**
   * What a tunnel carries: its protocol as the daemon says, else told from its other fields (an
   * older daemon), and a UDP tunnel's datagrams dropped.
   * @param {Tunnel} t
   * @returns {string}
   */
  function protocolText(t) {
    const protocol = t.protocol || (t.host ? (t.passthrough ? "tls" : "http") : "tcp");
    if (!t.udp) return protocol;
    let dropped = 0;
    for (const reason in t.udp.drops) dropped += t.udp.drops[reason];
    return dropped > 0 ? protocol + " (" + dropped + " dropped)" : protocol;
  }

  function renderTunnels() {
    const body = tbody("tunnels");
    const rows = sorted("tunnels", data.tunnels).map(function (t) {
      const tr = el("tr");
      tr.dataset.tunnel = t.id;
      cells(tr, [
        [t.id],
        [t.client],
        [protocolText(t)],
        [bindText(t) + (policyText(t.policy) ? " [" + policyText(t.policy) + "]" : "")],
        [t.label === null ? "-" : t.label],
        [t.connections, "num"],
        [t.active, "num"],
        [bytes(t.bytesFromVisitors), "num"],
        [bytes(t.bytesToVisitors), "num"],
      ]);
      actionCell(tr, [destructive("Close", "close-tunnel", { id: t.id }, "Close " + t.id + "?")]);
      return tr;
    });
    body.replaceChildren(...rows);
    $("tunnel-count").textContent = "(" + data.tunnels.length + ")";
  }

  function renderTokens() {
    if (!tokensAvailable) return;
    const body = tbody("tokens");
    const rows = sorted("tokens", data.tokens).map(function (t) {
      const tr = el("tr");
      tr.dataset.token = t.id;
      cells(tr, [
        [t.id],
        [t.name],
        [new Date(t.createdAt).toLocaleString()],
        [t.expiresAt === null ? "never" : new Date(t.expiresAt).toLocaleString()],
        [t.active ? "active" : (t.problem || "inactive")],
        [(t.sessions || []).length, "num"],
      ]);
      actionCell(tr, [destructive("Revoke", "revoke", { id: t.id }, "Revoke " + t.name + "?")]);
      return tr;
    });
    body.replaceChildren(...rows);
    $("token-count").textContent = "(" + data.tokens.length + ")";
  }

  // ---- actions ----

  /**
   * Calls the API; on success says `done` and refreshes, on failure says why.
   * @param {string} method
   * @param {string} path
   * @param {string} done
   */
  function act(method, path, done) {
    armed = null;
    api(method, path).then(function (r) {
      if (r.ok) {
        notice(done, true);
        refresh();
        return;
      }
      return failure(r).then(notice);
    }).catch(function (e) {
      if (token) notice(e.message);
    });
  }

  /**
   * The destructive actions: the path each DELETEs for a target, and what it says when done.
   * @type {Record<string, ((id: string, sid: string) => [path: string, done: string]) | undefined>}
   */
  const DELETES = {
    "kick": function (id) {
      return ["/v1/sessions/" + encodeURIComponent(id), "Kicked " + id + "."];
    },
    "reset": function (id, sid) {
      return [
        "/v1/sessions/" + encodeURIComponent(id) + "/streams/" + sid,
        "Reset stream " + sid + " of " + id + ".",
      ];
    },
    "close-tunnel": function (id) {
      return ["/v1/tunnels/" + encodeURIComponent(id), "Closed tunnel " + id + "."];
    },
    "revoke": function (id) {
      return ["/v1/tokens/" + encodeURIComponent(id), "Revoked token " + id + "."];
    },
  };

  document.addEventListener("click", function (event) {
    const target = event.target;
    if (!(target instanceof Element)) return;
    const th = target.closest("th[data-sort]");
    if (th) {
      const table = th.closest("table");
      const key = th.getAttribute("data-sort");
      if (!table || !isTable(table.id) || key === null) return;
      const s = sorting[table.id];
      if (s.key === key) s.dir = -s.dir;
      else {
        s.key = key;
        s.dir = 1;
      }
      render();
      return;
    }
    const b = target.closest("button[data-action]");
    if (!(b instanceof HTMLButtonElement) || !token) return;
    const action = b.dataset.action || "";
    const id = b.dataset.id || "";
    const sid = b.dataset.sid;
    if (action === "cancel") {
      armed = null;
      render();
      return;
    }
    if (action === "streams") {
      if (open.has(id)) open.delete(id);
      else open.add(id);
      render();
      return;
    }
    const deletion = DELETES[action];
    if (!deletion) return;
    if (!isArmed(action, id, sid)) {
      // First click: ask. The question replaces the button; it disarms by itself.
      armed = { action: action, id: id, sid: sid, until: Date.now() + CONFIRM_MS };
      render();
      setTimeout(function () {
        if (armed && Date.now() > armed.until) {
          armed = null;
          render();
        }
      }, CONFIRM_MS + 50);
      return;
    }
    b.disabled = true;
    const [path, done] = deletion(id, sid || "");
    act("DELETE", path, done);
  });

  $("mint-form").addEventListener("submit", function (event) {
    event.preventDefault();
    /** @type {{ name: string, expiresIn?: number }} */
    const body = { name: input("mint-name").value.trim() };
    const hours = Number(input("mint-hours").value);
    if (hours > 0) body.expiresIn = Math.round(hours * 3600);
    api("POST", "/v1/tokens", body).then(function (r) {
      if (!r.ok) return failure(r).then(notice);
      return r.json().then(function (/** @type {Token & { token: string }} */ minted) {
        $("minted-token").textContent = minted.token;
        $("minted").hidden = false;
        input("mint-name").value = "";
        input("mint-hours").value = "";
        notice("Minted a token for " + minted.name + ".", true);
        refresh();
      });
    }).catch(function (e) {
      if (token) notice(e.message);
    });
  });

  $("minted-copy").addEventListener("click", function () {
    const text = $("minted-token").textContent || "";
    const failed = "Copy failed: select the token and copy it by hand.";
    // Browsers offer no clipboard to a page served over plain HTTP from another host.
    if (!navigator.clipboard) {
      notice(failed);
      return;
    }
    navigator.clipboard.writeText(text).then(function () {
      notice("Copied.", true);
    }, function () {
      notice(failed);
    });
  });

  // Done: the secret leaves the page for good.
  $("minted-done").addEventListener("click", function () {
    $("minted-token").textContent = "";
    $("minted").hidden = true;
  });

  // ---- events ----

  /**
   * Adds an event to the top of the list, as its time, type and fields, keeping MAX_EVENTS.
   * @param {string} type
   * @param {string} raw  the event's data: JSON fields, or anything else
   */
  function logEvent(type, raw) {
    const list = $("events");
    let when = new Date();
    let text = "";
    try {
      /** @type {Record<string, unknown>} */
      const fields = JSON.parse(raw);
      if (typeof fields.time === "number") when = new Date(fields.time);
      Object.keys(fields).forEach(function (k) {
        if (k !== "type" && k !== "time") text += " " + k + "=" + fields[k];
      });
    } catch { /* not JSON: the type alone */ }
    list.prepend(el("li", when.toLocaleTimeString() + " " + type + text));
    while (list.children.length > MAX_EVENTS) list.children[list.children.length - 1].remove();
  }

  // A minimal Server-Sent Events reader over fetch. The first connection asks for the whole
  // ring (lastEventId 0), so the list shows what happened before the page was opened; later
  // ones resume with Last-Event-ID after a drop.
  function openFeed() {
    const controller = new AbortController();
    feed = controller;
    const h = headers({ "last-event-id": lastEventId === null ? "0" : lastEventId });
    fetch("/v1/events", { headers: h, signal: controller.signal, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          logout("The admin token was refused.");
          return;
        }
        if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
        status("live", true);
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        /** @returns {Promise<void>} */
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) throw new Error("the feed ended");
            buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
            let end;
            while ((end = buffer.indexOf("\n\n")) >= 0) {
              message(buffer.slice(0, end));
              buffer = buffer.slice(end + 2);
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {
        if (feed !== controller) return; // stopped on purpose
        status("reconnecting…", false);
        setTimeout(function () {
          if (feed === controller) openFeed();
        }, RECONNECT_MS);
      });
  }

  /**
   * Handles one Server-Sent Events block: logs it, and refreshes what it changed.
   * @param {string} block  its lines, without the blank line that ends it
   */
  function message(block) {
    let type = "message";
    /** @type {string[]} */
    const lines = [];
    block.split("\n").forEach(function (line) {
      if (line === "" || line[0] === ":") return;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") type = value;
      else if (field === "data") lines.push(value);
      else if (field === "id") lastEventId = value;
    });
    if (lines.length === 0) return; // as EventSource: comments and bare ids dispatch nothing
    logEvent(type, lines.join("\n"));
    if (/^(session_|tunnel_|stream_reset|drain|token_)/.test(type)) refresh();
    if (/^(token_|drain)/.test(type)) loadInfo();
  }

  /**
   * A link may carry the admin token in its fragment (`/#token=…`), which browsers never send to
   * the server: it is kept for this tab like a typed one, and cleared from the address bar so it
   * does not linger on screen or in the tab's history. A refused one logs out as usual.
   */
  function tokenFromLink() {
    const found = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!found) return;
    let value = "";
    try {
      value = decodeURIComponent(found[1]).trim();
    } catch (_) {
      // A malformed escape: no token, the login form as usual.
    }
    if (value) sessionStorage.setItem(KEY, value);
    globalThis.history.replaceState(null, "", location.pathname + location.search);
  }

  $("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const candidate = input("token").value.trim();
    if (!candidate) return;
    fetch("/v1/info", { headers: { authorization: "Bearer " + candidate }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          $("login-error").textContent = "The token was refused (HTTP " + r.status + ").";
          return;
        }
        token = candidate;
        sessionStorage.setItem(KEY, token);
        input("token").value = "";
        start();
      }, function (e) {
        $("login-error").textContent = "The daemon did not answer: " + e.message;
      });
  });

  $("logout").addEventListener("click", function () {
    logout("");
  });

  if (token) start();
  else show(false);
})();
