// Run comparison: hyperparameters side by side (differences marked) and every per-epoch
// measure of every stage overlaid across the selected trainings on one shared axis.
import { COLORS, lineChart } from "./chart.js";
import { canned, errorText, formatValue, h, link, message, records, setState, setStatus, short } from "./lib.js";
import { loadRuns, REFRESH_MS } from "./runs.js";

/** {"<stage> <measure>": [[epoch, value], ...]} and {stage: [[epoch, seconds]]}. */
export function curves(answer) {
  const measures = {};
  const seconds = {};
  for (const r of records(answer)) {
    if (r.epoch === null || r.epoch === undefined) continue;
    if (typeof r.seconds === "number") {
      const list = (seconds[r.stage] ||= new Map());
      list.set(r.epoch, r.seconds);
    }
    if (r.measure && typeof r.value === "number") (measures[`${r.stage} ${r.measure}`] ||= []).push([r.epoch, r.value]);
  }
  const perStage = Object.fromEntries(Object.entries(seconds).map(([k, m]) => [k, [...m.entries()]]));
  return { measures, seconds: perStage };
}

export function render(main, params) {
  const chosen = params.getAll("t");
  const body = h("div", { id: "compare-body" });
  const picker = h("select", { id: "compare-add", "aria-label": "add a training" });
  main.replaceChildren(h("h1", {}, "Compare runs"),
    h("div", { class: "toolbar" }, h("label", {}, "Add ", picker),
      h("a", { href: link("runs", { t: chosen }) }, "back to runs")), body);
  let runs = [];
  let drawnFor = "";

  const draw = async () => {
    // the runs (hyperparameters, status) and the chosen trainings' epochs and adaptations at
    // once: the requests run side by side on the server
    // (the runs' hyperparameters and status only: their measures are the runs page's)
    const [data, answers, adapted] = await Promise.all([loadRuns([], { measures: false }),
      Promise.all(chosen.map((t) => canned("epochs", { training: t }))),
      Promise.all(chosen.map((t) => canned("adaptations", { training: t })))]);
    runs = data.runs;
    const others = runs.filter((r) => !chosen.includes(r.training));
    if (picker.options.length !== others.length + 1) { // rebuilt only when runs came: an open list stays open
      picker.replaceChildren(h("option", { value: "" }, "a training…"),
        ...others.map((r) => h("option", { value: r.training }, `${r.row.run} · ${r.row.training}`)));
    }
    const selected = chosen.map((t) => runs.find((r) => r.training === t) || { training: t, hyper: {}, row: { run: short(t), training: short(t) }, status: "unknown" });
    if (!selected.length) {
      body.replaceChildren(message("info", "Select trainings on the Runs page, or add one above."));
      return;
    }
    // redrawn when something changed: a running training's new epochs, a status, a duration
    const key = JSON.stringify([selected.map((r) => [r.training, r.status, r.seconds]), answers.map((a) => a.rows)]);
    if (key === drawnFor) return;
    drawnFor = key;
    const perRun = answers.map(curves);
    // learning-rate adaptations, marked at their epoch on every curve
    const marks = adapted.flatMap((a, i) => records(a).filter((m) => typeof m.epoch === "number").map((m) => ({
      x: m.epoch, label: `▼${i + 1}`, text: `${selected[i].row.run}: ${m.technique || "adaptation"} → learning rate ${m.new_value}`,
    })));
    // batch measures: one band per epoch (min..max around the mean), downsampled on the server
    const batchNames = [...new Set(perRun.flatMap((c) => Object.keys(c.measures)).filter((k) => k.startsWith("training "))
      .map((k) => k.slice("training ".length)))].slice(0, 4);
    const perBatch = await Promise.all(batchNames.map((m) => Promise.all(selected.map((r) => canned("batches", { training: r.training, measure: m })))));
    const names = [...new Set(selected.flatMap((r) => Object.keys(r.hyper)))].sort();
    const header = h("tr", {}, h("th", {}, "hyperparameter"), selected.map((r, i) => h("th", {},
      h("span", { class: `swatch c${i % COLORS.length}` }), `${r.row.run} (${r.row.training})`,
      " ", h("a", { href: link("compare", { t: chosen.filter((t) => t !== r.training) }), title: "remove", class: "remove" }, "×"))));
    const rows = names.map((n) => {
      const values = selected.map((r) => r.hyper[n]);
      const differs = new Set(values.map(String)).size > 1;
      return h("tr", { class: differs ? "differs" : null }, h("th", { scope: "row" }, n),
        values.map((v) => h("td", {}, v === undefined ? "—" : formatValue(v))));
    });
    const status = h("tr", {}, h("th", { scope: "row" }, "status"), selected.map((r) => h("td", {}, r.status)));
    const charts = h("div", { class: "charts" });
    const keys = [...new Set(perRun.flatMap((c) => Object.keys(c.measures)))].sort();
    for (const k of keys) {
      charts.append(lineChart({
        title: k, marks: k.startsWith("training ") ? marks : [],
        series: selected.map((r, i) => ({ name: `${r.row.run} (${r.row.training})`, points: perRun[i].measures[k] || [] })),
      }));
    }
    batchNames.forEach((m, j) => {
      const rows = perBatch[j].map(records);
      const total = rows.flat().reduce((t, r) => t + (r.batches || 0), 0);
      if (!total) return;
      charts.append(lineChart({
        title: `batch ${m}: mean per epoch, band min–max (${total.toLocaleString()} batches)`, marks,
        series: selected.map((r, i) => ({
          name: `${r.row.run} (${r.row.training})`, points: rows[i].map((b) => [b.epoch, b.avg_value]),
          band: rows[i].map((b) => [b.epoch, b.min_value, b.max_value]),
        })),
      }));
    });
    const stages = [...new Set(perRun.flatMap((c) => Object.keys(c.seconds)))].sort();
    for (const st of stages) {
      charts.append(lineChart({
        title: `${st} seconds per epoch`,
        series: selected.map((r, i) => ({ name: `${r.row.run} (${r.row.training})`, points: perRun[i].seconds[st] || [] })),
      }));
    }
    body.replaceChildren(
      h("h2", {}, "Hyperparameters"),
      h("div", { class: "table-wrap" }, h("table", { class: "data compare" }, h("thead", {}, header),
        h("tbody", {}, status, rows))),
      h("h2", {}, "Measures per epoch"),
      keys.length || stages.length ? charts : message("info", "No per-epoch values stored for these trainings."));
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  };
  picker.addEventListener("change", () => {
    if (picker.value) location.hash = link("compare", { t: [...chosen, picker.value] });
  });
  let busy = false;
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try { await draw(); } catch (err) { body.replaceChildren(message("error", errorText(err))); } finally { busy = false; }
  };
  setState("compare", { t: chosen });
  refresh();
  const timer = setInterval(refresh, REFRESH_MS);
  return () => clearInterval(timer);
}
