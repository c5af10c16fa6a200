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

book: venv
	$(PY) -m qkov_lib reproduce --profile $(PROFILE)
	$(PY) -m qkov_lib book

test: venv
	$(PY) -m pytest

bench: venv
	$(PY) benchmarks/bench_fig4.py
	$(PY) benchmarks/bench_engine.py

clean:
	rm -rf _build book/chapters book/_static/plotly.min.js
