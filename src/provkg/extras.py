"""Which install extra provides a third-party package, for a one-line error when it is missing.

``pip install provkg`` is the capture library alone (orjson, zstandard); everything else comes
with an extra. Code that needs one imports it as usual; the CLI's boundary (and the capture
library's sink set-up) turn the ModuleNotFoundError into :func:`missing_extra`'s sentence.
"""

from __future__ import annotations

__all__ = ["EXTRA_OF", "missing_extra"]

#: top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF = {
    "paho": "mqtt",
    "pydantic": "server",
    "pydantic_settings": "server",
    "pyoxigraph": "server",
    "rdflib": "server",
    "fastapi": "server",
    "starlette": "server",
    "uvicorn": "server",
    "httpx": "server",
    "yaml": "server",
    "rich": "server",
    "tqdm": "server",
    "owlready2": "reason",
    "mlflow": "mlflow",
    "torch": "lightning",
    "lightning": "lightning",
    "keras": "keras",
    "transformers": "transformers",
    "accelerate": "transformers",
    "numpy": "demo",
    "segyio": "demo",
    "h5py": "demo",
    "sklearn": "demo",
    "joblib": "demo",
    "matplotlib": "demo",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The sentence for a package an extra would have installed, or None for any other
    missing module (a real bug: let it show)."""
    top = (exc.name or "").split(".", 1)[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return (f'this needs provkg\'s "{extra}" extra ({top} is not installed): '
            f'pip install "provkg[{extra}]"')
