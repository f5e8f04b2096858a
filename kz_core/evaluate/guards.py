"""The core's static guards: checks of every candidate's source before anything runs.

Each check reads the syntax tree only and has a stable name; each has a cheating
candidate in ``tests/cheats/`` that it must catch. Backend plugins add checks of their
own (``no_triton_kernel``, ``no_cuda_kernel``). Runtime guards (launch counts, the
profiler, mutation, aliasing, flags, threads, streams) live in the evaluator, which judges
what the workers measured.

- ``syntax_error`` / ``no_model_new`` (format errors): the source does not parse, or
  defines no ``class ModelNew``.
- ``reference_reuse``: ``ModelNew`` subclasses ``Model``, or the source instantiates or
  calls ``Model`` (the reference), or imports the problem's module.
- ``try_except_fallback``: a ``try`` whose handler computes instead of re-raising, the
  shape of "launch the kernel, fall back to torch when it fails".
- ``monkeypatch``: assigning attributes of modules the harness relies on (torch, numpy,
  time, builtins, sys, triton, ...), or ``setattr`` on them.
- ``frame_inspection``: reading other frames or the heap (``sys._getframe``,
  ``inspect.stack``, ``gc.get_objects``, ``f_back``, ``f_locals``, ...).
- ``seed_tampering``: seeding or restoring random generators in a function or class
  (at module level, where it runs once at import before kz draws any input, it is the
  warning ``seed_at_import``).
- ``global_flags``: changing process-wide numerics (TF32, cuDNN, default dtype, matmul
  precision); switching a reduced-precision mode off (``allow_tf32 = False``, matmul
  precision ``"highest"``) is only noted (``global_flags_strict``, info).
- ``thread_or_stream``: threads, processes or CUDA streams created by the candidate.
- ``l2_persistence``: CUDA access-policy windows or persisting-L2 limits, which keep data
  in L2 across timed calls.
"""

from __future__ import annotations

import ast

from kz_core.hookspecs import hookimpl
from kz_core.model import Finding, Severity
from kz_core.source import dotted_name, parse_tree, string_constants

#: Checks whose error means the reply held no usable candidate (verdict ``format_error``).
FORMAT_CHECKS = frozenset({"syntax_error", "no_model_new"})

