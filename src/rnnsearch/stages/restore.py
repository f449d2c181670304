"""A failed stage's previous outputs, put back from DVC's cache.

DVC deletes a stage's outputs before it runs the stage's command (no output is ``persist``, so
DVC's run cache stays on). When the stage then fails, :func:`restore_outputs` checks out what its
last successful run recorded in ``dvc.lock``: the cached outputs (data, models) and the uncached
ones (metrics, plots, reports), of which DVC's run cache keeps a copy. By hand, after a
``kill -9``: ``dvc checkout <stage>`` for the cached ones, ``git checkout -- <file>`` for a
committed metrics file (docs/failures.md)."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


def restore_outputs(addressing: str, root: Path) -> list[str]:
    """Check out the outputs ``dvc.lock`` records for stage ``addressing`` (e.g.
    ``train@search-50``) in the repository ``root``; returns the outputs the cache could not
    give back (none recorded: nothing to do)."""
    from dvc.repo import Repo
    from dvc.stage.serialize import to_single_stage_lockfile

    with contextlib.closing(Repo(str(root))) as repo:
        stage = repo.stage.get_target(addressing)
        if not stage.outs or not all(out.hash_info for out in stage.outs):
            return []           # never recorded: there is nothing previous
        # the lock entry as a stage whose every output is cached, as DVC's run cache restores it
        recorded = repo.stage_cache._create_stage(to_single_stage_lockfile(stage),
                                                  wdir=stage.wdir)
        with repo.stage_cache._cache_type_copy():
            stats = recorded.checkout(allow_missing=True, force=True)
    return [str(path) for path in stats.get("failed", [])]


def restore_after_failure(stage: str) -> None:
    """Under ``dvc repro`` (``DVC_STAGE`` set), put the stage's previous outputs back and say
    so; a problem doing it is one line, never a second traceback."""
    addressing, root = os.environ.get("DVC_STAGE"), os.environ.get("DVC_ROOT")
    if not addressing or not root:
        return
    try:
        missing = restore_outputs(addressing, Path(root))
    except Exception as err:   # noqa: BLE001 - the stage's own failure is what matters
        print(f"{stage}: could not put the previous outputs back ({err}); "
              f"`dvc checkout {addressing}` does it", file=sys.stderr)
        return
    if missing:
        print(f"{stage}: the previous outputs are back, but for {', '.join(missing)} (not in "
              f"DVC's cache; `git checkout -- <file>` restores a committed one)", file=sys.stderr)
