"""The environment of a workflow run, captured once: host, process, Python, ML package versions.

Package versions come from modules already imported (``sys.modules``) or from installed
distribution metadata; nothing heavy is imported just to learn its version.
"""

from __future__ import annotations

import getpass
import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

from provkg.wire import MAX_NAME

__all__ = ["capture_environment", "process_environment", "default_agent", "PACKAGES"]

#: module name -> distribution name, for the packages whose versions matter to ML provenance
PACKAGES = {
    "numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "sklearn": "scikit-learn",
    "torch": "torch", "tensorflow": "tensorflow", "jax": "jax", "h5py": "h5py",
    "segyio": "segyio", "provkg": "provkg",
}
#: environment variables of batch schedulers worth recording
_JOB_VARS = {"SLURM_JOB_ID": "job_id", "PBS_JOBID": "job_id", "LSB_JOBID": "job_id",
             "SLURM_CLUSTER_NAME": "cluster", "SLURM_JOB_NODELIST": "nodes"}
_cache: dict[int, dict[str, Any]] = {}


def capture_environment() -> dict[str, Any]:
    """Host, pid, Python, platform, scheduler job ids and package versions (cached per process)."""
    pid = os.getpid()
    env = _cache.get(pid)
    if env is None:
        env = {
            "host": socket.gethostname(),
            "pid": pid,
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count() or 0,
        }
        for var, key in _JOB_VARS.items():
            if os.environ.get(var) and key not in env:
                env[key] = os.environ[var]
        env["packages"] = _package_versions()
        _cache.clear()
        _cache[pid] = env
    return dict(env)


_process: dict[int, dict[str, Any]] = {}


def process_environment() -> dict[str, Any]:
    """Host and pid of this process (cached per pid): what a task begun in a process that does
    not own its run (a forked or spawned worker) carries, so S-PROV places its invocation at
    the worker's own system process, not at the run's."""
    pid = os.getpid()
    env = _process.get(pid)
    if env is None:
        env = _process[pid] = {"host": socket.gethostname(), "pid": pid}
    return env


def _package_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for module, dist in PACKAGES.items():
        loaded = sys.modules.get(module)
        version = getattr(loaded, "__version__", None) if loaded is not None else None
        if not isinstance(version, str):
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
            except Exception:  # broken metadata of a foreign package: not worth failing over
                continue
        versions[dist] = version
    return versions


def default_agent() -> str | None:
    """``PROVKG_AGENT``, else the login name, else None."""
    agent = os.environ.get("PROVKG_AGENT") or os.environ.get("USER") or os.environ.get("LOGNAME")
    if not agent:
        try:
            agent = getpass.getuser()
        except Exception:
            return None
    return agent[:MAX_NAME] or None
