"""The HTTP service (docs/reference/rest.md): ``create_app(settings)`` in :mod:`provkg.api.app`, what its
requests use in :mod:`provkg.api.service`, uvicorn in :mod:`provkg.api.server`, the MQTT
listener in :mod:`provkg.api.listener`; the commands are :mod:`provkg.cli.serve`'s."""
