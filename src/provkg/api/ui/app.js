// The web UI's router: the view and its state live in the URL's hash (#/view?k=v), so every
// view is deep-linkable; a view's render returns its cleanup (timers) for the next navigation.
import { renderOntologies, renderSpecs } from "./catalog.js";
import * as compare from "./compare.js";
import { h, route, setStatus } from "./lib.js";
import * as lineage from "./lineage.js";
import * as queries from "./queries.js";
import * as runs from "./runs.js";
import * as sparql from "./sparql.js";

const VIEWS = {
  runs: runs.render,
  compare: compare.render,
  lineage: lineage.render,
  queries: queries.render,
  sparql: sparql.render,
  specs: renderSpecs,
  ontologies: renderOntologies,
};

let cleanup = () => {};
let shown = "";

function show() {
  const { view, params } = route();
  const key = `${view}?${params}`;
  if (key === shown) return; // a view saving its own state in the URL
  shown = key;
  cleanup();
  setStatus("");
  const main = document.getElementById("view");
  for (const a of document.querySelectorAll("#nav a[data-view]")) a.classList.toggle("current", a.dataset.view === view);
  const render = VIEWS[view];
  if (!render) {
    main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No view of this name; see the links above."));
    cleanup = () => {};
    return;
  }
  document.title = `provkg · ${view}`;
  cleanup = render(main, params) || (() => {});
}

window.addEventListener("hashchange", show);
show();
