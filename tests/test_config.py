"""Typed params: unknown keys, wrong types and impossible values fail naming the key."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import make_project, run_in
from rnnsearch.config.base import from_dict, load_section
from rnnsearch.errors import ConfigError
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.tokenize import TokenizeConfig

REPO = Path(__file__).resolve().parents[1]
BASE = {"corpus": "multi30k", "src_lang": "en", "tgt_lang": "fr"}


def test_repo_params_are_valid():
    prepare = load_section(PrepareConfig, "prepare", REPO / "params.yaml")
    tokenize = load_section(TokenizeConfig, "tokenize", REPO / "params.yaml")
    assert prepare.corpus in ("multi30k", "hansard36")
    assert tokenize.vocab_size_src > 4


def test_defaults_and_nested_values():
    cfg = from_dict(PrepareConfig, {**BASE, "clean": {"max_len": 50}, "test_buckets": [10, 20],
                                    "test_per_bucket": 5}, "prepare")
    assert cfg.clean.max_len == 50 and cfg.clean.min_len == 1
    assert cfg.test_buckets == (10, 20)


@pytest.mark.parametrize("override, key", [
    ({"corpsu": "multi30k"}, "prepare.corpsu"),                       # unknown key
    ({"clean": {"max_lenght": 3}}, "prepare.clean.max_lenght"),      # unknown nested key
    ({"seed": "one"}, "prepare.seed"),                                # wrong type
    ({"download": "yes"}, "prepare.download"),                        # a string is not a bool
    ({"sizes": {"train": -5}}, "prepare.sizes.train"),                # negative size
    ({"sizes": {"dev": 1.5}}, "prepare.sizes.dev"),                   # float for an int
    ({"corpus": "europarl"}, "prepare.corpus"),                       # unknown corpus
    ({"corpus": "hansard36", "src_lang": "de"}, "prepare.src_lang"),  # language the corpus lacks
    ({"tgt_lang": "en"}, "prepare.tgt_lang"),                         # same language both sides
    ({"clean": {"min_len": 5, "max_len": 2}}, "prepare.clean.max_len"),
    ({"test_buckets": [20, 10], "test_per_bucket": 3}, "prepare.test_buckets"),
    ({"test_buckets": [10]}, "prepare.test_per_bucket"),
    ({"clean": {"max_ratio": float("nan")}}, "prepare.clean.max_ratio"),   # passes every bound
    ({"clean": {"max_ratio": float("inf")}}, "prepare.clean.max_ratio"),
    ({"cache_dir": ""}, "prepare.cache_dir"),                         # would cache in the repo root
    ({"mirror": " "}, "prepare.mirror"),
])
def test_bad_prepare_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        from_dict(PrepareConfig, {**BASE, **override}, "prepare")
    assert str(err.value).startswith(key + ":"), str(err.value)


def test_missing_required_key():
    with pytest.raises(ConfigError, match=r"prepare\.tgt_lang: required"):
        from_dict(PrepareConfig, {"corpus": "multi30k", "src_lang": "en"}, "prepare")


def test_tokenize_vocab_too_small():
    with pytest.raises(ConfigError, match=r"tokenize\.vocab_size_tgt: must be > 4"):
        from_dict(TokenizeConfig, {"vocab_size_tgt": 3}, "tokenize")


def test_params_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml: params file not found"):
        load_section(PrepareConfig, "prepare", missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("prepare: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load_section(PrepareConfig, "prepare", broken)
    empty_section = tmp_path / "p.yaml"
    empty_section.write_text(yaml.safe_dump({"tokenize": {}}))
    with pytest.raises(ConfigError, match="missing section 'prepare'"):
        load_section(PrepareConfig, "prepare", empty_section)


def test_the_evaluate_stage_names_a_missing_section(tmp_path):
    """The sections the evaluate stage reads besides its own (which cells, which units) fail
    naming the file and the section, not with a KeyError or a silent default."""
    from rnnsearch.stages.evaluate import read_grid, read_tokenize

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"evaluate": {}}))
    for read, section in ((read_grid, "train"), (read_tokenize, "tokenize")):
        with pytest.raises(ConfigError, match=f"p.yaml: missing section '{section}'"):
            read(str(params))


def test_every_float_param_refuses_nan_and_infinity_naming_the_key():
    """NaN compares False with every bound, so a range check alone lets it through."""
    from rnnsearch.config.base import read_params
    from rnnsearch.config.sections import validate_params

    params = read_params(REPO / "params.yaml")
    floats = [(section, name) for section, values in params.items() for name, value in
              values.items() if isinstance(value, float)]
    assert len(floats) >= 2
    for section, name in floats:
        for bad in (float("nan"), float("inf"), float("-inf")):
            changed = {**params, section: {**params[section], name: bad}}
            with pytest.raises(ConfigError, match=rf"^{section}\.{name}: must be a finite number"):
                validate_params(changed)


def alias_bomb(depth: int = 9) -> str:
    """Params whose ``prepare.corpus`` is a list of lists nested ``depth`` deep, each of nine
    aliases of the one below: a few lines that stand for 9**depth values."""
    names = [f"l{level}" for level in range(depth)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['1'] * 9)}]"]
    lines += [f"{name}: &{name} [{', '.join([f'*{below}'] * 9)}]"
              for below, name in zip(names, names[1:])]
    return "\n".join([*lines, f"prepare: {{corpus: *{names[-1]}}}"]) + "\n"


def test_an_alias_bomb_is_refused_at_once_naming_the_file(tmp_path):
    """Was: every entry point hung (an error message formatted the repr of 9**9 values)."""
    from rnnsearch.config.base import read_params

    params = tmp_path / "params.yaml"
    params.write_text(alias_bomb())
    with pytest.raises(ConfigError, match=r"params\.yaml: its aliases expand to [\d,]+ values, "
                                          r"more than the 1,000,000"):
        read_params(params)
    params.write_text(alias_bomb(depth=5))                 # 9**5 values: a size params may have
    assert len(read_params(params)["l4"]) == 9
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "mine.yaml").write_text(alias_bomb())
    done = subprocess.run([sys.executable, "-m", "rnnsearch.presets", "check", "mine"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src"),
                                   RNNSEARCH_ROOT=str(tmp_path)))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "mine.yaml: its aliases expand to" in lines[0]


def test_a_refused_value_is_shown_cut_short():
    """An error message shows a few items of a long or deep value, not the whole of it."""
    nested: list = [1] * 9
    for _ in range(8):
        nested = [nested] * 9                              # 9**9 values, each list shared
    for value in (list(range(100_000)), nested):
        with pytest.raises(ConfigError, match=r"^prepare\.corpus: expected a string") as err:
            from_dict(PrepareConfig, {**BASE, "corpus": value}, "prepare")
        assert len(str(err.value)) < 300, str(err.value)[:300]


def test_the_search_error_wide_beam_must_be_wider_than_the_beam():
    """Was: a wide beam no wider than ``translate.search.beam_size`` was accepted, and the
    search_error stage compared the beam with itself."""
    from rnnsearch.config.base import read_params
    from rnnsearch.config.sections import validate_params

    params = read_params(REPO / "params.yaml")
    beam = params["translate"]["search"]["beam_size"]

    def with_wide_beam(wide: int) -> dict:
        return {**params, "evaluate": {**params["evaluate"], "search_error_wide_beam": wide}}

    for wide in (beam, beam - 1):
        with pytest.raises(ConfigError, match=rf"^evaluate\.search_error_wide_beam: must be > "
                                              rf"translate\.search\.beam_size \({beam}\), "
                                              rf"got {wide}"):
            validate_params(with_wide_beam(wide))
    assert validate_params(with_wide_beam(beam + 1))["evaluate"].search_error_wide_beam == beam + 1


@pytest.mark.parametrize("cap", [0, 1])
def test_a_length_cap_with_no_place_for_a_word_is_refused(cap):
    """Was: ``max_len_cap: 1`` emptied every translation (the cap counts the closing </s>)."""
    from rnnsearch.config.search import SearchOptions

    with pytest.raises(ConfigError, match=rf"^translate\.search\.max_len_cap: must be >= 2 "
                                          rf"\(.*</s>.*\), got {cap}$"):
        from_dict(SearchOptions, {"max_len_cap": cap}, "translate.search")
    assert from_dict(SearchOptions, {"max_len_cap": 2}, "translate.search").max_len_cap == 2


def presets_check(root: Path, name: str) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.presets check <name>`` over the project at ``root``."""
    return run_in([sys.executable, "-m", "rnnsearch.presets", "check", name], root, check=False,
                  timeout=300)


