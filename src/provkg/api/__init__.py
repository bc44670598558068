"""The HTTP service (DESIGN §7): ``create_app(settings)`` in :mod:`provkg.api.app`,
``provkg serve`` in :mod:`provkg.api.server`, ``provkg listen`` in :mod:`provkg.api.listener`."""
