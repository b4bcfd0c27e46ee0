PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check pi_lsp tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/python examples/demo.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_session.py
	$(BIN)/python benchmarks/bench_server.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
