// Specs (the prospective view: transformations, attributes, roles) and the ontologies'
// classes and properties with their labels and comments.
import { errorText, getJSON, h, link, message, setState } from "./lib.js";

function attributes(list) {
  if (!list || !list.length) return h("span", { class: "muted" }, "—");
  return h("ul", { class: "attrs" }, list.map((a) => h("li", {},
    h("code", {}, a.name), " ", h("span", { class: "badge" }, a.role || "plain"),
    a.concept ? [" ", h("span", { class: "muted" }, a.concept)] : [],
    a.description ? [" — ", a.description] : [])));
}

export function renderSpecs(main, params) {
  const only = params.get("workflow") || "";
  const body = h("div", { id: "specs" });
  main.replaceChildren(h("h1", {}, "Specs"), h("p", { class: "muted" },
    "The registered workflow specs: what each transformation uses and generates (GET /v1/specs)."), body);
  (async () => {
    try {
      const specs = await getJSON("/v1/specs");
      if (!specs.length) { body.replaceChildren(message("info", "No spec is registered.")); return; }
      const nav = h("p", {}, specs.map((sp) => [h("a", { href: link("specs", { workflow: sp.workflow }) }, sp.workflow), " "]),
        h("a", { href: link("specs") }, "(all)"));
      body.replaceChildren(nav, ...specs.filter((sp) => !only || sp.workflow === only).map((sp) => h("section", { class: "spec" },
        h("h2", {}, sp.workflow, " ", h("span", { class: "badge" }, sp.phase || "")),
        h("div", { class: "table-wrap" }, h("table", { class: "data" },
          h("thead", {}, h("tr", {}, ["transformation", "kind", "granularity", "uses", "generates"].map((c) => h("th", {}, c)))),
          h("tbody", {}, (sp.transformations || []).map((t) => h("tr", {},
            h("td", {}, h("code", {}, t.name), t.description ? h("div", { class: "muted" }, t.description) : null),
            h("td", {}, t.kind || ""), h("td", {}, t.granularity || ""),
            h("td", {}, attributes(t.used)), h("td", {}, attributes(t.generated))))))))));
    } catch (err) {
      body.replaceChildren(message("error", errorText(err)));
    }
  })();
  return () => {};
}

export function renderOntologies(main, params) {
  const name = params.get("name") || "";
  const filter = params.get("filter") || "";
  const body = h("div", { id: "ontology" });
  const input = h("input", { type: "search", value: filter, placeholder: "filter by name, label or comment", "aria-label": "filter terms" });
  main.replaceChildren(h("h1", {}, "Ontologies"), h("div", { class: "toolbar", id: "ontology-names" }), input, body);
  (async () => {
    try {
      const names = await getJSON("/v1/ontologies");
      main.querySelector("#ontology-names").replaceChildren(...names.map((n) => h("a", {
        class: n === name ? "button current" : "button", href: link("ontologies", { name: n }),
      }, n)));
      if (!name) { body.replaceChildren(message("info", "Choose an ontology.")); return; }
      const terms = await getJSON(`/v1/ontologies/${encodeURIComponent(name)}/terms`);
      const draw = () => {
        const f = input.value.trim().toLowerCase();
        const shown = terms.filter((t) => !f || [t.iri, t.label, t.comment].some((x) => x.toLowerCase().includes(f)));
        body.replaceChildren(h("p", { class: "muted" }, `${shown.length} of ${terms.length} terms · `,
          h("a", { href: `/v1/ontologies/${encodeURIComponent(name)}` }, "Turtle")),
        h("div", { class: "table-wrap" }, h("table", { class: "data terms" },
          h("thead", {}, h("tr", {}, ["term", "kind", "label", "comment", "parent / domain → range"].map((c) => h("th", {}, c)))),
          h("tbody", {}, shown.map((t) => h("tr", {},
            h("td", { title: t.iri }, h("code", {}, t.iri.replace(/^.*[#/]/, ""))), h("td", {}, t.kind), h("td", {}, t.label),
            h("td", {}, t.comment), h("td", { class: "muted" }, t.parent || [t.domain, t.range].filter(Boolean).join(" → "))))))));
      };
      input.addEventListener("input", () => { setState("ontologies", { name, filter: input.value }); draw(); });
      draw();
    } catch (err) {
      body.replaceChildren(message("error", errorText(err)));
    }
  })();
  return () => {};
}
