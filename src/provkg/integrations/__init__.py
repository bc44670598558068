"""provkg.integrations — framework callbacks that record a training with no code of yours.

Each integration is a module of its own, imported only when you use it (importing this
package imports no framework):

- :mod:`provkg.integrations.lightning`: ``ProvenanceCallback`` for PyTorch Lightning's
  ``Trainer(callbacks=[...])`` (the ``lightning`` extra);
- :mod:`provkg.integrations.keras`: ``ProvenanceCallback`` for Keras 3's ``model.fit(callbacks=[...])``,
  any backend (the ``keras`` extra);
- :mod:`provkg.integrations.transformers`: ``ProvenanceCallback`` for Hugging Face's
  ``Trainer(callbacks=[...])`` (the ``transformers`` extra);
- :mod:`provkg.integrations.sklearn`: ``ProvenanceCallback`` for scikit-learn searches
  (``GridSearchCV`` / ``RandomizedSearchCV``, one training per candidate) and ``partial_fit``
  loops (scikit-learn has no callback API: the callback wraps ``fit`` / ``partial_fit``).

What the callbacks share (settings as dotted names, the framework environment, learning-rate
adaptations, the never-raise guard) is in :mod:`provkg.integrations._common`, which imports
no framework either. The events they send say their kinds and roles, so ingest needs no
written spec.
"""

from __future__ import annotations

__all__: list[str] = []
