"""Decoding: greedy and batched beam search over the model interface of docs/contracts.md.

``encode / init_state / step`` are all a decoder needs, so every model decodes through the same
code. Like every package ``__init__`` of the project, this one imports nothing, so that a stage
depends only on the modules it uses (tests/test_dvc_deps.py)."""
