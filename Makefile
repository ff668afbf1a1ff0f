# Two entry points for a fresh machine (see README.md):
#   make book   build the book into _build/html
#   make test   unit tests, nbval on every chapter, and the book build with warnings as errors
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: book test clean

book: $(VENV)/installed
	$(BIN)/jupyter-book build --warningiserror --keep-going .
	@echo "The book is at _build/html/index.html"

test: $(VENV)/installed
	$(BIN)/python -m pytest

$(VENV)/installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

clean:
	rm -rf _build $(VENV)