def write_lr(root: Path, text: str) -> None:
    """Write ``pretrain_lm.lr`` of ``root``'s params.yaml as the YAML text ``text``."""
    params = root / "params.yaml"
    content, count = re.subn(r"(?m)^(pretrain_lm:\n(?:  .*\n)*?  lr: )\S+", rf"\g<1>{text}",
                             params.read_text())
    assert count == 1
    params.write_text(content)


def test_a_learning_rate_written_1e_3_is_the_number_dvc_reads(tmp_path):
    """YAML 1.1 (PyYAML) reads ``1e-3`` (no dot) as a string; DVC, on YAML 1.2, as 0.001."""
    project = make_project(tmp_path / "project", {})
    (project / "presets" / "small_lr.yaml").write_text("train:\n  optim:\n    lr: 5E-4\n")
    write_lr(project, "1e-3")
    done = presets_check(project, "small_lr")
    assert done.returncode == 0, done.stderr
    assert "preset 'small_lr' is valid" in done.stdout
    changed = json.loads(run_in(["dvc", "params", "diff", "--json"], project).stdout)
    lr = changed["params.yaml"]["pretrain_lm.lr"]
    assert (lr["old"], lr["new"]) == (0.002, 0.001)        # a number for DVC too
    run_in(["dvc", "status"], project)
    write_lr(project, "1e-3x")                             # not a number: refused by name
    done = presets_check(project, "small_lr")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "pretrain_lm.lr: expected a number, got '1e-3x'" in lines[-1], lines


# A stage that reads the train section for another purpose, then Lightning's presence.
OTHER_STAGE_READS_TRAIN = (
    "import sys; from rnnsearch.stages.runner import StageContext; "
    "from rnnsearch.config.train import TrainConfig; "
    "StageContext('model_code', 'params.yaml').section(TrainConfig, 'train'); "
    "print('pytorch_lightning' in sys.modules)")


def test_trainer_names_known_without_lightning_are_lightnings_and_spare_its_import():
    """The trainer names checked without importing Lightning are all in its registries, and a
    stage reading the train section for another purpose (model_code) does not import Lightning
    (four seconds of its start) while the train stage's own load checks this machine."""
    from rnnsearch.config.train import COMMON_CHOICES, lightning_choices

    for name, common in COMMON_CHOICES.items():
        assert set(common) <= set(lightning_choices()[name]), name
    imported = subprocess.run([sys.executable, "-c", OTHER_STAGE_READS_TRAIN], cwd=REPO,
                              capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "False"
