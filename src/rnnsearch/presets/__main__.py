"""``python -m rnnsearch.presets``: :func:`rnnsearch.presets.cli.main`."""
import sys

from rnnsearch.presets.cli import main

sys.exit(main())
