#!/usr/bin/env bash
# The integrations at the LOWEST versions pyproject.toml supports (CI installs the newest).
# A fresh virtual environment with durable plus exactly the lower bounds of the extras
# pydantic-ai, openai and anthropic, then tests/integrations (crash tests included) and the
# agent recipes. The OpenAI Agents SDK's lowest (0.21.0) needs openai>=3 while the openai
# client's lowest is openai 2.0.0: it gets a second environment of its own, with its tests,
# its crash test on SQLite and its recipe. Keep the pins below equal to the lower bounds in
# pyproject.toml. LangChain and LangGraph get a third, at the lower bounds of the extras langchain
# and langgraph.
#
#   scripts/test_lowest_integrations.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${1:-$(mktemp -d)/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q -e ".[dev]"
"$venv/bin/python" -m pip uninstall -q -y openai-agents  # tested at its lowest in its own environment
"$venv/bin/python" -m pip install -q "pydantic-ai-slim[mcp]==2.64.0" "openai==2.0.0" "anthropic==1.0.0"
"$venv/bin/python" -m pip list 2>/dev/null | grep -iE '^(pydantic-ai-slim|openai|anthropic|mcp) '
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests/integrations tests/crash/test_agent_recipes.py tests/cli/test_cookbook.py \
  --ignore=tests/integrations/langchain --ignore=tests/integrations/langgraph  # at their lowest below

agents_venv="${venv}-openai-agents"
[ -x "$agents_venv/bin/python" ] || python3 -m venv "$agents_venv"
"$agents_venv/bin/python" -m pip install -q -e ".[postgres]" "openai-agents==0.21.0" "pytest>=8" "pytest-xdist>=3.5"
"$agents_venv/bin/python" -m pip list 2>/dev/null | grep -iE '^(openai-agents|openai|mcp) '
"$agents_venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 tests/integrations/openai_agents \
  --ignore tests/integrations/openai_agents/test_crashes.py
"$agents_venv/bin/python" -m pytest -q -p no:cacheprovider tests/integrations/openai_agents/test_crashes.py \
  -k "third_model_call and sqlite"
(cd cookbook && "$agents_venv/bin/python" openai_agents_support.py)

# LangChain and LangGraph at their lowest, in a virtual environment of their own: durable with the
# stores it is tested on and exactly the lower bounds of the extras langchain and langgraph (and the
# conformance suite's first release). CI's main test run has their SIGKILL suites at the newest
# versions on SQLite and Postgres; here the in-process tests, the recipe and two of the kills
# (an agent's third model call, a node's second) on SQLite check the bounds.
lc_venv="${venv}-langchain"
[ -x "$lc_venv/bin/python" ] || python3 -m venv "$lc_venv"
"$lc_venv/bin/python" -m pip install -q -e ".[postgres,crypto]" pytest pytest-xdist hypothesis \
  "langchain==1.3.0" "langchain-core==1.4.0" "langgraph==1.2.0" "langgraph-checkpoint==4.1.0" \
  "langgraph-checkpoint-conformance==0.0.1"
"$lc_venv/bin/python" -m pip list 2>/dev/null | grep -iE '^(langchain|langchain-core|langgraph|langgraph-checkpoint) '
"$lc_venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 -m "not slow" \
  tests/integrations/langchain tests/integrations/langgraph tests/integrations/test_docstring_examples.py \
  tests/cli/test_cookbook.py -k "not test_recipe_runs or langgraph_research"
"$lc_venv/bin/python" -m pytest -q -p no:cacheprovider tests/integrations/langgraph/test_crashes.py \
  -k "sqlite and (third_model_call or second_model_call)"
