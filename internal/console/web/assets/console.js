// fleetnet console: a read-only view of the fleet. Each page is a function
// of one JSON view of the server; the server's event stream says when the
// model changed, and the page shown fetches its view again. Nothing from
// the fleet is ever put into the page as HTML: every text goes through
// text nodes (h() below), so a Service name or a condition message can't
// inject markup.
"use strict";

const PAGE = 50;
const state = { route: null, fetching: false, again: false, query: "", offset: 0, revision: 0 };

// h builds an element: h("td", {class: "x", dataset: {cluster: "west"}}, "text", child…)
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "dataset") Object.assign(el.dataset, v);
    // Through the CSSOM: the page's policy forbids style attributes.
    else if (k === "width") el.style.width = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "services" && parts.length === 3) return { page: "service", namespace: parts[1], name: parts[2] };
  if (parts[0] === "services") return { page: "services" };
  if (parts[0] === "entrypoints") return { page: "entrypoints" };
  return { page: "fleet" };
}

async function getJSON(url) {
  const resp = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await resp.json().catch(() => ({ error: resp.statusText }));
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

// refresh fetches the shown page's view and draws it; a change that comes
// while a fetch runs is fetched after it.
async function refresh() {
  if (state.fetching) { state.again = true; return; }
  state.fetching = true;
  try {
    do {
      state.again = false;
      const r = route();
      const view = await load(r);
      if (JSON.stringify(r) !== JSON.stringify(route())) { state.again = true; continue; }
      draw(r, view);
    } while (state.again);
  } catch (err) {
    showError(err);
  } finally {
    state.fetching = false;
  }
}

function load(r) {
  switch (r.page) {
    case "service": return getJSON(`/api/services/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}`);
    case "services": return getJSON(`/api/services?q=${encodeURIComponent(state.query)}&offset=${state.offset}&limit=${PAGE}`);
    case "entrypoints": return getJSON("/api/entrypoints");
    default: return getJSON("/api/fleet");
  }
}

function draw(r, view) {
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.nav === (r.page === "service" ? "services" : r.page)));
  state.revision = view.revision;
  document.body.dataset.revision = view.revision;
  const main = document.getElementById("main");
  let content;
  switch (r.page) {
    case "service": content = servicePage(view); break;
    case "services": content = servicesPage(view); break;
    case "entrypoints": content = entryPointsPage(view); break;
    default: content = fleetPage(view);
  }
  // The search box keeps its focus and caret across redraws.
  const search = document.getElementById("search");
  const focused = search && document.activeElement === search;
  const caret = focused ? search.selectionStart : 0;
  main.replaceChildren(content);
  if (view.feeds) drawFeeds(view.feeds);
  if (focused) {
    const s = document.getElementById("search");
    s.focus();
    s.setSelectionRange(caret, caret);
  }
}

function showError(err) {
  const main = document.getElementById("main");
  main.replaceChildren(h("section", { class: "card error", role: "alert" }, h("h2", {}, "The console could not load this page"), h("p", {}, err.message)));
}

function drawFeeds(feeds) {
  const names = { registry: "registry", hub: "hub", edge: "edges" };
  document.getElementById("feeds").replaceChildren(...Object.keys(names).map(k => {
    const f = feeds[k] || {};
    const cls = f.error ? "bad" : f.synced ? "ok" : "wait";
    const title = f.error ? `${names[k]}: ${f.error}` : f.synced ? `${names[k]}: up to date` : `${names[k]}: waiting for a first answer`;
    return h("span", { class: `feed ${cls}`, title, dataset: { feed: k } }, names[k]);
  }));
}

function ago(seconds) {
  const s = Math.abs(seconds);
  const t = s < 90 ? `${Math.round(s)}s` : s < 5400 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  return t;
}

