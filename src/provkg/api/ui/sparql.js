// SPARQL editor: highlighted text, provkg's prefixes declared, results as a table; the
// endpoint's read-only guard and time limit answer as for any client, shown inline.
import { errorText, getJSON, h, message, setState, table } from "./lib.js";

const KEYWORDS = /\b(SELECT|ASK|CONSTRUCT|DESCRIBE|WHERE|PREFIX|BASE|FILTER|OPTIONAL|UNION|MINUS|GRAPH|SERVICE|BIND|VALUES|AS|DISTINCT|REDUCED|ORDER|BY|GROUP|HAVING|LIMIT|OFFSET|ASC|DESC|NOT|EXISTS|IN|COUNT|SUM|MIN|MAX|AVG|SAMPLE|GROUP_CONCAT|FROM|NAMED|INSERT|DELETE|DATA|LOAD|CLEAR|DROP|CREATE|WITH|USING|a)\b/g;
const TOKENS = /(#[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(<[^<>"{}|^`\\\s]*>)|([?$][A-Za-z_][\w]*)|([A-Za-z][\w-]*:[\w-]*)|(\b\d+(?:\.\d+)?\b)/g;

/** Highlighted copy of the query as DOM nodes (text only: a query is user text too). */
export function highlight(text) {
  const out = [];
  let at = 0;
  const plain = (chunk) => {
    let last = 0;
    for (const m of chunk.matchAll(KEYWORDS)) {
      out.push(chunk.slice(last, m.index), h("span", { class: "kw" }, m[0]));
      last = m.index + m[0].length;
    }
    out.push(chunk.slice(last));
  };
  for (const m of text.matchAll(TOKENS)) {
    plain(text.slice(at, m.index));
    const cls = m[1] ? "comment" : m[2] ? "str" : m[3] ? "iri" : m[4] ? "var" : m[5] ? "pname" : "num";
    out.push(h("span", { class: cls }, m[0]));
    at = m.index + m[0].length;
  }
  plain(text.slice(at));
  out.push("\n");
  return out;
}

function bindingsTable(json) {
  const vars = json.head.vars || [];
  const rows = json.results.bindings.map((b) => vars.map((v) => (b[v] ? b[v].value : null)));
  return table(vars, rows);
}

export function render(main, params) {
  const area = h("textarea", { id: "sparql-text", spellcheck: "false", "aria-label": "SPARQL query", rows: 14 });
  const shade = h("pre", { class: "hl", "aria-hidden": "true" });
  const out = h("div", { id: "sparql-result" });
  const runButton = h("button", { type: "button", id: "sparql-run" }, "Run (Ctrl+Enter)");
  main.replaceChildren(h("h1", {}, "SPARQL"),
    h("p", { class: "muted" }, "Read-only SPARQL 1.1 on this server's store (POST /v1/sparql): updates are refused, queries have the server's time limit."),
    h("div", { class: "editor" }, shade, area), h("div", { class: "toolbar" }, runButton), out);
  const sync = () => { shade.replaceChildren(...highlight(area.value)); shade.scrollTop = area.scrollTop; };
  area.addEventListener("input", () => { sync(); setState("sparql", { q: area.value }); });
  area.addEventListener("scroll", () => { shade.scrollTop = area.scrollTop; shade.scrollLeft = area.scrollLeft; });
  const run = async () => {
    out.replaceChildren(h("p", { class: "muted" }, "Running…"));
    const started = performance.now();
    try {
      const response = await fetch("/v1/sparql", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/sparql-results+json, text/turtle;q=0.9" },
        body: new URLSearchParams({ query: area.value }),
      });
      const type = response.headers.get("content-type") || "";
      if (!response.ok) {
        let detail = await response.text();
        try { const j = JSON.parse(detail); detail = j.detail || j.error || detail; } catch { /* text as sent */ }
        out.replaceChildren(message("error", `${response.status}: ${detail}`));
        return;
      }
      const ms = `${(performance.now() - started).toFixed(0)} ms`;
      if (type.includes("json")) {
        const json = await response.json();
        if ("boolean" in json) out.replaceChildren(h("p", { id: "sparql-boolean" }, `ASK: ${json.boolean} (${ms})`));
        else out.replaceChildren(h("p", { class: "muted", id: "sparql-count" }, `${json.results.bindings.length} rows in ${ms}`), bindingsTable(json));
      } else {
        out.replaceChildren(h("p", { class: "muted" }, ms), h("pre", { class: "sparql" }, await response.text()));
      }
    } catch (err) {
      out.replaceChildren(message("error", errorText(err)));
    }
  };
  runButton.addEventListener("click", run);
  area.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(); } });
  (async () => {
    let text = params.get("q");
    if (text === null) {
      const prefixes = await getJSON("/ui/prefixes.json").catch(() => ({}));
      text = Object.entries(prefixes).map(([p, ns]) => `PREFIX ${p}: <${ns}>`).join("\n")
        + "\n\nSELECT ?training ?started WHERE {\n  ?training a provml:TrainingExecution ; prov:startedAtTime ?started .\n} LIMIT 20\n";
    }
    area.value = text;
    sync();
  })();
  return () => {};
}
