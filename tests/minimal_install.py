"""Run code here as it runs with a minimal install: torch, Lightning, numpy, sacrebleu and pytest
but not mlflow, dvc, gensim or sacremoses, which is all the GPU check (scripts/gpu_check.sh)
and the bench need. In subprocesses for which those are absent
(``import mlflow`` raises ModuleNotFoundError, ``importlib.util.find_spec`` finds nothing, and no
package metadata names them), so that those commands cannot come to need one of them unnoticed.
A ``sitecustomize`` module on PYTHONPATH does it at start-up, so every python that a script under
test starts with that PYTHONPATH is affected too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from conftest import REPO

NOT_IN_A_MINIMAL_INSTALL = ("mlflow", "dvc", "gensim", "sacremoses")

_SITECUSTOMIZE = '''"""Test set-up (tests/minimal_install.py): the packages in $RNNSEARCH_ABSENT are not there."""
import importlib.metadata as metadata
import os
import sys

_absent = set(filter(None, os.environ.get("RNNSEARCH_ABSENT", "").split(",")))
sys.modules.update(dict.fromkeys(_absent))      # `import mlflow` raises, find_spec gives None


def _hidden(lookup):                            # ... and no package metadata says otherwise
    def look(name, *args, **kwargs):
        if name.split(".")[0].lower() in _absent:
            raise metadata.PackageNotFoundError(name)
        return lookup(name, *args, **kwargs)
    return look


metadata.version, metadata.distribution = _hidden(metadata.version), _hidden(metadata.distribution)
'''


def minimal_install_env(folder: Path, absent: Sequence[str] = NOT_IN_A_MINIMAL_INSTALL
                        ) -> dict[str, str]:
    """This process's environment with ``src`` and ``folder`` (given a sitecustomize.py that
    hides the ``absent`` packages) on PYTHONPATH: pythons started with it miss those packages."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(folder)]),
                RNNSEARCH_ABSENT=",".join(absent))


def run_with_minimal_install(folder: Path, module: str, *args: str,
                             absent: Sequence[str] = NOT_IN_A_MINIMAL_INSTALL,
                             timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` from the repository root with the ``absent`` packages missing
    (:func:`minimal_install_env`, its sitecustomize written to ``folder``); output captured as
    text."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=minimal_install_env(folder, absent))
