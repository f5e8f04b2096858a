"""Builds shared between candidates (kz_core/evaluate/builds.py): made by kz's trusted
builder, moved into the shared folder under a key the evaluator computes, read (never
written) by candidates.

Written against the version before it, where a candidate's own process built and cached
its extensions: sharing that cache would have let one candidate plant a library for
another candidate's sources, so nothing was shared and every candidate built again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kz_core.evaluate import isolation
from kz_core.evaluate.builds import MAX_DEFERRED, plain_tree, publish, shared_key, validate_deferred
from kz_core.model import Candidate, Problem, Verdict

from .conftest import EXAMPLE_CANDIDATES, REPO, eval_config


def test_the_key_follows_backend_arguments_and_toolchain():
    base = shared_key("cuda_inline", {"name": "a", "flags": ["-O3"]}, {"nvcc": "13.0"})
    assert base == shared_key("cuda_inline", {"flags": ["-O3"], "name": "a"}, {"nvcc": "13.0"})
    assert base != shared_key("cuda_inline", {"name": "a", "flags": ["-O2"]}, {"nvcc": "13.0"})
    assert base != shared_key("cuda_inline", {"name": "a", "flags": ["-O3"]}, {"nvcc": "12.8"})
    assert base != shared_key("cuda", {"name": "a", "flags": ["-O3"]}, {"nvcc": "13.0"})


def test_deferred_builds_are_checked_as_data():
    builders = {"cuda_inline": object()}
    entry = {"backend": "cuda_inline", "arguments": {"name": "x"}}
    assert validate_deferred([entry], builders) == [entry]
    optional = {**entry, "optional": True}  # a build its user can do without (cuda_inline's prelude)
    assert validate_deferred([optional, entry], builders) == [optional, entry]
    for bad in (
        [{"backend": "triton", "arguments": {}}], [{"backend": "cuda_inline"}], "x", [entry] * (MAX_DEFERRED + 1), [{**entry, "folder": "/tmp"}],
        [{**entry, "optional": False}], [{**entry, "optional": "yes"}],
    ):
        with pytest.raises(ValueError):
            validate_deferred(bad, builders)


def test_only_plain_trees_are_published_and_a_published_key_stays(tmp_path):
    root = tmp_path / "builds"
    good = tmp_path / "good"
    (good / "sub").mkdir(parents=True)
    (good / "lib.so").write_bytes(b"binary")
    assert publish(good, root, "cuda_inline", "k1") and (root / "cuda_inline" / "k1" / "lib.so").read_bytes() == b"binary"
    again = tmp_path / "again"
    again.mkdir()
    (again / "lib.so").write_bytes(b"other")
    assert publish(again, root, "cuda_inline", "k1")
    assert (root / "cuda_inline" / "k1" / "lib.so").read_bytes() == b"binary"  # the first build stays
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "lib.so").symlink_to(root / "cuda_inline" / "k1" / "lib.so")
    assert not plain_tree(linked) and not publish(linked, root, "cuda_inline", "k2")
    assert not (root / "cuda_inline" / "k2").exists()


def test_a_record_naming_a_library_outside_its_folder_is_not_a_build(tmp_path):
    pytest.importorskip("kz_backend_cuda")
    import json

    from kz_backend_cuda.inline_build import RECORD_NAME, read_record

    folder = tmp_path / "k"
    folder.mkdir()
    (tmp_path / "elsewhere.so").write_bytes(b"x")
    (folder / "mine.so").write_bytes(b"x")
    record = {"status": "built", "library": "../elsewhere.so"}
    (folder / RECORD_NAME).write_text(json.dumps(record))
    assert read_record(folder) is None
    (folder / RECORD_NAME).write_text(json.dumps({**record, "library": str(tmp_path / "elsewhere.so")}))
    assert read_record(folder) is None
    (folder / RECORD_NAME).write_text(json.dumps({**record, "library": "mine.so"}))
    assert read_record(folder).library == str((folder / "mine.so").resolve())


@pytest.mark.triton
@pytest.mark.skipif(not isolation.support().landlock_abi, reason="this kernel has no Landlock (the sandbox reports it and runs without)")
def test_a_candidate_cannot_plant_a_shared_build(tmp_path, monkeypatch):
    """A candidate reads the shared folder and cannot write it: a library or a record
    planted under any key would be loaded by every later candidate with those sources."""
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))
    from kz_core.evaluate import Evaluator

    plant = '''

def _plant():
    import os
    root = os.environ.get("KZ_SHARED_BUILDS", "")
    for path in (os.path.join(root, "cuda_inline", "0" * 40), os.path.join(root, "planted")):
        try:
            os.makedirs(path, exist_ok=True)
            open(os.path.join(path, "kz-build.json"), "w").write('{"status": "built", "library": "x.so"}')
        except OSError:
            pass


_plant()
'''
    honest = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    problem = Problem("1_vector_add", (REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    with Evaluator([problem], eval_config("eval.workers=1")) as evaluator:
        [result] = evaluator.evaluate([Candidate("1_vector_add", "triton", honest + plant, "planter")])
    assert result.verdict is Verdict.CORRECT, result.message  # it only failed to plant
    shared = tmp_path / "cache" / "builds"
    assert shared.is_dir() and not any(Path(root, name).name == "kz-build.json" for root, _, names in os.walk(shared) for name in names)


def test_a_build_deferred_again_once_made_is_not_the_candidates_fault(monkeypatch):
    """Written against the version before: when the candidate's worker did not find what
    kz's builder had just made (on a busy machine, `nvcc --version` gave no answer in one
    of the two processes, so their build keys differed), the candidate loaded six times
    and was failed with a compile_error."""
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate import evaluator as evaluator_module

    entry = {"backend": "cuda_inline", "arguments": {"name": "ext", "cuda_sources": ["..."]}}
    loads, builds = [], []
    monkeypatch.setattr(evaluator_module, "call_worker", lambda worker, request, timeout, stage: (loads.append(request["op"]) or {"deferred_builds": [entry]}, None))
    problem = Problem("1_vector_add", (REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    with Evaluator([problem], eval_config("eval.workers=1")) as evaluator:
        monkeypatch.setattr(evaluator, "_build_deferred", lambda entries: builds.append(entries) or None)
        reply, finding = evaluator._load(None, Candidate("1_vector_add", "cuda_inline", "", "again"), problem)
    assert reply is None and finding.check == "not_run" and "not the candidate's fault" in finding.message
    assert loads == ["load", "load"] and len(builds) == 1  # built once, then the repeat is seen


@pytest.mark.triton
def test_a_verified_candidates_deferred_build_is_made_with_nothing_of_the_gpu_held(tmp_path, monkeypatch):
    """Written against the version before: a verified candidate's deferred builds were made
    while it held the GPU lock shared (and, for a large problem, its memory reservation),
    its worker alive, and it loaded again in that same worker. A cold load_inline build
    is tens of seconds of nvcc, and every neighbour's timing (an exclusive take waits for
    every shared holder), and every shared take behind it, waited for it. Now the worker
    is killed and the GPU given back before kz's builder runs, and the candidate loads
    again in a fresh worker, still correct."""
    pytest.importorskip("kz_backend_cuda")  # a backend with a builder (cuda_inline); its build is made by the test
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate import evaluator as evaluator_module

    defers = """

