// Shared helpers of the web UI. Invariant: captured values reach the page only as text
// (textContent, attribute values set through the DOM), never as markup.

export const BASE = "https://w3id.org/provkg/id/";

/** An element: h("td", {class: "x", title: "t"}, "text", childNode, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const svgNS = "http://www.w3.org/2000/svg";
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function readError(response) {
  const text = await response.text();
  try { return JSON.parse(text); } catch { return { detail: text.slice(0, 500) }; }
}

/** GET a JSON document of this server. */
export async function getJSON(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") url.searchParams.append(k, v);
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new ApiError(response.status, await readError(response));
  return response.json();
}

/** A canned query's answer: {columns, rows, notes}. */
export async function canned(name, params = {}) {
  const url = queryURL(name, params);
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new ApiError(response.status, await readError(response));
  const answer = await response.json();
  const note = response.headers.get("Provkg-Note");
  answer.notes = note ? [note] : [];
  return answer;
}

export function queryURL(name, params = {}, suffix = "") {
  const url = new URL(`/v1/queries/${encodeURIComponent(name)}${suffix}`, location.origin);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") url.searchParams.append(k, v);
  return url;
}

/** Rows as objects keyed by column. */
export function records(answer) {
  return answer.rows.map((row) => Object.fromEntries(answer.columns.map((c, i) => [c, row[i]])));
}

/** "a=1; b=[2,3]" (an encoded pairs column) -> [["a", "1"], ["b", "[2,3]"]]. */
export function pairs(text) {
  if (!text) return [];
  return String(text).split("; ").map((part) => {
    const at = part.indexOf("=");
    return at < 0 ? [part, ""] : [part.slice(0, at), part.slice(at + 1)];
  });
}

/** A minted IRI without the base ("task/run-1.1"), or the text itself. */
export function short(value) {
  if (typeof value !== "string") return value;
  if (value.startsWith(BASE)) {
    const rest = value.slice(BASE.length);
    const slash = rest.indexOf("/");
    try { return decodeURIComponent(rest.slice(slash + 1)); } catch { return rest.slice(slash + 1); }
  }
  return value;
}

export function looksLikeIRI(value) {
  return typeof value === "string" && /^[a-z][a-z0-9+.-]*:[^\s]+$/i.test(value) && !/^\d/.test(value);
}

export function formatValue(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3 ? value.toExponential(3) : value.toFixed(4);
  }
  return short(value);
}

export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "";
  const n = Number(seconds);
  if (n < 60) return `${n.toFixed(2)} s`;
  if (n < 3600) return `${Math.floor(n / 60)} min ${Math.round(n % 60)} s`;
  return `${Math.floor(n / 3600)} h ${Math.round((n % 3600) / 60)} min`;
}

/** The view's state: the hash "#/view?k=v&k=v2" -> {view, params: URLSearchParams}. */
export function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const at = hash.indexOf("?");
  const view = (at < 0 ? hash : hash.slice(0, at)) || "runs";
  return { view, params: new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)) };
}

export function link(view, params = {}) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    for (const one of [v].flat()) if (one !== undefined && one !== null && one !== "") search.append(k, one);
  }
  const text = search.toString();
  return `#/${view}${text ? "?" + text : ""}`;
}

/** Replace the hash without a new history entry or a re-render. */
export function setState(view, params) {
  history.replaceState(null, "", link(view, params));
}

/** A table of columns and rows (values as text); an IRI a query returned links to its page. */
export function table(columns, rows, { cell } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c))));
  const body = h("tbody", {}, rows.map((row) => h("tr", {}, row.map((value, i) => {
    const custom = cell && cell(columns[i], value, row);
    if (custom) return h("td", {}, custom);
    return h("td", { title: typeof value === "string" ? value : null }, resourceText(value));
  }))));
  return h("div", { class: "table-wrap" }, h("table", { class: "data" }, head, body));
}

/** A value as text; a minted IRI as a link to its Linked Data page. */
export function resourceText(value) {
  if (typeof value === "string" && value.startsWith(BASE)) {
    return h("a", { href: "/id/" + value.slice(BASE.length), title: value }, short(value));
  }
  return formatValue(value);
}

export function message(kind, text) {
  return h("p", { class: `msg ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

export function errorText(err) {
  if (err instanceof ApiError) return `${err.status}: ${err.message}`;
  return String(err && err.message ? err.message : err);
}

/** Offer text as a file download (a blob: URL, no inline script). */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function toCSV(columns, rows) {
  const quote = (v) => {
    const text = v === null || v === undefined ? "" : String(v);
    return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return [columns, ...rows].map((r) => r.map(quote).join(",")).join("\r\n") + "\r\n";
}

const directions = new Map(); // measure name -> lower is better, as the server ranks

/** For each name, whether lower is better: asked of the server once per name (the rule
 * the ranking queries use), so the UI's "best" is the queries' best. */
export async function lowerIsBetter(names) {
  const unknown = [...new Set(names)].filter((n) => n && !directions.has(n));
  if (unknown.length) {
    const url = new URL("/ui/lower-is-better.json", location.origin);
    unknown.forEach((n) => url.searchParams.append("measure", n));
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new ApiError(response.status, await readError(response));
    for (const [n, lower] of Object.entries(await response.json())) directions.set(n, lower);
  }
  return (name) => directions.get(name) === true;
}

export function setStatus(text) {
  const el = document.getElementById("status");
  if (el) el.textContent = text;
}
