// @ts-check
/// <reference lib="dom" />
/**
 * The request inspector's script, served as-is at GET /inspector.js by ../app.ts: plain ES2020
 * in one IIFE, no build step. It lists `/api/requests` with the filters as query parameters, and
 * reloads the list (and the open detail) when `/api/events` (read through `fetch`, which unlike
 * EventSource can send the token) says something changed. Everything from the network is put on
 * the page with `textContent`, never `innerHTML`: paths, headers and bodies are the visitors'.
 */

/**
 * An exchange as the list and the events give it (client/inspector/views.ts).
 * @typedef {object} Summary
 * @property {number} id
 * @property {number} [replayOf]
 * @property {number} connection
 * @property {string} tunnel
 * @property {string} local
 * @property {string} remote
 * @property {string} method
 * @property {string} target
 * @property {number} [status]
 * @property {string} [reason]
 * @property {string} state
 * @property {string} startedAt
 * @property {number} [firstByteMs]
 * @property {number} [endMs]
 * @property {number} requestSize
 * @property {number} responseSize
 * @property {boolean} truncated
 * @property {{framesIn: number, framesOut: number, bytesIn: number, bytesOut: number}} [upgrade]
 * @property {string} [error]
 */

/**
 * A body as the detail shows it.
 * @typedef {object} Body
 * @property {number} size
 * @property {number} captured
 * @property {boolean} truncated
 * @property {string} [encoding]
 * @property {"empty" | "text" | "json" | "hex"} kind
 * @property {string} text
 * @property {string} base64
 * @property {string} [note]
 */

/**
 * An exchange in full.
 * @typedef {Summary & {version: string, requestHeaders: [string, string][],
 *   responseHeaders?: [string, string][], requestBody: Body, responseBody: Body}} Detail
 */

