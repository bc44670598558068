"""The ``provkg`` command line: every sub-command, its arguments and its help.

A sub-command's handler lives in the module of its group (``provkg.cli.store``, ``.ingest``,
``.query``, ``.specs``, ``.replay``, ``.bench``, ``.serve``), imported only when it runs, so
``provkg --help`` loads no store, mapper or web server.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable

from provkg.defaults import DEFAULT_STORE

__all__ = ["build_parser"]

Handler = Callable[[argparse.Namespace], int]


def _command(module: str, name: str) -> Handler:
    """The handler ``provkg.cli.MODULE.NAME``, imported when the command runs."""
    def handler(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"provkg.cli.{module}"), name)(args)

    handler.__name__ = handler.__qualname__ = name
    return handler


EPILOG = """\
stores (--store URL or PROVKG_STORE):
  oxigraph:DIR                 embedded Oxigraph on disk (default: oxigraph:provkg-data)
  memory:                      embedded Oxigraph in memory (gone when the command ends)
  rdflib:                      rdflib in memory
  oxigraph+http://HOST:PORT    an Oxigraph server (oxigraph serve): /query, /update, /store
  virtuoso+http://HOST:PORT    a Virtuoso server: /sparql (add ?user=dba&password=... to
                               update through the authenticated /sparql-auth)
  sparql+http://HOST:PORT/PATH any SPARQL 1.1 endpoint (PATH: its query URL); options:
                               ?update=/PATH (update URL) &gsp=/PATH (Graph Store Protocol,
                               fast loads) &user=..&password=.. &default_graph=IRI

examples:
  provkg demo                                  # the seismic lifecycle, end to end
  provkg init                                  # load the ontologies into ./provkg-data
  provkg ingest spool/ --spec training.yaml    # events -> typed PROV-ML triples
  provkg query --list                          # the canned lifecycle queries
  provkg query q7 --param dataset=file:///data/train.h5 --format json
