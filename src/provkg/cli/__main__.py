"""``python -m provkg.cli ARGS``: the ``provkg`` command."""

import sys

from provkg.cli import main

if __name__ == "__main__":  # (imported, e.g. to read this docstring: nothing runs)
    sys.exit(main())
