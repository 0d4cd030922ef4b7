/**
 * The dashboard's static files as strings: its HTML, script and style sheet. No build step and
 * nothing from a CDN: the admin listener is often on a host without internet access, and a page
 * that holds the admin token must not run third-party code.
 *
 * The script builds every dynamic piece of the page with `textContent` and DOM calls, never
 * `innerHTML`: client names and addresses come from the network. It sets no inline styles either
 * (SVG presentation attributes only), so the page runs under a CSP without `'unsafe-inline'`.
 *
 * @module
 */

/** `GET /`: the page. Its script and style sheet are separate files so the CSP can be strict. */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunnelmux</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard.css">
<script src="/dashboard.js" defer></script>
</head>
<body>
<header>
  <h1>tunnelmux</h1>
  <span id="status">not connected</span>
  <button id="logout" type="button" hidden>Forget token</button>
</header>
<section id="login">
  <form id="login-form">
    <label for="token">Admin token</label>
    <input id="token" name="token" type="password" autocomplete="off" required>
    <button type="submit">Connect</button>
  </form>
  <p id="login-error" role="alert"></p>
  <p class="hint">The token stays in this tab (sessionStorage) and is sent as a bearer token.</p>
</section>
<main id="main" hidden>
  <p id="notice" role="status"></p>
  <section>
    <h2>Throughput</h2>
    <div class="sparks">
      <figure><figcaption>in <span id="rate-in">-</span></figcaption><div id="spark-in"></div></figure>
      <figure><figcaption>out <span id="rate-out">-</span></figcaption><div id="spark-out"></div></figure>
    </div>
  </section>
  <section>
    <h2>Sessions <span id="session-count" class="count"></span></h2>
    <table id="sessions">
      <thead><tr>
        <th>id</th><th>client</th><th>transport</th><th>remote</th><th>RTT</th>
        <th>in</th><th>out</th><th>streams</th><th>rate</th><th></th>
      </tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section>
    <h2>Tunnels <span id="tunnel-count" class="count"></span></h2>
    <table id="tunnels">
      <thead><tr>
        <th>id</th><th>client</th><th>bind</th><th>label</th><th>connections</th><th>active</th>
        <th>from visitors</th><th>to visitors</th><th></th>
      </tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section>
    <h2>Events</h2>
    <ol id="events" reversed></ol>
  </section>
