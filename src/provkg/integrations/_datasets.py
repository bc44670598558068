"""Arrays a training used (``X``, ``y``: numpy, scipy sparse) as capture values; imports no
framework (numpy, scikit-learn's own dependency, only when data is fingerprinted).

- :func:`array_dataset_values`: the data set as a reference, at its location when given,
  else by its content (:func:`fingerprint`), so the same data in several runs is one node;
  and its :func:`shape`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from provkg import capture

__all__ = ["array_dataset_values", "fingerprint", "shape"]

#: data up to this size is fingerprinted whole; larger data by an even sample of its rows
_HASH_WHOLE_BYTES = 64 * 1024 * 1024


def shape(data: Any) -> list[int] | None:
    """``data.shape`` (else ``[len(data)]``) as a list of ints, or None."""
    try:
        held = getattr(data, "shape", None)
        return [int(n) for n in (held if held is not None else (len(data),))]
    except (TypeError, ValueError):
        return None


def array_dataset_values(X: Any, y: Any, dataset: Any, *, run_id: str) -> list[Mapping[str, Any]]:
    """The data set a training used, one mapping per role: a ref (at ``dataset``'s location;
    else by a content id of ``X`` and ``y``, so the same data in several runs is one node) and
    its shape."""
    if isinstance(dataset, capture.Ref):
        ref = dataset
    elif dataset is not None:
        ref = capture.ref(dataset)
    elif X is not None:
        ref = capture.Ref(None, fingerprint(X, y) or f"{run_id}/dataset")
    else:
        return []
    characteristics: dict[str, Any] = {}
    for name, data in (("dataset.shape", X), ("dataset.target_shape", y)):
        found = shape(data)
        if found:
            characteristics[name] = found
    return [capture.datasets(dataset=ref),
            capture.with_role("dataset_characteristic", characteristics)]


def fingerprint(*arrays: Any) -> str | None:
    """A content id of the data (``sklearn-data/<blake2b>``); None for data without bytes
    (object arrays, generators). Data over ``_HASH_WHOLE_BYTES`` is read at evenly spaced
    rows: the id still tells different data sets apart, at a bounded cost."""
    import numpy as np  # scikit-learn's own dependency, there whenever an estimator is

    digest = hashlib.blake2b(digest_size=16)
    for data in arrays:
        if data is None:
            continue
        parts = [getattr(data, name) for name in ("data", "indices", "indptr")] \
            if hasattr(data, "indptr") else [data]  # a scipy sparse matrix
        for part in parts:
            array = np.asarray(part)
            if array.dtype == object:
                return None
            digest.update(f"{array.shape}{array.dtype.str}".encode())
            if array.nbytes > _HASH_WHOLE_BYTES and array.ndim:
                step = -(-array.nbytes // _HASH_WHOLE_BYTES)
                array = array[::step]
            digest.update(np.ascontiguousarray(array).tobytes())
    return f"sklearn-data/{digest.hexdigest()}"
