"""The distribution builds and works installed (docs/architecture.md#publishing).

A wheel and an sdist are built from a copy of the sources (as ``python -m build`` would, offline: pip's
``wheel --no-build-isolation`` and setuptools' own ``build_sdist``); the wheel is installed into a fresh
virtual environment with ``--no-deps``, its dependencies reached through a ``.pth`` naming this
environment's site-packages (no network); from a directory outside the repository, ``topicaudit --version``,
an audit of a text corpus (the lemmatiser's data are package data) and the demo run work.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from topicaudit.version import __version__

REPO = Path(__file__).resolve().parents[1]
# What a build reads: the three code folders mapped into topicaudit, the metadata and the texts it names.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "audit", "targets", "reports")
FOLDERS = {"audit": "topicaudit", "targets": "topicaudit/targets", "reports": "topicaudit/reports"}


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """dist/ with the wheel and the sdist, built from a copy of the sources (a build in the work tree would write
    build/lib beside the development install's tree)."""
    tmp = tmp_path_factory.mktemp("packaging")
    src, out = tmp / "src", tmp / "dist"
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(source, src / name)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", out, src])
    _run([sys.executable, "-c", "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])",
          out], cwd=src)
    return out


def test_the_wheel_holds_every_module_its_data_and_complete_metadata(dist):
    [wheel] = dist.glob(f"topicaudit-{__version__}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"topicaudit-{__version__}.dist-info"
        metadata = Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
        launcher = z.read(f"topicaudit-{__version__}.data/scripts/topicaudit")  # the `topicaudit` command
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            assert f"{package}/{path.relative_to(REPO / folder).as_posix()}" in names, path
    data = {p.name for p in (REPO / "audit" / "inputs" / "_data").iterdir()}
    assert {"wordnet-3.0-lemmatizer.zip", "stopwords-english.txt", "WORDNET-LICENSE.txt"} <= data
    assert {f"topicaudit/inputs/_data/{name}" for name in data} <= names
    assert "topicaudit/py.typed" in names and f"{info}/LICENSE" in names
    assert not [n for n in names if n.split("/")[0] in ("audit", "targets", "reports", "tests")]  # one namespace
    assert metadata["Name"] == "topicaudit" and metadata["Version"] == __version__
    assert metadata["License"] == "MIT" and metadata["Requires-Python"] == ">=3.11"
    classifiers = metadata.get_all("Classifier")
    assert "License :: OSI Approved :: MIT License" in classifiers and "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert metadata["Description-Content-Type"] == "text/markdown" and metadata.get_payload().strip()
    assert any(r.startswith("numpy") for r in metadata.get_all("Requires-Dist"))
    assert "topicaudit-python = topicaudit.cli.console:main" in entry_points
    assert launcher == (REPO / "audit" / "cli" / "topicaudit").read_bytes()


def test_the_sdist_holds_what_a_wheel_is_built_from(dist):
    [sdist] = dist.glob(f"topicaudit-{__version__}.tar.gz")
    root = f"topicaudit-{__version__}"
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    assert {f"{root}/{name}" for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "PKG-INFO")} <= names
    assert f"{root}/audit/inputs/_data/wordnet-3.0-lemmatizer.zip" in names
    assert f"{root}/targets/learners/lda.py" in names and f"{root}/reports/build.py" in names


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> tuple[Path, dict]:
    """A fresh virtual environment with only the wheel installed (the dependencies: this environment's, by a
    .pth), and the environment its commands run in: no PYTHONPATH, no cluster address, its bin/ first."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # every site-packages this interpreter reads (this venv's, and those it chains to), never the editable tree
    sites = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    assert sysconfig.get_paths()["purelib"] in sites
    (purelib / "zz-dependencies.pth").write_text("".join(f"{p}\n" for p in sites))
    [wheel] = dist.glob("*.whl")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return venv, env


def test_the_installed_wheel_runs_the_demo_from_outside_the_repository(installed, tmp_path):
    venv, env = installed
    where, words = _run([venv / "bin" / "python", "-c", "import topicaudit.inputs.preprocess as p; print(p.DATA_DIR); "
                         "print(' '.join(p.preprocess_text('The geese were running from the dogs')))"],
                        cwd=tmp_path, env=env).stdout.splitlines()
    assert Path(where).is_relative_to(venv) and not Path(where).is_relative_to(REPO)  # the wheel's, not ours
    assert words.split() == ["goose", "running", "dog"]  # stop words gone, nouns lemmatised by the shipped WordNet
    version = _run([venv / "bin" / "topicaudit", "--version"], cwd=tmp_path, env=env)
    assert version.stdout.strip() == f"topicaudit {__version__}"

    # a text corpus, pre-processed (stop words, WordNet lemmas: the package's data), audited by canaries alone
    corpus = tmp_path / "texts.json"
    corpus.write_text(json.dumps({"text": [f"the running dogs were chasing {w} cats near rivers and mountains"
                                           for w in ("red", "blue", "green", "small", "large") * 20]}))
    _run([venv / "bin" / "topicaudit", "run", "--corpus", corpus, "--k", "2", "--shadows", "0", "--canaries", "20",
          "--output", tmp_path / "texts", "--quiet"], cwd=tmp_path, env=env)
    assert json.loads((tmp_path / "texts" / "results.json").read_text())["corpus"]["n_docs"] == 100

    # the demo, as README.md's first command: `topicaudit run`
    demo = _run([venv / "bin" / "topicaudit", "run", "--output", tmp_path / "demo"], cwd=tmp_path, env=env)
    assert "← recommended" in demo.stdout and "what the figures mean:" in demo.stdout
    assert (tmp_path / "demo" / "roc.png").is_file() and (tmp_path / "demo" / "results.json").is_file()
