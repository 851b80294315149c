#!/usr/bin/env bash
# The integrations at the LOWEST versions pyproject.toml supports (CI installs the newest).
# A fresh virtual environment with durable plus exactly the lower bounds of the extras
# pydantic-ai, openai and anthropic, then tests/integrations (crash tests included) and the
# agent recipes. Keep the pins below equal to the lower bounds in pyproject.toml.
#
#   scripts/test_lowest_integrations.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${1:-$(mktemp -d)/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q -e ".[dev]" \
  "pydantic-ai-slim[mcp]==2.64.0" "openai==2.0.0" "anthropic==1.0.0"
"$venv/bin/python" -m pip list 2>/dev/null | grep -iE '^(pydantic-ai-slim|openai|anthropic|mcp) '
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests/integrations tests/crash/test_agent_recipes.py tests/cli/test_cookbook.py
