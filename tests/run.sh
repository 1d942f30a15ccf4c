#!/usr/bin/env bash
# Run the test suite, creating the environment (.venv) on first use.
# Extra arguments go to pytest, e.g. `bash tests/run.sh -m slow` for the long real-data runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# The editable install is "strict" (docs/architecture.md#one-package): a tree of links under build/ to every file
# of the package, named by a static .pth file, so mypy and editors resolve topicaudit as they would an installed
# package (the default mode's import hook is invisible to them). Edits to a file show through its link; a file
# added, removed or renamed needs a new tree, so reinstall whenever pyproject.toml or the list of files changes.
stamp=.venv/.topicaudit-installed
want=$( (cat pyproject.toml; find audit targets reports -type f ! -path '*/__pycache__/*' | LC_ALL=C sort) \
        | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "tests/run.sh: installing topicaudit and its test extras into .venv (minutes on first use)" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]' \
        --config-settings editable_mode=strict
    echo "$want" > "$stamp"
fi
# BERTopic itself, for tests/test_bertopic.py's comparisons with models BERTopic fits and saves (they are skipped,
# saying so, without it). Its own requirements pull in sentence-transformers and torch, which neither topicaudit nor
# those tests need, so it is installed without them (~15 s and ~90 MB, mostly pandas); pip cannot say --no-deps
# inside an extra, hence here rather than in [test].
if ! .venv/bin/python -c "import bertopic" >/dev/null 2>&1; then
    echo "tests/run.sh: installing bertopic 0.17.4 without its torch requirements (pandas, safetensors)" >&2
    (.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps bertopic==0.17.4 \
        && .venv/bin/python -m pip install --quiet --disable-pip-version-check pandas safetensors) \
        || echo "note: could not install bertopic; tests/test_bertopic.py's comparisons with it will be skipped" >&2
fi
# Full WordNet 3.0 (Debian's wordnet-base) lets the tests prove that the shipped
# lemmatiser data gives exactly nltk's answers; install it when we can.
if [ ! -f /usr/share/wordnet/index.noun ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tests/run.sh: installing Debian's wordnet-base" >&2
    (apt-get update -qq && apt-get install -y -qq --no-install-recommends wordnet-base) >/dev/null 2>&1 \
        || echo "note: could not install wordnet-base; the nltk equality test will be skipped" >&2
fi
# Headless Chromium (Debian's chromium) lets tests/test_report_browser.py open the report page
# from disk; install it when we can (the test is skipped, with the reason, when it is absent).
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
        && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "tests/run.sh: installing Debian's chromium (for the report's browser test)" >&2
    (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1 \
        || echo "note: could not install chromium; the report browser test will be skipped" >&2
fi
exec .venv/bin/python -m pytest "$@"
