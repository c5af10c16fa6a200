# The entry points of the README: `make book` (REPO_URL=... adds the repository link and each chapter's launch links),
# `make test` and `make lab`.
PYTHON ?= python3
VENV ?= .venv
PROFILE ?= auto
PY := $(VENV)/bin/python

.PHONY: venv book report lab lint test test-fast bench clean portable-reference

venv: $(VENV)/.installed

# pip installs without compiling each module's bytecode one file at a time; COMPILE then compiles what is new in the
# environment on every core, skipping a file that fails as pip would (torch ships one written for Python 3.12). The
# bytecode matters where PYTHONDONTWRITEBYTECODE is set: no process would write it, and each would compile afresh.
PIP = $(PY) -m pip install -q --disable-pip-version-check --no-compile
COMPILE = $(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)"

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.txt
	$(PIP) --no-deps -e .
	$(COMPILE)
	touch $@

# The book is rendered even when a chapter failed (its page shows the failure) or had no data (its page says how
# to get it); the exit status is then reproduce's: 1 for a failure (or, with STRICT=1, missing data), else 0.
# BUDGET=M (minutes): no stale chapter is started that would end the run past M; its page shows its last results.
# STORED_ONLY=1: no stale chapter is started that would train (a run the results store does not hold); likewise.
# First it takes in the published results that this checkout can use ($QKOV_RESULTS_URL, else the origin's Pages
# site; QKOV_RESULTS_URL= or NO_FETCH=1 turns that off), so that only what the checkout changed is computed.
book: venv
	$(PY) -m qkov_lib reproduce --profile $(PROFILE) $(if $(STRICT),--strict) $(if $(NO_FETCH),--no-fetch) \
		$(if $(BUDGET),--budget-minutes $(BUDGET))$(if $(STORED_ONLY), --stored-only); status=$$?; \
	if [ $$status -le 1 ]; then $(PY) -m qkov_lib book $(if $(REPO_URL),--repo-url $(REPO_URL)) || exit $$?; fi; \
	exit $$status

# The built book as one A4 article in ReScience's form, _build/html/report.pdf (qkov_lib/runner/report.py), printed
# offline by headless Chromium; PROFILE (default: the built book's) must be the profile the book was built under.
report: venv
	$(PY) -m qkov_lib report $(if $(filter-out auto,$(PROFILE)),--profile $(PROFILE))

# JupyterLab rooted at the repository, opening on the chapters' sources, with .md files opening as notebooks
# (jupytext); the setting is written into this environment's JupyterLab, not the user's. Its contents manager
# (qkov_lib/runner/lab.py) opens a chapter with the language_info its kernel reports, so the tab is not marked
# unsaved. A chapter run there writes to data/results/interactive/<profile>.
lab: venv $(VENV)/.lab
	$(VENV)/bin/jupytext-config --settings-file $(VENV)/share/jupyter/lab/settings/overrides.json \
		set-default-viewer markdown myst
	$(PY) -m qkov_lib.runner.lab $(VENV)/share/jupyter/lab/settings/overrides.json
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/notebooks \
		--ServerApp.contents_manager_class=qkov_lib.runner.lab.ChapterContentsManager $(LAB_ARGS)

$(VENV)/.lab: requirements-lab.txt
	$(PIP) -r requirements-lab.txt
	$(COMPILE)
	touch $@

# The gate on style and types (pyproject.toml configures both): ruff's lint rules over the library, its formatter over
# the library, the tests and the benchmarks, then mypy over the library's type hints (the Jupyter server's among them:
# runner/lab.py is typed against it, so the lab requirements come first).
lint: venv $(VENV)/.lab $(VENV)/.lint
	$(VENV)/bin/ruff check qkov_lib
	$(VENV)/bin/ruff format --check qkov_lib tests benchmarks
	$(VENV)/bin/mypy

$(VENV)/.lint: requirements-lint.txt
	$(PIP) -r requirements-lint.txt
	$(COMPILE)
	touch $@

# The tests in TEST_JOBS processes (pytest-xdist; 0: in this one), each taking the next test when it is free: one
# more than 2 cores, since the browser tests mostly wait. Each test's torch keeps to one thread (OMP_NUM_THREADS):
# processes beside each other would otherwise fight over the cores (a 2-thread torch slows about 5x then).
TEST_JOBS ?= 3
PYTEST = OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_JOBS) --dist worksteal
# the library's bytecode, written once: the tests start hundreds of processes (kernels, workers, runners) that import it
LIBRARY_BYTECODE = $(PY) -m compileall -q qkov_lib
# The whole run ends with its 25 slowest steps (set-up and calls), so that any run's log says where its time went.
test: venv
	$(LIBRARY_BYTECODE)
	$(PYTEST) --durations=25

# The fast tier (a few minutes): tests/unit and tests/project; tests/integration and tests/book are marked slow
# (tests/conftest.py: the folder decides).
test-fast: venv
	$(LIBRARY_BYTECODE)
	$(PYTEST) -m "not slow"

bench: venv
	$(PY) benchmarks/bench_fig4.py
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_classifier.py

# The portable mode's committed reference (tests/expected/portable.json): rerun after a deliberate change of numbers.
portable-reference: venv
	$(PY) tests/portable_reference.py

clean:
	rm -rf _build book/chapters book/_static/plotly.min.js book/_static/mathjax
