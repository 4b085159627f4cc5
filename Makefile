# One-command set-up: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
# Where torch comes from: empty for the default index (on Linux, PyPI's wheel bundles CUDA);
# https://download.pytorch.org/whl/cpu for the CPU-only build.
TORCH_INDEX ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test docs lint format bench-model bench-pbo bench-lfpl bench-acqf clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(BIN)/python -m pip install --quiet -e ".[dev,web,ax]"
	touch $(STAMP)

demo: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(BIN)/botorch-pref demo

# tests/test_docs.py reads the site `make docs` builds; without it those tests skip (CI builds it).
test: $(STAMP)
	@test -f docs/_build/html/objects.inv || echo "make test: docs/_build/html is not built, so the \
	tests of the built site in tests/test_docs.py skip; run 'make docs' first to include them."
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -n 2 -q

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

# The documentation site (docs/_build/html/index.html): executes the tutorials; warnings are errors.
docs: $(DOCS_STAMP)
	rm -rf docs/_build docs/_generated
	OMP_WAIT_POLICY=PASSIVE $(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench-model: $(STAMP)
	$(BIN)/python -m benchmarks.model

bench-pbo: $(STAMP)
	$(BIN)/python -m benchmarks.pbo

bench-lfpl: $(STAMP)
	$(BIN)/python -m benchmarks.lfpl

bench-acqf: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m benchmarks.acquisition

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache docs/_build docs/_generated