</main>
</body>
</html>
`;

/** `GET /dashboard.css`. */
export const DASHBOARD_CSS = `:root { color-scheme: light dark; --accent: #2f7d5b; --muted: #888; }
[hidden] { display: none !important; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5rem 2rem; }
header { display: flex; gap: 1rem; align-items: baseline; border-bottom: 1px solid var(--muted); }
h1 { font-size: 1.3rem; margin: .6rem 0; }
h2 { font-size: 1rem; margin: 1.2rem 0 .4rem; }
.count, .hint, #status { color: var(--muted); }
#status.live { color: var(--accent); }
#notice:empty, #login-error:empty { display: none; }
#notice, #login-error { padding: .3rem .6rem; border-left: 3px solid #c44; }
#notice.ok { border-left-color: var(--accent); }
form { display: flex; gap: .5rem; align-items: center; margin-top: 1rem; }
input { font: inherit; padding: .2rem .4rem; min-width: 24rem; }
button { font: inherit; cursor: pointer; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid rgba(128, 128, 128, .3); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.streams td { padding-left: 2rem; }
.sparks { display: flex; gap: 2rem; }
figure { margin: 0; }
svg.spark { display: block; }
svg.spark polyline { fill: none; stroke: var(--accent); stroke-width: 1.5; }
#events { font-family: ui-monospace, monospace; font-size: 12px; max-height: 14rem; overflow: auto; }
`;

/**
 * `GET /dashboard.js`. Plain ES2020 in one IIFE. It polls `/v1/sessions` and `/v1/tunnels`
 * (throughput is the difference of the byte counters between polls), and reads `/v1/events`
 * through `fetch` (EventSource cannot send an Authorization header) to refresh at once when a
 * session or tunnel comes or goes. Histories are bounded to `HISTORY` points.
 */
export const DASHBOARD_JS = String.raw`"use strict";
(function () {
  var KEY = "tunnelmux.adminToken";
  var HISTORY = 60;
  var POLL_MS = 2000;
  var RECONNECT_MS = 2000;
  var MAX_EVENTS = 50;
  var SVG = "http://www.w3.org/2000/svg";

  var token = sessionStorage.getItem(KEY);
  var pollTimer = 0;
  var feed = null;
  var lastEventId = null;
  var busy = false;
  var again = false;
  var previous = new Map(); // session id -> { t, bytesIn, bytesOut }
  var rates = new Map(); // session id -> [bytes/s]
  var totals = { in: [], out: [] };

  function $(id) { return document.getElementById(id); }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function bytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
  }

  function push(list, value) {
    list.push(value);
    if (list.length > HISTORY) list.splice(0, list.length - HISTORY);
  }

  function sparkline(values, width, height) {
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    var max = 1;
    values.forEach(function (v) { if (v > max) max = v; });
    var step = width / (HISTORY - 1);
    var offset = (HISTORY - values.length) * step;
    var points = values.map(function (v, i) {
      return (offset + i * step).toFixed(1) + "," + (height - 1 - (v / max) * (height - 2)).toFixed(1);
    });
    var line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    svg.appendChild(line);
    return svg;
  }

  function notice(text, ok) {
    $("notice").textContent = text || "";
    $("notice").className = ok ? "ok" : "";
  }

  function headers() { return { authorization: "Bearer " + token }; }

  // Every call goes through here: a 401 means the token is wrong (or was rotated), so forget it.
  function api(method, path) {
    return fetch(path, { method: method, headers: headers(), cache: "no-store" }).then(function (r) {
      if (r.status === 401) {
        logout("The admin token was refused.");
        throw new Error("unauthorized");
      }
      return r;
    });
  }

  function failure(r) {
    return r.json().then(function (body) {
      return (body && body.error && body.error.message) || ("HTTP " + r.status);
    }, function () { return "HTTP " + r.status; });
  }

  function show(connected) {
    $("login").hidden = connected;
    $("main").hidden = !connected;
    $("logout").hidden = !connected;
  }

  function status(text, live) {
    var node = $("status");
    node.textContent = text;
    node.className = live ? "live" : "";
  }

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
    pollTimer = 0;
    if (feed) feed.abort();
    feed = null;
  }

  function start() {
    show(true);
    $("login-error").textContent = "";
    refresh();
    pollTimer = setInterval(refresh, POLL_MS);
    openFeed();
  }

  // One refresh at a time; a request for another while one runs is remembered, not dropped.
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    Promise.all([api("GET", "/v1/sessions?limit=1000"), api("GET", "/v1/tunnels")])
      .then(function (rs) {
        if (!rs[0].ok || !rs[1].ok) throw new Error("HTTP " + rs[0].status + "/" + rs[1].status);
        return Promise.all([rs[0].json(), rs[1].json()]);
      })
      .then(function (bodies) {
        measure(bodies[0].sessions);
        renderSessions(bodies[0].sessions);
        renderTunnels(bodies[1].tunnels);
      })
      .catch(function (e) { if (token) notice("Refresh failed: " + e.message); })
      .then(function () {
        busy = false;
        if (again && token) { again = false; refresh(); }
      });
  }

  // Rates from counter differences; a session seen for the first time contributes nothing yet,
  // and one that left just drops out (its counters do not go negative).
  function measure(sessions) {
    var now = performance.now();
    var sumIn = 0, sumOut = 0, seen = new Set();
    sessions.forEach(function (s) {
      seen.add(s.id);
      var before = previous.get(s.id);
      var list = rates.get(s.id) || [];
      if (before && now > before.t) {
        var dt = (now - before.t) / 1000;
        var rin = Math.max(0, s.bytesIn - before.bytesIn) / dt;
        var rout = Math.max(0, s.bytesOut - before.bytesOut) / dt;
        sumIn += rin;
        sumOut += rout;
        push(list, rin + rout);
      }
      rates.set(s.id, list);
      previous.set(s.id, { t: now, bytesIn: s.bytesIn, bytesOut: s.bytesOut });
    });
    Array.from(previous.keys()).forEach(function (id) {
      if (!seen.has(id)) { previous.delete(id); rates.delete(id); }
    });
    push(totals.in, sumIn);
    push(totals.out, sumOut);
    $("rate-in").textContent = bytes(Math.round(sumIn)) + "/s";
    $("rate-out").textContent = bytes(Math.round(sumOut)) + "/s";
    $("spark-in").replaceChildren(sparkline(totals.in, 240, 40));
    $("spark-out").replaceChildren(sparkline(totals.out, 240, 40));
  }

  function button(label, action, data) {
    var b = el("button", label);
    b.type = "button";
    b.dataset.action = action;
    Object.keys(data).forEach(function (k) { b.dataset[k] = data[k]; });
    return b;
  }

  function cells(row, values) {
    values.forEach(function (v) {
      var td = el("td", v[0], v[1]);
      row.appendChild(td);
    });
  }

  var open = new Set(); // sessions whose stream list is shown

  function renderSessions(sessions) {
    var body = document.querySelector("#sessions tbody");
    var rows = [];
    sessions.forEach(function (s) {
      var tr = el("tr");
      tr.dataset.session = s.id;
      cells(tr, [
        [s.id], [s.client === null ? "-" : s.client], [s.transport], [s.remoteAddress],
        [s.rttMs === null ? "-" : s.rttMs.toFixed(1) + " ms", "num"],
        [bytes(s.bytesIn), "num"], [bytes(s.bytesOut), "num"], [s.streamCount, "num"],
      ]);
      var spark = el("td");
      spark.appendChild(sparkline(rates.get(s.id) || [], 120, 20));
      tr.appendChild(spark);
      var actions = el("td");
      actions.appendChild(button(open.has(s.id) ? "Hide streams" : "Streams", "streams", { id: s.id }));
      actions.appendChild(button("Kick", "kick", { id: s.id }));
      tr.appendChild(actions);
      rows.push(tr);
      if (open.has(s.id)) {
        var detail = el("tr", null, "streams");
        detail.dataset.streamsOf = s.id;
        var td = el("td", "loading streams…");
        td.colSpan = 10;
        detail.appendChild(td);
        rows.push(detail);
        loadStreams(s.id, td);
      }
    });
    body.replaceChildren.apply(body, rows);
    $("session-count").textContent = "(" + sessions.length + ")";
  }

  function loadStreams(id, td) {
    api("GET", "/v1/sessions/" + encodeURIComponent(id)).then(function (r) {
      if (!r.ok) return failure(r).then(function (m) { td.textContent = m; });
      return r.json().then(function (detail) {
        var list = el("ul");
        detail.streams.forEach(function (st) {
          var li = el("li", "stream " + st.id + " " + st.state + ", in " + bytes(st.bytesIn) +
            ", out " + bytes(st.bytesOut) + " ");
          li.appendChild(button("Reset", "reset", { id: id, sid: String(st.id) }));
          list.appendChild(li);
        });
        td.replaceChildren(detail.streams.length ? list : el("span", "no streams"));
      });
    }).catch(function () {});
  }

  function renderTunnels(tunnels) {
    var body = document.querySelector("#tunnels tbody");
    var rows = tunnels.map(function (t) {
      var tr = el("tr");
      tr.dataset.tunnel = t.id;
      cells(tr, [
        [t.id], [t.client], [t.bind], [t.label === null ? "-" : t.label],
        [t.connections, "num"], [t.active, "num"],
        [bytes(t.bytesFromVisitors), "num"], [bytes(t.bytesToVisitors), "num"],
      ]);
      var actions = el("td");
      actions.appendChild(button("Close", "close-tunnel", { id: t.id }));
      tr.appendChild(actions);
      return tr;
    });
    body.replaceChildren.apply(body, rows);
    $("tunnel-count").textContent = "(" + tunnels.length + ")";
  }

  function act(method, path, done) {
    api(method, path).then(function (r) {
      if (r.ok) { notice(done, true); refresh(); return; }
      return failure(r).then(notice);
    }).catch(function (e) { if (token) notice(e.message); });
  }

  document.addEventListener("click", function (event) {
    var b = event.target.closest("button[data-action]");
    if (!b || !token) return;
    var id = b.dataset.id;
    if (b.dataset.action === "kick") {
      b.disabled = true;
      act("DELETE", "/v1/sessions/" + encodeURIComponent(id), "Kicked " + id + ".");
    } else if (b.dataset.action === "reset") {
      b.disabled = true;
      act("DELETE", "/v1/sessions/" + encodeURIComponent(id) + "/streams/" + b.dataset.sid,
        "Reset stream " + b.dataset.sid + " of " + id + ".");
    } else if (b.dataset.action === "close-tunnel") {
      b.disabled = true;
      act("DELETE", "/v1/tunnels/" + encodeURIComponent(id), "Closed tunnel " + id + ".");
    } else if (b.dataset.action === "streams") {
      if (open.has(id)) open.delete(id); else open.add(id);
      refresh();
    }
  });

  function logEvent(type, data) {
    var list = $("events");
    var text = new Date().toLocaleTimeString() + " " + type;
    try {
      var fields = JSON.parse(data);
      Object.keys(fields).forEach(function (k) {
        if (k !== "type" && k !== "time") text += " " + k + "=" + fields[k];
      });
    } catch (e) { /* not JSON: the type alone */ }
    list.insertBefore(el("li", text), list.firstChild);
    while (list.children.length > MAX_EVENTS) list.removeChild(list.lastChild);
  }

  // A minimal Server-Sent Events reader over fetch; resumes with Last-Event-ID after a drop.
  function openFeed() {
    var controller = new AbortController();
    feed = controller;
    var h = headers();
    if (lastEventId !== null) h["last-event-id"] = lastEventId;
    fetch("/v1/events", { headers: h, signal: controller.signal, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { logout("The admin token was refused."); return; }
        if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
        status("live", true);
        var reader = r.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) throw new Error("the feed ended");
            buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
            var end;
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
        setTimeout(function () { if (feed === controller) openFeed(); }, RECONNECT_MS);
      });
  }

  function message(block) {
    var type = "message", data = [];
    block.split("\n").forEach(function (line) {
      if (line === "" || line[0] === ":") return;
      var colon = line.indexOf(":");
      var field = colon < 0 ? line : line.slice(0, colon);
      var value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") type = value;
      else if (field === "data") data.push(value);
      else if (field === "id") lastEventId = value;
    });
    if (data.length === 0) return; // as EventSource: comments and bare ids dispatch nothing
    logEvent(type, data.join("\n"));
    if (/^(session_|tunnel_|stream_reset|drain|reset)/.test(type)) refresh();
  }

  $("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var candidate = $("token").value.trim();
    if (!candidate) return;
    fetch("/v1/info", { headers: { authorization: "Bearer " + candidate }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { $("login-error").textContent = "The token was refused (HTTP " + r.status + ")."; return; }
        token = candidate;
        sessionStorage.setItem(KEY, token);
        $("token").value = "";
        start();
      }, function (e) { $("login-error").textContent = "The daemon did not answer: " + e.message; });
  });

  $("logout").addEventListener("click", function () { logout(""); });

  if (token) start(); else show(false);
})();
`;
