"""Address tables in plans: a tensor made from host data whose elements are addresses
inside tensors of the call (Triton tutorial 8's grouped GEMM builds
``torch.tensor([a.data_ptr(), ...], device=...)`` and its kernel loads pointers from it).
Written against the version before, which recorded the candidate process's addresses as
numbers and replayed them so: a kernel reading through them read the wrong memory
(``incorrect``) and one storing through them was refused (``kernel_out_of_bounds``)."""

from __future__ import annotations

import copy
import gc
import weakref

import pytest
import torch

from kz_core.evaluate.plans import PlanError, Replay, launch_table_memory, release_schedule, validate_plan
from kz_core.evaluate.recording import MAX_TABLE_ENTRIES, Recorder, record_kernel


def _record(forward, *inputs):
    recorder = Recorder(list(inputs), 1 << 20)
    plan = recorder.plan(recorder.call(forward, list(inputs)))
    return plan, recorder.constants


#: A tensor no recording of the forward ever sees: its address is no tensor's of the call.
OUTSIDE = torch.zeros(16)


def _grouped(a, b):
    """Row blocks of ``a`` times ``b`` into row blocks of ``c``, through a table of the
    blocks' addresses (and two numbers that are no tensor's address)."""
    c = torch.empty(a.shape[0], b.shape[1])
    table = torch.tensor([a.data_ptr(), a[4:].data_ptr(), c.data_ptr(), c[4:].data_ptr(), 7, OUTSIDE.data_ptr()])
    with record_kernel("triton", {"name": "grouped"}, (2,), [table, b, 4], {}):
        c.copy_(a @ b)
    return c


def _table_launch(seen: list):
    """A stand-in for the kernel: it reads the addresses from its table and computes
    through the tensors the replay says the table names."""

    def launch(step, args, options):
        table, b, rows = args
        named = launch_table_memory()
        seen.append((table.clone(), named))
        a, c = (next(t for t in named if t.data_ptr() == table[i].item()) for i in (0, 2))
        for block in range(2):
            c[block * rows:(block + 1) * rows] = a[block * rows:(block + 1) * rows] @ b

    return launch


def test_addresses_in_a_table_are_recorded_as_references_and_replayed_as_the_replays_own():
    a, b = torch.randn(8, 5), torch.randn(5, 3)
    plan, constants = _record(_grouped, a, b)
    made = next(i for i, s in enumerate(plan["steps"]) if s["kind"] == "op" and s["op"][1] == "lift_fresh_copy")
    step = plan["steps"][made + 1]
    c = plan["steps"][0]["out"]  # torch.empty
    assert step == {
        "kind": "addresses", "table": plan["steps"][made]["out"],
        "entries": [[0, {"t": ["in", 0]}, 0], [1, {"t": ["in", 0]}, 4 * 5 * 4], [2, c, 0], [3, c, 4 * 3 * 4]],
    }  # 7 and an address of no tensor of the call stay numbers
    validate_plan(copy.deepcopy(plan), "triton", len(constants))

    seen: list = []
    fresh_a, fresh_b = torch.randn(8, 5), torch.randn(5, 3)
    provenance: dict = {}
    result = Replay(plan, constants, _table_launch(seen), "cpu")(fresh_a, fresh_b, provenance=provenance)
    torch.testing.assert_close(result, fresh_a @ fresh_b)
    (table, named), = seen
    assert table.tolist() == [
        fresh_a.data_ptr(), fresh_a.data_ptr() + 80, result.data_ptr(), result.data_ptr() + 48, 7, OUTSIDE.data_ptr(),
    ]
    assert any(t is fresh_a for t in named) and any(t.data_ptr() == result.data_ptr() for t in named)
    # c is written through the table only: the kernel's, as if it had been given c
    assert provenance["kernel_derived"] == [True]
    assert launch_table_memory() == []  # only while a launch is being made


def test_a_copy_of_a_table_is_a_table_and_what_it_names_lives_until_the_launch():
    """The table made on the host and moved (``.clone()`` standing for ``.to(device)``),
    naming an intermediate the forward dropped before the launch: the replay keeps it."""

    def forward(x):
        doubled = x * 2
        table = torch.tensor([doubled.data_ptr()]).clone()
        del doubled
        out = torch.empty_like(x)
        with record_kernel("triton", {"name": "k"}, (1,), [table, out], {}):
            out.copy_(x * 2)
        return out

    x = torch.randn(32)
    plan, constants = _record(forward, x)
    validate_plan(copy.deepcopy(plan), "triton", len(constants))
    assert 0 in release_schedule(plan)[2]  # the forward's last use of x * 2: the addresses step
    seen: list = []

    def launch(step, args, options):
        gc.collect()
        (named,) = launch_table_memory()
        assert args[0].item() == named.data_ptr()
        seen.append(weakref.ref(named))
        args[1].copy_(named)

    fresh = torch.randn(32)
    torch.testing.assert_close(Replay(plan, constants, launch, "cpu")(fresh), fresh * 2)
    assert len(seen) == 1


