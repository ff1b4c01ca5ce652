// Berth dashboard: vanilla JavaScript, no framework, no build step.
// Reads /ui/api/* (JSON) and /ui/api/decisions (server-sent events); read-only.
// Markers for tests and people: <html data-nodes-drawn="N"> once the heat map
// is drawn, data-pods-ready / data-pod-groups / data-gangs-ready /
// data-queues-ready / data-pod-ready / data-node-matches likewise, the heat
// map's tile layout on the canvas (data-cols, data-pitch, data-cell), and
// window.berthTimings.heatmapDrawnMs (performance.now() at the first draw).
// Every value is set as text (textContent, attributes): none is parsed as HTML.
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);
  const root = document.documentElement;
  window.berthTimings = {};

  // ------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "style") e.style.cssText = v; // CSSOM, which the CSP allows (a style attribute it would not)
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // An answer that is not 2xx: its {"Error": ...} and status (401: sign in; 403: not allowed).
  class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function getJSON(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => ({}));
    if (r.status === 401) showSignIn();
    if (!r.ok) throw new HttpError(r.status, body.Error || `${r.status} ${r.statusText}`);
    return body;
  }

  async function postJSON(path, data) {
    const r = await fetch(path, {
      method: "POST", headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify(data),
    });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new HttpError(r.status, body.Error || `${r.status} ${r.statusText}`);
    return body;
  }

  const BINARY = [["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]];
  function trim(n) { return Number.isInteger(n) ? String(n) : n.toFixed(n < 10 ? 2 : 1).replace(/\.?0+$/, ""); }
  // A canonical amount (milli-cpu, bytes, counts) as a person reads it.
  function qty(resource, v) {
    if (v === undefined || v === null) return "–";
    if (resource === "cpu") return trim(v / 1000);
    if (resource === "memory" || resource === "ephemeral-storage" || resource.startsWith("hugepages-")) {
      for (const [s, u] of BINARY) if (v >= u) return trim(v / u) + s;
      return String(v);
    }
    return String(v);
  }
  // cpu, memory, pods first, then the rest by name.
  const FIRST = ["cpu", "memory", "pods"];
  function byResource(names) {
    const rank = (r) => (FIRST.includes(r) ? FIRST.indexOf(r) : FIRST.length);
    return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  }
  function pct(permille) { return permille < 0 ? "–" : `${(permille / 10).toFixed(permille < 100 ? 1 : 0)}%`; }
  function age(seconds) {
    if (!seconds) return "";
    if (seconds < 90) return `${Math.round(seconds)}s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)}m`;
    if (seconds < 129600) return `${Math.round(seconds / 3600)}h`;
    return `${Math.round(seconds / 86400)}d`;
  }
  function badge(text, cls) { return el("span", { class: `badge ${cls || text}`, text }); }
  function podLink(key) { return el("a", { href: `#/pod/${key}`, class: "pod-link", text: key }); }
  function say(node, text, cls) { node.replaceChildren(el("div", { class: cls || "empty", text })); }

  // A refresh that runs at most once at a time and coalesces calls made meanwhile.
  // A refusal (403: the caller may not list what the card shows) is said in
  // the card ``box``; 401 has shown the sign-in form already.
  function coalesced(fn, box) {
    let running = null, again = false;
    const failed = (e) => {
      if (e instanceof HttpError && e.status === 401) return;
      if (e instanceof HttpError && e.status === 403 && box) { say($(box), e.message, "error forbidden"); return; }
      console.error(e);
    };
    const run = async () => {
      if (running) { again = true; return running; }
      running = (async () => {
        do { again = false; try { await fn(); } catch (e) { failed(e); } } while (again);
      })();
      try { await running; } finally { running = null; }
    };
    return run;
  }

  // ------------------------------------------------------------ nodes heat map

  const heat = { data: null, resource: "cpu", order: "name", rows: null, layout: null, drawn: false, match: null };
  // Names in natural order: node-2 before node-10.
  const natural = new Intl.Collator("en", { numeric: true }).compare;
  const canvas = $("#heatmap");
  const tip = $("#tip");

  function color(permille) {
    if (permille < 0) return "#d9dce2";
    const f = Math.min(permille, 1000) / 1000;
    if (permille > 1000) return "hsl(285,55%,45%)"; // overcommitted (should not happen)
    const hue = 140 - 140 * f;
    return `hsl(${hue.toFixed(0)},${(55 + 25 * f).toFixed(0)}%,${(50 - 4 * f).toFixed(0)}%)`;
  }

  function cellSize(n, width) {
    // As big as fits in ~320 px of height, between 6 and 40 px.
    const area = (width * 320) / Math.max(n, 1);
    return Math.max(6, Math.min(40, Math.floor(Math.sqrt(area)) - 2));
  }

  function orderRows() {
    const d = heat.data, n = d.count;
    const idx = Array.from({ length: n }, (_, i) => i);
    const byName = (a, b) => natural(d.names[a], d.names[b]);
    if (heat.order === "usage") {
      const u = d.used[heat.resource] || [];
      idx.sort((a, b) => (u[b] ?? -1) - (u[a] ?? -1) || byName(a, b));
    } else {
      idx.sort(byName);
    }
    heat.rows = idx;
  }

  function drawHeat() {
    const d = heat.data;
    if (!d) return;
    const width = canvas.parentElement.clientWidth || 800;
    const cell = cellSize(d.count, width), gap = cell >= 14 ? 2 : 1, pitch = cell + gap;
    const cols = Math.max(1, Math.floor((width + gap) / pitch));
    const rows = Math.ceil(d.count / cols);
    const height = Math.max(rows * pitch - gap, cell);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const used = d.used[heat.resource] || [];
    const label = cell >= 30;
    if (label) { ctx.font = "9px system-ui, sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "center"; }
    for (let k = 0; k < d.count; k++) {
      const i = heat.rows[k];
      const x = (k % cols) * pitch, y = Math.floor(k / cols) * pitch;
      const p = used[i] ?? -1;
      ctx.globalAlpha = heat.match && !heat.match[i] ? 0.18 : 1; // a search dims the other nodes
      ctx.fillStyle = d.flags[i] & 1 ? "#2c2f36" : color(p);
      ctx.fillRect(x, y, cell, cell);
      if (d.flags[i] & 1 && p >= 0) { // cordoned: its usage as an inner square
        ctx.fillStyle = color(p);
        ctx.fillRect(x + cell / 4, y + cell / 4, cell / 2, cell / 2);
      }
      if (label && p >= 0) {
        ctx.fillStyle = "rgba(0,0,0,.65)";
        ctx.fillText(String(Math.round(p / 10)), x + cell / 2, y + cell / 2);
      }
    }
    ctx.globalAlpha = 1;
    heat.layout = { cols, pitch, cell };
    // Where the k-th tile is, for tests and people: (k % cols, k / cols) * pitch.
    Object.assign(canvas.dataset, { cols: String(cols), pitch: String(pitch), cell: String(cell) });
    canvas.dataset.drawn = String(d.count);
    canvas.dataset.resource = heat.resource;
    if (!heat.drawn) {
      heat.drawn = true;
      window.berthTimings.heatmapDrawnMs = performance.now();
    }
    root.dataset.nodesDrawn = String(d.count);
  }

  function drawTotals() {
    const d = heat.data;
    const box = $("#totals");
    box.replaceChildren(...d.resources.map((r) => {
      const t = d.totals[r];
      const f = t.allocatable ? t.requested / t.allocatable : 0;
      return el("span", { "data-resource": r },
        el("b", { text: r }), " ", `${qty(r, t.requested)} / ${qty(r, t.allocatable)}`,
        el("span", { class: "bar" }, el("i", { style: `width:${(Math.min(f, 1) * 100).toFixed(1)}%` })),
        `${(f * 100).toFixed(1)}%`);
    }));
  }

  function drawResourceButtons() {
    const box = $("#resource-buttons");
    const d = heat.data;
    if (!d.resources.includes(heat.resource)) heat.resource = d.resources[0] || "cpu";
    box.replaceChildren(...d.resources.map((r) => el("button", {
      type: "button", class: r === heat.resource ? "on" : "", "data-resource": r, text: r,
      onclick: () => { heat.resource = r; drawResourceButtons(); orderRows(); drawHeat(); drawNodeList(); },
    })));
  }

  const refreshNodes = coalesced(async () => {
    const d = await getJSON("api/nodes");
    heat.data = d;
    $("#nodes-count").textContent = `${d.count}`;
    drawResourceButtons();
    drawTotals();
    orderRows();
    drawNodeList();
    drawHeat();
    counters.nodes = d.count;
    drawCounters();
  }, "#totals");

  function nodeAt(ev) {
    const d = heat.data, L = heat.layout;
    if (!d || !L) return -1;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const c = Math.floor(x / L.pitch), row = Math.floor(y / L.pitch);
    if (c >= L.cols || x % L.pitch > L.cell || y % L.pitch > L.cell) return -1;
    const k = row * L.cols + c;
    return k < d.count ? heat.rows[k] : -1;
  }

  canvas.addEventListener("mousemove", (ev) => {
    const i = nodeAt(ev);
    if (i < 0) { tip.hidden = true; return; }
    const d = heat.data;
    tip.replaceChildren(el("b", { text: d.names[i] }), d.flags[i] & 1 ? " (cordoned)" : "",
      ...d.resources.map((r) => el("div", { text: `${r}: ${pct(d.used[r][i])}` })));
    tip.hidden = false;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left + 14, y = ev.clientY - r.top + 14;
    tip.style.left = `${Math.min(x, r.width - tip.offsetWidth - 4)}px`;
    tip.style.top = `${y}px`;
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("click", (ev) => { const i = nodeAt(ev); if (i >= 0) showNode(heat.data.names[i]); });
  $("#node-order").addEventListener("change", (ev) => { heat.order = ev.target.value; orderRows(); drawHeat(); drawNodeList(); });

  // The node list under the heat map: the first nodes in the map's order,
  // or those whose name holds the search text (their tiles stay lit).
  const NODE_LIST_SHOWN = 60;
  const nodeSearch = $("#node-search");

  function drawNodeList() {
    const d = heat.data;
    if (!d) return;
    const needle = nodeSearch.value.trim().toLowerCase();
    heat.match = needle ? d.names.map((n) => n.toLowerCase().includes(needle)) : null;
    const found = heat.match ? heat.rows.filter((i) => heat.match[i]) : heat.rows;
    const used = d.used[heat.resource] || [];
    $("#node-list").replaceChildren(...found.slice(0, NODE_LIST_SHOWN).map((i) => el("li", { "data-node": d.names[i] },
      el("button", { type: "button", onclick: () => showNode(d.names[i]) },
        el("span", { class: "sw", style: `background:${d.flags[i] & 1 ? "#2c2f36" : color(used[i] ?? -1)}` }),
        el("span", { class: "name", text: d.names[i] }), el("span", { class: "muted", text: ` ${pct(used[i] ?? -1)}` })))));
    const shown = Math.min(found.length, NODE_LIST_SHOWN);
    $("#node-matches").textContent = needle
      ? `${found.length} of ${d.count} match${found.length > shown ? `, first ${shown} listed` : ""}`
      : `first ${shown} of ${d.count}${d.count > shown ? ": type to find others" : ""}`;
    root.dataset.nodeMatches = String(found.length);
  }

  let nodeSearchTimer = 0;
  nodeSearch.addEventListener("input", () => {
    clearTimeout(nodeSearchTimer);
    nodeSearchTimer = setTimeout(() => { drawNodeList(); drawHeat(); }, 120);
  });
  let resizeTimer = 0;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(drawHeat, 100); });

  async function showNode(name) {
    const box = $("#node-detail");
    box.hidden = false;
    try {
      const n = await getJSON(`api/nodes/${encodeURIComponent(name)}`);
      const res = Object.keys(n.allocatable);
      box.replaceChildren(
        el("h3", {}, n.name, n.unschedulable ? " " : "", n.unschedulable ? badge("cordoned", "Rejected") : ""),
        el("div", { class: "kv" },
          ...res.flatMap((r) => [el("span", { class: "muted", text: r }),
            el("span", { text: `${qty(r, n.requested[r] || 0)} requested of ${qty(r, n.allocatable[r])}` })]),
          el("span", { class: "muted", text: "taints" }), el("span", { text: n.taints.join(", ") || "none" }),
          el("span", { class: "muted", text: "labels" }),
          el("span", { text: Object.entries(n.labels).map(([k, v]) => `${k}=${v}`).join("  ") }),
          el("span", { class: "muted", text: `pods (${n.pod_count})` }),
          el("span", {}, ...n.pods.map((p, j) => [j ? ", " : "", p]))));
    } catch (e) { say(box, e.message, "error"); }
  }

  // ------------------------------------------------------------ queues

  const refreshQueues = coalesced(async () => {
    const d = await getJSON("api/queues");
    const box = $("#queues");
    counters.queues = d.queues.length;
    drawCounters();
    if (!d.enabled) {
      say(box, "No batch queues configured (the queues section of the configuration).");
      root.dataset.queuesReady = "0";
      return;
    }
    const depth = {};
    const tbody = el("tbody");
    for (const q of d.queues) {
      depth[q.name] = q.parent ? (depth[q.parent] || 0) + 1 : 0;
      const res = byResource([...new Set([...Object.keys(q.guaranteed), ...Object.keys(q.max), ...Object.keys(q.allocated)])]);
      const usage = el("div", { class: "qres" }, ...res.flatMap((r) => {
        const a = q.allocated[r] || 0, g = q.guaranteed[r], m = q.max[r];
        const scale = m || d.capacity[r] || Math.max(g || 0, a) || 1;
        const bar = el("div", { class: "qbar", title: `${r}: ${qty(r, a)} used, guaranteed ${qty(r, g)}, max ${qty(r, m)}` },
          el("i", { style: `width:${Math.min((a / scale) * 100, 100).toFixed(1)}%; background:${g !== undefined && a > g ? "var(--warn)" : "var(--accent)"}` }));
        if (g !== undefined) bar.append(el("span", { class: "g", style: `left:${Math.min((g / scale) * 100, 100).toFixed(1)}%` }));
        return [el("span", { class: "muted", text: r }), bar];
      }));
      const amounts = (m) => byResource(Object.keys(m)).map((r) => `${r} ${qty(r, m[r])}`).join(", ") || "–";
      tbody.append(el("tr", { class: `q-depth-${Math.min(depth[q.name], 3)}`, "data-queue": q.name },
        el("td", {}, el("b", { text: q.name }), q.leaf ? "" : el("span", { class: "muted", text: " (parent)" }),
          ...((d.reservations || {})[q.name] || []).map((line) => el("div", { class: "muted reservation", text: line }))),
        el("td", { text: amounts(q.guaranteed) }),
        el("td", { class: "used", text: amounts(q.allocated) }),
        el("td", { text: amounts(q.max) }),
        el("td", { class: "pending" }, el("b", { text: String(q.pending_pods) }), q.pending_pods ? ` (${amounts(q.pending)})` : ""),
        el("td", { class: "num", text: `${(q.dominant_share * 100).toFixed(0)}% / ${(q.fair_share * 100).toFixed(0)}%` }),
        el("td", {}, usage)));
    }
    box.replaceChildren(el("table", { class: "grid" },
      el("thead", {}, el("tr", {}, ...["queue", "guaranteed", "usage", "max", "pending", "share / fair", ""].map((h) => el("th", { text: h })))),
      tbody));
    root.dataset.queuesReady = String(d.queues.length);
  }, "#queues");

  // ------------------------------------------------------------ pods

  // Sorting and paging happen on the server (2000 pending pods are not
  // sent to the page); grouped, the server counts the groups and each open
  // group asks for its own page.
  const pods = { offset: 0, limit: 25, sort: "name", order: "asc", open: new Map() };
  const filters = { text: $("#f-text"), phase: $("#f-phase"), namespace: $("#f-namespace"), queue: $("#f-queue"), by: $("#f-by") };
  const POD_COLUMNS = [["pod", "name"], ["queue", "queue"], ["phase", "phase"], ["pos", "position", "num"],
    ["node", "node"], ["attempts", "attempts", "num"], ["age", "age", "num"], ["why", "reason"]];
  const GROUP_NONE = { reason: "no reason yet", queue: "no queue", gang: "no gang" };

  function fillSelect(sel, values, first) {
    const keep = sel.value;
    const opts = [...first, ...values.filter((v) => !first.some(([fv]) => fv === v)).map((v) => [v, v])];
    const same = sel.options.length === opts.length && opts.every(([v], i) => sel.options[i].value === v);
    if (same) return;
    sel.replaceChildren(...opts.map(([v, t]) => el("option", { value: v, text: t })));
    sel.value = opts.some(([v]) => v === keep) ? keep : opts[0][0];
  }

  // A table head whose columns sort (state.sort / state.order) on click;
  // a second click on the sorted column reverses it. Redrawn at once, the
  // rows follow when the server answers.
  function sortableHead(thead, columns, state, reload, extra) {
    thead.replaceChildren(el("tr", {}, ...columns.map(([label, key, cls]) => {
      const on = state.sort === key;
      return el("th", { class: `sortable ${cls || ""}`, "data-sort": key, "aria-sort": on ? (state.order === "asc" ? "ascending" : "descending") : "none" },
        el("button", { type: "button", text: label + (on ? (state.order === "asc" ? " ▲" : " ▼") : ""),
          onclick: () => {
            if (on) state.order = state.order === "asc" ? "desc" : "asc";
            else Object.assign(state, { sort: key, order: "asc" });
            state.offset = 0;
            for (const g of state.open?.values() || []) g.offset = 0;
            sortableHead(thead, columns, state, reload, extra);
            reload();
          } }));
    }), ...(extra || []).map((label) => el("th", { text: label }))));
  }

  function podsQuery(extra) {
    const q = new URLSearchParams({ phase: filters.phase.value, sort: pods.sort, order: pods.order, ...extra });
    if (filters.namespace.value) q.set("namespace", filters.namespace.value);
    if (filters.queue.value) q.set("queue", filters.queue.value);
    if (filters.text.value.trim()) q.set("q", filters.text.value.trim());
    return q;
  }

  function podRow(p) {
    return el("tr", { "data-pod": `${p.namespace}/${p.name}`, "data-phase": p.phase },
      el("td", {}, podLink(`${p.namespace}/${p.name}`)),
      el("td", { text: p.queue || "–" }),
      el("td", {}, badge(p.phase)),
      el("td", { class: "num", text: p.position || "" }),
      el("td", { text: p.node || (p.nominated_node ? `→ ${p.nominated_node}` : "") }),
      el("td", { class: "num", text: p.attempts }),
      el("td", { class: "num", text: age(p.age) }),
      el("td", { class: "why", text: p.why || p.reason }));
  }

  function phaseBadges(phases) {
    return Object.entries(phases).sort((a, b) => b[1] - a[1]).map(([ph, n]) => el("span", { class: "count" }, badge(ph), ` ${n}`));
  }

  const refreshPods = coalesced(async () => {
    const by = filters.by.value;
    const d = await getJSON(`api/pods?${podsQuery(by ? { by } : { offset: pods.offset, limit: pods.limit })}`);
    const pendingCount = Object.entries(d.phases).filter(([p]) => PENDING.has(p)).reduce((s, [, n]) => s + n, 0);
    counters.pending = pendingCount;
    counters.bound = (d.phases.Bound || 0) + (d.phases.Assumed || 0);
    drawCounters();
    fillSelect(filters.phase, Object.keys(d.phases).sort(), [["pending", `pending (${pendingCount})`], ["all", "all phases"]]);
    for (const o of filters.phase.options) if (d.phases[o.value] !== undefined) o.textContent = `${o.value} (${d.phases[o.value]})`;
    fillSelect(filters.namespace, d.namespaces, [["", "all namespaces"]]);
    fillSelect(filters.queue, d.queues, [["", "all queues"]]);
    $("#pods-count").textContent = `${d.total}`;
    sortableHead($("#pods thead"), POD_COLUMNS, pods, refreshPods);
    const tbody = $("#pods tbody");
    const cols = POD_COLUMNS.length;
    if (!by) {
      tbody.replaceChildren(...(d.pods.length ? d.pods.map(podRow) : [el("tr", {}, el("td", { colspan: cols, class: "empty", text: "No pods match." }))]));
      pager($("#pods-pager"), d.total, pods, refreshPods);
      $("#pods-pager").hidden = false;
      delete root.dataset.podGroups;
      root.dataset.podsReady = String(d.total);
      return;
    }
    // Grouped: a header row per group (the largest first), its page under it when open.
    $("#pods-pager").hidden = true;
    for (const k of [...pods.open.keys()]) if (!d.groups.some((g) => g.key === k)) pods.open.delete(k);
    const pages = await Promise.all(d.groups.map((g) => pods.open.has(g.key)
      ? getJSON(`api/pods?${podsQuery({ by, group: g.key, offset: pods.open.get(g.key).offset, limit: pods.limit })}`) : null));
    const rows = [];
    d.groups.forEach((g, i) => {
      const open = pods.open.has(g.key);
      rows.push(el("tr", { class: "group", "data-group": g.key, "data-count": g.count, "aria-expanded": String(open) },
        el("td", { colspan: cols },
          el("button", { type: "button", class: "toggle", "aria-label": open ? "collapse" : "expand", text: open ? "▾" : "▸",
            onclick: () => { if (open) pods.open.delete(g.key); else pods.open.set(g.key, { offset: 0, limit: pods.limit }); refreshPods(); } }),
          el("b", { class: "count-n", text: String(g.count) }), " ",
          el("span", { class: g.key ? "group-key" : "group-key muted", text: g.key || GROUP_NONE[by] }),
          el("span", { class: "phases" }, ...phaseBadges(g.phases)))));
      const page = pages[i];
      if (!page || !open) return; // closed while its page was fetched: the queued refresh draws it closed
      rows.push(...page.pods.map(podRow));
      const box = el("div", { class: "pager" });
      pager(box, page.total, pods.open.get(g.key), refreshPods);
      rows.push(el("tr", { class: "group-pager" }, el("td", { colspan: cols }, box)));
    });
    if (d.group_count > d.groups.length) {
      rows.push(el("tr", {}, el("td", { colspan: cols, class: "empty", text: `${d.group_count - d.groups.length} smaller groups not shown: filter to narrow.` })));
    }
    tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: cols, class: "empty", text: "No pods match." }))]));
    root.dataset.podGroups = String(d.group_count);
    root.dataset.podsReady = String(d.total);
  }, "#pods-pager");

  function pager(box, total, state, reload) {
    const from = total ? state.offset + 1 : 0, to = Math.min(state.offset + state.limit, total);
    box.replaceChildren(
      el("button", { type: "button", class: "prev", disabled: state.offset === 0, text: "‹ prev",
        onclick: () => { state.offset = Math.max(0, state.offset - state.limit); reload(); } }),
      el("span", { text: `${from}–${to} of ${total}` }),
      el("button", { type: "button", class: "next", disabled: to >= total, text: "next ›",
        onclick: () => { state.offset += state.limit; reload(); } }));
  }

  function resetPods() { pods.offset = 0; pods.open.clear(); refreshPods(); }
  let textTimer = 0;
  filters.text.addEventListener("input", () => { clearTimeout(textTimer); textTimer = setTimeout(resetPods, 200); });
  for (const s of [filters.phase, filters.namespace, filters.queue, filters.by]) s.addEventListener("change", resetPods);

  // ------------------------------------------------------------ gangs

  const gangs = { offset: 0, limit: 25, sort: "name", order: "asc" };
  const GANG_COLUMNS = [["gang", "name"], ["present / min", "members", "num"], ["placed", "placed", "num"], ["pending", "pending", "num"]];

  function whereText(w) {
    const more = w.node_count > w.nodes.length ? ` and ${w.node_count - w.nodes.length} more` : "";
    const nodes = w.nodes.length ? ` on ${w.nodes.join(", ")}${more}` : "";
    return `${w.count}${nodes}${w.reason ? `: ${w.reason}` : ""}`;
  }

  const refreshGangs = coalesced(async () => {
    const q = new URLSearchParams({ offset: gangs.offset, limit: gangs.limit, sort: gangs.sort, order: gangs.order });
    const text = $("#g-text").value.trim();
    if (text) q.set("q", text);
    const d = await getJSON(`api/gangs?${q}`);
    $("#gangs-count").textContent = d.total ? `${d.total} (${d.incomplete} incomplete)` : "";
    sortableHead($("#gangs thead"), GANG_COLUMNS, gangs, refreshGangs, ["where they wait"]);
    const tbody = $("#gangs tbody");
    if (!d.gangs.length) {
      const none = text ? "No gangs match." : "No gangs: a PodGroup (scheduling.x-k8s.io, Volcano's, KAI's or the Workload API's) and pods that name it make one.";
      tbody.replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "empty", text: none })));
    } else {
      tbody.replaceChildren(...d.gangs.map((g) => el("tr", { "data-gang": g.gang, "data-dialect": g.dialect, "data-members": g.members, "data-min": g.min_member, "data-placed": g.placed },
        el("td", {}, el("b", { text: g.gang }), " ", badge(g.phase, g.phase === "Scheduled" ? "Bound" : g.phase === "Pending" ? "Gated" : "Active")),
        el("td", { class: `num ${g.members < g.min_member ? "short" : ""}`, text: `${g.members} / ${g.min_member}` }),
        el("td", { class: "num", text: g.placed }),
        el("td", { class: "num", text: g.pending }),
        el("td", { class: "where" }, g.where.length
          ? el("ul", {}, ...g.where.map((w) => el("li", { "data-phase": w.phase }, badge(w.phase), " ", whereText(w))))
          : el("span", { class: "yes", text: "all bound" })))));
    }
    pager($("#gangs-pager"), d.total, gangs, refreshGangs);
    root.dataset.gangsReady = String(d.total);
  }, "#gangs-pager");

  let gangTimer = 0;
  $("#g-text").addEventListener("input", () => { clearTimeout(gangTimer); gangTimer = setTimeout(() => { gangs.offset = 0; refreshGangs(); }, 200); });

  // ------------------------------------------------------------ a pod's page

  const podState = { key: "", offset: 0, limit: 50, show: "all" };

  const refreshPod = coalesced(async () => {
    const key = podState.key;
    if (!key) return;
    const q = new URLSearchParams({ offset: podState.offset, limit: podState.limit, show: podState.show });
    let d;
    try {
      d = await getJSON(`api/pods/${key.split("/").map(encodeURIComponent).join("/")}?${q}`);
    } catch (e) {
      $("#pod-title").textContent = key;
      say($("#pod-blockers"), e.message, "error");
      $("#explain-card").hidden = true;
      root.dataset.podReady = key;
      return;
    }
    const w = d.why, row = d.row || {};
    $("#pod-title").textContent = d.pod;
    $("#pod-phase").replaceChildren(badge(w.phase));
    $("#pod-summary").textContent = w.summary;
    const facts = [["queue", w.queue || "–"], ["position", w.position || "–"], ["node", w.node || "–"],
      ["nominated", row.nominated_node || "–"], ["attempts", row.attempts ?? "–"], ["age", age(row.age) || "–"],
      ["priority", row.priority ?? "–"],
      ["requests", byResource(Object.keys(row.requests || {})).map((r) => `${r} ${qty(r, row.requests[r])}`).join(", ") || "–"]];
    $("#pod-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })]));
    const bl = $("#pod-blockers");
    if (!w.blockers.length) say(bl, "Nothing blocks it.");
    else bl.replaceChildren(...w.blockers.map((b) => el("li", { "data-kind": b.kind }, badge(b.kind), " ", b.message,
      b.unblocks_when ? el("span", { class: "unblock", text: `→ ${b.unblocks_when}` }) : "")));
    $("#pod-closest").replaceChildren(...(w.closest_nodes.length ? [el("h3", { text: "Closest nodes" }),
      el("ul", {}, ...w.closest_nodes.map(([n, lack]) => el("li", {}, el("b", { text: n }), ` lacks ${lack}`)))] : []));
    const e = d.explain;
    $("#explain-card").hidden = !e;
    if (e) {
      $("#explain-count").textContent = `${e.feasible_nodes} of ${e.total_nodes} fit`;
      $("#explain-summary").textContent = e.summary;
      const head = ["node", "fits", "score", ...e.plugins, "reasons"];
      $("#explain thead").replaceChildren(el("tr", {}, ...head.map((h, i) => el("th", { class: i >= 2 && i < head.length - 1 ? "num" : "", text: h }))));
      const tb = $("#explain tbody");
      if (!e.nodes.length) tb.replaceChildren(el("tr", {}, el("td", { colspan: head.length, class: "empty", text: "No nodes." })));
      else tb.replaceChildren(...e.nodes.map((n) => el("tr", { "data-node": n.node },
        el("td", { text: n.node }),
        el("td", {}, el("span", { class: n.feasible ? "yes" : "no", text: n.feasible ? "✓" : "✗" })),
        el("td", { class: "num", text: n.feasible ? n.score : "" }),
        ...e.plugins.map((p) => el("td", { class: "num", "data-plugin": p, text: n.plugin_scores[p] ?? "" })),
        el("td", { class: "reasons", text: n.reasons.map((r) => `${r.plugin}: ${r.reason}`).join("; ") }))));
      pager($("#explain-pager"), e.total, podState, refreshPod);
    }
    root.dataset.podReady = key;
  });

  for (const b of document.querySelectorAll("#explain-show button")) {
    b.addEventListener("click", () => {
      podState.show = b.dataset.show;
      podState.offset = 0;
      for (const o of document.querySelectorAll("#explain-show button")) o.classList.toggle("on", o === b);
      refreshPod();
    });
  }

  // ------------------------------------------------------------ header counters

  const counters = { nodes: null, pending: null, bound: null, queues: null };
  const PENDING = new Set(["Gated", "Active", "Backoff", "Unschedulable", "WaitingOnPermit", "Rejected"]);
  function drawCounters() {
    const items = [["nodes", "nodes"], ["pending", "pending"], ["bound", "placed"], ["queues", "queues"]];
    $("#counters").replaceChildren(...items.filter(([k]) => counters[k] !== null)
      .map(([k, label]) => el("span", { "data-counter": k }, el("b", { text: counters[k] }), label)));
  }

  // ------------------------------------------------------------ live decisions

  const MAX_DECISIONS = 200;
  const decisionBuffer = [];
  let decisionFrame = 0;
  function hhmmss(ms) { const d = new Date(ms || Date.now()); return d.toTimeString().slice(0, 8); }

  // One row per pod: its latest decision, the kinds before it as a trail
  // (Queued › Assumed › Bound), moved to the top when it changes.
  const decisionRows = new Map(); // pod -> { li, trail }
  const TRAIL = 6;
  const FLASH = [{ background: "#fff7cc" }, { background: "transparent" }];

  function flushDecisions() {
    decisionFrame = 0;
    if ($("#decisions-pause").checked) return;
    const list = $("#decisions");
    const latest = new Map(); // pod -> its newest decision of this batch, in the order they came
    for (const d of decisionBuffer.splice(0)) {
      let row = decisionRows.get(d.pod);
      if (!row) { row = { li: el("li", { "data-pod": d.pod }), trail: [] }; decisionRows.set(d.pod, row); }
      row.trail.push(d.kind);
      if (row.trail.length > TRAIL) row.trail.shift();
      latest.delete(d.pod);
      latest.set(d.pod, d);
    }
    const items = [...latest.values()].reverse().map((d) => {
      const { li, trail } = decisionRows.get(d.pod);
      li.dataset.kind = d.kind;
      li.dataset.decisions = String(trail.length);
      li.replaceChildren(
        el("span", { class: "muted", text: hhmmss(d.time) }), el("span", {}, badge(d.kind)),
        el("span", {}, podLink(d.pod), d.node ? ` → ${d.node}` : ""),
        el("span", { class: "msg", title: d.message || "", text: [trail.slice(0, -1).join(" › "), d.message].filter(Boolean).join(" · ") }));
      li.animate(FLASH, 1200); // new or changed: highlighted a moment
      return li;
    });
    list.prepend(...items);
    while (list.children.length > MAX_DECISIONS) {
      decisionRows.delete(list.lastElementChild.dataset.pod);
      list.lastElementChild.remove();
    }
    root.dataset.decisions = String(list.children.length);
  }

  // While decisions stream in, the overview refreshes at most every 1.5 s,
  // and never more often than twice the time its last refresh took: a
  // large cluster's pages (each pending pod's why) cost the server more.
  let refreshTimer = 0, lastRefresh = 0, lastCost = 0;
  function scheduleRefresh(podKey) {
    if (podState.key && podKey === podState.key) refreshPod();
    if (refreshTimer) return;
    const wait = Math.max(0, Math.max(1500, 2 * lastCost) - (Date.now() - lastRefresh));
    refreshTimer = setTimeout(async () => {
      refreshTimer = 0;
      lastRefresh = Date.now();
      await refreshAll();
      lastCost = Date.now() - lastRefresh;
    }, wait);
  }

  let events = null;
  function connect() {
    const live = $("#live");
    if (events) events.close();
    const es = events = new EventSource("api/decisions");
    es.onopen = () => { live.textContent = "live"; live.className = "live on"; };
    es.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
    es.addEventListener("decision", (ev) => {
      const d = JSON.parse(ev.data);
      decisionBuffer.push(d);
      if (decisionBuffer.length > MAX_DECISIONS * 2) decisionBuffer.splice(0, decisionBuffer.length - MAX_DECISIONS);
      if (!decisionFrame) decisionFrame = requestAnimationFrame(flushDecisions);
      scheduleRefresh(d.pod);
    });
  }

  // ------------------------------------------------------------ views

  async function refreshAll() {
    if (signedIn && !$("#overview").hidden) await Promise.all([refreshNodes(), refreshQueues(), refreshPods(), refreshGangs()]);
  }

  function route() {
    if (!signedIn) return;
    const m = location.hash.match(/^#\/pod\/([^/]+)\/(.+)$/);
    if (m) {
      $("#overview").hidden = true;
      $("#podview").hidden = false;
      const key = `${decodeURIComponent(m[1])}/${decodeURIComponent(m[2])}`;
      if (key !== podState.key) Object.assign(podState, { key, offset: 0 });
      delete root.dataset.podReady;
      refreshPod();
      window.scrollTo(0, 0);
    } else {
      podState.key = "";
      $("#podview").hidden = true;
      $("#overview").hidden = false;
      refreshAll();
    }
  }

  // ------------------------------------------------------------ signing in

  // With a Kubernetes authority (or ui.auth.tokenFile) every api/ call needs
  // a caller: a 401 shows this form; signing in sets an HttpOnly session
  // cookie (the page never holds the token after the POST).
  let signedIn = false;
  function showSignIn() {
    signedIn = false;
    if (events) { events.close(); events = null; }
    $("#overview").hidden = true;
    $("#podview").hidden = true;
    $("#signin").hidden = false;
    $("#signout").hidden = true;
    $("#who").textContent = "";
    root.dataset.signin = "";
    $("#signin-token").focus();
  }

  async function start() {
    let me;
    try { me = await getJSON("api/whoami"); } catch (e) { if (!(e instanceof HttpError && e.status === 401)) console.error(e); return; }
    signedIn = true;
    delete root.dataset.signin;
    $("#signin").hidden = true;
    $("#who").textContent = me.open ? "" : `signed in as ${me.user}`;
    $("#signout").hidden = me.open;
    route();
    connect();
  }

  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("#signin-token"), err = $("#signin-error");
    err.textContent = "";
    try {
      await postJSON("api/login", { token: input.value.trim() });
    } catch (e) {
      err.textContent = e.message;
      return;
    } finally {
      input.value = "";
    }
    await start();
  });

  $("#signout").addEventListener("click", async () => {
    try { await postJSON("api/logout", {}); } catch (e) { console.error(e); }
    showSignIn();
  });

  $("#pod-filters").addEventListener("submit", (ev) => ev.preventDefault());
  window.addEventListener("hashchange", route);
  drawCounters();
  start();
  setInterval(refreshAll, 15000); // what decisions do not announce (nodes joining, queues reloaded)
})();
