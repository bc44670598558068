"""One router per resource: events, specs, queries, sparql, ontologies, health."""