def _build_or_defer():
    import os
    from kz_core.evaluate import builds
    if not os.path.isdir(os.path.join(os.environ.get(builds.SHARED_ENV, ""), "cuda_inline", "made-by-the-test")):
        builds.defer("cuda_inline", {"name": "kz_test_ext", "cuda_sources": ["// made by the test"]})


_build_or_defer()
"""
    honest = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    problem = Problem("1_vector_add", (REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    loaded_in, at_build = [], []
    call_worker = evaluator_module.call_worker

    def recorded_call(worker, request, *args, **kwargs):
        if request.get("op") == "load":
            loaded_in.append(worker)
        return call_worker(worker, request, *args, **kwargs)

    monkeypatch.setattr(evaluator_module, "call_worker", recorded_call)
    with Evaluator([problem], eval_config("eval.workers=1")) as evaluator:

        def build(entries):
            gpu = evaluator._gpu
            at_build.append({"gpu shared": gpu._shared, "gpu exclusive": gpu._exclusive, "loading worker retired": loaded_in[-1].retired})
            (evaluator._shared_builds.root / "cuda_inline" / "made-by-the-test").mkdir(parents=True)
            return None

        monkeypatch.setattr(evaluator, "_build_deferred", build)
        [result] = evaluator.evaluate([Candidate("1_vector_add", "triton", honest + defers, "deferring")])
    assert result.verdict is Verdict.CORRECT, result.message
    assert at_build == [{"gpu shared": 0, "gpu exclusive": False, "loading worker retired": True}]
    assert len(loaded_in) == 2 and loaded_in[0] is not loaded_in[1]  # loaded again in a fresh worker
    assert any("made 1 build(s) this candidate deferred" in f.message for f in result.findings), result.findings


def test_a_build_the_builder_did_not_finish_is_never_shared(tmp_path, monkeypatch):
    """Written against the version before: a build cut by its timeout (a busy machine) left
    a folder without a record, which was moved into the shared folder all the same; the
    candidate's worker, finding no finished build under the key, deferred it again and got
    "not_run ... the two processes described the toolchain differently", and so did every
    later candidate with those sources, since a key that exists is never built again. Now
    it is the candidate's compile_error (as a timeout in its own process was), nothing is
    shared, and the next evaluation builds it."""
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate import evaluator as evaluator_module

    replies = iter([{"identity": {"toolchain": "fake"}}, {"record": {"status": "failed", "message": "the build ran past 150 s", "retry": True}}])
    monkeypatch.setattr(evaluator_module, "call_worker", lambda worker, request, timeout, stage: (next(replies), None))
    problem = Problem("1_vector_add", (REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    with Evaluator([problem], eval_config("eval.workers=1")) as evaluator:
        finding = evaluator._build_one("cuda_inline", {"name": "ext", "cuda_sources": ["..."]})
        shared = evaluator._shared_builds.root
    assert finding is not None and finding.check == "compile_error", finding
    assert "ran past 150 s" in finding.message and "builds it again" in finding.message
    assert not (shared / "cuda_inline").exists() or not any((shared / "cuda_inline").iterdir())


def test_the_inline_builder_marks_an_unfinished_build(monkeypatch, tmp_path):
    from kz_backend_cuda import inline_build

    tools = inline_build.Toolchain("/usr/local/cuda", "13.0", "9.0", "13.0")
    monkeypatch.setattr(inline_build, "toolchain", lambda device: tools)

    def cut(*args, **kwargs):
        raise inline_build.InlineBuildError("load_inline: building extension 'ext' ran past the cuda_inline build timeout")

    monkeypatch.setattr(inline_build, "build_into", cut)
    monkeypatch.setattr(inline_build, "USE_PRELUDE", False)
    record = inline_build.build_shared({"name": "ext", "cuda_sources": ["..."]}, str(tmp_path), "cuda:0")
    assert record["status"] == "failed" and record["retry"] is True
    monkeypatch.setattr(inline_build, "build_into", lambda *a, **k: (_ for _ in ()).throw(inline_build.InlineBuildError("no nvcc", unavailable=True)))
    assert "retry" not in inline_build.build_shared({"name": "ext"}, str(tmp_path), "cuda:0")


@pytest.mark.triton
@pytest.mark.skipif(not isolation.support().landlock_abi, reason="this kernel has no Landlock (the sandbox reports it and runs without)")
def test_a_candidate_opens_a_build_by_its_key_and_cannot_list_its_siblings(tmp_path, monkeypatch):
    """The cheat that defeated the version before (the shared folder readable whole): list
    the shared builds, read a sibling's ``cuda.cu`` and ``load_inline`` those very sources,
    which finds the sibling's build under their key and launches its kernel as the
    candidate's own. Now the folder's files open only by name: a candidate finds its own
    builds (it knows their key) and lists nothing there."""
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "cache"))
    from kz_core.evaluate import Evaluator

    sibling = tmp_path / "cache" / "builds" / "cuda_inline" / ("b" * 40)
    sibling.mkdir(parents=True)
    (sibling / "cuda.cu").write_text("__global__ void siblings_kernel() {}")
    probe = f'''

def _probe():
    import os
    # The evaluator's compile timeout reaches its workers (backends' builds stop before it).
    assert os.environ["KZ_COMPILE_TIMEOUT_S"] == "77", os.environ.get("KZ_COMPILE_TIMEOUT_S")
    root = os.environ["KZ_SHARED_BUILDS"]
    with open(os.path.join(root, "cuda_inline", "{sibling.name}", "cuda.cu")) as file:
        assert "siblings_kernel" in file.read()  # a build opens by its key
    for folder in (root, os.path.join(root, "cuda_inline"), os.path.join(root, "cuda_inline", "{sibling.name}")):
        try:
            found = os.listdir(folder)
        except PermissionError:
            continue
        raise RuntimeError(f"listed {{folder}}: {{found}}")


_probe()
'''
    honest = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    problem = Problem("1_vector_add", (REPO / "examples" / "problems" / "1_vector_add.py").read_text())
    with Evaluator([problem], eval_config("eval.workers=1", "eval.compile_timeout_s=77")) as evaluator:
        [result] = evaluator.evaluate([Candidate("1_vector_add", "triton", honest + probe, "lister")])
    assert result.verdict is Verdict.CORRECT, result.message
