"""Lifecycle queries: the builder (query parts per schema), the canned-query catalog,
the portable duration expression and the clause counts of the PROV-ML paper's Table 3.

>>> from provkg.queries import render
>>> "provml:TrainingExecution" in render("q4", {"dataset": "file:///d.h5"}, schema="typed")
True
"""

from provkg.queries.builder import seconds_between
from provkg.queries.catalog import CannedQuery, canned_queries, get_query, render
from provkg.queries.params import Parameter

__all__ = ["CannedQuery", "Parameter", "canned_queries", "get_query", "render", "seconds_between"]
