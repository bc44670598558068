// Query console: every canned query with its question, a typed parameter form (pickers from
// the store), the result table, CSV / JSON downloads, its SPARQL and the CLI command.
import {
  canned, download, errorText, getJSON, h, link, message, queryURL, records, setState, short, table, toCSV,
} from "./lib.js";

function shellQuote(text) {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${String(text).replace(/'/g, "'\\''")}'`;
}

export function cliCommand(name, values) {
  const parts = ["provkg", "query", name];
  for (const [k, v] of Object.entries(values)) if (v !== "") parts.push("--param", shellQuote(`${k}=${v}`));
  return parts.join(" ");
}

let choices = null; // pickers: {workflow: [...], task: [...], data: [...]}, loaded once per visit

async function loadChoices() {
  const workflows = records(await canned("workflows"));
  const used = workflows.filter((w) => w.trainings > 0);
  const runs = (await Promise.all(used.map((w) => canned("runs", { workflow: w.workflow })))).flatMap(records);
  const data = (await Promise.all(used.map((w) => canned("data", { workflow: w.workflow })))).flatMap(records);
  return {
    workflow: workflows.map((w) => [w.workflow, w.workflow]),
    task: runs.map((r) => [r.training, `${short(r.training)}${r.label ? " · " + r.label : ""}`]),
    data: [...new Map(data.map((d) => [d.data, [d.data, `${d.role}: ${short(d.data)}`]])).values()],
  };
}

function field(p, value, lists) {
  const id = `param-${p.name}`;
  const attrs = { id, name: p.name, "data-param": p.name };
  let control;
  if (p.type === "stage" || p.type === "better" || (p.type === "workflow" && lists.workflow.length)) {
    const options = p.type === "stage" ? ["training", "validation", "evaluation"]
      : p.type === "better" ? ["lower", "higher"] : lists.workflow.map((w) => w[0]);
    control = h("select", attrs, !p.required ? h("option", { value: "" }, `(default: ${p.default ?? "none"})`) : null,
      options.map((o) => h("option", { value: o, selected: o === value }, o)));
  } else {
    const list = lists[p.type];
    control = h("input", {
      ...attrs, type: p.type === "int" || p.type === "float" ? "number" : "text", value: value ?? "",
      step: p.type === "float" ? "any" : null, required: p.required, size: 60, list: list ? `${id}-list` : null,
      placeholder: p.required ? p.description || p.type : `default: ${p.default ?? "none"}`,
    });
    if (list) control = [control, h("datalist", { id: `${id}-list` }, list.map(([v, label]) => h("option", { value: v }, label)))];
  }
  return h("div", { class: "field" }, h("label", { for: id }, p.name, h("span", { class: "muted" }, ` ${p.type}${p.required ? "" : ", optional"}`)),
    control, p.description ? h("small", { class: "muted" }, p.description) : null);
}

export function render(main, params) {
  const name = params.get("name") || "";
  const list = h("nav", { class: "query-list" });
  const pane = h("section", { class: "query-pane", id: "query-pane" });
  main.replaceChildren(h("h1", {}, "Queries"), h("div", { class: "split queries" }, list, pane));
  (async () => {
    try {
      const catalog = await getJSON("/v1/queries");
      list.replaceChildren(h("ul", {}, catalog.map((q) => h("li", { class: q.name === name ? "current" : null },
        h("a", { href: link("queries", { name: q.name }), title: q.question }, h("code", {}, q.name), " ", q.question)))));
      const query = catalog.find((q) => q.name === name);
      if (!query) {
        pane.replaceChildren(message("info", "Choose a query: its form, answer, SPARQL and CLI command show here."));
        return;
      }
      choices ||= await loadChoices();
      const values = Object.fromEntries(query.parameters.map((p) => [p.name, params.get(p.name) ?? ""]));
      const form = h("form", { id: "query-form" }, query.parameters.map((p) => field(p, values[p.name], choices)),
        h("button", { type: "submit", id: "query-run" }, "Run"));
      const out = h("div", { id: "query-result" });
      const extras = h("div", { class: "query-extras" });
      pane.replaceChildren(h("h2", {}, h("code", {}, query.name)), h("p", {}, query.question),
        h("p", { class: "muted" }, `columns: ${query.columns.join(", ")}`), form, extras, out);
      const current = () => Object.fromEntries([...form.querySelectorAll("[data-param]")].map((el) => [el.dataset.param, el.value.trim()]));
      const run = async () => {
        const given = current();
        setState("queries", { name, ...given });
        out.replaceChildren(h("p", { class: "muted" }, "Running…"));
        extras.replaceChildren();
        const started = performance.now();
        try {
          const answer = await canned(name, given);
          const ms = performance.now() - started;
          const sparqlBox = h("pre", { class: "sparql", id: "query-sparql", hidden: true });
          extras.replaceChildren(
            h("p", {}, "Same answer on the command line: ", h("code", { id: "query-cli" }, cliCommand(name, given))),
            h("div", { class: "toolbar" },
              h("button", { type: "button", id: "download-csv", onclick: () => download(`${name}.csv`, toCSV(answer.columns, answer.rows), "text/csv") }, "Download CSV"),
              h("button", { type: "button", id: "download-json", onclick: () => download(`${name}.json`, JSON.stringify({ columns: answer.columns, rows: answer.rows }, null, 2), "application/json") }, "Download JSON"),
              h("button", {
                type: "button", id: "show-sparql", onclick: async () => {
                  if (!sparqlBox.hidden) { sparqlBox.hidden = true; return; }
                  const response = await fetch(queryURL(name, given, "/sparql"));
                  sparqlBox.textContent = await response.text();
                  sparqlBox.hidden = false;
                },
              }, "Show SPARQL")),
            sparqlBox);
          out.replaceChildren(h("p", { class: "muted", id: "query-count" }, `${answer.rows.length} rows in ${ms.toFixed(0)} ms`),
            ...answer.notes.map((n) => message("info", n)), table(answer.columns, answer.rows));
        } catch (err) {
          out.replaceChildren(message("error", errorText(err)));
        }
      };
      form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
      const ready = query.parameters.every((p) => !p.required || values[p.name]);
      if (ready && query.parameters.some((p) => params.has(p.name))) run();
      else if (!query.parameters.some((p) => p.required)) run();
    } catch (err) {
      pane.replaceChildren(message("error", errorText(err)));
    }
  })();
  return () => { choices = null; };
}
