"""CLI behaviour on input found by black-box testing: every problem is `error: …` and exit 1
(docs/reference/cli.md), never a traceback; JSON / CSV output keeps the `{"columns", "rows"}` shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provkg.cli import main

TRIPLES = ('<http://example.org/a> <http://example.org/p> "x" .\n'
           '<http://example.org/a> <http://example.org/q> <http://example.org/b> .\n')


def test_a_folder_given_as_spec_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["spec", "validate", str(tmp_path)]) == 1
    assert "is a folder, not a spec file" in capsys.readouterr().err
    events = tmp_path / "e.jsonl"
    events.write_text("")
    assert main(["ingest", str(events), "--spec", str(tmp_path), "--store", "memory:"]) == 1
    assert "is a folder" in capsys.readouterr().err


def test_a_json_spec_is_parsed_as_json(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.json"
    spec.write_text('{"workflow": "w",\n "phase": "learning",\n "transformations": [],\n}\n')
    assert main(["spec", "validate", str(spec)]) == 1
    assert f"{spec}:4: not valid JSON" in capsys.readouterr().err


def test_load_takes_the_format_when_the_extension_does_not_say_it(tmp_path: Path, capsys) -> None:
    data = tmp_path / "export.dat"
    data.write_text(TRIPLES)
    assert main(["load", str(data), "--store", "memory:"]) == 1
    assert "provkg load --format" in capsys.readouterr().err
    assert main(["load", str(data), "--format", "ntriples", "--store", "memory:"]) == 0
    assert "2 new triples" in capsys.readouterr().out


def test_reading_a_missing_store_folder_is_an_error_and_creates_nothing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "typo-data"
    assert main(["query", "d3", "-p", "training=t", "--store", f"oxigraph:{missing}"]) == 1
    assert "no store in" in capsys.readouterr().err
    query = tmp_path / "q.rq"
    query.write_text("ASK { ?s ?p ?o }")
    assert main(["sparql", str(query), "--store", f"oxigraph:{missing}"]) == 1
    assert not missing.exists()


@pytest.fixture
def store_url(tmp_path: Path, capsys) -> str:
    data = tmp_path / "d.nt"
    data.write_text(TRIPLES)
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", str(data), "--store", url]) == 0
    capsys.readouterr()
    return url


def _sparql(tmp_path: Path, text: str, url: str, fmt: str, capsys) -> str:
    query = tmp_path / "q.rq"
    query.write_text(text)
    assert main(["sparql", str(query), "--format", fmt, "--store", url]) == 0
    return capsys.readouterr().out


def test_sparql_ask_and_construct_keep_the_columns_rows_shape(tmp_path: Path, store_url: str, capsys) -> None:
    ask = "ASK { ?s <http://example.org/p> 'x' }"
    assert json.loads(_sparql(tmp_path, ask, store_url, "json", capsys)) == {
        "columns": ["boolean"], "rows": [[True]]}
    assert _sparql(tmp_path, ask, store_url, "csv", capsys).split() == ["boolean", "true"]
    construct = "CONSTRUCT { ?s ?p ?o } WHERE { ?s <http://example.org/q> ?o BIND(<http://example.org/q> AS ?p) }"
    out = json.loads(_sparql(tmp_path, construct, store_url, "json", capsys))
    assert out == {"columns": ["subject", "predicate", "object"],
                   "rows": [["<http://example.org/a>", "<http://example.org/q>", "<http://example.org/b>"]]}
    assert _sparql(tmp_path, construct, store_url, "table", capsys).strip() == TRIPLES.splitlines()[1]


def test_version_and_sprov_queries_need_no_schema_flag(tmp_path: Path, capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("provkg ")
    data = tmp_path / "d.nt"
    data.write_text(TRIPLES)
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", str(data), "--store", url]) == 0
    capsys.readouterr()
    # s1-s3 exist only in the S-PROV schema: it is their default
    assert main(["query", "s3", "-p", "workflow=w", "--format", "json", "--store", url]) == 0
    assert json.loads(capsys.readouterr().out)["columns"] == ["component", "invocations", "last_event_time"]
    assert main(["query", "s3", "-p", "workflow=w", "--schema", "typed", "--store", url]) == 1
    assert "runs on the sprov schema" in capsys.readouterr().err


def test_malformed_store_urls_are_clear_errors(capsys) -> None:
    for url, says in [("sparql+http://[::1", "IPv6 address opened with [ is not closed with ]"),
                      ("oxigraph+http://h:port", "the port must be a number from 0 to 65535"),
                      ("oxigraph+http://h:99999", "the port must be a number from 0 to 65535"),
                      ("rdflib:/tmp/somewhere", "in memory only"), ("memory:foo", "in memory only")]:
        assert main(["query", "d4", "-p", "workflow=x", "--store", url]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: store URL") and says in err, err


def test_two_specs_for_one_workflow_are_refused(tmp_path: Path, capsys) -> None:
    # found by black-box testing: the last --spec won silently
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("workflow: w\nphase: learning\ntransformations:\n  - {name: t, kind: training}\n")
    b.write_text("workflow: w\nphase: preparation\ntransformations:\n  - {name: t, kind: transformation}\n")
    events = tmp_path / "e.jsonl"
    events.write_text("")
    store = f"oxigraph:{tmp_path / 'db'}"
    assert main(["ingest", str(events), "--spec", str(a), "--spec", str(b), "--store", store]) == 1
    assert f"error: {b}: workflow 'w' already has a spec ({a})" in capsys.readouterr().err
    assert main(["ingest", str(events), "--spec", str(a), "--spec", str(a), "--store", store]) == 0


def test_a_query_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path, store_url: str, capsys,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    query = tmp_path / "bin.rq"
    query.write_bytes(b"SELECT * WHERE { ?s ?p \xff\xfe }")
    assert main(["sparql", str(query), "--store", store_url]) == 1
    assert capsys.readouterr().err == f"error: {query}: not UTF-8 text (byte 23); a SPARQL query is UTF-8 text\n"
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(query.read_bytes())))
    assert main(["sparql", "-", "--store", store_url]) == 1
    assert "error: standard input: not UTF-8 text" in capsys.readouterr().err


def test_a_query_file_with_a_byte_order_mark_runs_and_syntax_errors_name_the_file(
        tmp_path: Path, store_url: str, capsys) -> None:
    # a BOM made the query "not a SPARQL query"; syntax errors gave no file name (black-box)
    query = tmp_path / "bom.rq"
    query.write_bytes("\ufeffASK { }".encode())
    assert main(["sparql", str(query), "--format", "json", "--store", store_url]) == 0
    assert '"boolean"' in capsys.readouterr().out
    bad = tmp_path / "bad.rq"
    bad.write_text("SELECT * WHERE {\n  ?s ?p\n}\n")
    assert main(["sparql", str(bad), "--store", store_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: SPARQL syntax error") and "line" in err
    words = tmp_path / "words.rq"
    words.write_text("this is not sparql")
    assert main(["sparql", str(words), "--store", store_url]) == 1
    assert capsys.readouterr().err.startswith(f"error: {words}: not a SPARQL query")


def test_sparql_json_is_valid_json_for_non_finite_doubles_and_big_integers(
        tmp_path: Path, store_url: str, capsys) -> None:
    xsd = "http://www.w3.org/2001/XMLSchema#"
    text = (f"PREFIX xsd: <{xsd}> SELECT ?v ?big WHERE {{ VALUES ?v {{ "
            '"NaN"^^xsd:double "INF"^^xsd:double "-INF"^^xsd:double 1.5e0 } '
            "BIND(123456789012345678901234567890 AS ?big) } ORDER BY STR(?v)")
    out = _sparql(tmp_path, text, store_url, "json", capsys)
    rows = json.loads(out, parse_constant=pytest.fail)["rows"]  # no bare NaN / Infinity
    # as the API writes them (application/vnd.provkg.rows+json) and capture sends them
    assert sorted(v for v, _ in rows if isinstance(v, str)) == ["-Infinity", "Infinity", "NaN"]
    assert [big for _, big in rows] == [123456789012345678901234567890] * 4


def test_sparql_csv_writes_non_finite_doubles_and_booleans_as_sparql_does(
        tmp_path: Path, store_url: str, capsys) -> None:
    # CSV said Python's nan / inf where JSON said "NaN" (black-box finding)
    text = ('PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> SELECT ?v ?b WHERE { VALUES (?v ?b) { '
            '("NaN"^^xsd:double true) ("INF"^^xsd:double false) ("-INF"^^xsd:double true) } } '
            "ORDER BY STR(?v)")
    out = _sparql(tmp_path, text, store_url, "csv", capsys)
    assert out.split() == ["v,b", "-INF,true", "INF,false", "NaN,true"]


def test_a_parameter_given_twice_is_refused(capsys) -> None:
    assert main(["query", "d3", "-p", "training=a", "--param", "training = b", "--store", "memory:"]) == 1
    assert "error: parameter 'training' given more than once" in capsys.readouterr().err


def test_a_folder_that_is_not_an_oxigraph_store_is_left_alone(tmp_path: Path, capsys) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "notes.txt").write_text("mine")
    query = tmp_path / "q.rq"
    query.write_text("ASK { ?s ?p ?o }")
    data = tmp_path / "d.nt"
    data.write_text(TRIPLES)
    for command in (["sparql", str(query)], ["load", str(data)]):
        assert main([*command, "--store", f"oxigraph:{papers}"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {papers} is not an Oxigraph store"), err
    assert [p.name for p in papers.iterdir()] == ["notes.txt"]  # no database written into it
    assert main(["load", str(data), "--store", f"oxigraph:{tmp_path / 'empty'}"]) == 0  # new: fine


def test_query_and_sparql_read_a_store_another_process_is_writing(tmp_path, capsys) -> None:
    # found by black-box testing: while `provkg ingest` (or a server) held the embedded store,
    # every read command failed on the RocksDB lock
    import subprocess
    import sys
    import textwrap

    db = tmp_path / "db"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from provkg.store import open_store
        with open_store("oxigraph:{db}") as s:
            s.add([("<urn:a>", "<urn:p>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>')])
            print("ready", flush=True)
            sys.stdin.readline()  # hold the lock until told
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        q = tmp_path / "count.rq"
        q.write_text("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert main(["sparql", str(q), "--store", f"oxigraph:{db}", "--format", "json"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out) == {"columns": ["n"], "rows": [[1]]}
        assert "is in use by another process" in err
        # check-links only reads too (it failed with exit 1, its "dangling links" status)
        assert main(["check-links", "--store", f"oxigraph:{db}"]) == 0
        out, err = capsys.readouterr()
        assert out.strip() == "no dangling links" and "is in use by another process" in err
        nt = tmp_path / "more.nt"
        nt.write_text("<urn:b> <urn:p> <urn:c> .\n")
        assert main(["load", str(nt), "--store", f"oxigraph:{db}"]) == 1  # writers still refused
        assert "another provkg process or an Oxigraph server is using that folder" in capsys.readouterr().err
    finally:
        holder.communicate("\n", timeout=30)


def test_an_empty_answer_says_why_when_the_store_can_tell(tmp_path: Path, capsys) -> None:
    """A canned query that finds nothing names a parameter the store does not hold, or the
    schema the data were mapped in; on stderr, so --format json stays parseable."""
    from lifecycle import build_lifecycle, load_lifecycle

    from provkg.store import open_store

    lc = build_lifecycle()
    url = f"oxigraph:{tmp_path / 'db'}"
    with open_store(url) as store:
        load_lifecycle(store, lc, schema="tagged")
    training = lc.trainings[0].id

    # the data are tagged: the typed form finds nothing, the note says where the rows are
    assert main(["query", "d3", "-p", f"training={training}", "--format", "json", "--store", url]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["rows"] == []
    assert "with --schema tagged the same query has" in out.err
    assert main(["query", "d3", "-p", f"training={training}", "--schema", "tagged", "--format",
                 "json", "--store", url]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)["rows"]) == len(lc.trainings[0].epochs) and out.err == ""

    # a task id, workflow name or value location that names nothing
    assert main(["query", "d3", "-p", "training=no-such-training", "--schema", "tagged",
                 "--store", url]) == 0
    assert "the store has no task id 'no-such-training' (parameter training)" in capsys.readouterr().err
    assert main(["query", "d4", "-p", "workflow=flower-trainin", "--store", url]) == 0
    assert "no workflow (spec name) 'flower-trainin'" in capsys.readouterr().err
    assert main(["query", "q3", "-p", "dataset=file:///nowhere.h5", "--store", url]) == 0
    assert "no captured value (id or location) 'file:///nowhere.h5'" in capsys.readouterr().err
    # a measure no spec has (a typo): found by black-box testing, it said nothing
    assert main(["query", "d4", "-p", "workflow=flower-training", "-p", "measure=acuracy",
                 "--schema", "tagged", "--store", url]) == 0
    assert "no attribute of any spec in the store is named 'acuracy'" in capsys.readouterr().err
    assert main(["query", "d7", "-p", "workflow=flower-training", "-p", "hyperparameter=lr_typo",
                 "-p", "value=1", "--schema", "tagged", "--store", url]) == 0
    assert "named 'lr_typo' (parameter hyperparameter)" in capsys.readouterr().err
    # d3 keeps its epochs with the measure column empty: the note comes with rows too
    assert main(["query", "d3", "-p", f"training={training}", "-p", "measure=Loss", "--schema",
                 "tagged", "--format", "json", "--store", url]) == 0
    out = capsys.readouterr()
    assert {row[2] for row in json.loads(out.out)["rows"]} == {None}
    assert "note: no attribute of any spec in the store is named 'Loss' (parameter measure)" in out.err
    # ... and a value no training had names the values recorded (black-box testing: a value
    # in another case gave no rows, unsaid), and nothing about workflows or schemas
    assert main(["query", "d7", "-p", "workflow=flower-training", "-p", "hyperparameter=learning_rate",
                 "-p", "value=12345", "--schema", "tagged", "--store", url]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: no rows: no value 12345 is recorded for hyperparameter "
                          "'learning_rate' (recorded: ") and err.count("\n") == 1
    assert all(repr(str(t.hyperparameters["learning_rate"])) in err for t in lc.trainings)


def test_a_typed_query_on_s_prov_data_says_which_schema_the_store_holds(tmp_path: Path,
                                                                       capsys) -> None:
    from lifecycle import build_lifecycle, load_lifecycle

    from provkg.store import open_store

    lc = build_lifecycle()
    url = f"oxigraph:{tmp_path / 'db'}"
    with open_store(url) as store:
        load_lifecycle(store, lc, schema="sprov")
    for schema in ("typed", "tagged"):
        assert main(["query", "d3", "-p", f"training={lc.trainings[0].id}", "--schema", schema,
                     "--store", url]) == 0
        err = capsys.readouterr().err
        assert (f"this store holds S-PROV data (s-prov:Invocation) and d3 reads the {schema} "
                "schema") in err


@pytest.mark.parametrize(("args", "says"), [
    (["--scale", "0"], "--scale: must be more than 0"), (["--scale", "11"], "at most 10"),
    (["--queries", "zz"], "no canned query named 'zz'"), (["--stores", ","], "--stores: name"),
    (["--timeout", "0"], "--timeout: must be more than 0"), (["--out", "/proc/x"], "--out /proc/x"),
    (["--work", "/proc/x"], "--work /proc/x: cannot write"),
    (["--queries", "q1,s1"], "--queries: s1 runs on the sprov schema")])
def test_bench_schemas_refuses_bad_arguments_before_the_long_work(tmp_path: Path, capsys, args, says) -> None:
    """Found by black-box testing: --scale 0 was a traceback, and an unwritable --out or an
    unknown query failed only after the data were generated, mapped, loaded and queried."""
    work = tmp_path / "work"
    assert main(["bench", "schemas", "--work", str(work), "--out", str(tmp_path / "out"),
                 "--stores", "memory", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err
    assert not work.exists()  # nothing generated


def test_load_says_a_folder_is_a_folder(tmp_path: Path, capsys) -> None:
    # found by black-box testing: `provkg load adir` said "no such file: adir"
    (tmp_path / "kg").mkdir()
    assert main(["load", str(tmp_path / "kg"), "--store", "memory:"]) == 1
    assert "a folder; load takes RDF files" in capsys.readouterr().err


@pytest.mark.parametrize(("group", "lists"), [("bench", "schemas"), ("spec", "validate")])
def test_a_command_group_alone_shows_its_own_help(capsys, group: str, lists: str) -> None:
    assert main([group]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: provkg {group} ")
    assert lists in err


def test_the_table_shows_stored_text_that_looks_like_rich_markup_as_it_is(
        tmp_path: Path, capsys) -> None:
    """Found by black-box testing: `[1,null]` printed as an empty cell, `[red]x[/red]` as `x`."""
    data = tmp_path / "d.nt"
    texts = ["[1,null]", "[red]alert[/red] keep", "C:\\\\path\\\\[x]", "[link=http://e]click[/link]",
             "\\u001B]0;pwned\\u0007 \\u001B[31mred"]  # control characters: escaped on screen
    data.write_text("".join(f'<http://example.org/s{i}> <http://example.org/p> "{t}" .\n'
                            for i, t in enumerate(texts)), encoding="utf-8")
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", str(data), "--store", url]) == 0
    capsys.readouterr()
    out = _sparql(tmp_path, "SELECT ?o WHERE { ?s <http://example.org/p> ?o } ORDER BY ?o", url,
                  "table", capsys)
    for shown in ["[1,null]", "[red]alert[/red] keep", "C:\\path\\[x]", "[link=http://e]click[/link]",
                  "\\x1b]0;pwned\\x07 \\x1b[31mred"]:
        assert shown in out
    assert "\x1b" not in out and "\x07" not in out


def test_a_command_that_only_reads_takes_no_lock(tmp_path: Path) -> None:
    # found by black-box testing: a running `provkg query` held the store's lock, so an
    # ingest (or a server) started meanwhile failed
    import subprocess
    import sys

    from provkg.store import open_store

    db = tmp_path / "db"
    with open_store(f"oxigraph:{db}") as s:
        s.add([("<urn:a>", "<urn:p>", "<urn:o>")])
    with open_store(f"oxigraph:{db}", existing=True, read_only=True) as reader:
        assert reader.select("SELECT ?s WHERE { ?s ?p ?o }").rows == [["urn:a"]]
        assert not reader.snapshot  # nobody else holds it: no "in use" note
        writer = subprocess.run([sys.executable, "-c", (
            "from provkg.store import open_store\n"
            f"with open_store('oxigraph:{db}') as s:\n"
            "    s.add([('<urn:b>', '<urn:p>', '<urn:o>')])\n")], capture_output=True, text=True)
        assert writer.returncode == 0, writer.stderr
    with open_store(f"oxigraph:{db}") as s:
        assert len(s.select("SELECT * WHERE { ?s ?p ?o }").rows) == 2


def test_query_without_a_name_is_an_error_line_and_shows_the_catalog(capsys) -> None:
    # errors are `error: ...` lines
    assert main(["query"]) == 2
    out = capsys.readouterr()
    assert out.err == "error: give a query name, or --list for the catalog\n"
    assert "d3" in out.out


def test_loading_triples_another_graph_holds_warns_where_queries_count_them_twice(
        tmp_path: Path, capsys) -> None:
    """Found by black-box testing: a KG loaded into the default graph and two named graphs
    answered COUNT(*) = 6 for its 2 triples on Oxigraph (oxigraph/oxigraph#1919), silently."""
    data = tmp_path / "kg.nt"
    data.write_text(TRIPLES)
    url = f"oxigraph:{tmp_path / 'db'}"
    assert main(["load", str(data), "--store", url]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["load", str(data), "--graph", "http://example.org/g/a", "--store", url]) == 0
    assert "warning: 2 copies of triples of http://example.org/g/a" in capsys.readouterr().err
    assert main(["load", str(data), "--graph", "http://example.org/g/b", "--store", url]) == 0
    assert "warning: 4 copies" in capsys.readouterr().err
    # a named graph first, then the same triples into the default graph: said too
    fresh = f"oxigraph:{tmp_path / 'db2'}"
    assert main(["load", str(data), "--graph", "http://example.org/g/a", "--store", fresh]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["load", str(data), "--store", fresh]) == 0
    assert "warning: 2 copies of triples of http://example.org/g/a" in capsys.readouterr().err


def test_rdflib_counts_a_triple_in_several_graphs_once(tmp_path: Path) -> None:
    from provkg.service.loading import load_files, shared_copies
    from provkg.store import open_store

    data = tmp_path / "kg.nt"
    data.write_text(TRIPLES)
    with open_store("rdflib:") as store:
        load_files(store, [data], progress=False)
        load_files(store, [data], graph="http://example.org/g/a", progress=False)
        assert shared_copies(store, "http://example.org/g/a") == 0
        assert store.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").rows == [[2]]


def test_arguments_that_are_no_utf8_and_a_bad_ipv6_host_are_one_line_errors(capsys) -> None:
    # found by black-box testing: UnicodeEncodeError and ValueError tracebacks
    from provkg.cli import main

    bad = b"v\xff".decode("utf-8", "surrogateescape")  # as Python hands such argv bytes over
    assert main(["query", "q1", "--param", f"model={bad}", "--store", "memory:"]) == 1
    assert main(["link", "--store", "memory:", bad, "http://x/y"]) == 1
    err = capsys.readouterr().err
    assert err.count("error: text that is not UTF-8") == 2 and "Traceback" not in err
    assert main(["listen", "mqtt://[::1/x", "--store", "memory:"]) == 1
    assert "error: the MQTT URL's host is not valid" in capsys.readouterr().err


def _recorded_store(tmp_path: Path, capsys) -> str:
    """A store holding one training of three epochs, recorded by the capture library."""
    from provkg import capture, ingest_paths, open_store, parse_spec

    events = tmp_path / "events"
    with capture.workflow("cli-wf", sink=f"file:{events}", spool=tmp_path / "spool",
                          run_id="cli-1") as wf:
        with wf.task("training", used={"learning_rate": 0.01}) as training:
            for e in range(3):
                with wf.task("epoch", parent=training, index=e) as epoch:
                    epoch.generate(loss=1.0 / (e + 1), note="x" * 150)
    spec = parse_spec("workflow: cli-wf\nphase: learning\ntransformations:\n"
                      "  - {name: training, kind: training, used: [{name: learning_rate, role: hyperparameter}]}\n"
                      "  - {name: epoch, kind: section, of: training, generated: "
                      "[{name: loss, role: evaluation_measure}]}\n")
    url = f"oxigraph:{tmp_path / 'db'}"
    with open_store(url) as store:
        ingest_paths(store, [events], specs=[spec])
    capsys.readouterr()
    return url


def test_fail_empty_exits_3_on_no_rows_and_0_on_rows(tmp_path: Path, capsys) -> None:
    url = _recorded_store(tmp_path, capsys)
    empty = ["query", "d3", "-p", "training=no-such-training", "--store", url]
    assert main(empty) == 0  # without the flag an empty answer is no failure
    assert main([*empty, "--fail-empty"]) == 3
    capsys.readouterr()
    assert main(["query", "d3", "-p", "training=cli-1.1", "--store", url, "--fail-empty",
                 "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 3


def test_a_table_written_to_a_pipe_is_not_wrapped(tmp_path: Path, capsys) -> None:
    url = _recorded_store(tmp_path, capsys)
    query = tmp_path / "notes.rq"
    query.write_text('SELECT ?v WHERE { ?x <http://www.w3.org/ns/prov#value> ?v '
                     'FILTER(STRSTARTS(STR(?v), "xxx")) }')
    assert main(["sparql", str(query), "--store", url]) == 0
    lines = capsys.readouterr().out.splitlines()  # stdout is no terminal here
    assert any("x" * 150 in line for line in lines), lines
