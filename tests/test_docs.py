"""The documentation site builds, and its reference pages say what the code does.

docs/reference/ is the source of truth for provkg's public contracts, so these tests hold it
against the code in both directions: a canned query, parameter, column, command, flag,
setting, route or namespace prefix added (or removed) without its documentation fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from provkg import query_catalog

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _sections(text: str, level: int) -> dict[str, str]:
    """Heading text -> the text under it, up to the next heading of ``level`` or higher."""
    out: dict[str, str] = {}
    current, lines = None, []
    for line in text.splitlines():
        m = re.match(r"^(#{1,6}) (.+?)\s*$", line)
        if m and len(m.group(1)) <= level:
            if current is not None:
                out[current] = "\n".join(lines)
            current, lines = (m.group(2) if len(m.group(1)) == level else None), []
        elif current is not None:
            lines.append(line)
    if current is not None:
        out[current] = "\n".join(lines)
    return out


def _ticked(line: str) -> list[str]:
    return re.findall(r"`([^`]+)`", line)


# -- (a) the site ---------------------------------------------------------------------------


def test_the_site_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    """No broken link or anchor, no page left out of the nav, nothing fetched from the web."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "reference" / "queries" / "index.html").is_file()
    pages = list((tmp_path / "site").rglob("*.html"))
    fetched = [str(p) for p in pages
               if re.search(r"fonts\.(googleapis|gstatic)\.com", p.read_text(encoding="utf-8"))]
    assert not fetched, f"pages that fetch web fonts (theme.font must stay false): {fetched}"


# -- (b) canned queries ---------------------------------------------------------------------

QUERIES_MD = REFERENCE / "queries.md"
_PARAM_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<type>[^|]+?) \| (?P<default>[^|]+?) \| .* \|$")
_SEISMIC_NS = "https://w3id.org/provkg/seismic#"
#: a value of each parameter type, to render a query's SPARQL
_SAMPLE = {"data": "x", "task": "t", "workflow": "w", "int": "1", "str": "loss", "scalar": "1",
           "iri": "https://example.org/x", "float": "1.0", "better": "lower"}


def _query_sections() -> dict[str, str]:
    return {name: text for name, text in _sections(_read(QUERIES_MD), 3).items()
            if re.fullmatch(r"[a-z][a-z0-9_]*", name)}


def _default_cell(parameter: object) -> str:
    if parameter.required:
        return "required"
    if parameter.default is None:
        return "optional"
    return f"`{parameter.default}`"


def test_queries_md_documents_exactly_the_catalog() -> None:
    documented = set(_query_sections())
    names = {q.name for q in query_catalog()}
    assert names - documented == set(), f"canned queries missing from {QUERIES_MD.name}"
    assert documented - names == set(), f"{QUERIES_MD.name} documents queries the code lacks"


@pytest.mark.parametrize("query", query_catalog(), ids=lambda q: q.name)
def test_queries_md_gives_each_query_its_parameters_columns_and_schemas(query: object) -> None:
    section = _query_sections().get(query.name)
    assert section is not None, f"no '### {query.name}' section in {QUERIES_MD.name}"
    assert query.question in section, f"{query.name}: the question is not the catalog's"
    rows = [m.groupdict() for line in section.splitlines() if (m := _PARAM_ROW.match(line))]
    documented = [(r["name"], r["type"].strip(), r["default"].strip()) for r in rows]
    expected = [(p.name, p.type, _default_cell(p)) for p in query.parameters]
    assert documented == expected, f"{query.name}: parameters (name, type, default)"
    columns = [line for line in section.splitlines() if line.startswith("Columns: ")]
    assert len(columns) == 1, f"{query.name}: one 'Columns: ...' line"
    assert _ticked(columns[0]) == list(query.columns), f"{query.name}: columns, in order"
    schemas = [line for line in section.splitlines() if line.startswith("Schemas: ")]
    assert len(schemas) == 1 and _ticked(schemas[0]) == list(query.schemas), f"{query.name}: schemas"


@pytest.mark.parametrize("query", query_catalog(), ids=lambda q: q.name)
def test_queries_md_says_which_queries_need_the_seismic_domain(query: object) -> None:
    """Generic, or reading the seismic vocabulary: as the query's own SPARQL says."""
    needs = [line for line in _query_sections()[query.name].splitlines()
             if line.startswith("Needs: ")]
    assert len(needs) == 1, f"{query.name}: one 'Needs: ...' line"
    params = {p.name: _SAMPLE[p.type] for p in query.parameters if p.required}
    seismic = _SEISMIC_NS in query.render(params, schema=query.schemas[0])
    said = needs[0].removeprefix("Needs: ")
    if seismic:
        assert said.startswith("**the seismic domain**"), f"{query.name} reads seis: terms"
    else:
        assert said.startswith("**generic**"), f"{query.name} is generic"


# -- (c) the command line -------------------------------------------------------------------

CLI_MD = REFERENCE / "cli.md"