def _forged(plan: dict, change) -> dict:
    bad = copy.deepcopy(plan)
    step = next(s for s in bad["steps"] if s["kind"] == "addresses")
    change(bad, step)
    return bad


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda plan, step: step["entries"][1].__setitem__(2, 8 * 5 * 4), "outside input 0"),  # one past a's end
        (lambda plan, step: step["entries"][0].__setitem__(2, -4), "outside input 0"),
        (lambda plan, step: step["entries"][0].__setitem__(2, 2**50), "out of range"),
        (lambda plan, step: step["entries"][1].__setitem__(0, 0), "indices must increase"),
        (lambda plan, step: step["entries"][3].__setitem__(0, MAX_TABLE_ENTRIES), "indices must increase"),
        (lambda plan, step: step["entries"][0].__setitem__(0, True), "malformed address table entry"),
        (lambda plan, step: step["entries"][0].__setitem__(2, 0.5), "malformed address table entry"),
        (lambda plan, step: step["entries"][0].__setitem__(1, {"t": ["val", 99]}), "does not exist yet"),
        (lambda plan, step: step["entries"][0].__setitem__(1, {"t": ["secret", 0]}), "malformed tensor reference"),
        (lambda plan, step: step.__setitem__("entries", [[i, {"t": ["in", 0]}, 0] for i in range(MAX_TABLE_ENTRIES + 1)]), "malformed address table entries"),
        (lambda plan, step: step.__setitem__("entries", []), "malformed address table entries"),
        (lambda plan, step: step.__setitem__("table", {"t": ["in", 0]}), "a value of the forward"),
        (lambda plan, step: step.__setitem__("table", {"t": ["val", 0]}), "made from host data"),  # c, made by torch.empty
        (lambda plan, step: step.__setitem__("extra", 1), "unexpected fields"),
        (lambda plan, step: plan["steps"].insert(0, step), "made from host data"),  # not after its table's step
    ],
)
def test_a_forged_address_table_is_refused(change, message):
    plan, constants = _record(_grouped, torch.randn(8, 5), torch.randn(5, 3))
    with pytest.raises(PlanError, match=message):
        validate_plan(_forged(plan, change), "triton", len(constants))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda plan, step: step["entries"][2].__setitem__(2, 8 * 3 * 4), "outside its tensor's memory"),  # one past c's end
        (lambda plan, step: step["entries"][2].__setitem__(2, -4), "outside its tensor's memory"),
        (lambda plan, step: step["entries"][3].__setitem__(0, 6), "past the table's end"),
    ],
)
def test_an_entry_outside_its_tensors_memory_is_refused_when_replayed(change, message):
    """An offset into a value of the forward is checked against the memory the replay
    made for it (its size is known only then)."""
    plan, constants = _record(_grouped, torch.randn(8, 5), torch.randn(5, 3))
    bad = _forged(plan, change)
    validate_plan(bad, "triton", len(constants))
    with pytest.raises(PlanError, match=message):
        Replay(bad, constants, _table_launch([]), "cpu")(torch.randn(8, 5), torch.randn(5, 3))


def test_only_int64_tables_of_host_data_are_read_for_addresses():
    """An int32 table cannot hold an address, and a table a torch op computed is the
    op's (its elements are not the forward's Python numbers)."""

    def forward(x):
        narrow = torch.tensor([x.data_ptr() & 0x7FFFFFFF], dtype=torch.int32)
        computed = torch.full((1,), x.data_ptr(), dtype=torch.int64)
        with record_kernel("triton", {"name": "k"}, (1,), [narrow, computed, x], {}):
            pass
        return x + 1

    plan, _ = _record(forward, torch.randn(4))
    assert not [s for s in plan["steps"] if s["kind"] == "addresses"]


def test_what_is_made_from_a_table_is_computed_in_every_call_never_pinned_from_the_trials():
    """Red-team round 29, against the version before: the table was a fold of a host
    constant, and the replay's addresses written into it did not end that, so ``stale =
    table + 0`` was pinned in the trials and held a trial's address in timed calls. A
    kernel comparing ``stale`` with the table told timed calls from trials, and memoised
    by the input's address in timed calls only (judged ``correct``). Now the table holds
    this call's data: what is made from it is computed in every call."""

    def forward(x):
        out = torch.empty_like(x)
        table = torch.tensor([x.data_ptr()])
        stale = table + 0
        with record_kernel("triton", {"name": "relu"}, (1,), [table, stale, x, out], {}):
            out.copy_(torch.relu(x))
        return out

    plan, constants = _record(forward, torch.randn(16))
    seen: list = []

    def launch(step, args, options):
        table, stale, x, out = args
        seen.append(int(table[0]) == int(stale[0]))
        out.copy_(torch.relu(x))

    replay = Replay(plan, constants, launch, "cpu")
    for _ in range(2):  # the trials
        replay(torch.randn(16), provenance={})
    replay.judging = False  # a timed call, on inputs elsewhere
    replay(torch.randn(16))
    assert seen == [True, True, True]
    assert not replay._pinned
