"""``provkg bench clauses | schemas``."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

__all__ = ["cmd_bench_clauses", "cmd_bench_schemas"]


def cmd_bench_clauses(args: argparse.Namespace) -> int:
    """Clause counts per Q7 part, typed vs tagged, next to the paper's Table 3 (``--format
    json`` for scripts; ``--show``: each part's SPARQL too)."""
    from provkg.queries.clauses import clause_counts, q7_parts

    rows = clause_counts()
    if getattr(args, "format", "table") == "json":
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    print(f"{'Q7 query part':<24}{'provkg typed':>14}{'provkg tagged':>15}"
          f"{'paper w/ PROV-ML':>18}{'paper w/o':>11}")
    for r in rows:
        print(f"{r.part:<24}{r.typed:>14}{r.tagged:>15}{r.paper_typed:>18}{r.paper_tagged:>11}")
    if getattr(args, "show", False):
        for schema in ("typed", "tagged"):
            print(f"\n# {schema}")
            for name, part in q7_parts(schema).items():
                print(f"# {name}\n{part.sparql()}")
    return 0


def cmd_bench_schemas(args: argparse.Namespace) -> int:
    """The typed vs tag-based experiment (:mod:`provkg.bench.schemas`, which prints its own
    progress and problems)."""
    from provkg.bench import schemas

    return schemas.cmd_schemas(args)
