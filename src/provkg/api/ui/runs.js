// Workflows and runs: every training of every workflow with its hyperparameters and the
// final / best measure of each stage; sort, filter, select to compare; refreshed while open.
import {
  canned, errorText, formatSeconds, formatValue, h, link, lowerIsBetter, message, pairs, records,
  setState, setStatus, short,
} from "./lib.js";

export const REFRESH_MS = 1500;

const FIXED = ["workflow", "run", "training", "status", "started", "duration"];

/** From `epochs`: per stage measure, the latest epoch's value and the best over the epochs. */
export function epochMeasures(answer, lower) {
  const out = {};
  const latest = {};
  for (const r of records(answer)) {
    if (r.measure === null || r.measure === undefined || typeof r.value !== "number") continue;
    if (r.epoch === null || r.epoch === undefined) continue; // the stage's own: see `measures`
    const key = `${r.stage} ${r.measure}`;
    if (!(key in latest) || r.epoch >= latest[key].epoch) latest[key] = { epoch: r.epoch, value: r.value };
    const best = `best ${key}`;
    const better = lower(r.measure) ? Math.min : Math.max;
    out[best] = best in out ? better(out[best], r.value) : r.value;
  }
  for (const [key, v] of Object.entries(latest)) out[key] = v.value;
  return out;
}

/** From `measures`: training -> {"<stage> <measure>": value}; of several checks of one
 * training (two validations), the best. */
function stageMeasures(answer, lower) {
  const out = new Map();
  for (const r of records(answer)) {
    if (typeof r.value !== "number") continue;
    const m = out.get(r.training) || out.set(r.training, {}).get(r.training);
    const key = `${r.stage} ${r.measure}`;
    const better = lower(r.measure) ? Math.min : Math.max;
    m[key] = key in m ? better(m[key], r.value) : r.value;
  }
  return out;
}

const epochCache = new Map(); // training -> its epochs' measures, kept once it has ended

function rowOf(r) {
  // a stage's own measure is its final one; without, its latest epoch's
  r.row = {
    workflow: r.workflow, run: r.label || short(r.run), training: short(r.training),
    status: r.status, started: r.started, duration: r.seconds, ...r.hyper, ...r.fromEpochs, ...r.measures,
  };
  return r;
}

/** Every training of the given workflows (all when none), with the measures of its stages:
 * three requests a workflow, however many trainings (what the page shows first). */
export async function loadRuns(only = [], { measures = true } = {}) {
  const every = records(await canned("workflows"));
  const workflows = every.filter((w) => w.trainings > 0);
  const chosen = only.length ? workflows.filter((w) => only.includes(w.workflow)) : workflows;
  const none = { columns: ["training", "stage", "measure", "value"], rows: [] };
  const answers = await Promise.all(chosen.map((w) => Promise.all([
    canned("runs", { workflow: w.workflow }),
    measures ? canned("measures", { workflow: w.workflow }) : none])));
  const lower = await lowerIsBetter(answers.flatMap(([, measured]) => records(measured).map((r) => r.measure)));
  const runs = [];
  answers.forEach(([answer, measured], i) => {
    const byTraining = stageMeasures(measured, lower);
    for (const r of records(answer)) {
      runs.push(rowOf({
        ...r, workflow: chosen[i].workflow, hyper: Object.fromEntries(pairs(r.hyperparameters)),
        measures: byTraining.get(r.training) || {}, fromEpochs: epochCache.get(r.training) || {},
      }));
    }
  });
  return { workflows: workflows.map((w) => w.workflow), every, runs };
}

/** The epochs' figures (latest and best per stage measure): a request per training, once
 * for a training that has ended. */
export async function addEpochs(runs) {
  await Promise.all(runs.map(async (r) => {
    if (epochCache.has(r.training) && r.status !== "running") return;
    const answer = await canned("epochs", { training: r.training });
    const figures = epochMeasures(answer, await lowerIsBetter(records(answer).map((e) => e.measure)));
    if (r.status !== "running") epochCache.set(r.training, figures);
    r.fromEpochs = figures;
  }));
  runs.forEach((r) => { r.fromEpochs = epochCache.get(r.training) || r.fromEpochs; rowOf(r); });
}

