"""The ``provkg`` command: data to stdout, diagnostics to stderr, ``error: ...`` and exit 1 on failure.

The only part of provkg that prints or reads command-line arguments. Parsing lives in
:mod:`provkg.cli.parser`; each command group is a module (``store``: init, load, export,
link, check-links; ``ingest``; ``query``: query, sparql; ``specs``; ``replay``; ``bench``;
``serve``: serve, listen, schema; ``demo``) whose handlers call the use cases of
:mod:`provkg.service` and print what they return, with :mod:`provkg.cli.output`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from provkg.cli.parser import build_parser
from provkg.errors import BadSpec, ProvkgError
from provkg.extras import missing_extra

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``provkg ARGV...``; its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "version", False):
        from provkg import __version__

        print(f"provkg {__version__}")
        return 0
    handler = getattr(args, "handler", None)
    if handler is None:
        getattr(args, "help_parser", parser).print_help(sys.stderr)
        return 2
    try:
        return int(handler(args) or 0)
    except ProvkgError as exc:
        # a spec's problems one per line, each an error as `provkg spec validate` prints them
        for problem in (getattr(exc, "problems", None) if isinstance(exc, BadSpec) else None) or [str(exc)]:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    except UnicodeEncodeError as exc:  # an argument's bytes that are no UTF-8: no traceback
        print(f"error: text that is not UTF-8 (an argument with other bytes?) cannot be used "
              f"here: {exc.object[exc.start:exc.end]!r} at position {exc.start}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # a package of an extra this install does not have
        said = missing_extra(exc)
        if said is None:
            raise
        print(f"error: {said}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `provkg query ... | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141
