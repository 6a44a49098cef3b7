# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := local,models,hf,embed,crowd,estimate,dev

.PHONY: install demo test test-fast test-opik browser bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# llama-cpp-python builds llama.cpp from source the first time (about 7 minutes on 2 cores; pip caches the wheel).
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/judgeblender demo

# The labeling page is tested in a real headless browser: Debian's chromium and chromedriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null)

test: $(STAMP) browser
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not model"

# The Opik adapter in its own venv (opik's dependencies would downgrade openai in .venv).
test-opik:
	$(PYTHON) -m venv .venv-opik
	.venv-opik/bin/python -m pip install --quiet --upgrade pip
	.venv-opik/bin/python -m pip install --quiet -e ".[dev,opik]"
	.venv-opik/bin/python -m pytest -q tests/test_opik_metric.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
