"""A failed stage's previous outputs, put back from DVC's cache (or git's HEAD).

DVC deletes a stage's outputs before running it (no output is ``persist``, so that DVC's run cache
stays on). When the stage fails, :func:`restore_outputs` checks out what its last success recorded
in ``dvc.lock``: the cached outputs (data, models) and the uncached ones (metrics, plots, reports),
which :func:`keep_uncached_outputs` copied into DVC's cache on that success, as DVC's run cache
does. By hand, after a ``kill -9``: ``dvc checkout <stage>`` for the cached ones,
``git checkout -- <file>`` for a committed metrics file (docs/failures.md)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from rnnsearch.data.savefile import save_atomically


def restore_outputs(addressing: str, root: Path) -> list[str] | None:
    """Check out the outputs ``dvc.lock`` records for stage ``addressing`` (``train@search-50``)
    in ``root``; returns those not restored, or None when ``dvc.lock`` records none."""
    from dvc.exceptions import CheckoutError
    from dvc.repo import Repo
    from dvc.stage.serialize import to_single_stage_lockfile

    with contextlib.closing(Repo(str(root))) as repo:
        stage = repo.stage.get_target(addressing)
        if not stage.outs or not all(out.hash_info for out in stage.outs):
            return None         # never recorded: there is nothing previous
        # the lock entry as a stage whose every output is cached, as DVC's run cache restores it
        recorded = repo.stage_cache._create_stage(to_single_stage_lockfile(stage),
                                                  wdir=stage.wdir)
        failed = []
        with repo.stage_cache._cache_type_copy():     # (``dvc repro`` holds the repo's lock:
            for out in recorded.outs:                  # outputs one by one, as it checks out)
                try:
                    out.checkout(force=True, allow_missing=True)
                except (CheckoutError, OSError):   # not in the cache
                    pass
                if not out.exists and not from_git(root, out.def_path, out.hash_info.value):
                    failed.append(str(out))
    return failed


def from_git(root: Path, path: str, md5: str) -> bool:
    """Put back ``path`` from git's HEAD if that is the version ``dvc.lock`` records (its md5);
    True when done. For a clone, whose DVC cache lacks committed metrics until its stages run."""
    done = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True)
    if done.returncode or hashlib.md5(done.stdout).hexdigest() != md5:
        return False
    save_atomically(root / path, lambda file: file.write_bytes(done.stdout))
    return True


def keep_uncached_outputs(addressing: str, root: Path) -> None:
    """Copy the uncached outputs of stage ``addressing`` (metrics, plots, reports) into DVC's
    cache, content-addressed as DVC keeps them; the workspace is left as it is."""
    from dvc.repo import Repo

    with contextlib.closing(Repo(str(root))) as repo, repo.stage_cache._cache_type_copy():
        for out in repo.stage.get_target(addressing).outs:
            if out.use_cache or not out.exists:
                continue
            out.save()                 # its hash, as an uncached output (git may track it)
            out.use_cache = True
            out.commit(relink=False)


def under_dvc() -> tuple[str, Path] | None:
    """``(stage addressing, repository)`` under ``dvc repro`` or ``dvc exp run``, else None. The
    repository is the nearest folder up holding ``.dvc``, not ``DVC_ROOT``: under ``dvc exp run
    --temp`` that names the user's repository, but the stage runs (and writes) in a copy of it
    under ``.dvc/tmp/exps/``."""
    addressing = os.environ.get("DVC_STAGE")
    if not addressing or not os.environ.get("DVC_ROOT"):
        return None
    from dvc.exceptions import NotDvcRepoError       # under DVC: it is installed
    from dvc.repo import Repo

    try:
        return addressing, Path(Repo.find_root())
    except NotDvcRepoError:
        return None


def keep_after_success(stage: str) -> None:
    """Under ``dvc repro``, :func:`keep_uncached_outputs` of the stage that just succeeded; a
    problem doing it is one warning line (the stage's outputs are whole)."""
    where = under_dvc()
    if where is None:
        return
    try:
        keep_uncached_outputs(*where)
    except Exception as err:   # noqa: BLE001 - outputs written; only a later restore lacks them
        print(f"{stage}: warning: could not keep a copy of the uncached outputs for a later "
              f"restore ({err})", file=sys.stderr)


def restore_after_failure(stage: str) -> None:
    """Under ``dvc repro`` (``DVC_STAGE`` set), put the stage's previous outputs back and say
    so; a problem doing it is one line, never a second traceback."""
    where = under_dvc()
    if where is None:
        return
    addressing = where[0]
    try:
        missing = restore_outputs(*where)
    except Exception as err:   # noqa: BLE001 - the stage's own failure is what matters
        print(f"{stage}: could not put the previous outputs back ({err}); "
              f"`dvc checkout {addressing}` does it", file=sys.stderr)
        return
    if missing is None:
        return
    if missing:
        print(f"{stage}: the previous outputs are back, but for {', '.join(missing)} (not in "
              f"DVC's cache; `git checkout -- <file>` restores a committed one)", file=sys.stderr)
    else:
        print(f"{stage}: the previous outputs (dvc.lock's) are back in place", file=sys.stderr)
