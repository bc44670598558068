"""provkg's flagship example: the lifecycle of a seismic facies classifier (Oil & Gas).

After the use case of Souza et al. (PROV-ML paper, sections 2.2 and 5.2, Table 4, Fig. 8):

- ``kg/seismic-kg.ttl``   the geoscientists' knowledge graph (basins, fields, wells, surveys, SEG-Y files)
- ``specs/*.yaml``        the prospective specs of the three workflows
- ``cube.py``             a synthetic post-stack cube written as a real SEG-Y file (segyio)
- ``curation.py``         phase 1: geometry extraction, KG links, despiking
- ``preparation.py``      phase 2: slice selection, tiles, facies labels, HDF5 sets (h5py)
- ``learning.py``         phase 3: scikit-learn MLP, epochs / batches, checkpoints, a rate decay
- ``lifecycle.py``        the three phases in order

The workflow code imports only ``provkg.capture`` from provkg: it is what a scientist writes.
``provkg demo`` (``src/provkg/demo/``) loads this folder as a package by path, gives it a
sink, and queries the graph its events become.
"""

from .lifecycle import DEFAULT, SMALL, LifecycleResult, Progress, Sizes, run_lifecycle

__all__ = ["DEFAULT", "SMALL", "LifecycleResult", "Progress", "Sizes", "run_lifecycle"]
