"""Problem sources: folders, JSONL, Hugging Face datasets, the shipped examples; filters."""

from __future__ import annotations

import json

import pytest

from kz_core.model import Problem
from kz_core.problems import ProblemSourceError, load_problems, parse_ids, select_problems, validate_problem_code
from kz_core.problems.sources import example_problems_dir

GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""


def test_validation_reasons():
    assert validate_problem_code(GOOD) is None
    assert "syntax error at line 1" in validate_problem_code("def broken(:\n")
    assert validate_problem_code(GOOD.replace("class Model", "class Other")) == "no module-level class Model"
    assert "no module-level def get_inputs()" == validate_problem_code(GOOD.replace("def get_inputs", "def inputs"))
    assert "no module-level def get_init_inputs()" == validate_problem_code(GOOD.replace("def get_init_inputs", "def x"))


def test_directory_source_levels_ids_and_malformed(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level2").mkdir()
    (tmp_path / "level1" / "3_Double.py").write_text(GOOD)
    (tmp_path / "level2" / "7_Fused.py").write_text(GOOD)
    (tmp_path / "level2" / "8_Broken.py").write_text("class Model(:\n")
    (tmp_path / "level2" / "9_NoInputs.py").write_text("class Model: pass\n")
    (tmp_path / "level2" / "__init__.py").write_text("")
    problem_set = load_problems(str(tmp_path))
    assert [(p.name, p.level, p.problem_id) for p in problem_set.problems] == [("3_Double", 1, 3), ("7_Fused", 2, 7)]
    reasons = {e.name: e.reason for e in problem_set.errors}
    assert reasons["8_Broken"].startswith("syntax error at line 1")
    assert "get_inputs" in reasons["9_NoInputs"]
    # One file is a source too.
    single = load_problems(str(tmp_path / "level1" / "3_Double.py"))
    assert single.names() == ["3_Double"]


def test_problem_code_is_never_executed(tmp_path):
    hostile = GOOD + "\nopen(__file__ + '.ran', 'w').write('x')\n"
    (tmp_path / "1_Hostile.py").write_text(hostile)
    assert load_problems(str(tmp_path)).names() == ["1_Hostile"]
    assert not (tmp_path / "1_Hostile.py.ran").exists()


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_jsonl_source_reports_bad_lines_and_loads_the_rest(tmp_path):
    path = tmp_path / "p.jsonl"
    write_jsonl(
        path,
        [
            {"name": "1_A", "code": GOOD, "level": 1, "problem_id": 1},
            '{"name": "2_B", "code": ',  # broken JSON
            {"code": GOOD},  # no name
            {"name": "3_C"},  # no code
            {"name": "4_D", "code": GOOD, "level": "one"},  # wrong type
            {"name": "1_A", "code": GOOD},  # duplicate
            {"name": "5_E", "code": "x = 1"},  # not a problem
            "",
            {"name": "6_F", "code": GOOD, "level": 2},
        ],
    )
    problem_set = load_problems(str(path))
    assert problem_set.names() == ["1_A", "6_F"]
    errors = {e.name: (e.reason, e.source) for e in problem_set.errors}
    assert errors["line 2"][0].startswith("not valid JSON") and errors["line 2"][1].endswith("p.jsonl:2")
    assert "name" in errors["line 3"][0]
    assert "code" in errors["3_C"][0]
    assert "level" in errors["4_D"][0]
    assert "duplicate" in errors["1_A"][0]
    assert "class Model" in errors["5_E"][0]


def test_missing_jsonl_file_is_a_source_error(tmp_path):
    with pytest.raises(ProblemSourceError, match="does not exist"):
        load_problems(str(tmp_path / "absent.jsonl"))


def test_unknown_source_says_what_is_accepted(tmp_path):
    with pytest.raises(ProblemSourceError, match="no problem source understands"):
        load_problems(str(tmp_path / "nothing-here"))


def test_examples_ship_with_the_package():
    problem_set = load_problems("examples")
    assert not problem_set.errors
    assert len(problem_set.problems) >= 5
    assert all(p.problem_id is not None for p in problem_set.problems)
    assert example_problems_dir().is_dir()


def test_filters():
    problems = [Problem(name=f"{i}_{n}", code=GOOD, level=lvl, problem_id=i) for i, n, lvl in [(1, "Matmul", 1), (2, "Conv2d", 1), (3, "Matmul_Relu", 2)]]
    assert [p.problem_id for p in select_problems(problems, level=1)] == [1, 2]
    assert [p.problem_id for p in select_problems(problems, ids="2-3")] == [2, 3]
    assert [p.problem_id for p in select_problems(problems, name="matmul")] == [1, 3]
    assert [p.problem_id for p in select_problems(problems, name="*_Matmul")] == [1]
    assert parse_ids("1-3,7") == {1, 2, 3, 7}
    assert parse_ids("") is None
    with pytest.raises(ValueError, match="bad problem id list"):
        parse_ids("3-1")


def test_kernelbench_level_1_has_100_problems(kernelbench_jsonl):
    problem_set = load_problems(str(kernelbench_jsonl), level=1)
    assert len(problem_set.problems) == 100 and not problem_set.errors
    assert problem_set.problems[0].name == "1_Square_matrix_multiplication_"


def test_kernelbench_with_a_broken_line(kernelbench_jsonl, tmp_path):
    lines = kernelbench_jsonl.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:10] + ['{"name": "oops", "code": "class'] + lines[10:]) + "\n")
    problem_set = load_problems(str(broken), level=1)
    assert len(problem_set.problems) == 100
    assert [(e.name, e.source) for e in problem_set.errors] == [("line 11", f"{broken}:11")]


def test_hugging_face_dataset_from_a_local_dataset_repository(tmp_path):
    """The hub layout of ScalingIntelligence/KernelBench: parquet splits level_1.. level_N."""
    datasets = pytest.importorskip("datasets")
    repo = tmp_path / "KernelBench"
    (repo / "data").mkdir(parents=True)
    for level in (1, 2):
        rows = [{"code": GOOD, "level": level, "name": f"{i}_L{level}P{i}", "problem_id": i} for i in (1, 2, 3)]
        datasets.Dataset.from_list(rows).to_parquet(str(repo / "data" / f"level_{level}-00000-of-00001.parquet"))
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        "  - split: level_1\n    path: data/level_1-*\n  - split: level_2\n    path: data/level_2-*\n---\n"
    )
    problem_set = load_problems(f"hf:{repo}", level=2, ids="2-3")
    assert problem_set.names() == ["2_L2P2", "3_L2P3"]
    assert all(p.source.startswith(f"hf:{repo}[level_2]") for p in problem_set.problems)


def test_hugging_face_dataset_saved_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = [{"name": "1_A", "code": GOOD}, {"name": "2_B", "code": "not python ("}]
    datasets.DatasetDict({"level_3": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    problem_set = load_problems(f"hf:{tmp_path / 'saved'}")
    assert [(p.name, p.level) for p in problem_set.problems] == [("1_A", 3)]
    assert problem_set.errors[0].name == "2_B"


def test_unreachable_hugging_face_dataset_is_a_clear_error(monkeypatch):
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    # Read at import time by both libraries, so patch the constants, not the environment.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ProblemSourceError, match="cannot load Hugging Face dataset 'kz-test/does-not-exist'"):
        load_problems("hf:kz-test/does-not-exist")
