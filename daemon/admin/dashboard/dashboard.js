// deno-lint-ignore-file no-var no-inner-declarations no-unused-vars
/**
 * The admin dashboard's script, served as-is at GET /dashboard.js by routes.ts. Plain ES2020 in
 * one IIFE, no build step. It polls `/v1/sessions`, `/v1/tunnels` and `/v1/tokens` (throughput is
 * the difference of the byte counters between polls), `/v1/info` for the header's facts, and reads
 * `/v1/events` through `fetch` (EventSource cannot send an Authorization header), from the start
 * of the daemon's event ring, to refresh at once when a session or tunnel comes or goes.
 * Histories are bounded to `HISTORY` points. Destructive actions (kick, reset, close, revoke) take
 * a second click on a confirmation that disarms by itself.
 *
 * Every dynamic piece of the page is built with `textContent` and DOM calls, never `innerHTML`:
 * client names and addresses come from the network. No inline styles either (SVG presentation
 * attributes only), so the page runs under a CSP without `'unsafe-inline'`.
 */
"use strict";
(function () {
  var KEY = "tunnelmux.adminToken";
  var HISTORY = 60;
  var POLL_MS = 2000;
  var INFO_MS = 10000;
  var RECONNECT_MS = 2000;
  var MAX_EVENTS = 50;
  var CONFIRM_MS = 5000;
  var SVG = "http://www.w3.org/2000/svg";

  var token = sessionStorage.getItem(KEY);
  var pollTimer = 0;
  var infoTimer = 0;
  var feed = null;
  var lastEventId = null;
  var busy = false;
  var again = false;
  var info = null;
  var previous = new Map(); // session id -> { t, bytesIn, bytesOut }
  var rates = new Map(); // session id -> [bytes/s]
  var history = { in: [], out: [], sessions: [], streams: [] };
  var data = { sessions: [], tunnels: [], tokens: [] };
  var sorting = {
    sessions: { key: "id", dir: 1 },
    tunnels: { key: "id", dir: 1 },
    tokens: { key: "createdAt", dir: -1 },
  };
  var armed = null; // { action, id, sid, until }: a destructive action awaiting confirmation
  var tokensAvailable = true;

  function $(id) {
    return document.getElementById(id);
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function svgEl(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) {
      node.setAttribute(k, String(attrs[k]));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function bytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(1)) + " " + units[i];
  }

  function rate(n) {
    return bytes(n) + "/s";
  }

  function count(n) {
    return String(Math.round(n));
  }

  function duration(ms) {
    var s = Math.floor(ms / 1000);
    var d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + (s % 60) + "s";
    return (s % 60) + "s";
  }

  function push(list, value) {
    list.push(value);
    if (list.length > HISTORY) list.splice(0, list.length - HISTORY);
  }

  /** A polyline of values scaled to max, right-aligned on a HISTORY-point x axis. */
  function line(values, x0, y0, width, height, max, cls) {
    var step = width / (HISTORY - 1);
    var offset = (HISTORY - values.length) * step;
    var points = values.map(function (v, i) {
      return (x0 + offset + i * step).toFixed(1) + "," +
        (y0 + height - (v / max) * height).toFixed(1);
    });
    var attrs = { points: points.join(" ") };
    if (cls) attrs["class"] = cls;
    return svgEl("polyline", attrs);
  }

  /** A round upper bound for an axis: 1, 2 or 5 times a power of ten (of 1024 for bytes). */
  function ceiling(max, base) {
    if (max <= 0) return 1;
    var power = Math.pow(base, Math.floor(Math.log(max) / Math.log(base)));
    var steps = base === 1024 ? [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] : [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * power >= max) return steps[i] * power;
    return base * power;
  }

  /**
   * A chart with axes: y from 0 to a round maximum with three labelled ticks in the series'
   * unit, x over the last HISTORY polls (two minutes) labelled in time, and a legend.
   */
  function chart(series, format, base) {
    var W = 320, H = 130, left = 62, right = 8, top = 16, bottom = 20;
    var w = W - left - right, h = H - top - bottom;
    var max = 0;
    series.forEach(function (s) {
      s.values.forEach(function (v) {
        if (v > max) max = v;
      });
    });
    // Bytes start at 1 KiB/s, counts at 2: an idle axis still reads in round units.
    max = Math.max(ceiling(max, base), base === 1024 ? 1024 : 2);
    var svg = svgEl("svg", {
      "class": "chart",
      width: W,
      height: H,
      viewBox: "0 0 " + W + " " + H,
      role: "img",
    });
    for (var i = 0; i <= 2; i++) {
      var y = top + h - (i / 2) * h;
      svg.appendChild(
        svgEl("line", { "class": i === 0 ? "axis" : "grid", x1: left, x2: left + w, y1: y, y2: y }),
      );
      svg.appendChild(
        svgEl("text", { x: left - 4, y: y + 3, "text-anchor": "end" }, format(max * i / 2)),
      );
    }
    svg.appendChild(svgEl("line", { "class": "axis", x1: left, x2: left, y1: top, y2: top + h }));
    var seconds = HISTORY * POLL_MS / 1000;
    [
      [0, "-" + Math.round(seconds / 60) + " min"],
      [0.5, "-" + Math.round(seconds / 120) + " min"],
      [1, "now"],
    ].forEach(function (tick) {
      svg.appendChild(
        svgEl("text", {
          x: left + tick[0] * w,
          y: H - 4,
          "text-anchor": tick[0] === 0 ? "start" : tick[0] === 1 ? "end" : "middle",
        }, tick[1]),
      );
    });
    var legendX = left;
    series.forEach(function (s, index) {
      svg.appendChild(line(s.values, left, top, w, h, max, index === 1 ? "second" : ""));
      if (series.length > 1) {
        var label = s.label + " " + format(s.values.length ? s.values[s.values.length - 1] : 0);
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
    var desc = series.map(function (s) {
      return s.label + " " + format(s.values.length ? s.values[s.values.length - 1] : 0);
    }).join(", ");
    svg.setAttribute("aria-label", desc);
    return svg;
  }

  function sparkline(values, width, height) {
    var max = 1;
    values.forEach(function (v) {
      if (v > max) max = v;
    });
    var svg = svgEl("svg", {
      "class": "spark",
      width: width,
      height: height,
      viewBox: "0 0 " + width + " " + height,
    });
    svg.appendChild(line(values, 0, 1, width, height - 2, max, ""));
    return svg;
  }

  function notice(text, ok) {
    $("notice").textContent = text || "";
    $("notice").className = ok ? "ok" : "";
  }

  function headers(extra) {
    var h = { authorization: "Bearer " + token };
    Object.keys(extra || {}).forEach(function (k) {
      h[k] = extra[k];
    });
    return h;
  }

  // Every call goes through here: a 401 means the token is wrong (or was rotated), so forget it.
  function api(method, path, body) {
    var init = { method: method, headers: headers(), cache: "no-store" };
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

  function failure(r) {
    return r.json().then(function (body) {
      return (body && body.error && body.error.message) || ("HTTP " + r.status);
    }, function () {
      return "HTTP " + r.status;
    });
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
    clearInterval(infoTimer);
    pollTimer = infoTimer = 0;
    if (feed) feed.abort();
    feed = null;
  }

  function start() {
    show(true);
    $("login-error").textContent = "";
    loadInfo();
    refresh();
    pollTimer = setInterval(refresh, POLL_MS);
    infoTimer = setInterval(loadInfo, INFO_MS);
    openFeed();
  }

  // ---- the header: the daemon's facts ----

  function loadInfo() {
    api("GET", "/v1/info").then(function (r) {
      return r.ok ? r.json() : null;
    })
      .then(function (body) {
        if (body) {
          info = { body: body, at: Date.now() };
          renderFacts();
        }
      })
      .catch(function () {});
  }

  function renderFacts() {
    if (!info) return;
    var b = info.body;
    var uptime = b.uptimeMs + (Date.now() - info.at);
    var listeners = ["tcp", "websocket", "admin"].map(function (k) {
      return k + " " + (b.listeners[k] || "off");
    }).join(", ");
    var limits = b.limits || {};
    var facts = [
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
    var nodes = facts.map(function (f) {
      var div = el("div");
      div.appendChild(el("dt", f[0]));
      var dd = el("dd", f[1]);
      dd.dataset.fact = f[0];
      div.appendChild(dd);
      return div;
    });
    $("facts").replaceChildren.apply($("facts"), nodes);
  }

  // ---- polling ----

  // One refresh at a time; a request for another while one runs is remembered, not dropped.
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    var calls = [api("GET", "/v1/sessions?limit=1000"), api("GET", "/v1/tunnels")];
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
  function measure(sessions) {
    var now = performance.now();
    var sumIn = 0, sumOut = 0, streams = 0, seen = new Set();
    sessions.forEach(function (s) {
      seen.add(s.id);
      streams += s.streamCount;
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

  function sortValue(row, key) {
    if (key === "rate") {
      var list = rates.get(row.id) || [];
      return list.length ? list[list.length - 1] : 0;
    }
    if (key === "sessions") return (row.sessions || []).length;
    var v = row[key];
    return v === null || v === undefined ? "" : v;
  }

  function sorted(table, rows) {
    var s = sorting[table];
    return rows.slice().sort(function (a, b) {
      var x = sortValue(a, s.key), y = sortValue(b, s.key);
      if (typeof x === "number" && typeof y === "number") return (x - y) * s.dir;
      return String(x).localeCompare(String(y), undefined, { numeric: true }) * s.dir;
    });
  }

  function markSorted() {
    Object.keys(sorting).forEach(function (table) {
      document.querySelectorAll("#" + table + " th[data-sort]").forEach(function (th) {
        if (th.dataset.sort === sorting[table].key) {
          th.setAttribute("aria-sort", sorting[table].dir > 0 ? "ascending" : "descending");
        } else th.removeAttribute("aria-sort");
      });
    });
  }

  function button(label, action, values, cls) {
    var b = el("button", label, cls);
    b.type = "button";
    b.dataset.action = action;
    Object.keys(values).forEach(function (k) {
      b.dataset[k] = values[k];
    });
    return b;
  }

  function isArmed(action, id, sid) {
    return armed !== null && armed.action === action && armed.id === id &&
      (sid === undefined || armed.sid === sid) && Date.now() <= armed.until;
  }

  /** A destructive action's button, or its confirmation and a cancel while armed. */
  function destructive(label, action, values, question) {
    var wrap = document.createDocumentFragment();
    if (isArmed(action, values.id, values.sid)) {
      wrap.appendChild(button(question, action, values, "confirm"));
      wrap.appendChild(button("Cancel", "cancel", {}));
    } else wrap.appendChild(button(label, action, values, "danger"));
    return wrap;
  }

  /** The last cell of a row: its action buttons, spaced. */
  function actionCell(row, nodes) {
    var actions = el("span", null, "actions");
    nodes.forEach(function (node) {
      actions.appendChild(node);
    });
    row.appendChild(el("td")).appendChild(actions);
  }

  function cells(row, values) {
    values.forEach(function (v) {
      row.appendChild(el("td", v[0], v[1]));
    });
  }

  var open = new Set(); // sessions whose stream list is shown

  function renderSessions() {
    var body = document.querySelector("#sessions tbody");
    var rows = [];
    sorted("sessions", data.sessions).forEach(function (s) {
      var tr = el("tr");
      tr.dataset.session = s.id;
      var list = rates.get(s.id) || [];
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
      var spark = el("td", null, "num");
      spark.appendChild(el("span", rate(list.length ? list[list.length - 1] : 0)));
      spark.appendChild(sparkline(list, 120, 24));
      tr.appendChild(spark);
      actionCell(tr, [
        button(open.has(s.id) ? "Hide streams" : "Streams", "streams", { id: s.id }),
        destructive("Kick", "kick", { id: s.id }, "Kick " + s.id + "?"),
      ]);
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
    $("session-count").textContent = "(" + data.sessions.length + ")";
  }

  function loadStreams(id, td) {
    api("GET", "/v1/sessions/" + encodeURIComponent(id)).then(function (r) {
      if (!r.ok) {
        return failure(r).then(function (m) {
          td.textContent = m;
        });
      }
      return r.json().then(function (detail) {
        var list = el("ul");
        detail.streams.forEach(function (st) {
          var li = el(
            "li",
            "stream " + st.id + " " + st.state + ", in " + bytes(st.bytesIn) +
              ", out " + bytes(st.bytesOut) + " ",
          );
          var actions = el("span", null, "actions");
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

  /** A port's address; an HTTP or TLS tunnel's name, and when its certificate expires. */
  function bindText(t) {
    if (!t.host) return t.bind;
    if (t.passthrough) return t.host + " (TLS passed through)";
    if (!t.certificate) return t.bind;
    return t.host + " (certificate until " + new Date(t.certificate.notAfter).toLocaleDateString() +
      ")";
  }

  function renderTunnels() {
    var body = document.querySelector("#tunnels tbody");
    var rows = sorted("tunnels", data.tunnels).map(function (t) {
      var tr = el("tr");
      tr.dataset.tunnel = t.id;
      cells(tr, [
        [t.id],
        [t.client],
        [bindText(t)],
        [t.label === null ? "-" : t.label],
        [t.connections, "num"],
        [t.active, "num"],
        [bytes(t.bytesFromVisitors), "num"],
        [bytes(t.bytesToVisitors), "num"],
      ]);
      actionCell(tr, [destructive("Close", "close-tunnel", { id: t.id }, "Close " + t.id + "?")]);
      return tr;
    });
    body.replaceChildren.apply(body, rows);
    $("tunnel-count").textContent = "(" + data.tunnels.length + ")";
  }

  function renderTokens() {
    if (!tokensAvailable) return;
    var body = document.querySelector("#tokens tbody");
    var rows = sorted("tokens", data.tokens).map(function (t) {
      var tr = el("tr");
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
    body.replaceChildren.apply(body, rows);
    $("token-count").textContent = "(" + data.tokens.length + ")";
  }

  // ---- actions ----

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

  var PATHS = {
    "kick": function (b) {
      return ["/v1/sessions/" + encodeURIComponent(b.dataset.id), "Kicked " + b.dataset.id + "."];
    },
    "reset": function (b) {
      return [
        "/v1/sessions/" + encodeURIComponent(b.dataset.id) + "/streams/" + b.dataset.sid,
        "Reset stream " + b.dataset.sid + " of " + b.dataset.id + ".",
      ];
    },
    "close-tunnel": function (b) {
      return [
        "/v1/tunnels/" + encodeURIComponent(b.dataset.id),
        "Closed tunnel " + b.dataset.id + ".",
      ];
    },
    "revoke": function (b) {
      return [
        "/v1/tokens/" + encodeURIComponent(b.dataset.id),
        "Revoked token " + b.dataset.id + ".",
      ];
    },
  };

  document.addEventListener("click", function (event) {
    var target = event.target;
    var th = target.closest("th[data-sort]");
    if (th) {
      var table = th.closest("table").id;
      var s = sorting[table];
      if (s.key === th.dataset.sort) s.dir = -s.dir;
      else {
        s.key = th.dataset.sort;
        s.dir = 1;
      }
      render();
      return;
    }
    var b = target.closest("button[data-action]");
    if (!b || !token) return;
    var action = b.dataset.action;
    if (action === "cancel") {
      armed = null;
      render();
      return;
    }
    if (action === "streams") {
      var id = b.dataset.id;
      if (open.has(id)) open.delete(id);
      else open.add(id);
      render();
      return;
    }
    if (!PATHS[action]) return;
    if (!isArmed(action, b.dataset.id, b.dataset.sid)) {
      // First click: ask. The question replaces the button; it disarms by itself.
      armed = {
        action: action,
        id: b.dataset.id,
        sid: b.dataset.sid,
        until: Date.now() + CONFIRM_MS,
      };
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
    var target2 = PATHS[action](b);
    act("DELETE", target2[0], target2[1]);
  });

  $("mint-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var body = { name: $("mint-name").value.trim() };
    var hours = Number($("mint-hours").value);
    if (hours > 0) body.expiresIn = Math.round(hours * 3600);
    api("POST", "/v1/tokens", body).then(function (r) {
      if (!r.ok) return failure(r).then(notice);
      return r.json().then(function (minted) {
        $("minted-token").textContent = minted.token;
        $("minted").hidden = false;
        $("mint-name").value = "";
        $("mint-hours").value = "";
        notice("Minted a token for " + minted.name + ".", true);
        refresh();
      });
    }).catch(function (e) {
      if (token) notice(e.message);
    });
  });

  $("minted-copy").addEventListener("click", function () {
    var text = $("minted-token").textContent;
    if (navigator.clipboard) {
      navigator.clipboard.writeText(text).then(function () {
        notice("Copied.", true);
      }, function () {
        notice("Copy failed: select the token and copy it by hand.");
      });
    }
  });

  // Done: the secret leaves the page for good.
  $("minted-done").addEventListener("click", function () {
    $("minted-token").textContent = "";
    $("minted").hidden = true;
  });

  // ---- events ----

  function logEvent(type, raw) {
    var list = $("events");
    var when = new Date();
    var text = "";
    try {
      var fields = JSON.parse(raw);
      if (typeof fields.time === "number") when = new Date(fields.time);
      Object.keys(fields).forEach(function (k) {
        if (k !== "type" && k !== "time") text += " " + k + "=" + fields[k];
      });
    } catch (e) { /* not JSON: the type alone */ }
    list.insertBefore(el("li", when.toLocaleTimeString() + " " + type + text), list.firstChild);
    while (list.children.length > MAX_EVENTS) list.removeChild(list.lastChild);
  }

  // A minimal Server-Sent Events reader over fetch. The first connection asks for the whole
  // ring (lastEventId 0), so the list shows what happened before the page was opened; later
  // ones resume with Last-Event-ID after a drop.
  function openFeed() {
    var controller = new AbortController();
    feed = controller;
    var h = headers({ "last-event-id": lastEventId === null ? "0" : lastEventId });
    fetch("/v1/events", { headers: h, signal: controller.signal, cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) {
          logout("The admin token was refused.");
          return;
        }
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
        setTimeout(function () {
          if (feed === controller) openFeed();
        }, RECONNECT_MS);
      });
  }

  function message(block) {
    var type = "message", lines = [];
    block.split("\n").forEach(function (line) {
      if (line === "" || line[0] === ":") return;
      var colon = line.indexOf(":");
      var field = colon < 0 ? line : line.slice(0, colon);
      var value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") type = value;
      else if (field === "data") lines.push(value);
      else if (field === "id") lastEventId = value;
    });
    if (lines.length === 0) return; // as EventSource: comments and bare ids dispatch nothing
    logEvent(type, lines.join("\n"));
    if (/^(session_|tunnel_|stream_reset|drain|token_)/.test(type)) refresh();
    if (/^(token_|drain)/.test(type)) loadInfo();
  }

  $("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var candidate = $("token").value.trim();
    if (!candidate) return;
    fetch("/v1/info", { headers: { authorization: "Bearer " + candidate }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          $("login-error").textContent = "The token was refused (HTTP " + r.status + ").";
          return;
        }
        token = candidate;
        sessionStorage.setItem(KEY, token);
        $("token").value = "";
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
