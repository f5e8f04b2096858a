"""Every data-model class round-trips through JSON and pickle (hypothesis)."""

from __future__ import annotations

import inspect
import json
import pickle

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kz_core import model
from kz_core.serialization import dumps, from_json_dict, loads, to_json_dict

text = st.text(max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
maybe_float = st.none() | st.floats(allow_nan=False, width=64)  # infinities allowed: JSON5 literals
small_int = st.integers(min_value=0, max_value=10**6)

findings = st.builds(model.Finding, check=text, message=text, severity=st.sampled_from(model.Severity), line=st.none() | small_int)
runtime_stats = st.builds(model.RuntimeStats, median_ms=finite, iqr_ms=finite, min_ms=finite, trials=small_int, clock=st.sampled_from(["cuda_graph", "cuda_events", "cpu"]))
environments = st.builds(model.Environment, device=text, device_name=text, python=text, torch=text, backend_version=text, driver=text)
timings = st.builds(
    model.StageTimings,
    static_s=maybe_float,
    reference_s=maybe_float,
    waiting_s=maybe_float,
    compile_s=maybe_float,
    correctness_s=maybe_float,
    timing_s=maybe_float,
    baseline_s=maybe_float,
    total_s=maybe_float,
)
messages = st.builds(model.ChatMessage, role=st.sampled_from(["system", "user", "assistant"]), content=text)

STRATEGIES = {
    model.Finding: findings,
    model.Problem: st.builds(model.Problem, name=text, code=text, level=st.none() | small_int, problem_id=st.none() | small_int, source=text),
    model.ProblemError: st.builds(model.ProblemError, name=text, reason=text, source=text),
    model.Candidate: st.builds(model.Candidate, problem=text, backend=text, code=text, sample_id=text),
    model.Tolerance: st.builds(model.Tolerance, atol=finite, rtol=finite),
    model.StageTimings: timings,
    model.RuntimeStats: runtime_stats,
    model.Environment: environments,
    model.EvalResult: st.builds(
        model.EvalResult,
        problem=text,
        sample_id=text,
        backend=text,
        verdict=st.sampled_from(model.Verdict),
        findings=st.lists(findings, max_size=3).map(tuple),
        timings=timings,
        max_abs_error=maybe_float,
        max_rel_error=maybe_float,
        runtime=st.none() | runtime_stats,
        baselines=st.dictionaries(text, runtime_stats, max_size=2),
        speedups=st.dictionaries(text, finite, max_size=2),
        launches=st.none() | small_int,
        environment=environments,
        problem_hash=text,
        candidate_hash=text,
        message=text,
    ),
    model.CheckResult: st.builds(
        model.CheckResult, problem=text, sample_id=text, backend=text, status=text,
        findings=st.lists(findings, max_size=3).map(tuple), compile_s=maybe_float, message=text,
    ),
    model.ApiSpec: st.builds(model.ApiSpec, name=text, category=text, description=text, shapes=text, ops=st.lists(text, max_size=3).map(tuple)),
    model.BackendInfo: st.builds(model.BackendInfo, name=text, language=text, description=text, runs_on_cpu=st.booleans()),
    model.ChatMessage: messages,
    model.Prompt: st.builds(model.Prompt, prompt_id=text, messages=st.lists(messages, max_size=3).map(tuple)),
    model.Completion: st.builds(model.Completion, prompt_id=text, role=text, text=text, sample_index=small_int, tokens=small_int),
    model.ModuleStats: st.builds(
        model.ModuleStats, module=text, apis=st.lists(text, max_size=3).map(tuple), samples=small_int, correct=small_int, best_speedup=maybe_float
    ),
    model.TrainingSummary: st.builds(
        model.TrainingSummary, role=st.sampled_from(["coder", "proposer"]), steps=small_int, seconds=finite, model_path=text, reward_wait_s=finite
    ),
    model.FrontierSelection: st.builds(
        model.FrontierSelection,
        modules=st.lists(text, max_size=3).map(tuple),
        api_sets=st.lists(st.lists(text, max_size=3).map(tuple), max_size=3).map(tuple),
        scores=st.dictionaries(text, finite, max_size=3),
    ),
}

MODEL_CLASSES = [obj for _, obj in inspect.getmembers(model, inspect.isclass) if attrs.has(obj) and obj.__module__ == model.__name__]


def test_every_model_class_has_a_strategy():
    missing = [cls.__name__ for cls in MODEL_CLASSES if cls not in STRATEGIES]
    assert not missing, f"add hypothesis strategies for {missing}"


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_round_trip_json_and_pickle_and_frozen(cls):
    @given(STRATEGIES[cls])
    def check(instance):
        line = dumps(instance)
        assert "\n" not in line
        assert loads(cls, line) == instance
        assert from_json_dict(cls, json.loads(json.dumps(to_json_dict(instance)))) == instance
        assert pickle.loads(pickle.dumps(instance)) == instance
        field = attrs.fields(cls)[0]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(instance, field.name, getattr(instance, field.name))

    check()


def test_json_is_plain_values():
    result = model.EvalResult(problem="p", sample_id="0", backend="triton", verdict=model.Verdict.TIMEOUT, findings=(model.Finding("timeout", "killed after 60 s"),))
    data = json.loads(dumps(result))
    assert data["verdict"] == "timeout"
    assert data["findings"] == [{"check": "timeout", "message": "killed after 60 s", "severity": "error", "line": None}]


def test_wrong_types_are_refused_with_the_field_named():
    with pytest.raises(TypeError, match=r"Candidate\.problem"):
        from_json_dict(model.Candidate, {"problem": 3, "backend": "triton", "code": ""})
    with pytest.raises(ValueError):
        from_json_dict(model.EvalResult, {"problem": "p", "sample_id": "0", "backend": "b", "verdict": "great"})


def test_unknown_keys_are_ignored_and_missing_take_defaults():
    candidate = from_json_dict(model.Candidate, {"problem": "p", "backend": "triton", "code": "x", "extra": 1})
    assert candidate == model.Candidate(problem="p", backend="triton", code="x", sample_id="0")


def test_content_hashes_identify_sources():
    a = model.Problem(name="a", code="print(1)")
    b = model.Problem(name="b", code="print(1)")
    assert a.content_hash == b.content_hash == model.content_hash("print(1)")
    assert model.Candidate("a", "triton", "x").content_hash != model.Candidate("a", "triton", "y").content_hash


def test_verdict_values_are_the_documented_ones():
    assert {v.value for v in model.Verdict} == {
        "correct", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "format_error"
    }
    assert not model.Verdict.CORRECT.is_failure and model.Verdict.TIMEOUT.is_failure


def test_a_findings_message_is_bounded_and_says_what_was_cut():
    """Red-team round 26b: a forged reply's 100 MiB "compile error" was copied whole into a
    finding, and so into results and the journal (210 MB each)."""
    from kz_core.model import MAX_FINDING_CHARS, Finding

    finding = Finding("compile_error", "head " + "A" * 10_000_000 + " tail")
    assert len(finding.message) <= MAX_FINDING_CHARS
    assert from_json_dict(Finding, to_json_dict(finding)) == finding  # cut once: read back as it was
    assert finding.message.startswith("head ") and finding.message.endswith(" tail") and "characters cut" in finding.message
    assert Finding("x", "short").message == "short"
    assert len(Finding("c" * 10_000, "m").check) == 200