PROTECTED_MODULES = frozenset(
    {"torch", "numpy", "np", "time", "builtins", "__builtins__", "sys", "os", "triton", "tl", "gc", "inspect", "math", "random", "F", "nn", "threading"}
)
FRAME_CALLS = frozenset(
    {
        "sys._getframe", "inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.getinnerframes",
        "inspect.trace", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "traceback.extract_stack",
        "traceback.walk_stack", "sys.settrace", "sys.setprofile", "threading.settrace",
    }
)
FRAME_ATTRIBUTES = frozenset({"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame"})
SEED_CALLS = frozenset(
    {
        "torch.manual_seed", "torch.seed", "torch.set_rng_state", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
        "torch.cuda.set_rng_state", "torch.cuda.set_rng_state_all", "torch.random.manual_seed", "torch.random.set_rng_state",
        "random.seed", "random.setstate", "np.random.seed", "numpy.random.seed", "np.random.set_state", "numpy.random.set_state",
    }
)
FLAG_CALLS = frozenset(
    {"torch.set_float32_matmul_precision", "torch.set_default_dtype", "torch.set_default_tensor_type", "torch.use_deterministic_algorithms", "torch.set_flush_denormal"}
)
FLAG_TARGET_PREFIXES = ("torch.backends.",)
CONCURRENCY_CALLS = frozenset(
    {
        "threading.Thread", "Thread", "threading.Timer", "concurrent.futures.ThreadPoolExecutor", "ThreadPoolExecutor",
        "concurrent.futures.ProcessPoolExecutor", "ProcessPoolExecutor", "multiprocessing.Process", "multiprocessing.Pool",
        "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.Stream", "os.fork", "subprocess.Popen",
        "subprocess.run", "asyncio.run", "_thread.start_new_thread",
    }
)
CUDA_STREAM_SOURCE = ("cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "std::thread")
L2_SOURCE = ("accessPolicyWindow", "cudaLimitPersistingL2CacheSize", "cudaAccessPropertyPersisting", "persistingL2")


def _finding(check: str, message: str, node: ast.AST | None = None, severity: Severity = Severity.ERROR) -> Finding:
    return Finding(check=check, message=message, severity=severity, line=getattr(node, "lineno", None))


def _call_name(call: ast.Call) -> str:
    """The called function's own name (``warn`` in ``warnings.warn(...)``), or ``""``."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _class_named(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _check_reference_reuse(tree: ast.Module, problem_name: str) -> list[Finding]:
    findings = []
    model_new = _class_named(tree, "ModelNew")
    if model_new is not None:
        for base in model_new.bases:
            if dotted_name(base).rsplit(".", 1)[-1] == "Model":
                findings.append(_finding("reference_reuse", "ModelNew subclasses the reference Model", base))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted_name(node.func).rsplit(".", 1)[-1] == "Model":
            findings.append(_finding("reference_reuse", "the source instantiates or calls the reference Model", node))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n and (n == problem_name or n.startswith("kz_problem_")) for n in names):
                findings.append(_finding("reference_reuse", "the source imports the problem's module", node))
    return findings


#: Calls a handler may make without computing: reporting, and reading simple values.
_HARMLESS_CALLS = frozenset({"print", "warn", "debug", "info", "warning", "error", "exception", "len", "int", "float", "bool", "str", "min", "max", "getattr", "hasattr"})
#: Exceptions whose handlers are import or environment guards, never a fallback.
_GUARD_EXCEPTIONS = frozenset({"ImportError", "ModuleNotFoundError"})


def _plain_value(node: ast.AST | None) -> bool:
    """A value that is not computed: a literal, a name, an attribute, or arithmetic and
    containers of those (``4``, ``None``, ``DEFAULT_SMS``, ``(1, 1)``, ``-1``)."""
    if node is None or isinstance(node, (ast.Constant, ast.Name, ast.Attribute)):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain_value(item) for item in node.elts)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.BinOp):
        return isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)
    return False


#: What a log call's arguments may call, in a handler that raises afterwards.
_DESCRIBING_CALLS = frozenset({"str", "repr", "type", "tuple", "list", "len", "int", "float", "format", "getattr", "hasattr", "isinstance", "size", "dim"})


def _describes(node: ast.AST) -> bool:
    """An expression that only describes (names, attributes, constants, f-strings,
    ``str(e)``, ``tuple(x.shape)``...): it calls nothing that could compute an output."""
    for part in ast.walk(node):
        if isinstance(part, ast.Call):
            if _call_name(part) not in _DESCRIBING_CALLS:
                return False
        elif isinstance(part, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
    return True


def _harmless_call(node: ast.AST, describing: bool = False) -> bool:
    """A call of a logging or conversion function on plain values, or, with
    ``describing`` (in a handler that raises afterwards), on anything that only describes
    what failed (``logger.error("...", tuple(x.shape), e, exc_info=True)``)."""
    if not isinstance(node, ast.Call) or _call_name(node) not in _HARMLESS_CALLS:
        return False
    if describing:
        return all(_describes(arg) for arg in node.args) and all(_describes(keyword.value) for keyword in node.keywords)
    return all(_plain_value(arg) or isinstance(arg, ast.JoinedStr) for arg in node.args)


def _handler_computes(handler: ast.ExceptHandler) -> bool:
    """A handler that does more than re-raise, pass, log or set a plain value is a
    fallback path. An import guard (``except ImportError``) may also import something
    else, and a default such as ``except Exception: return 4`` around reading the
    device's SM count is not one; ``except ImportError: return torch.relu(x)`` is."""
    caught = handler.type
    names = [caught] if not isinstance(caught, ast.Tuple) else list(caught.elts)
    import_guard = caught is not None and all(isinstance(n, ast.Name) and n.id in _GUARD_EXCEPTIONS for n in names)
    # ``except RuntimeError as e: logger.error(f"...{e}", exc_info=e); raise``: it describes
    # what failed, then raises.
    reraises = bool(handler.body) and isinstance(handler.body[-1], ast.Raise)
    return not _harmless(handler.body, import_guard, reraises)


def _plain_decorator(node: ast.expr) -> bool:
    """A decorator that computes nothing when applied beyond its own call: a name, an
    attribute, or a call of one with plain values (``triton.jit``, ``lru_cache(None)``)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, (ast.Name, ast.Attribute)) and _describes(node.func) \
            and all(_plain_value(a) for a in node.args) and all(_plain_value(k.value) for k in node.keywords)
    return isinstance(node, (ast.Name, ast.Attribute)) and _describes(node)


def _harmless(body: list[ast.stmt], import_guard: bool, reraises: bool) -> bool:
    """Whether a handler's statements only re-raise, pass, log, set plain values or (in an
    import guard) import or define a function. An import guard may also try a chain of
    imports or choose one by a test that only describes (``except ImportError: try: from a
    import x`` ``except ImportError: from b import x``; ``if hasattr(tl.extra, "cuda"):
    libdevice = tl.extra.cuda.libdevice``, as Inductor's helpers do: over-rejection probe 16)."""
    for stmt in body:
        if isinstance(stmt, (ast.Raise, ast.Pass, ast.Break, ast.Continue)):
            continue
        if import_guard and isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue  # ``except ImportError: from triton.language.extra.cuda import libdevice``
        if import_guard and isinstance(stmt, (ast.Try, ast.TryStar)) and not any(_handler_computes(h) for h in stmt.handlers) \
                and _harmless(stmt.body + stmt.orelse + stmt.finalbody, True, reraises):
            continue
        if import_guard and isinstance(stmt, ast.If) and _describes(stmt.test) and _harmless(stmt.body + stmt.orelse, True, reraises):
            continue
        if import_guard and isinstance(stmt, ast.FunctionDef) and all(_plain_decorator(d) for d in stmt.decorator_list):
            # ``except ImportError: def get_raw_stream(index): return 0``, the shim Inductor's
            # code needs where torch lacks the import (over-rejection probe 21): defining
            # runs nothing of the body; what a call of it computes, evidence judges.
            continue
        if isinstance(stmt, ast.Expr) and (isinstance(stmt.value, ast.Constant) or _harmless_call(stmt.value, describing=reraises)):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and _plain_value(stmt.value):
            continue
        if isinstance(stmt, ast.Return) and _plain_value(stmt.value):
            continue
        return False
    return True


def without_main_block(tree: ast.Module) -> ast.Module:
    """The module without the body of its ``if __name__ == "__main__":`` blocks, which
    never runs when the candidate is loaded (a local test there may seed, print or call
    torch). Only that exact test is stripped; an ``else`` branch stays, and nothing is
    stripped from a module that assigns ``__name__`` itself."""

    def is_main_block(node: ast.AST) -> bool:
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            return False
        test = node.test
        if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
            return False
        sides = [test.left, test.comparators[0]]
        return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)

    def assigns_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Name) and node.id == "__name__" and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)) and "__name__" in node.names:
            return True
        return isinstance(node, (ast.Import, ast.ImportFrom)) and any((alias.asname or alias.name) == "__name__" for alias in node.names)

    if any(assigns_name(node) for node in ast.walk(tree)):
        return tree
    body: list[ast.stmt] = []
    for node in tree.body:
        body.extend(node.orelse if is_main_block(node) else [node])
    tree.body = body
    return tree


