// Line charts in SVG: several series on one shared x axis, with marked x positions.
import { h, s } from "./lib.js";

export const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

function ticks(lo, hi, count = 5) {
  if (lo === hi) return [lo];
  const step0 = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(step0));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((st) => st >= step0) || step0;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function label(v) {
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(1) : String(+v.toPrecision(4));
}

/** series: [{name, points: [[x, y], ...]}]; marks: [{x, text}]. */
export function lineChart({ title, series, marks = [], xLabel = "epoch", width = 560, height = 260 }) {
  const pad = { left: 56, right: 12, top: 24, bottom: 36 };
  const all = series.flatMap((se) => [...se.points, ...(se.band || []).flatMap(([x, lo, hi]) => [[x, lo], [x, hi]])]);
  const figure = h("figure", { class: "chart" });
  if (!all.length) {
    figure.append(h("figcaption", {}, title), h("p", { class: "muted" }, "no values"));
    return figure;
  }
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const X = (x) => pad.left + ((x - x0) / (x1 - x0)) * (width - pad.left - pad.right);
  const Y = (y) => height - pad.bottom - ((y - y0) / (y1 - y0)) * (height - pad.top - pad.bottom);
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart-svg", role: "img", "aria-label": title });
  for (const t of ticks(y0, y1)) {
    svg.append(s("line", { x1: pad.left, x2: width - pad.right, y1: Y(t), y2: Y(t), class: "grid" }),
      s("text", { x: pad.left - 6, y: Y(t) + 4, "text-anchor": "end", class: "tick" }, label(t)));
  }
  const wholeX = xs.every(Number.isInteger); // epochs: no tick between two
  for (const t of ticks(x0, x1, 8).filter((v) => !wholeX || Number.isInteger(v))) {
    svg.append(s("text", { x: X(t), y: height - pad.bottom + 16, "text-anchor": "middle", class: "tick" }, label(t)));
  }
  svg.append(s("text", { x: (width + pad.left) / 2, y: height - 4, "text-anchor": "middle", class: "axis" }, xLabel));
  for (const m of marks) {
    svg.append(s("line", { x1: X(m.x), x2: X(m.x), y1: pad.top, y2: height - pad.bottom, class: "mark" },
      s("title", {}, m.text)),
    s("text", { x: X(m.x) + 3, y: pad.top + 10, class: "mark-text" }, m.label || "▼"));
  }
  series.forEach((se, i) => {
    const color = se.color || COLORS[i % COLORS.length];
    if (se.band && se.band.length) { // min..max around the line: a downsampled curve's spread
      const band = [...se.band].sort((a, b) => a[0] - b[0]);
      const edge = [...band.map(([x, , hi]) => [x, hi]), ...band.reverse().map(([x, lo]) => [x, lo])];
      svg.append(s("polygon", {
        points: edge.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "),
        fill: color, "fill-opacity": 0.15, stroke: "none", class: "band", "data-series": se.name,
      }));
    }
    const pts = [...se.points].sort((a, b) => a[0] - b[0]);
    svg.append(s("polyline", {
      points: pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "),
      fill: "none", stroke: color, "stroke-width": 2, class: "series", "data-series": se.name,
    }));
    if (pts.length <= 200) {
      for (const [x, y] of pts) {
        svg.append(s("circle", { cx: X(x), cy: Y(y), r: 2.5, fill: color },
          s("title", {}, `${se.name}\n${xLabel} ${x}: ${y}`)));
      }
    }
  });
  const legend = h("ul", { class: "legend" }, series.map((se, i) => h("li", {},
    h("span", { class: `swatch c${i % COLORS.length}` }), se.name)));
  figure.append(h("figcaption", {}, title), svg, legend);
  return figure;
}