(function () {
  "use strict";
  const KEY = "tunnelmux-inspector-token";
  const RECONNECT_MS = 2000;
  const REDACTED = "[redacted]";

  /** @param {string} id */
  function $(id) {
    const found = document.getElementById(id);
    if (!found) throw new Error("missing #" + id);
    return found;
  }
  /** @param {string} id */
  function input(id) {
    return /** @type {HTMLInputElement} */ ($(id));
  }
  /**
   * @param {string} tag
   * @param {string} [text]
   * @param {string} [className]
   */
  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  /** @type {Summary[]} */
  let rows = [];
  /** @type {number | null} */
  let picked = null;
  /** @type {Detail | null} */
  let current = null;
  /** @type {AbortController | null} */
  let feed = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let reloadTimer;

  /** @param {Record<string, string>} [extra] */
  function headers(extra) {
    /** @type {Record<string, string>} */
    const h = Object.assign({}, extra || {});
    const token = sessionStorage.getItem(KEY);
    if (token) h.authorization = "Bearer " + token;
    return h;
  }

  /**
   * A JSON call to the API; a 401 shows the token form.
   * @param {string} path
   * @param {RequestInit} [init]
   * @returns {Promise<any>}
   */
  function api(path, init) {
    const options = Object.assign({ cache: "no-store" }, init || {});
    options.headers = headers(/** @type {Record<string, string>} */ (options.headers || {}));
    return fetch(path, options).then(function (r) {
      if (r.status === 401) {
        showLogin("This inspector wants its token.");
        throw new Error("unauthorized");
      }
      if (r.status === 204) return null;
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body && body.error ? body.error.message : "HTTP " + r.status);
        return body;
      });
    });
  }

  /** @param {string} message */
  function showLogin(message) {
    $("login").hidden = false;
    $("main").hidden = true;
    $("login-error").textContent = message;
    stopFeed();
  }

  /** @param {string} text @param {boolean} live */
  function status(text, live) {
    const node = $("status");
    node.textContent = text;
    node.className = live ? "live" : "";
  }

  function query() {
    const q = new URLSearchParams();
    const pairs = [["status", "f-status"], ["method", "f-method"], ["path", "f-path"], [
      "q",
      "f-q",
    ]];
    pairs.forEach(function (pair) {
      const value = input(pair[1]).value.trim();
      if (value) q.set(pair[0], value);
    });
    const text = q.toString();
    return text ? "?" + text : "";
  }

  function reload() {
    return api("/api/requests" + query()).then(function (body) {
      rows = body.requests;
      $("count").textContent = body.total + " recorded";
      renderRows();
      if (picked !== null) loadDetail(picked);
    }).catch(function () {});
  }

  function scheduleReload() {
    clearTimeout(reloadTimer);
    reloadTimer = setTimeout(reload, 100);
  }

  /** @param {number | undefined} ms */
  function ms(ms) {
    return ms === undefined
      ? ""
      : ms < 1000
      ? ms.toFixed(1) + " ms"
      : (ms / 1000).toFixed(2) + " s";
  }

  /** @param {number} n */
  function size(n) {
    return n < 1024
      ? n + " B"
      : n < 1048576
      ? (n / 1024).toFixed(1) + " KiB"
      : (n / 1048576).toFixed(1) + " MiB";
  }

  /** @param {Summary} r */
  function statusText(r) {
    if (r.upgrade) return r.status + " ws";
    if (r.status !== undefined) return String(r.status);
    return r.state === "failed" ? "failed" : "…";
  }

  /** @param {Summary} r */
  function statusClass(r) {
    if (r.state === "failed") return "failed";
    return r.status ? "s" + String(r.status)[0] : "";
  }

  function renderRows() {
    const body = $("rows");
    body.replaceChildren();
    rows.forEach(function (r) {
      const tr = el("tr");
      tr.dataset.id = String(r.id);
      if (r.id === picked) tr.className = "picked";
      tr.append(el("td", new Date(r.startedAt).toLocaleTimeString()));
      tr.append(el("td", r.method));
      const path = el("td", r.target, "path");
      if (r.replayOf !== undefined) path.append(el("span", "replay of #" + r.replayOf, "tag"));
      if (r.truncated) path.append(el("span", "cut", "tag"));
      tr.append(path);
      tr.append(el("td", statusText(r), statusClass(r)));
      tr.append(el("td", ms(r.endMs)));
      tr.append(el("td", size(r.responseSize)));
      tr.addEventListener("click", function () {
        pick(r.id);
      });
      body.append(tr);
    });
    $("empty").hidden = rows.length > 0;
  }

  /** @param {number} id */
  function pick(id) {
    picked = id;
    $("editor").hidden = true;
    $("d-note").textContent = "";
    renderRows();
    loadDetail(id);
  }

  /** @param {number} id */
  function loadDetail(id) {
    api("/api/requests/" + id).then(function (d) {
      if (picked !== id) return;
      current = d;
      renderDetail(d);
    }).catch(function (error) {
      if (picked === id) $("d-note").textContent = error.message;
    });
  }

  /**
   * @param {string} tableId
   * @param {[string, string][] | undefined} fields
   */
  function renderHeaders(tableId, fields) {
    const table = $(tableId);
    table.replaceChildren();
    (fields || []).forEach(function (f) {
      const tr = el("tr");
      tr.append(el("td", f[0]), el("td", f[1]));
      table.append(tr);
    });
  }

  /**
   * @param {string} prefix
   * @param {Body} body
   */
  function renderBody(prefix, body) {
    const notes = [];
    if (body.size > 0) notes.push(size(body.size));
    if (body.encoding) notes.push(body.encoding + " decoded");
    if (body.kind === "hex") notes.push("binary, as hex");
    if (body.truncated) {
      notes.push("cut: " + size(body.captured) + " of " + size(body.size) + " kept");
    }
    if (body.note) notes.push(body.note);
    const note = $(prefix + "-note");
    note.textContent = notes.join(" · ");
    note.className = "body-note" + (body.truncated ? " cut" : "");
    $(prefix + "-body").textContent = body.text;
  }

  /** @param {Detail} d */
  function renderDetail(d) {
    $("detail-pane").hidden = false;
    $("d-title").textContent = "#" + d.id + " " + d.method + " " + d.target;
    const facts = $("d-facts");
    facts.replaceChildren();
    /** @type {[string, string][]} */
    const list = [
      ["status", d.status !== undefined ? d.status + " " + (d.reason || "") : d.state],
      ["state", d.state],
      ["visitor", d.remote],
      ["tunnel", d.tunnel],
      ["local service", d.local],
      ["started", new Date(d.startedAt).toLocaleString()],
      ["first byte", ms(d.firstByteMs)],
      ["duration", ms(d.endMs)],
      ["connection", "#" + d.connection],
    ];
    if (d.replayOf !== undefined) list.push(["replay of", "#" + d.replayOf]);
    if (d.upgrade) {
      list.push(["frames in", String(d.upgrade.framesIn)]);
      list.push(["frames out", String(d.upgrade.framesOut)]);
    }
    if (d.error) list.push(["error", d.error]);
    list.forEach(function (pair) {
      const div = el("div");
      const dd = el("dd", pair[1]);
      dd.dataset.fact = pair[0];
      div.append(el("dt", pair[0]), dd);
      facts.append(div);
    });
    const replays = rows.filter(function (r) {
      return r.replayOf === d.id;
    });
    const line = $("d-replays");
    line.replaceChildren();
    if (d.replayOf !== undefined) {
      line.append("Replay of ");
      line.append(link(d.replayOf, "#" + d.replayOf));
    }
    if (replays.length > 0) {
      line.append("Replays: ");
      replays.forEach(function (r) {
        line.append(link(r.id, "#" + r.id + " (" + statusText(r) + ")"));
      });
    }
    renderHeaders("d-req-headers", d.requestHeaders);
    renderHeaders("d-res-headers", d.responseHeaders);
    renderBody("d-req", d.requestBody);
    renderBody("d-res", d.responseBody);
  }

  /** @param {number} id @param {string} text */
  function link(id, text) {
    const a = /** @type {HTMLAnchorElement} */ (el("a", text));
    a.href = "#";
    a.dataset.id = String(id);
    a.addEventListener("click", function (event) {
      event.preventDefault();
      pick(id);
    });
    return a;
  }

  /** @param {Record<string, unknown>} edits */
  function replay(edits) {
    if (!current) return;
    const from = current.id;
    $("d-note").textContent = "replaying #" + from + "…";
    api("/api/requests/" + from + "/replay", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(edits),
    }).then(function (d) {
      $("editor").hidden = true;
      picked = d.id;
      return reload().then(function () {
        $("d-note").textContent = "replayed #" + from + " as #" + d.id;
      });
    }).catch(function (error) {
      $("d-note").textContent = "replay failed: " + error.message;
    });
  }

  /** @param {string} s */
  function shellQuote(s) {
    return "'" + s.replace(/'/g, "'\\''") + "'";
  }

  /** @param {Detail} d */
  function curlOf(d) {
    /** @param {string} name */
    const field = function (name) {
      const f = d.requestHeaders.find(function (h) {
        return h[0].toLowerCase() === name;
      });
      return f ? f[1] : undefined;
    };
    const proto = field("x-forwarded-proto") || "http";
    const host = field("host") || d.tunnel;
    const parts = ["curl", "-X", d.method, shellQuote(proto + "://" + host + d.target)];
    d.requestHeaders.forEach(function (h) {
      const lower = h[0].toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "connection") return;
      if (h[1] === REDACTED) return;
      parts.push("-H", shellQuote(h[0] + ": " + h[1]));
    });
    if (d.requestBody.size > 0 && d.requestBody.kind !== "hex") {
      parts.push("--data-binary", shellQuote(d.requestBody.text));
    }
    return parts.join(" ");
  }

  $("replay").addEventListener("click", function () {
    replay({});
  });
  $("edit").addEventListener("click", function () {
    if (!current) return;
    const d = current;
    input("e-method").value = d.method;
    input("e-path").value = d.target;
    /** @type {HTMLTextAreaElement} */ ($("e-headers")).value = d.requestHeaders.map(function (h) {
      return h[0] + ": " + h[1];
    }).join("\n");
    const body = /** @type {HTMLTextAreaElement} */ ($("e-body"));
    body.value = d.requestBody.kind === "hex" ? "" : d.requestBody.text;
    body.disabled = d.requestBody.kind === "hex";
    $("editor").hidden = false;
  });
  $("e-cancel").addEventListener("click", function () {
    $("editor").hidden = true;
  });
  $("editor").addEventListener("submit", function (event) {
    event.preventDefault();
    if (!current) return;
    /** @type {[string, string][]} */
    const fields = [];
    /** @type {HTMLTextAreaElement} */ ($("e-headers")).value.split("\n").forEach(function (line) {
      const colon = line.indexOf(":");
      if (line.trim() === "" || colon <= 0) return;
      fields.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
    });
    const body = /** @type {HTMLTextAreaElement} */ ($("e-body"));
    /** @type {Record<string, unknown>} */
    const edits = {
      method: input("e-method").value.trim(),
      path: input("e-path").value.trim(),
      headers: fields,
    };
    if (body.disabled) edits.bodyBase64 = current.requestBody.base64;
    else edits.body = body.value;
    replay(edits);
  });
  $("curl").addEventListener("click", function () {
    if (!current) return;
    const command = curlOf(current);
    $("d-note").textContent = command;
    if (navigator.clipboard) navigator.clipboard.writeText(command).catch(function () {});
  });
  $("export").addEventListener("click", function () {
    fetch("/api/har", { headers: headers(), cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.blob();
    }).then(function (blob) {
      const a = /** @type {HTMLAnchorElement} */ (el("a"));
      a.href = URL.createObjectURL(blob);
      a.download = "tunnelmux-inspector.har";
      a.click();
      setTimeout(function () {
        URL.revokeObjectURL(a.href);
      }, 1000);
    }).catch(function () {});
  });
  $("clear").addEventListener("click", function () {
    api("/api/requests", { method: "DELETE" }).then(function () {
      picked = null;
      current = null;
      $("detail-pane").hidden = true;
      return reload();
    }).catch(function () {});
  });
  ["f-status", "f-method"].forEach(function (id) {
    $(id).addEventListener("change", reload);
  });
  ["f-path", "f-q"].forEach(function (id) {
    $(id).addEventListener("input", scheduleReload);
  });
  $("filters").addEventListener("submit", function (event) {
    event.preventDefault();
    reload();
  });
  $("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const token = input("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(KEY, token);
    $("login").hidden = true;
    $("main").hidden = false;
    start();
  });

  function stopFeed() {
    const was = feed;
    feed = null;
    if (was) was.abort();
  }

  // Server-Sent Events over fetch: every event reloads the list (at most every 100 ms).
  function openFeed() {
    const controller = new AbortController();
    feed = controller;
    fetch("/api/events", { headers: headers(), signal: controller.signal, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          showLogin("This inspector wants its token.");
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
            buffer += decoder.decode(chunk.value, { stream: true });
            let end;
            while ((end = buffer.indexOf("\n\n")) >= 0) {
              if (/^event: /m.test(buffer.slice(0, end))) scheduleReload();
              buffer = buffer.slice(end + 2);
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {
        if (feed !== controller) return;
        status("reconnecting…", false);
        setTimeout(function () {
          if (feed === controller) start();
        }, RECONNECT_MS);
      });
  }

  function start() {
    openFeed();
    reload();
  }

  // A link may carry the token in its fragment (never sent to the server): kept for this tab.
  const found = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (found) {
    try {
      sessionStorage.setItem(KEY, decodeURIComponent(found[1]));
    } catch (_) {
      // A malformed escape: the token form, if one is needed.
    }
    history.replaceState(null, "", location.pathname + location.search);
  }
  start();
})();
