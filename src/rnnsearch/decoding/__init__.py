"""Decoding: greedy and batched beam search over the model interface of docs/contracts.md.

Every model decodes through the same code: ``encode / init_state / step`` are all it needs. Like
every package ``__init__`` here, it imports nothing, so a stage depends only on the modules it uses
(tests/test_dvc_deps.py)."""