def _check_fallback(tree: ast.Module) -> list[Finding]:
    findings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_handler_computes(h) for h in node.handlers):
            findings.append(
                _finding("try_except_fallback", "a try/except computes in its handler: a fallback path around the kernel is not allowed", node)
            )
    return findings


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _constant(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _strict_setting(name: str, value: ast.AST | None) -> bool:
    """``torch.backends....allow_<something> = False``: a reduced-precision mode switched
    off (TF32, reduced-precision reductions), which only makes numerics stricter."""
    return name.rsplit(".", 1)[-1].startswith("allow_") and _constant(value) is False


def _saved_flags(tree: ast.Module) -> dict[str, str]:
    """Names that hold a flag's own value: bound once in the source, by ``old =
    torch.backends.cuda.matmul.allow_tf32`` (or a tuple of such), to the flag they read."""
    stores: dict[str, int] = {}
    for node in ast.walk(tree):
        # Every binding of a name in any scope: a parameter, an import, a handler, a
        # function or class, a global declaration, as well as assignments (a parameter
        # ``old=True`` shadowing the saved ``old`` would otherwise pass as a restore).
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names = [node.id]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        elif isinstance(node, ast.alias):
            names = [(node.asname or node.name).split(".")[0]]
        elif isinstance(node, (ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name] if node.name else []
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names) * 2
        else:
            names = []
        for name in names:
            stores[name] = stores.get(name, 0) + 1
    saved: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) else [(target, value)]
        for name, read in pairs:
            if isinstance(name, ast.Name) and isinstance(read, ast.Attribute) and stores.get(name.id) == 1:
                flag = dotted_name(read)
                if flag.startswith(FLAG_TARGET_PREFIXES):
                    saved[name.id] = flag
    return saved


def _restored_setting(name: str, value: ast.AST | None, saved: dict[str, str]) -> bool:
    """``torch.backends....allow_tf32 = old``, where ``old`` holds that flag's own value
    read before (the save, tighten and restore of a kernel that computes its reference
    strictly): the flag ends as it was."""
    return isinstance(value, ast.Name) and saved.get(value.id) == name


