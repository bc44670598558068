// Lineage explorer: from a data item or model, the graph of what it came from (lineage, to
// the left) and what came from it (impact, to the right), with the activities between and
// the domain-KG resources (SEG-Y file, survey, basin, field) it denotes.
import {
  BASE, canned, errorText, formatValue, h, link, looksLikeIRI, message, records, s, setState, setStatus, short,
} from "./lib.js";

const COLUMN_LIMIT = 40; // nodes drawn per column before the rest is grouped (and says so)
const KG_HOPS = 2; // domain-KG links followed from a resource the data denotes
const KG_LINKS = 12; // per KG resource
const RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
const LABEL = "http://www.w3.org/2000/01/rdf-schema#label";

function localName(iri) {
  const m = String(iri).match(/[#/]([^#/]+)\/?$/);
  return m ? m[1] : String(iri);
}

function nodeLabel(id) {
  const text = short(id);
  if (/^[a-z]+:\/\//i.test(text)) return text.replace(/\/+$/, "").split("/").pop() || text;
  const param = text.match(/\/(used|generated)\/([^/]+)$/); // a task's named value
  return param ? `${param[2]} (${param[1]})` : text;
}

function clip(text, n = 24) {
  return text.length > n ? "…" + text.slice(-(n - 1)) : text; // the end tells ids apart
}

/** The graph of lineage and impact rows: nodes with a column (negative: upstream). */
export function buildGraph(start, lineageRows, impactRows) {
  const nodes = new Map();
  const edges = new Map();
  const add = (id, kind, col) => {
    const old = nodes.get(id);
    if (!old) nodes.set(id, { id, kind, col, label: nodeLabel(id) });
    else if (Math.abs(col) < Math.abs(old.col)) old.col = col;
    return id;
  };
  const edge = (from, to, label = "") => edges.set(`${from}\u0000${to}`, { from, to, label });
  add(start, "data", 0);
  for (const r of lineageRows) {
    const kind = String(r.derived_from).startsWith(BASE) ? "data" : "kg";
    add(r.derived_from, kind, -2 * r.depth);
    add(r.data, "data", -2 * (r.depth - 1));
    if (r.activity) {
      add(r.activity, "activity", -2 * r.depth + 1);
      edge(r.derived_from, r.activity, "used");
      edge(r.activity, r.data, "generated");
    } else edge(r.derived_from, r.data, kind === "kg" ? "denoted by" : "derived");
  }
  for (const r of impactRows) {
    add(r.data, "data", 2 * (r.depth - 1));
    add(r.derived, "data", 2 * r.depth);
    if (r.activity) {
      add(r.activity, "activity", 2 * r.depth - 1);
      edge(r.data, r.activity, "used");
      edge(r.activity, r.derived, "generated");
    } else edge(r.data, r.derived, "derived");
  }
  return { nodes, edges };
}

/** Follow the KG resources' own links (file -> survey -> basin, field) a few hops. */
async function expandKG(graph, details) {
  let frontier = [...graph.nodes.values()].filter((n) => n.kind === "kg");
  // one round more than hops: the last resources reached get their labels and details too
  for (let hop = 0; hop <= KG_HOPS && frontier.length; hop++) {
    const next = [];
    await Promise.all(frontier.map(async (node) => {
      const rows = records(await canned("about", { resource: node.id }));
      details.set(node.id, rows);
      const label = rows.find((r) => r.direction === "out" && r.property === LABEL);
      if (label) node.label = String(label.value);
      if (hop === KG_HOPS) return;
      const links = rows.filter((r) => r.direction === "out" && r.property !== RDF_TYPE && looksLikeIRI(r.value)
        && !String(r.value).startsWith(BASE)).slice(0, KG_LINKS);
      for (const l of links) {
        if (!graph.nodes.has(l.value)) {
          const child = { id: l.value, kind: "kg", col: node.col - 2, label: localName(l.value) };
          graph.nodes.set(l.value, child);
          next.push(child);
        }
        graph.edges.set(`${l.value}\u0000${node.id}`, { from: l.value, to: node.id, label: localName(l.property) });
      }
    }));
    frontier = next;
  }
}

const W = 190;
const H = 30;
const GAP_X = 70;
const GAP_Y = 14;

/** Columns by distance; in each, nodes ordered by where their neighbours nearer the start
 * sit (barycentres), so edges cross less; a column over the limit is cut and grouped. */
function layout(graph, expanded) {
  const columns = new Map();
  for (const n of graph.nodes.values()) (columns.get(n.col) || columns.set(n.col, []).get(n.col)).push(n);
  const neighbours = new Map();
  for (const e of graph.edges.values()) {
    (neighbours.get(e.from) || neighbours.set(e.from, []).get(e.from)).push(e.to);
    (neighbours.get(e.to) || neighbours.set(e.to, []).get(e.to)).push(e.from);
  }
  const rank = new Map();
  const byDistance = [...columns.keys()].sort((a, b) => Math.abs(a) - Math.abs(b) || a - b);
  for (const c of byDistance) {
    const centre = (n) => {
      const known = (neighbours.get(n.id) || []).filter((id) => rank.has(id)).map((id) => rank.get(id));
      return known.length ? known.reduce((a, b) => a + b, 0) / known.length : Infinity;
    };
    const list = columns.get(c).map((n) => [centre(n), n])
      .sort((a, b) => a[0] - b[0] || a[1].kind.localeCompare(b[1].kind) || a[1].label.localeCompare(b[1].label))
      .map(([, n]) => n);
    list.forEach((n, i) => rank.set(n.id, i));
    columns.set(c, list);
  }
  const cols = [...columns.keys()].sort((a, b) => a - b);
  const placed = new Map();
  const groups = [];
  let rows = 1;
  cols.forEach((c, ci) => {
    const list = columns.get(c);
    const limit = expanded.has(c) ? Infinity : COLUMN_LIMIT;
    const x = 20 + ci * (W + GAP_X);
    list.slice(0, limit).forEach((n, i) => placed.set(n.id, { ...n, x, y: 20 + i * (H + GAP_Y) }));
    rows = Math.max(rows, Math.min(list.length, limit) + (list.length > limit ? 1 : 0));
    if (list.length > limit) groups.push({ col: c, hidden: list.length - limit, x, y: 20 + limit * (H + GAP_Y) });
  });
  return { placed, groups, width: 40 + cols.length * (W + GAP_X), rows };
}

export function render(main, params) {
  const start = params.get("data") || "";
  const depth = Math.max(1, Math.min(10, Number(params.get("depth")) || 3));
  const expanded = new Set(params.getAll("all").map(Number));
  const save = () => setState("lineage", { data: start, depth, all: [...expanded] });
  const picker = h("select", { id: "lineage-pick", "aria-label": "data item or model" });
  const input = h("input", { id: "lineage-data", type: "text", value: start, size: 60, placeholder: "a value id, location URI or IRI" });
  const go = h("button", { type: "button", id: "lineage-go" }, "Show");
  const canvas = h("div", { class: "graph-wrap", id: "lineage-graph" });
  const side = h("aside", { class: "details", id: "lineage-details" }, h("p", { class: "muted" }, "Click a node for its details."));
  const notes = h("div", { class: "notes" });
  main.replaceChildren(h("h1", {}, "Lineage"),
    h("div", { class: "toolbar" }, h("label", {}, "Pick ", picker), h("label", {}, "or ", input), go,
      h("span", {}, "Hops: "),
      h("a", { class: "button", href: link("lineage", { data: start, depth: Math.max(1, depth - 1) }), id: "hop-less" }, "−"),
      h("span", { id: "hop-depth" }, String(depth)),
      h("a", { class: "button", href: link("lineage", { data: start, depth: Math.min(10, depth + 1) }), id: "hop-more" }, "+")),
    notes, h("div", { class: "split" }, canvas, side));
  go.addEventListener("click", () => { location.hash = link("lineage", { data: input.value.trim(), depth }); });
  picker.addEventListener("change", () => { if (picker.value) location.hash = link("lineage", { data: picker.value, depth }); });

  (async () => {
    try {
      const workflows = records(await canned("workflows")).filter((w) => w.trainings > 0);
      const items = (await Promise.all(workflows.map((w) => canned("data", { workflow: w.workflow })))).flatMap(records);
      const seen = new Set();
      picker.replaceChildren(h("option", { value: "" }, "a dataset or model…"),
        ...items.filter((r) => !seen.has(r.data) && seen.add(r.data)).map((r) => h("option", { value: r.data, selected: r.data === start },
          `${r.role}: ${nodeLabel(r.data)} (${short(r.training)})`)));
    } catch (err) {
      notes.append(message("error", errorText(err)));
    }
  })();
  if (!start) {
    canvas.replaceChildren(message("info", "Pick a dataset or model, or give a value id."));
    return () => {};
  }
  const details = new Map();
  (async () => {
    try {
      canvas.replaceChildren(h("p", { class: "muted" }, "Walking the graph…"));
      const [up, down] = await Promise.all([canned("lineage", { data: start, depth }), canned("impact", { data: start, depth })]);
      // the start as the store names it (its minted IRI): the data of a first hop
      const first = [...records(up), ...records(down)].find((r) => r.depth === 1);
      const graph = buildGraph(first ? first.data : start, records(up), records(down));
      await expandKG(graph, details);
      drawGraph(graph);
      setStatus(`${graph.nodes.size} nodes, ${graph.edges.size} edges`);
    } catch (err) {
      canvas.replaceChildren(message("error", errorText(err)));
    }
  })();

  const showDetails = async (node) => {
    side.replaceChildren(h("h2", {}, node.label), h("p", {}, h("span", { class: `badge ${node.kind}` }, node.kind)),
      h("p", { class: "iri" }, node.id),
      h("p", {}, h("a", { href: link("lineage", { data: node.id, depth }) }, "lineage from here"),
        node.id.startsWith(BASE) ? [" · ", h("a", { href: "/id/" + node.id.slice(BASE.length) }, "Linked Data page")] : []));
    try {
      const rows = details.get(node.id) || records(await canned("about", { resource: node.id }));
      details.set(node.id, rows);
      side.append(h("table", { class: "data about" }, h("tbody", {}, rows.map((r) => h("tr", { class: r.direction },
        h("th", { scope: "row", title: r.property }, (r.direction === "in" ? "← " : "") + localName(r.property)),
        h("td", { title: String(r.value) }, formatValue(r.value)))))));
    } catch (err) {
      side.append(message("error", errorText(err)));
    }
  };

  function drawGraph(graph) {
    const { placed, groups, width, rows } = layout(graph, expanded);
    const height = 40 + rows * (H + GAP_Y);
    const svg = s("svg", { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "lineage graph" });
    for (const e of graph.edges.values()) {
      const a = placed.get(e.from);
      const b = placed.get(e.to);
      if (!a || !b) continue;
      const [x1, y1, x2, y2] = [a.x + W, a.y + H / 2, b.x, b.y + H / 2];
      const mid = (x1 + x2) / 2;
      svg.append(s("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, class: "edge" }, s("title", {}, e.label)));
    }
    for (const n of placed.values()) {
      const g = s("g", { class: `node ${n.kind}${n.id === start || n.col === 0 ? " start" : ""}`, transform: `translate(${n.x},${n.y})`, tabindex: 0, "data-id": n.id, "data-kind": n.kind },
        s("rect", { width: W, height: H, rx: n.kind === "activity" ? 14 : 4 }),
        s("text", { x: 8, y: H / 2 + 4 }, clip(n.label)),
        s("title", {}, `${n.kind}: ${n.id}`));
      g.addEventListener("click", () => showDetails(n));
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") showDetails(n); });
      svg.append(g);
    }
    for (const grp of groups) {
      const g = s("g", { class: "node group", transform: `translate(${grp.x},${grp.y})`, tabindex: 0 },
        s("rect", { width: W, height: H, rx: 4 }), s("text", { x: 8, y: H / 2 + 4 }, `+ ${grp.hidden} more: show all`));
      g.addEventListener("click", () => { expanded.add(grp.col); save(); drawGraph(graph); });
      svg.append(g);
    }
    const hidden = groups.reduce((t, g) => t + g.hidden, 0);
    notes.replaceChildren(h("p", { class: "muted", id: "lineage-summary" },
      `${graph.nodes.size} nodes (${[...graph.nodes.values()].filter((n) => n.kind === "kg").length} domain-KG), `
      + `${graph.edges.size} edges, ${depth} hops each way`
      + (hidden ? `; ${hidden} nodes grouped in columns of more than ${COLUMN_LIMIT}: click a group to show them` : "")));
    canvas.replaceChildren(svg);
    const origin = [...placed.values()].find((n) => n.col === 0);
    if (origin) canvas.scrollLeft = Math.max(0, origin.x - canvas.clientWidth / 2 + W / 2);
  }
  return () => {};
}