@cache
def _provkg_help(*command: str) -> str:
    """``provkg [COMMAND ...] --help``, run as the installed console script runs it."""
    (script,) = entry_points(group="console_scripts", name="provkg")
    module, _, attr = script.value.partition(":")
    code = f"import sys; from {module} import {attr} as main; sys.exit(main(sys.argv[1:]))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVKG_")}
    env["COLUMNS"] = "100"
    result = subprocess.run([sys.executable, "-c", code, *command, "--help"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _listed_commands(help_text: str) -> list[str]:
    """The sub-commands a help text lists under its positional arguments (COMMAND, ACTION...)."""
    block = help_text.split("positional arguments:", 1)[-1].split("\noptions:", 1)[0]
    if not re.search(r"(?m)^  [A-Z]+$", block):
        return []
    return re.findall(r"(?m)^    ([a-z][\w-]*)(?:\s{2,}|$)", block)


def _flags(help_text: str) -> list[str]:
    block = help_text.split("\noptions:", 1)[-1]
    found = []
    for line in block.splitlines():
        if re.match(r"^  -", line):
            found += [f for f in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line.split("  ", 2)[1])
                      if f not in ("-h", "--help")]
    return found


def _command_paths() -> list[tuple[str, ...]]:
    paths = []
    for command in _listed_commands(_provkg_help()):
        paths.append((command,))
        paths += [(command, action) for action in _listed_commands(_provkg_help(command))]
    return paths


COMMANDS = _command_paths()


def test_provkg_help_lists_commands() -> None:
    assert ("query",) in COMMANDS and ("spec", "validate") in COMMANDS, COMMANDS


def test_cli_md_documents_the_options_of_provkg_itself() -> None:
    head = _read(CLI_MD).split("\n## provkg ", 1)[0]
    missing = [flag for flag in _flags(_provkg_help()) if f"`{flag}`" not in head]
    assert not missing, f"options of `provkg` missing from the top of {CLI_MD.name}: {missing}"


def test_cli_md_documents_exactly_the_commands_of_provkg_help() -> None:
    headings = {h.removeprefix("provkg ") for level in (2, 3)
                for h in _sections(_read(CLI_MD), level) if h.startswith("provkg ")}
    listed = {" ".join(path) for path in COMMANDS}
    assert listed - headings == set(), f"commands of `provkg --help` missing from {CLI_MD.name}"
    assert headings - listed == set(), f"{CLI_MD.name} documents commands provkg lacks"


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_cli_md_documents_every_flag_of_each_command(path: tuple[str, ...]) -> None:
    section = _sections(_read(CLI_MD), len(path) + 1).get("provkg " + " ".join(path))
    assert section is not None, f"no section 'provkg {' '.join(path)}' in {CLI_MD.name}"
    missing = [flag for flag in _flags(_provkg_help(*path))
               if not re.search(rf"`{re.escape(flag)}[ `]", section)]
    assert not missing, f"provkg {' '.join(path)}: flags missing from {CLI_MD.name}: {missing}"


# -- (d) the other contracts the reference pages state ----------------------------------------


def test_the_settings_table_lists_every_setting() -> None:
    from provkg.config import Settings

    text = _sections(_read(REFERENCE / "service.md"), 2)["Settings"]
    documented = {name for line in text.splitlines() if line.startswith("| `")
                  for name in _ticked(line.split("|")[1])}
    fields = {name.upper() for name in Settings.model_fields}
    assert fields - documented == set(), "settings missing from service.md"
    assert documented - fields == set(), "service.md documents settings the code lacks"


def test_rest_md_documents_exactly_the_routes(tmp_path: Path) -> None:
    from provkg.api.app import create_app
    from provkg.config import get_settings

    app = create_app(get_settings(store="memory:", queue_dir=str(tmp_path / "queue")))
    routes = {(method.upper(), path) for path, ops in app.openapi()["paths"].items()
              for method in ops}
    documented = set()
    for heading in _sections(_read(REFERENCE / "rest.md"), 2):
        m = re.fullmatch(r"((?:GET|POST|PUT|PATCH|DELETE)(?:, (?:GET|POST|PUT|PATCH|DELETE))*) (/\S+)",
                         heading)
        if m:
            documented |= {(method, m.group(2)) for method in m.group(1).split(", ")}
    assert routes - documented == set(), "routes missing from rest.md"
    assert documented - routes == set(), "rest.md documents routes the app lacks"


def test_the_sparql_guide_lists_every_namespace_prefix() -> None:
    from provkg.vocab import PREFIXES

    text = _read(DOCS / "how-to" / "sparql.md")
    table = _sections(text, 3)["Prefixes"]
    rows = {tuple(_ticked(line)[:2]) for line in table.splitlines() if line.startswith("| `")}
    assert rows == set(PREFIXES.items()), "the prefix table differs from provkg.vocab.PREFIXES"
    declared = dict(re.findall(r"(?m)^PREFIX ([\w-]+):\s+<([^>]+)>", text.split("### Prefixes")[0]))
    assert declared == PREFIXES, "the copy-paste PREFIX block differs from provkg.vocab.PREFIXES"