export function columnsOf(runs) {
  const hyper = new Set();
  const measures = new Set();
  for (const r of runs) {
    Object.keys(r.hyper).forEach((k) => hyper.add(k));
    Object.keys(r.measures).forEach((k) => measures.add(k));
    Object.keys(r.fromEpochs).forEach((k) => measures.add(k));
  }
  const order = (a, b) => a.replace(/^best /, "").localeCompare(b.replace(/^best /, "")) || a.localeCompare(b);
  return [...FIXED, ...[...measures].sort(order), ...[...hyper].sort()];
}

const OPS = ["!=", ">=", "<=", "=", ">", "<", "~"];

/** "optimizer = adam and validation accuracy > 0.8" -> a predicate over rows, or an error
 * naming the clause and the expected form. */
export function parseFilter(text, columns) {
  const clauses = text.trim() ? text.trim().split(/\s+and\s+/i) : [];
  const tests = clauses.map((clause) => {
    const op = OPS.find((o) => clause.includes(o));
    if (!op) throw new Error(`"${clause}": expected "column op value" with op one of ${OPS.join(" ")}`);
    const at = clause.indexOf(op);
    const name = clause.slice(0, at).trim().toLowerCase();
    const raw = clause.slice(at + op.length).trim().replace(/^["']|["']$/g, "");
    const column = columns.find((c) => c.toLowerCase() === name);
    if (!column) throw new Error(`"${clause}": no column named "${name}"; columns: ${columns.join(", ")}`);
    const number = raw !== "" && !Number.isNaN(Number(raw)) ? Number(raw) : null;
    return (row) => {
      const value = row[column];
      if (value === undefined || value === null) return op === "!=";
      const numeric = number !== null && value !== "" && !Number.isNaN(Number(value));
      const [a, b] = numeric ? [Number(value), number] : [String(value).toLowerCase(), raw.toLowerCase()];
      switch (op) {
        case "=": return a === b;
        case "!=": return a !== b;
        case ">": return a > b;
        case ">=": return a >= b;
        case "<": return a < b;
        case "<=": return a <= b;
        default: return String(value).toLowerCase().includes(raw.toLowerCase());
      }
    };
  });
  return (row) => tests.every((t) => t(row));
}

function compareRows(column, desc) {
  return (x, y) => {
    const a = x.row[column];
    const b = y.row[column];
    if (a === undefined || a === null) return 1;
    if (b === undefined || b === null) return -1;
    const both = typeof a === "number" && typeof b === "number";
    const order = both ? a - b : String(a).localeCompare(String(b), undefined, { numeric: true });
    return desc ? -order : order;
  };
}

export function render(main, params) {
  const state = {
    workflow: params.getAll("workflow"),
    filter: params.get("filter") || "",
    sort: params.get("sort") || "started",
    desc: params.get("desc") === "1",
    selected: new Set(params.getAll("t")),
  };
  let data = null;
  const save = () => setState("runs", {
    workflow: state.workflow, filter: state.filter, sort: state.sort,
    desc: state.desc ? "1" : "", t: [...state.selected],
  });
  const filterInput = h("input", {
    type: "search", id: "run-filter", value: state.filter, size: 50,
    placeholder: "optimizer = adam and validation accuracy > 0.8", "aria-label": "filter runs",
  });
  const workflowSelect = h("select", { id: "run-workflow", "aria-label": "workflow" });
  const compareButton = h("button", { id: "compare-selected", type: "button" }, "Compare selected");
  const info = h("div", { class: "notes" });
  const holder = h("div", { id: "runs-table" });
  main.replaceChildren(
    h("h1", {}, "Runs"),
    h("div", { class: "toolbar" },
      h("label", {}, "Workflow ", workflowSelect),
      h("label", {}, "Filter ", filterInput), compareButton),
    info, holder);

  const draw = () => {
    if (!data) return;
    const columns = columnsOf(data.runs);
    let keep;
    info.replaceChildren();
    try {
      keep = parseFilter(state.filter, columns);
      filterInput.removeAttribute("aria-invalid");
    } catch (err) {
      keep = () => true;
      filterInput.setAttribute("aria-invalid", "true");
      info.append(message("error", err.message));
    }
    const shown = data.runs.filter((r) => keep(r.row)).sort(compareRows(state.sort, state.desc));
    info.append(h("p", { class: "muted", id: "run-count" },
      `${shown.length} of ${data.runs.length} trainings · ${data.workflows.length} workflows with trainings`));
    // every workflow of the store, those without trainings (curation, preparation) too
    info.append(h("ul", { class: "workflows", id: "workflow-list" }, data.every.map((w) => h("li", {},
      h("a", { href: link("runs", { workflow: w.trainings ? w.workflow : [] }), title: "its runs" }, w.workflow),
      ` ${w.runs} runs, ${w.trainings} trainings · `,
      h("a", { href: link("specs", { workflow: w.workflow }) }, "spec")))));
    const head = h("tr", {}, h("th", {}, ""), columns.map((c) => h("th", {
      scope: "col", class: c === state.sort ? (state.desc ? "sorted desc" : "sorted") : "sortable",
      onclick: () => {
        state.desc = state.sort === c ? !state.desc : false;
        state.sort = c;
        save();
        draw();
      },
    }, c)));
    const rows = shown.map((r) => h("tr", { class: `status-${r.status}`, dataset: { training: r.training } },
      h("td", {}, h("input", {
        type: "checkbox", "aria-label": `select ${r.row.training}`, checked: state.selected.has(r.training),
        onchange: (e) => {
          if (e.target.checked) state.selected.add(r.training); else state.selected.delete(r.training);
          save();
        },
      })),
      columns.map((c) => {
        const value = r.row[c];
        if (c === "training") return h("td", {}, h("a", { href: link("compare", { t: r.training }) }, value));
        if (c === "duration") return h("td", { class: "num" }, formatSeconds(value));
        if (c === "started") return h("td", { title: value }, String(value || "").replace("T", " ").replace(/\.\d+/, ""));
        if (c === "status") return h("td", {}, h("span", { class: `badge ${value}` }, value));
        return h("td", { class: typeof value === "number" ? "num" : null, title: value ?? null },
          formatValue(value));
      })));
    holder.replaceChildren(h("div", { class: "table-wrap" },
      h("table", { class: "data runs" }, h("thead", {}, head), h("tbody", {}, rows))));
  };

  let busy = false;
  let drawnKey = "";
  const refresh = async () => {
    if (busy) return; // a slow store: one refresh at a time
    busy = true;
    try {
      const fresh = await loadRuns(state.workflow);
      const show = () => { // unchanged: the table (its scroll, a row being ticked) stays as it is
        const key = JSON.stringify(fresh.runs.map((r) => r.row));
        if (key === drawnKey) return;
        data = fresh;
        drawnKey = key;
        draw();
      };
      const options = ["", ...fresh.workflows];
      if (workflowSelect.options.length !== options.length) {
        workflowSelect.replaceChildren(...options.map((w) => h("option", {
          value: w, selected: state.workflow.includes(w) || (!w && !state.workflow.length),
        }, w || "all workflows")));
      }
      show(); // the runs and their stages' measures first, then the epochs' figures
      await addEpochs(fresh.runs);
      show();
      setStatus(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      holder.replaceChildren(message("error", errorText(err)));
    } finally {
      busy = false;
    }
  };
  filterInput.addEventListener("input", () => { state.filter = filterInput.value; save(); draw(); });
  workflowSelect.addEventListener("change", () => {
    state.workflow = workflowSelect.value ? [workflowSelect.value] : [];
    save();
    refresh();
  });
  compareButton.addEventListener("click", () => {
    location.hash = link("compare", { t: [...state.selected] });
  });
  refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  return () => clearInterval(timer);
}
