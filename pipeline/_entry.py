"""What every ``pipeline/<stage>.py`` does: run the stage, or say in one line how to get the
project's Python when the stage's modules cannot be imported (``dvc repro`` runs the ``python``
first on the PATH, which is the project's only inside ``make`` or an activated ``.venv``).

Among every stage's DVC dependencies (``tests/test_dvc_deps.py``): it picks the stage that runs.
"""
import sys

EXIT_ERROR = 2   # as the stage runner's expected errors


def run_stage(name: str) -> None:
    """Run ``rnnsearch.stages.<name>`` through the stage runner (exit status as it returns)."""
    try:
        from rnnsearch.stages.runner import main
    except ModuleNotFoundError as err:
        print(f"{name}: error: {sys.executable} cannot import {err.name!r}: this is not the "
              f"project's Python. Run the pipeline with `make repro`, or "
              f"`source .venv/bin/activate` first (`make setup` creates .venv)", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    main(name)
