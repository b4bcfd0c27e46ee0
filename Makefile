PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench clean vscode-test test-vscode-e2e wheel install

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Every suite runs even when one fails; each ends with one line, and `make test` fails if any did.
# pytest runs on all cores (pytest-xdist), a test file per worker: module-scoped fixtures (the
# fake model servers, the language servers) are started once per file.
SUITE := .ci/suite run
test: $(STAMP)
	@rm -f .suites
	@$(SUITE) ruff $(BIN)/ruff check pi_lsp tests benchmarks examples
	@$(SUITE) mypy $(BIN)/mypy
	@$(SUITE) pytest $(BIN)/python -m pytest -q -n auto --dist loadfile --ignore tests/test_nvim.py
	@$(SUITE) neovim $(BIN)/python -m pytest -q -n auto tests/test_nvim.py
	@$(SUITE) vscode $(MAKE) --no-print-directory vscode-test
	@.ci/suite report

demo: $(STAMP)
	$(BIN)/python examples/demo.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_session.py
	$(BIN)/python benchmarks/bench_server.py
	$(BIN)/python benchmarks/bench_resources.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_editors.py
	$(BIN)/python benchmarks/bench_prompt.py
	$(BIN)/python benchmarks/bench_reply.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .suites build dist

# pi-lsp is not on the package index: a wheel of this checkout, and an install of it in a
# virtualenv of its own under $(PREFIX)/lib/pi-lsp with `pi-lsp` linked into $(PREFIX)/bin.
PREFIX ?= $(HOME)/.local

wheel: $(STAMP)
	rm -f dist/pi_lsp-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .

install: wheel
	$(PYTHON) -m venv $(PREFIX)/lib/pi-lsp
	$(PREFIX)/lib/pi-lsp/bin/python -m pip install --quiet dist/pi_lsp-*.whl
	$(PREFIX)/lib/pi-lsp/bin/python -m pip install --quiet --force-reinstall --no-deps dist/pi_lsp-*.whl
	mkdir -p $(PREFIX)/bin
	ln -sf $(PREFIX)/lib/pi-lsp/bin/pi-lsp $(PREFIX)/bin/pi-lsp
	$(PREFIX)/bin/pi-lsp --version

# -- VS Code extension (editors/vscode): node --test against the real server ------------------
VSCODE := editors/vscode
VSCODE_STAMP := $(VSCODE)/node_modules/.ci-stamp

NEED_NODE = command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	echo "error: the VS Code extension tests need Node.js 20+ and npm on PATH" \
	     "(node: $$(command -v node || echo missing), npm: $$(command -v npm || echo missing))" >&2; exit 1; }

# npm ci only when node_modules is missing or older than the lockfile.
$(VSCODE_STAMP): $(VSCODE)/package-lock.json $(VSCODE)/package.json
	@$(NEED_NODE)
	cd $(VSCODE) && npm ci --no-audit --no-fund
	touch $@

vscode-test: $(STAMP)
	@$(NEED_NODE)
	@$(MAKE) --no-print-directory $(VSCODE_STAMP)
	cd $(VSCODE) && PI_PYTHON=$(abspath $(BIN))/python npm test

# -- VS Code for real (opt-in, not part of `make test`) ----------------------------------------
# code-server + Debian chromium + playwright-core drive the packaged .vsix against the real
# server and the fake model; see editors/vscode/e2e/. Installs what it needs on first run.
test-vscode-e2e: $(STAMP)
	@$(NEED_NODE)
	$(VSCODE)/e2e/install.sh
	@$(MAKE) --no-print-directory $(VSCODE_STAMP)
	cd $(VSCODE) && npm run package
	PI_PYTHON=$(abspath $(BIN))/python node $(VSCODE)/e2e/run.js
