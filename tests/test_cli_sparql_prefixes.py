"""``provkg sparql`` declares provkg's own prefixes a query uses without declaring them."""

from __future__ import annotations

import json
import re

from provkg.cli import main
from provkg.store import open_store

TRAINING = "<https://w3id.org/provkg/id/task/t1>"


def _store(tmp_path) -> str:
    url = f"oxigraph:{tmp_path / 'store'}"
    with open_store(url) as s:
        s.add([(TRAINING, "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>",
                "<https://w3id.org/provkg/provml#TrainingExecution>")])
    return url


def _ask(tmp_path, capsys, text: str, url: str) -> tuple[int, str, str]:
    query = tmp_path / "q.rq"
    query.write_text(text)
    code = main(["sparql", str(query), "--store", url, "--format", "json"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_provkg_prefixes_need_no_prefix_line(tmp_path, capsys):
    url = _store(tmp_path)
    code, out, _ = _ask(tmp_path, capsys, "SELECT ?t WHERE { ?t a provml:TrainingExecution }", url)
    assert code == 0
    assert json.loads(out)["rows"] == [[TRAINING.strip("<>")]]


def test_a_declared_prefix_keeps_its_own_iri(tmp_path, capsys):
    url = _store(tmp_path)
    code, out, _ = _ask(tmp_path, capsys, "PREFIX provml: <urn:other#>\n"
                        "SELECT ?t WHERE { ?t a provml:TrainingExecution }", url)
    assert code == 0
    assert json.loads(out)["rows"] == []


def test_an_error_names_the_line_of_the_file_not_of_the_added_prefixes(tmp_path, capsys):
    url = _store(tmp_path)
    body = "SELECT ?t WHERE {\n  ?t a provml:TrainingExecution .\n  ?t ?p\n}\n"
    code, _, err = _ask(tmp_path, capsys, body, url)
    declared = "PREFIX provml: <https://w3id.org/provkg/provml#>\n"
    code_declared, _, err_declared = _ask(tmp_path, capsys, declared + body, url)
    assert code == code_declared == 1
    line = int(re.search(r"line (\d+)", err).group(1))
    # the same error, one line further down in the file that declares the prefix itself
    assert f"line {line + 1}," in err_declared, (err, err_declared)


def test_an_unknown_prefix_is_still_named(tmp_path, capsys):
    url = _store(tmp_path)
    code, _, err = _ask(tmp_path, capsys, "SELECT ?t WHERE { ?t a nope:Thing }", url)
    assert code == 1
    assert "nope:" in err


def test_a_prefix_name_inside_a_string_or_iri_declares_nothing(tmp_path, capsys):
    url = _store(tmp_path)
    code, out, _ = _ask(tmp_path, capsys,
                        'SELECT ?x WHERE { BIND("provml:x" AS ?x) FILTER(?x != <urn:prov:y>) }', url)
    assert code == 0
    assert json.loads(out)["rows"] == [["provml:x"]]
