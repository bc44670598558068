"""Triple stores behind one small interface, picked by URL.

Store URLs (``--store URL`` or ``PROVKG_STORE``):

=============================================  ==============================================
``oxigraph:DIR``                               embedded Oxigraph on disk (default ``oxigraph:provkg-data``)
``memory:``                                    embedded Oxigraph in memory
``rdflib:``                                    rdflib ``Dataset`` in memory (small graphs; slow queries)
``oxigraph+http://HOST:PORT``                  an Oxigraph server (``oxigraph serve``): ``/query``,
                                               ``/update``, Graph Store Protocol at ``/store``
``virtuoso+http://HOST:PORT``                  a Virtuoso server: ``/sparql``, updates through the
                                               authenticated ``/sparql-auth`` (``?user=dba&password=dba``)
``sparql+http(s)://HOST:PORT/PATH``            any SPARQL 1.1 endpoint; the URL is the query endpoint
=============================================  ==============================================

Options for the server forms go in the query string and are removed from the endpoint URL:
``update=URL|/path`` (update endpoint; default: the query URL), ``gsp=URL|/path`` (Graph Store
Protocol endpoint for fast bulk loads), ``user=`` / ``password=`` (HTTP credentials, digest or
basic; ``user:password@HOST`` works too), ``default_graph=IRI`` (where writes without a graph
go, for stores with no writable default graph), ``union=PARAM`` (query parameter asking the
endpoint for the union default graph), ``connect_timeout=S`` (seconds to connect; default 5),
``timeout=S`` (seconds to wait for an answer when no time limit is given; default 900; writes
wait at least 600). Example:
``sparql+http://127.0.0.1:7878/query?update=/update&gsp=/store&union=union-default-graph``.
Messages show store URLs through :func:`display_url`, which hides passwords.

>>> with open_store("memory:") as store:
...     store.count()
0
"""

from __future__ import annotations

from provkg.store.base import Rows, Store, display_url
from provkg.store.urls import STORE_SCHEMES, open_store, store_dialect

__all__ = ["open_store", "store_dialect", "display_url", "Store", "Rows", "STORE_SCHEMES"]