function stat(label, value, cls) {
  return h("div", { class: `stat ${cls || ""}` }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

// ---- the fleet page

function fleetPage(v) {
  const regions = v.regions || [];
  return h("div", { class: "page" },
    h("h1", {}, "Fleet"),
    h("div", { class: "stats" },
      stat("clusters live", `${v.live} / ${v.clusters}`, v.live < v.clusters ? "warn" : ""),
      stat("services", v.services.toLocaleString()),
      stat("services in conflict", v.conflicts, v.conflicts ? "bad" : "")),
    regions.length === 0 ? h("p", { class: "empty" }, "No cluster has registered with the registry yet.") : null,
    // Small regions sit side by side; a region of many clusters takes the row.
    h("div", { class: "regions" }, regions.map(r => h("section", { class: `region ${r.clusters.length <= 3 ? "small" : ""}`, dataset: { region: r.name } },
      h("h2", {}, r.name ? `Region ${r.name}` : "No region"),
      h("div", { class: "clusters" }, r.clusters.map(clusterCard))))));
}

function clusterCard(c) {
  const lease = c.since
    ? `${c.live ? "live" : "lease expired"} for ${ago(c.seconds)}`
    : c.live ? "lease live" : "lease expired";
  return h("a", { class: `cluster card ${c.live ? "" : "down"}`, href: `#/services`, dataset: { cluster: c.id, live: String(c.live) },
    onclick: () => { state.query = `cluster:${c.id}`; state.offset = 0; } },
    h("div", { class: "name" }, c.id, h("span", { class: `badge ${c.live ? "ok" : "bad"}` }, c.live ? "live" : "down")),
    h("div", { class: "lease" }, lease),
    h("dl", {},
      h("dt", {}, "network"), h("dd", { class: "network" }, c.network || "default"),
      h("dt", {}, "east-west gateway"), h("dd", { class: "gateway" }, c.eastWestGateway || "none"),
      h("dt", {}, "agent"), h("dd", { class: "agent-version" }, c.agentVersion || "unknown"),
      h("dt", {}, "exports"), h("dd", {}, c.exports),
      h("dt", {}, "imports"), h("dd", {}, c.imports),
      h("dt", {}, "conflicts"), h("dd", { class: c.conflicts ? "bad" : "" }, c.conflicts)));
}

// ---- the services list

let searchTimer;
function servicesPage(v) {
  const search = h("input", {
    id: "search", type: "search", placeholder: "Search: name, cluster:ID, is:conflict", value: state.query, "aria-label": "search services",
    oninput: e => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => { state.query = e.target.value; state.offset = 0; refresh(); }, 200);
    },
  });
  const from = v.total ? v.offset + 1 : 0, to = v.offset + v.items.length;
  const pager = h("div", { class: "pager" },
    h("button", { disabled: v.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - PAGE); refresh(); } }, "‹ previous"),
    h("span", { class: "range", id: "range" }, `${from.toLocaleString()}–${to.toLocaleString()} of ${v.total.toLocaleString()}`),
    h("button", { disabled: to >= v.total, onclick: () => { state.offset += PAGE; refresh(); } }, "next ›"));
  const rows = v.items.map(s => h("tr", { dataset: { service: `${s.namespace}/${s.name}` }, class: s.conflicts ? "conflict" : "" },
    h("td", {}, h("a", { href: `#/services/${encodeURIComponent(s.namespace)}/${encodeURIComponent(s.name)}` }, h("span", { class: "ns" }, `${s.namespace}/`), s.name)),
    h("td", {}, s.type || "—"),
    h("td", { class: "exporters" }, s.exporters.map(e => h("span", {
      class: `badge ${e.inImport ? "ok" : "off"}`, dataset: { exporter: e.cluster, inImport: String(e.inImport) },
      title: e.inImport ? `${e.cluster}: ${e.ready} ready endpoints in the import` : `${e.cluster}: exports it, but is not in the import (lease expired, not participating or in conflict)`,
    }, e.cluster))),
    h("td", { class: "num" }, s.ready),
    h("td", { class: "num" }, s.sentTo),
    h("td", { class: "conflicts" }, s.conflicts ? h("span", { class: "bad", title: s.firstConflict }, s.firstConflict) : "")));
  return h("div", { class: "page" },
    h("h1", {}, "Services"),
    h("div", { class: "toolbar" }, search, pager),
    h("table", { class: "services" },
      h("thead", {}, h("tr", {}, ["Service", "Type", "Exporting clusters", "Ready endpoints", "Sent to clusters", "Conflict"].map(t => h("th", {}, t)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, class: "empty" }, v.total ? "" : "No service matches.")))));
}

// ---- one service

