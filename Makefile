# Two commands from a fresh clone:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
UV     := $(VENV)/bin/uv

.PHONY: setup test docs demo demo-quick bench container-test container-matrix clean

# The prerequisites are checked first, each with one line naming what to install; a failed
# step removes .venv so that the next `make` starts clean instead of on a half-made venv.
$(VENV)/.installed: challenge-welding/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || \
	  { echo "error: Python >= 3.10 is needed as '$(PYTHON)' (install python3, or run make PYTHON=/path/to/python3.x)" >&2; exit 2; }
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || \
	  { echo "error: Python's venv module is missing: install the package python3-venv (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 2; }
	$(VENV)/bin/pip install --quiet --upgrade pip uv || { rm -rf $(VENV); exit 2; }
	$(UV) pip install --python $(PY) --quiet -e "challenge-welding[dev]" || { rm -rf $(VENV); exit 2; }
	touch $@

setup: $(VENV)/.installed  ## make the virtual environment with the package and test tools

test: setup docs  ## the docs site (strict links), then the whole test suite (installs Chromium when missing)
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "make test: chromium is missing; one test renders the results page in it:"; \
	  echo "  installing Debian's chromium with apt-get (Debian 12: ~130 packages with its libraries, libgl1 among them)"; \
	  echo "  not root? the script only prints how, and that test is skipped"; \
	  bash scripts/install-chromium.sh; }
	@# the errors that are bugs (pyflakes, syntax; pyproject's [tool.ruff]), then the docstrings' examples
	$(VENV)/bin/ruff check --config challenge-welding/pyproject.toml challenge-welding tests benchmarks scripts
	$(PY) -m pytest -q -p no:cacheprovider --doctest-modules challenge-welding/challenge_welding
	@# tests marked serial change the evaluator's own files (the hash check's test): alone first
	$(PY) -m pytest -q -m serial tests
	$(PY) -m pytest -n 2 -q -m "not serial" tests

# The README is the front door: at most 250 lines; docs/ builds as a site, a broken link or anchor fails.
docs: setup  ## build the docs site into .site/ (mkdocs --strict) and check the README's length
	@n=$$(wc -l < README.md); [ $$n -le 250 ] || { echo "error: README.md has $$n lines (at most 250): move detail to docs/" >&2; exit 1; }
	@# no --quiet: it hides the warnings that --strict counts (mkdocs.yml makes a broken link or anchor one)
	$(VENV)/bin/mkdocs build --strict --site-dir .site

demo: setup  ## end-to-end demo: synthetic data -> sets -> Solution-1 -> leaderboard
	$(VENV)/bin/challenge-welding demo --workdir demo-work

demo-quick: setup
	$(VENV)/bin/challenge-welding demo --workdir demo-work --quick

bench: setup  ## every benchmark; each prints its figures against a baseline of the same run
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

container-test: setup  ## (root, podman, network; not in CI) image on python:3.12-slim + dry-run through Podman's Docker API: Solution-1, planted metadata.yaml, non-root image, opencv-python, full HD; ~13 min
	bash scripts/container_test.sh

# PUBLISHED=DIR: a checkout of confianceai/Challenge-Welding-Reference-Solution-1 (its row is left out without it)
container-matrix: setup  ## (root, podman, network; not in CI) every reference solution (+ the published one) x root / non-root / Codabench worker at Landlock ABI 7, 1, 0 in the image, scores against the host's, a hostile submission; ~1 h
	bash scripts/container_matrix.sh $(if $(PUBLISHED),--published $(PUBLISHED))

clean:
	rm -rf $(VENV) demo-work .site