"""


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=os.environ.get("PROVKG_STORE", "").strip() or DEFAULT_STORE,  # set but empty: unset
        help="store URL (default: $PROVKG_STORE or %(default)s)",
    )


def _format_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=["table", "json", "csv"], default="table",
                   help="table for people, json / csv for scripts (default: %(default)s)")


def action(group: argparse._SubParsersAction, name: str, help: str,
           description: str) -> argparse.ArgumentParser:
    """A sub-command whose description keeps its line breaks (examples)."""
    return group.add_parser(name, help=help, description=description,
                            formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="provkg",
        description="Provenance knowledge graphs for the scientific-ML lifecycle: capture events, "
        "map them to PROV-ML / PROVLake / S-PROV triples, store them, ask lifecycle questions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print provkg's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return action(sub, name, help, description or help)

    # -- demo ---------------------------------------------------------------
    p = add("demo", "run the seismic scientific-ML lifecycle end to end and answer Q1-Q7",
            "Generates a synthetic seismic cube, writes it as SEG-Y, curates it, prepares HDF5\n"
            "training sets, trains scikit-learn classifiers for 3 hyperparameter configurations,\n"
            "captures everything with provkg.capture, and answers the PROV-ML paper's Q1-Q7 and\n"
            "DNNProv's D6-D8, each checked against what its own code measured; the report is\n"
            "OUT/report.html.\n\nexamples:\n  provkg demo\n  provkg demo --online --epochs 4\n"
            "  provkg demo --fresh --store oxigraph:demo-db")
    _store_arg(p)
    p.add_argument("--out", default="provkg-demo",
                   help="folder for data, models and the report (default %(default)s)")
    p.add_argument("--sink", default=None,
                   help="send events to a running server (http://HOST:PORT) instead of the store; "
                        "--store must then be the store that server writes to, as a SPARQL "
                        "endpoint (oxigraph+http://..., virtuoso+http://...)")
    p.add_argument("--online", action="store_true",
                   help="query the store each epoch while training and print the live loss")
    p.add_argument("--fresh", action="store_true", help="start over: delete --out and the demo's graph")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs per training (default 6, 2 with --small; smaller = faster)")
    p.add_argument("--small", action="store_true", help="tiny sizes, for tests")
    p.set_defaults(handler=_command("demo", "cmd_demo"))

    # -- init / load --------------------------------------------------------
    p = add("init", "load the provkg ontologies (PROVLake, PROV-ML, S-PROV, seismic) into the store",
            "Loads the provkg ontologies, each into the named graph of its IRI (run again to\n"
            "refresh them).\n\nexamples:\n  provkg init\n  provkg init --store oxigraph+http://127.0.0.1:7878")
    _store_arg(p)
    p.set_defaults(handler=_command("store", "cmd_init"))

    p = add("load", "load RDF files (Turtle, N-Triples, N-Quads, RDF/XML) into the store",
            "Loads ontologies or domain knowledge graphs. The format comes from the file\n"
            "extension (.ttl .nt .nq .rdf .owl .xml, optionally .gz) or --format. A file that\n"
            "does not parse is left out whole and named (with its line) after the others are\n"
            "loaded; the exit status is then 1.\n\n"
            "Load a domain KG into a named graph of its own (--graph): queries read every\n"
            "graph, and a corrected version can then replace it (--replace). The default\n"
            "graph holds the provenance and only grows: a fixed KG loaded there again is\n"
            "added beside the old facts. N-Quads and TriG name their own graphs (no --graph).\n"
            "\nexamples:\n"
            "  provkg load seismic-kg.ttl --graph https://example.org/kg/seismic\n"
            "  provkg load wells.nt.gz --graph https://example.org/kg/wells\n"
            "  provkg load wells-v2.ttl --graph https://example.org/kg/wells --replace\n"
            "  provkg load ontology.ttl")
    _store_arg(p)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--graph", default=None, help="named graph IRI to load into (default graph if omitted)")
    p.add_argument("--replace", action="store_true",
                   help="replace what --graph holds with the files (a corrected domain KG; "
                        "loading again only adds, and blank nodes add up); all or nothing")
    p.add_argument("--format", default=None, choices=["turtle", "ntriples", "nquads", "rdfxml", "trig"],
                   help="the RDF format of every FILE, when their extensions do not say it")
    p.set_defaults(handler=_command("store", "cmd_load"))

    # -- ingest / spec / links ---------------------------------------------
    p = add("ingest", "map captured events (JSONL, .gz, .zst files or spool folders) into the store",
            "Maps captured events (wire format v1) into the store, guided by the specs of\n"
            "their workflows (--spec, or those registered before). Events may come in any\n"
            "order and more than once: running it again adds no triple. A bad line is\n"
            "skipped and named (file, line, field) at the end, after every other event is\n"
            "stored; the exit status is then 1.\n\nexamples:\n"
            "  provkg ingest provkg-spool/ --spec training.yaml\n"
            "  provkg ingest run1.jsonl.zst run2.jsonl.gz --schema tagged --store oxigraph:tagged-db")
    _store_arg(p)
    p.add_argument("paths", nargs="+", metavar="FILE|DIR")
    p.add_argument("--spec", action="append", default=[], metavar="SPEC",
                   help="prospective spec (YAML / JSON); repeat for several workflows")
    p.add_argument("--schema", choices=["typed", "tagged", "sprov"], default="typed",
                   help="typed PROV-ML (default), tag-based PROVLake, or S-PROV")
    p.set_defaults(handler=_command("ingest", "cmd_ingest"))

    p = add("export", "write the store, a run or a lineage as RDF, W3C PROV or a Workflow Run Crate",
            "Writes the whole store, one run (--run: its executions, values, agents and plans) or\n"
            "one value's lineage (--lineage: what it was derived from, at any depth) as N-Quads,\n"
            "TriG or Turtle, as W3C PROV (PROV-JSON, PROV-N, PROV-XML, PROV-JSONLD: activities,\n"
            "entities, agents, usages with roles, generations, derivations, associations with\n"
            "plans), or as an RO-Crate of the Workflow Run Crate profile (a folder or a .zip).\n"
            "The format comes from FILE's name (.nq .trig .ttl .json .provn .provx/.xml .jsonld,\n"
            ".zip or a folder) or --format. A whole-store N-Quads export keeps every graph (the\n"
            "provenance, the specs, the ontologies, each domain KG): `provkg load` reads it back\n"
            "(a backup, a move); with --graph IRI, only that graph, as N-Triples. A .nq.gz name\n"
            "compresses; '-' is stdout.\n\n"
            "examples:\n  provkg export backup.nq.gz\n"
            "  provkg export run.json --run seismic-demo-mlp64-zscore     # PROV-JSON\n"
            "  provkg export model.provn --lineage file:///models/m.pt\n"
            "  provkg export crate.zip --run run-1 --with-data             # Workflow Run Crate\n"
            "  provkg export kg.nt --graph https://example.org/kg/seismic\n"
            "  provkg export backup.nq.gz && provkg load backup.nq.gz --store oxigraph+http://127.0.0.1:7878")
    _store_arg(p)
    p.add_argument("file", metavar="FILE", help="the file (or RO-Crate folder) to write, or '-'")
    p.add_argument("--format", default=None,
                   choices=["nq", "trig", "ttl", "prov-json", "prov-n", "prov-xml", "prov-jsonld", "ro-crate"],
                   help="the format (default: the one FILE's name says)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--run", default=None, metavar="RUN_ID", help="export only this run (its id or IRI)")
    scope.add_argument("--lineage", default=None, metavar="VALUE_ID",
                       help="export only this value's or model's lineage (its id, IRI or location)")
    p.add_argument("--with-data", action="store_true",
                   help="ro-crate: copy the local files the values refer to into the crate (default: "
                        "referenced by their locations)")
    p.add_argument("--graph", default=None, metavar="IRI", help="export only this named graph, as N-Triples")
    p.set_defaults(handler=_command("export", "cmd_export"))

    p = add("spec", "work with prospective specs")
    spec_sub = p.add_subparsers(dest="spec_command", metavar="ACTION")
    p.set_defaults(help_parser=p)  # `provkg spec` alone shows its actions, not the top help
    sv = action(spec_sub, "validate", "check a spec; errors name file, line and field",
                "Checks prospective specs (YAML or JSON; their format: the README's spec\n"
                "example): each problem is named by file, line and field; the exit status is 1\n"
                "if any. Without --store, no store is read. With --store, also says how each spec\n"
                "differs from the one the store holds for its workflow.\n\n"
                "examples:\n  provkg spec validate training.yaml\n"
                "  provkg spec validate specs/*.yaml\n"
                "  provkg spec validate train.yaml --store oxigraph:kg")
    sv.add_argument("files", nargs="+", metavar="SPEC", help="a spec file (.yaml, .yml or .json)")
    sv.add_argument("--store", default=None,
                    help="also compare each spec with the one this store holds for its workflow "
                         "(new, the same, or what `ingest --spec` would change); nothing is written")
    sv.set_defaults(handler=_command("specs", "cmd_spec_validate"))
    sl = action(spec_sub, "list", "the specs a store holds, one row per workflow",
                "Lists the workflows whose prospective spec the store holds (registered by\n"
                "`provkg ingest --spec`, `provkg listen --spec` or POST /v1/specs): phase, number of\n"
                "transformations, stages and sections, and which sections are kept as summaries.\n\n"
                "examples:\n  provkg spec list\n  provkg spec list --store oxigraph:kg --format json")
    _store_arg(sl)
    _format_arg(sl)
    sl.set_defaults(handler=_command("specs", "cmd_spec_list"))
    ss = action(spec_sub, "show", "print the spec a store holds for a workflow (JSON, every default spelled out)",
                "Prints the spec the store holds for WORKFLOW as JSON (which is also YAML),\n"
                "every default spelled out: what the mapper uses for that workflow's events.\n"
                "Save it, edit it, check it with `spec validate --store`, register it with\n"
                "`ingest --spec`.\n\n"
                "examples:\n  provkg spec show train\n  provkg spec show train > train.json")
    _store_arg(ss)
    ss.add_argument("workflow", metavar="WORKFLOW", help="the workflow's name (see `provkg spec list`)")
    ss.set_defaults(handler=_command("specs", "cmd_spec_show"))
    si = action(spec_sub, "infer", "draft a spec from captured events (YAML on stdout, guesses marked)",
                "Drafts a spec per workflow from captured event files: the kinds and roles the\n"
                "events carry (framework callbacks, wf.task(..., kind=...), capture.hyperparameters)\n"
                "and the structure (a task with a parent is a section of it); kinds and roles read\n"
                "from names (train, loss, lr, a value with a location) are marked `# guessed`.\n"
                "Review it, then `provkg spec register FILE`. Nothing is read from a store.\n\n"
                "examples:\n  provkg spec infer runs/ > spec.yaml\n"
                "  provkg spec infer run.jsonl --workflow fit > fit.yaml")
    si.add_argument("paths", nargs="+", metavar="EVENTS", help="event files (.jsonl, .jsonl.gz, .jsonl.zst) or folders")
    si.add_argument("--workflow", default=None, metavar="NAME",
                    help="only this workflow's spec (default: every workflow's, one YAML document each)")
    si.set_defaults(handler=_command("specs", "cmd_spec_infer"))
    sr = action(spec_sub, "register", "register spec files in a store (its runs are mapped again with it)",
                "Registers each spec file in the store, as `provkg ingest --spec` does with no\n"
                "events: its prospective triples are written and runs already stored for its\n"
                "workflow are typed with it. The same spec again changes nothing.\n\n"
                "examples:\n  provkg spec register spec.yaml\n"
                "  provkg spec register specs/*.yaml --store oxigraph+http://127.0.0.1:7878")
    _store_arg(sr)
    sr.add_argument("files", nargs="+", metavar="SPEC", help="a spec file (.yaml, .yml or .json)")
    sr.set_defaults(handler=_command("specs", "cmd_spec_register"))

    p = add("link", "link a captured value to a domain-KG resource after the fact (recorded with who and when)",
            "Says that a captured value denotes a domain-KG resource (provlake:denotes), for data\n"
            "captured without capture.ref(..., domain=IRI). Given a location URI, every value\n"
            "captured there is linked. The link is recorded as a provkg:LinkAssertion with who\n"
            "(--agent, default $USER) and when. q1, q2 and q6 then find the basin and field.\n\n"
            "examples:\n  provkg link file:///lake/f3.sgy https://example.org/kg/f3-segy\n"
            "  provkg link cur-A https://example.org/kg/A-segy --agent geo-team\n"
            "  provkg link cur-A https://example.org/kg/old-segy --remove")
    _store_arg(p)
    p.add_argument("value_id", metavar="VALUE_ID",
                   help="captured value id, its IRI (as queries print it) or location URI")
    p.add_argument("target", metavar="IRI", help="domain-KG resource the value denotes")
    p.add_argument("--agent", default=None, help="who asserts the link (default: $USER)")
    p.add_argument("--remove", action="store_true",
                   help="take the link back instead (a wrong link, or a resource gone from the KG), "
                        "recorded as a provkg:LinkRetraction with who and when; a link the capture "
                        "sent (a value's domain) returns if its events are ingested again")
    p.set_defaults(handler=_command("store", "cmd_link"))

    p = add("check-links", "list domain links whose target the loaded domain graphs do not describe",
            "Lists (value id, target IRI) of each provlake:denotes link whose target is the\n"
            "subject of no triple in the store: a typo, or a domain KG not loaded yet\n"
            "(provkg load kg.ttl). Exit status 1 when there is any, 0 when there is none.\n\n"
            "examples:\n  provkg check-links\n  provkg check-links --store oxigraph:provkg-data")
    _store_arg(p)
    p.set_defaults(handler=_command("store", "cmd_check_links"))

    p = add("import", "import history from other tools (MLflow runs) into the store")
    import_sub = p.add_subparsers(dest="import_command", metavar="SOURCE")
    p.set_defaults(help_parser=p)  # `provkg import` alone shows its sources
    im = action(import_sub, "mlflow", "import MLflow runs: params, metrics per step, datasets, models",
                "Turns each MLflow run into a training: params are its hyperparameters, a metric's\n"
                "steps its epochs, its latest metric values its evaluations, dataset inputs its\n"
                "datasets, logged models and artifacts what it generated; each experiment is a\n"
                "workflow of that name, whose spec the import writes. Importing again adds no\n"
                "triple. Needs the mlflow extra.\n\n"
                "examples:\n  provkg import mlflow --tracking-uri sqlite:///mlflow.db\n"
                "  provkg import mlflow --tracking-uri http://127.0.0.1:5000 --experiment flowers\n"
                "  provkg query d5 -p workflow=flowers -p measure=accuracy")
    _store_arg(im)
    tracking = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    im.add_argument("--tracking-uri", default=tracking or None, required=not tracking, metavar="URI",
                    help="the MLflow tracking server or store: http(s)://HOST:PORT, sqlite:///FILE, "
                         "databricks, ... (default: $MLFLOW_TRACKING_URI)")
    im.add_argument("--experiment", default=None, metavar="NAME",
                    help="only this experiment (default: every active experiment with runs)")
    im.set_defaults(handler=_command("importing", "cmd_import_mlflow"))

    # -- queries ------------------------------------------------------------
    p = add("query", "run a canned lifecycle query (q1-q7, d1-d8, p1-p2, s1-s3)",
            "Runs a canned lifecycle query with its parameters bound (never pasted into the\n"
            "SPARQL). A data parameter (model, dataset, data) takes a captured value id, the\n"
            "data's location URI or its path (a relative one from the working directory);\n"
            "training takes a task id; ids and IRIs a query printed can be given back. Tables\n"
            "show ids (run-1/training), json / csv the full IRIs. --schema must be the one the\n"
            "store was ingested in.\n\nexamples:\n"
            "  provkg query --list\n"
            "  provkg query q1 -p model=file:///models/m.pt\n"
            "  provkg query d5 -p workflow=flower-training -p k=5 --format csv\n"
            "  provkg query q4 -p dataset=file:///data/train.h5 --schema tagged --store oxigraph:tagged-db\n"
            "  provkg query q7 -p dataset=ds-1 --show         # the SPARQL, not the answer")
    _store_arg(p)
    p.add_argument("name", nargs="?", help="query name (see --list)")
    p.add_argument("--list", action="store_true", help="list canned queries, parameters and columns")
    p.add_argument("--param", "-p", action="append", default=[], metavar="K=V", help="a parameter; repeat")
    p.add_argument("--schema", choices=["typed", "tagged", "sprov"], default=None,
                   help="the schema the store was ingested in: typed PROV-ML, tag-based PROVLake "
                        "or S-PROV (default: typed; sprov for s1-s3, which exist only there)")
    p.add_argument("--show", action="store_true", help="print the SPARQL instead of running it")
    p.add_argument("--fail-empty", action="store_true",
                   help="exit with status 3 when the answer has no rows (for scripts)")
    _format_arg(p)
    p.set_defaults(handler=_command("query", "cmd_query"))

    p = add("sparql", "run a read-only SPARQL query from a file ('-' for stdin)",
            "Runs SELECT, ASK, CONSTRUCT or DESCRIBE (updates and SERVICE are refused) over every\n"
            "graph of the store; CONSTRUCT / DESCRIBE print N-Triples as a table. provkg's\n"
            "prefixes (prov:, provml:, provlake:, seis:, ... ) need no PREFIX line.\n\nexamples:\n"
            "  provkg sparql my-query.rq --format csv\n"
            "  echo 'SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }' | provkg sparql - --format json")
    _store_arg(p)
    p.add_argument("file", metavar="FILE.rq")
    _format_arg(p)
    p.set_defaults(handler=_command("query", "cmd_sparql"))

    p = add("validate", "check the store's graph against the graph contract's SHACL shapes",
            "Checks the store's graph (every graph but the ontologies') with pyshacl against the\n"
            "shapes in ontology/shapes/ for its schema (those whose executions the store holds,\n"
            "typed when none; --schema to choose), with the ontologies as the class hierarchy.\n"
            "Prints the violations grouped by node (path, message, shape); exit status 1 when\n"
            "there are any, 0 when the graph conforms. Reads the store whole: for stores of\n"
            "demo size, tests and CI.\n\nexamples:\n"
            "  provkg validate\n"
            "  provkg validate --store oxigraph:tagged-db --schema tagged --format json\n"
            "  provkg validate --no-prov-base   # a graph mapped before the PROV base layer")
    _store_arg(p)
    p.add_argument("--schema", choices=["typed", "tagged", "sprov"], action="append", default=None,
                   help="a schema whose shapes apply; repeat for a store holding several "
                        "(default: the schemas found in the store)")
    p.add_argument("--no-prov-base", dest="prov_base", action="store_false",
                   help="skip ontology/shapes/prov-base.ttl (prov:Activity / Entity / Agent / Plan "
                        "asserted, qualified associations with prov:hadPlan): for a graph mapped "
                        "before provkg asserted them")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="text for people, json for scripts (default: %(default)s)")
    p.set_defaults(handler=_command("validate", "cmd_validate"))

    # -- capture side -------------------------------------------------------
    p = add("schema", "print JSON Schemas of the public formats",
            "Prints the JSON Schema of a public format, for clients in other languages.\n\n"
            "examples:\n  provkg schema events > provkg-events.schema.json")
    p.add_argument("which", choices=["events"], metavar="{events}",
                   help="events: wire format v1 batch envelope")
    p.set_defaults(handler=_command("serve", "cmd_schema"))

    p = add("replay", "re-send a capture spool to a server or another sink (idempotent)",
            "Re-sends what a capture sink spooled because its receiver was down, then removes\n"
            "it from the spool; sending twice adds nothing (events are idempotent).\n\nexamples:\n"
            "  provkg replay provkg-spool --to http://127.0.0.1:8000\n"
            "  provkg replay provkg-spool --to file:provkg-events    # then provkg ingest provkg-events/")
    p.add_argument("spool", metavar="SPOOL_DIR")
    p.add_argument("--to", required=True, metavar="URL", help="http://HOST:PORT, mqtt://HOST:PORT/TOPIC or file:DIR")
    p.set_defaults(handler=_command("replay", "cmd_replay"))

    # -- service ------------------------------------------------------------
    p = add("serve", "run the HTTP API (ingest, canned queries, read-only SPARQL)",
            "The shared endpoint next to the clusters: POST /v1/events, /v1/specs, GET /v1/queries,\n"
            "/v1/sparql (SPARQL 1.1 Protocol, read-only), /health/ready; OpenAPI docs at /docs.\n"
            "Accepted batches reach a durable queue (PROVKG_QUEUE_DIR, default ./provkg-queue)\n"
            "before 202; a worker maps them into the store.\n\n"
            "Settings (environment, prefix PROVKG_; all in docs/reference/service.md):\n"
            "  PROVKG_TOKEN           writes need 'Authorization: Bearer <token>' when set\n"
            "  PROVKG_MQTT_URL        also consume capture batches from this broker (mqtt://H:P/prefix/#)\n"
            "  PROVKG_INGEST_SCHEMA   typed (default) | tagged | sprov\n"
            "  PROVKG_QUERY_TIMEOUT_S SPARQL time limit (30), PROVKG_MAX_ROWS row cap (100000)\n"
            "  PROVKG_MAX_BODY_BYTES  request body limit (16 MiB)\n\n"
            "  PROVKG_TOKEN=s3cret provkg serve --store oxigraph:kg --port 8000")
    _store_arg(p)
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=None, help="port (default 8000)")
    p.set_defaults(handler=_command("serve", "cmd_serve"))

    p = add("listen", "consume capture batches from an MQTT broker into the ingest queue",
            "Edge devices publish and forget; this process subscribes (QoS 1, persistent session),\n"
            "queues each batch durably before acknowledging it, and maps it into the store.\n"
            "Settings as for serve (PROVKG_QUEUE_DIR, PROVKG_INGEST_SCHEMA, PROVKG_MQTT_CLIENT_ID;\n"
            "see docs/reference/service.md). Specs: --spec here, or any spec registered in the store before.\n\n"
            "  provkg listen 'mqtt://127.0.0.1:1883/provkg/#' --spec train.yaml --store oxigraph:kg")
    _store_arg(p)
    p.add_argument("url", metavar="mqtt://HOST:PORT/PREFIX/#")
    p.add_argument("--spec", action="append", default=[], metavar="SPEC",
                   help="prospective spec (YAML / JSON) of a workflow the devices capture; repeat")
    p.set_defaults(handler=_command("serve", "cmd_listen"))

    # -- benchmarks ---------------------------------------------------------
    p = add("bench", "benchmarks")
    bench_sub = p.add_subparsers(dest="bench_command", metavar="WHICH")
    p.set_defaults(help_parser=p)
    bc = bench_sub.add_parser(
        "clauses", help="clause counts per query part, typed vs tagged, next to the paper's Table 3",
        description="Counts the triple patterns (clauses) of each part of Q7 as provkg renders it,\n"
                    "typed (PROV-ML) and tag-based (PROVLake), next to the PROV-ML paper's Table 3;\n"
                    "--show prints each part's SPARQL.\n\n"
                    "examples:\n  provkg bench clauses\n  provkg bench clauses --show\n"
                    "  provkg bench clauses --format json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bc.add_argument("--format", choices=("table", "json"), default="table",
                    help="table for people (default), json for scripts")
    bc.add_argument("--show", action="store_true",
                    help="also print each Q7 part's SPARQL in both schemas")
    bc.set_defaults(handler=_command("bench", "cmd_bench_clauses"))
    bs = bench_sub.add_parser(
        "schemas", help="the paper's typed vs tag-based experiment across stores",
        description="Generates the PROV-ML paper's synthetic lifecycle (8 workflows x 300 epochs x 200\n"
                    "batches at --scale 1: 10.17M triples per schema), maps it typed and tagged, bulk\n"
                    "loads both into each store, times every canned query (cold, then warm median\n"
                    "and min-max) and checks typed and tagged answers are identical.\n"
                    "Then the same with per-epoch rollups (granularity both) for q4, q5 and q7.\n"
                    "Results: OUT/schemas-SCALE.{json,md,png}. Full scale needs ~40 minutes here.\n\n"
                    "  provkg bench schemas --scale 0.01 --stores oxigraph,memory\n"
                    "  provkg bench schemas --scale 1 --stores oxigraph,virtuoso --queries q1,q5,q7",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bs.add_argument("--scale", type=float, default=0.01,
                    help="fraction of the paper's 10.17M triples, more than 0 and at most 10 (default %(default)s)")
    bs.add_argument("--stores", default="oxigraph,memory,rdflib,oxigraph-server,virtuoso",
                    help="comma-separated, from oxigraph (on disk), memory, rdflib, oxigraph-server, "
                         "virtuoso (default: all)")
    bs.add_argument("--out", default="benchmarks/results", help="where results go (default %(default)s)")
    bs.add_argument("--work", default="benchmarks/work",
                    help="where data and stores go (large; git-ignored; default %(default)s)")
    bs.add_argument("--queries", default=None,
                    help="comma-separated canned queries (default: every one with an answer)")
    bs.add_argument("--rdflib-scale", type=float, default=0.05,
                    help="scale for rdflib when --scale is larger (it holds less; default %(default)s)")
    bs.add_argument("--timeout", type=float, default=300.0,
                    help="seconds per query run before it counts as timed out (default %(default)s)")
    bs.add_argument("--rdflib-timeout", type=float, default=60.0,
                    help="the same for rdflib, whose queries are slow (default %(default)s)")
    bs.add_argument("--budget", type=float, default=60.0,
                    help="seconds of warm runs per query and store, never below 5 runs (default %(default)s)")
    bs.add_argument("--explain-timeout", type=float, default=1800.0,
                    help="seconds for each Oxigraph query plan with evaluation statistics "
                         "(Q1/Q5/Q7; collecting the statistics runs a query several times "
                         "slower): a plan not "
                         "done by then is left out (default %(default)s)")
    bs.add_argument("--no-rollups", action="store_true",
                    help="leave out the rollup-backed canned forms (the same lifecycle stored again at "
                         "granularity both, q4 / q5 / q7 timed on it)")
    bs.add_argument("--quiet", action="store_true", help="no progress bars")
    bs.set_defaults(handler=_command("bench", "cmd_bench_schemas"))

    return parser