function servicePage(v) {
  const title = h("h1", {}, h("a", { href: "#/services", class: "back" }, "Services"), " / ", `${v.namespace}/${v.name}`);
  if (!v.found) return h("div", { class: "page" }, title, h("p", { class: "empty" }, "No cluster exports this service."));
  return h("div", { class: "page service", dataset: { service: `${v.namespace}/${v.name}` } }, title,
    h("div", { class: "stats" },
      stat("type", v.type || "—"),
      stat("ports", v.ports.join(", ") || "—"),
      // A handful of clusters by name; more as a count, named in the title.
      h("div", { class: "stat", title: v.sentTo.join(", ") },
        h("div", { class: "value" }, v.sentTo.length === 0 ? "no cluster" : v.sentTo.length <= 4 ? v.sentTo.join(", ") : `${v.sentTo.length} clusters`),
        h("div", { class: "label" }, v.scope ? "sent to (its scope)" : "sent to")),
      v.scope ? stat("export scope", v.scope.join(", ")) : null),
    v.conflicts.length ? h("section", { class: "card error conflicts" }, h("h2", {}, "Conflicts"),
      h("ul", {}, v.conflicts.map(c => h("li", { dataset: { reason: c.reason } }, h("b", {}, c.reason), ": ", c.message)))) : null,
    h("h2", {}, "Exporting clusters"),
    h("table", { class: "exporting" },
      h("thead", {}, h("tr", {}, ["Cluster", "Region", "Lease", "Participating", "In the import", "Weight", "Ready endpoints", "Conflicts"].map(t => h("th", {}, t)))),
      h("tbody", {}, v.clusters.map(c => h("tr", { dataset: { cluster: c.id, inImport: String(c.inImport) }, class: c.inImport ? "" : "out" },
        h("td", {}, c.id), h("td", {}, c.region || "—"),
        h("td", {}, h("span", { class: `badge ${c.live ? "ok" : "bad"}` }, c.live ? "live" : "expired")),
        h("td", {}, c.participating ? "yes" : "no"),
        h("td", {}, c.inImport ? "yes" : "no"),
        h("td", { class: "num" }, c.weight),
        h("td", { class: "num" }, `${c.ready} / ${c.endpoints}`),
        h("td", { class: "conflicts" }, c.conflicts.map(x => h("div", { class: "bad" }, `${x.reason}: ${x.message}`))))))));
}

// ---- entry points

function conditionBadges(conds) {
  // A policy's own condition and its ancestors' often say the same: one
  // badge each, the title names every parent.
  const seen = new Map();
  for (const c of conds || []) {
    const k = `${c.type}/${c.status}/${c.reason}`;
    const prev = seen.get(k);
    if (prev) prev.parent = [prev.parent, c.parent].filter(Boolean).join(", ");
    else seen.set(k, { ...c });
  }
  return [...seen.values()].map(c => h("span", {
    class: `badge ${c.status === "True" ? "ok" : "bad"}`, title: `${c.parent ? c.parent + ": " : ""}${c.type} ${c.status} ${c.reason}${c.message ? ": " + c.message : ""}`,
    dataset: { condition: c.type, status: c.status },
  }, `${c.type}${c.status === "True" ? "" : ": " + c.reason}`));
}

function pct(x) { return x < 0 ? "—" : `${Math.round(x * 100)}%`; }

// splitBar draws the configured shares above the live ones, one segment
// per cluster, colored by cluster.
function splitBar(splits, what) {
  const colors = new Map();
  splits.forEach((s, i) => colors.set(s.cluster, `c${i % 8}`));
  const bar = (key) => h("div", { class: "bar", dataset: { bar: key } }, splits.filter(s => (key === "live" ? s.live : s.share) > 0).map(s =>
    h("div", { class: `seg ${colors.get(s.cluster)}`, width: `${((key === "live" ? s.live : s.share) * 100).toFixed(1)}%`, title: `${s.cluster}: ${pct(key === "live" ? s.live : s.share)}` }, s.cluster)));
  return h("div", { class: "split" },
    h("div", { class: "barlabel" }, "configured"), bar("share"),
    h("div", { class: "barlabel" }, "live"), splits.some(s => s.live > 0) ? bar("live") : h("div", { class: "bar none" }, `no ${what} in the last interval`),
    h("table", { class: "splits" },
      h("thead", {}, h("tr", {}, ["Cluster", "Region", "State", "Weight", "Ready", "Healthy / ejected at the edge", "Configured", "Live", `${what}/s`, what === "requests" ? "5xx/s" : null].filter(Boolean).map(t => h("th", {}, t)))),
      h("tbody", {}, splits.map(s => h("tr", { dataset: { cluster: s.cluster, state: s.state, share: s.share.toFixed(3), live: s.live.toFixed(3) } },
        h("td", {}, h("span", { class: `dot ${colors.get(s.cluster)}` }), s.cluster), h("td", {}, s.region || "—"),
        h("td", {}, h("span", { class: `badge ${s.state === "Healthy" ? "ok" : s.state === "Draining" ? "warn" : "bad"}` }, s.state)),
        h("td", { class: "num" }, s.weight), h("td", { class: "num" }, s.ready),
        h("td", { class: "num" }, s.healthy < 0 ? "—" : `${s.healthy} / ${s.ejected}`),
        h("td", { class: "num" }, pct(s.share)), h("td", { class: "num" }, pct(s.live)), h("td", { class: "num" }, s.rate.toFixed(1)),
        what === "requests" ? h("td", { class: `num ${s.errors > 0 ? "bad" : ""}` }, s.errors.toFixed(1)) : null)))));
}

