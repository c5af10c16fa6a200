# The two entry points of the README: `make book` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PROFILE ?= auto
PY := $(VENV)/bin/python

.PHONY: venv book test bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# The book is rendered even when a chapter failed (its page shows the failure) or had no data (its page says how
# to get it); the exit status is then reproduce's: 1 for a failure (or, with STRICT=1, missing data), else 0.
book: venv
	$(PY) -m qkov_lib reproduce --profile $(PROFILE) $(if $(STRICT),--strict); status=$$?; \
	if [ $$status -le 1 ]; then $(PY) -m qkov_lib book || exit $$?; fi; exit $$status

test: venv
	$(PY) -m pytest

bench: venv
	$(PY) benchmarks/bench_fig4.py
	$(PY) benchmarks/bench_engine.py

clean:
	rm -rf _build book/chapters book/_static/plotly.min.js book/_static/mathjax