def _check_monkeypatch_and_flags(tree: ast.Module) -> list[Finding]:
    findings = []
    saved = _saved_flags(tree)
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            name = dotted_name(target)
            if name.startswith(FLAG_TARGET_PREFIXES) and isinstance(node, ast.Assign) and _strict_setting(name, node.value):
                # ``torch.backends.cuda.matmul.allow_tf32 = False``: the default, or stricter
                # numerics, set for exact local comparisons; nothing gets faster or less precise.
                findings.append(_finding("global_flags_strict", f"the source sets {name} = False (no faster, no less precise)", node, Severity.INFO))
            elif name.startswith(FLAG_TARGET_PREFIXES) and isinstance(node, ast.Assign) and _restored_setting(name, node.value, saved):
                findings.append(_finding("global_flags_strict", f"the source restores {name} to the value it read from it", node, Severity.INFO))
            elif name.startswith(FLAG_TARGET_PREFIXES):
                findings.append(_finding("global_flags", f"the source changes {name}, a process-wide numerics flag", node))
            elif _root(target) in PROTECTED_MODULES:
                findings.append(_finding("monkeypatch", f"the source assigns {name or 'an attribute of ' + _root(target)}", node))
        if isinstance(node, ast.Call):
            callee = dotted_name(node.func)
            if callee in ("setattr", "delattr", "builtins.setattr") and node.args and _root(node.args[0]) in PROTECTED_MODULES:
                findings.append(_finding("monkeypatch", f"the source calls {callee} on {dotted_name(node.args[0]) or _root(node.args[0])}", node))
            if callee == "torch.set_float32_matmul_precision" and len(node.args) == 1 and not node.keywords and _constant(node.args[0]) == "highest":
                findings.append(_finding("global_flags_strict", "the source sets float32 matmul precision to 'highest', the default (no faster, no less precise)", node, Severity.INFO))
            elif callee in FLAG_CALLS:
                findings.append(_finding("global_flags", f"the source calls {callee}", node))
    return findings


def _import_time_nodes(tree: ast.Module) -> set[int]:
    """The ids of the nodes that run once, when the module is imported: its top-level
    statements, outside any function, lambda or class body."""
    found: set[int] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # its body runs later (a decorator's or a default's call is judged as if it did)
        found.add(id(node))
        stack.extend(ast.iter_child_nodes(node))
    return found


def _check_calls(tree: ast.Module) -> list[Finding]:
    findings = []
    at_import = _import_time_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = dotted_name(node.func)
            if callee in FRAME_CALLS:
                findings.append(_finding("frame_inspection", f"the source calls {callee}, which reads other frames or objects", node))
            elif callee in SEED_CALLS and id(node) in at_import:
                # Triton's tutorials, and kernels published from them, seed at module level
                # before their local tests. That runs once, when the candidate is loaded,
                # before kz draws any input: from a fresh secret seed, and for the trials in
                # another process. Said, not rejected.
                message = f"the source calls {callee} when it is imported; kz draws every input afterwards, from secret seeds, so it changes nothing"
                findings.append(_finding("seed_at_import", message, node, Severity.WARNING))
            elif callee in SEED_CALLS:
                findings.append(_finding("seed_tampering", f"the source calls {callee}; inputs come from secret seeds the candidate must not touch", node))
            elif callee in CONCURRENCY_CALLS:
                findings.append(_finding("thread_or_stream", f"the source calls {callee}; kernels must run on the caller's thread and stream", node))
        elif isinstance(node, ast.Attribute) and node.attr in FRAME_ATTRIBUTES:
            findings.append(_finding("frame_inspection", f"the source reads .{node.attr}, another frame's state", node))
    for constant in string_constants(tree):
        text = constant.value
        if any(marker in text for marker in CUDA_STREAM_SOURCE):
            findings.append(_finding("thread_or_stream", "the CUDA source creates streams or threads of its own", constant))
        if any(marker in text for marker in L2_SOURCE):
            findings.append(_finding("l2_persistence", "the CUDA source sets L2 persistence, which survives between timed calls", constant))
    return findings


def check_source(code: str, problem_name: str = "") -> list[Finding]:
    """Every core static finding for one candidate's source."""
    try:
        tree = parse_tree(code)
    except SyntaxError as exc:
        return [Finding("syntax_error", f"the source does not parse: {exc.msg} (line {exc.lineno})", line=exc.lineno)]
    except ValueError as exc:
        return [Finding("syntax_error", f"the source does not parse: {exc}")]
    tree = without_main_block(tree)
    findings: list[Finding] = []
    if _class_named(tree, "ModelNew") is None:
        findings.append(Finding("no_model_new", "the source defines no module-level class ModelNew"))
    findings += _check_reference_reuse(tree, problem_name)
    findings += _check_fallback(tree)
    findings += _check_monkeypatch_and_flags(tree)
    findings += _check_calls(tree)
    return findings


@hookimpl
def static_checks(candidate, problem):
    return check_source(candidate.code, getattr(problem, "name", ""))