function entryPointsPage(v) {
  return h("div", { class: "page" },
    h("h1", {}, "Entry points"),
    h("h2", {}, "Gateways"),
    v.gateways.length === 0 ? h("p", { class: "empty" }, "No Gateway on the hub.") :
      h("table", {}, h("thead", {}, h("tr", {}, ["Gateway", "Class", "Addresses", "Listeners", "Status"].map(t => h("th", {}, t)))),
        h("tbody", {}, v.gateways.map(g => h("tr", { dataset: { gateway: `${g.namespace}/${g.name}` } },
          h("td", {}, `${g.namespace}/${g.name}`), h("td", {}, g.class), h("td", {}, g.addresses.join(", ") || "—"),
          h("td", {}, g.listeners.map(l => h("div", {}, `${l.name}: ${l.protocol} ${l.port}${l.hostname ? " " + l.hostname : ""} (${l.attachedRoutes} routes)`))),
          h("td", {}, conditionBadges(g.conditions)))))),
    h("h2", {}, "HTTP routes"),
    v.routes.length === 0 ? h("p", { class: "empty" }, "No HTTPRoute on the hub.") :
      v.routes.map(r => h("section", { class: "card route", dataset: { route: `${r.namespace}/${r.name}` } },
        h("h3", {}, `${r.namespace}/${r.name}`, " ", conditionBadges(r.conditions)),
        h("div", { class: "meta" }, `parents ${r.parents.join(", ")}`, r.hostnames ? ` · hosts ${r.hostnames.join(", ")}` : ""),
        r.ruleSplits.map(rs => h("div", { class: "rule", dataset: { rule: rs.rule } },
          h("div", { class: "meta" }, `rule ${rs.rule} · ${rs.requestsPerSecond.toFixed(1)} requests/s`),
          rs.backends.map(b => h("div", { class: "backend", dataset: { backend: `${b.kind}/${b.namespace}/${b.name}` } },
            h("div", { class: "meta" }, `${b.kind} ${b.namespace}/${b.name}${b.port ? ":" + b.port : ""} · weight ${b.weight}`),
            b.clusters.length ? splitBar(b.clusters, "requests") : h("p", { class: "empty" }, b.kind === "ServiceImport" ? "No cluster exports it." : "Not a ServiceImport."))))))),
    h("h2", {}, "Load balancers"),
    v.loadBalancers.length === 0 ? h("p", { class: "empty" }, "No MultiClusterLoadBalancer on the hub.") :
      v.loadBalancers.map(lb => h("section", { class: "card loadbalancer", dataset: { loadbalancer: `${lb.namespace}/${lb.name}` } },
        h("h3", {}, `${lb.namespace}/${lb.name}`, " ", conditionBadges(lb.conditions)),
        h("div", { class: "meta" }, `${lb.backend} · ${lb.ports || "no port"} · ${(lb.addresses || []).join(", ") || "no address"} · ${lb.connectionsPerSecond.toFixed(1)} connections/s`),
        lb.split.length ? splitBar(lb.split, "connections") : h("p", { class: "empty" }, "No cluster behind it."))),
    h("h2", {}, "Backend traffic policies"),
    v.policies.length === 0 ? h("p", { class: "empty" }, "No BackendTrafficPolicy on the hub.") :
      h("table", {}, h("thead", {}, h("tr", {}, ["Policy", "Targets", "Locality", "Failover", "Status"].map(t => h("th", {}, t)))),
        h("tbody", {}, v.policies.map(p => h("tr", { dataset: { policy: `${p.namespace}/${p.name}` } },
          h("td", {}, `${p.namespace}/${p.name}`), h("td", {}, p.targets.join(", ")), h("td", {}, p.locality || "—"),
          h("td", {}, (p.failover || []).join(" → ") || "—"), h("td", {}, conditionBadges(p.conditions)))))));
}

// ---- live updates

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("/api/events");
  es.addEventListener("change", e => {
    live.textContent = "live";
    live.className = "live ok";
    live.dataset.revision = e.data;
    refresh();
  });
  es.onerror = () => {
    live.textContent = "reconnecting…";
    live.className = "live bad";
  };
}

window.addEventListener("hashchange", () => { if (route().page !== "services") state.offset = 0; refresh(); });
document.addEventListener("DOMContentLoaded", () => { refresh(); connect(); });
