"""Hardening V (issue 32, what was left): an integrity key that authenticates manifests and corpus cache entries,
and the defects a fresh hostile pass found (links, FIFOs and directories in place of files, damaged files,
closed streams, odd names and TOML).

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in ~1 s.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.inputs.files import file_sha256
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.inputs import integrity_key

REPO = Path(__file__).resolve().parents[1]
KEY = "a" * 16 + "0123456789abcdef" * 3  # 64 characters
OTHER_KEY = "b" * 64
CLAIM = "0.01"  # plain LDA's canaries prove more than this


def canary_run(output: Path, *extra: str) -> int:
    return main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(output), "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h5") / "keyed"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
        assert canary_run(out) == 0
    return out


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h5") / "plain"
    assert canary_run(out) == 0
    return out


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    for name in ("check.json", "check.junit.xml"):
        (copy / name).unlink(missing_ok=True)
    return copy


@pytest.fixture
def keyed(keyed_run, tmp_path):
    return copy_of(keyed_run, tmp_path)


@pytest.fixture
def plain(plain_run, tmp_path):
    return copy_of(plain_run, tmp_path)


@pytest.fixture
def with_key(monkeypatch):
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)


def check(capsys, run_dir, *extra):
    code = main(["check", str(run_dir), "--epsilon", CLAIM, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shuffle_coins(run_dir: Path) -> None:
    with np.load(run_dir / "canaries.npz", allow_pickle=False) as z:
        data = dict(z)
    data["coins"] = np.random.default_rng(0).permutation(data["coins"])
    np.savez(run_dir / "canaries.npz", **data)


def forge_manifest(run_dir: Path, monkeypatch, key: str = "off") -> None:
    """Recompute every hash with the module's own function, as a forger would (with ``key``: as one holding it)."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, key)
    (run_dir / manifest.NAME).unlink()
    manifest.record(run_dir, "config.toml", "canaries.npz", "canary_scores.npz", "results.json",
                    "models/canary-target.npz", write_text=atomic_write_text)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)


# -- 1. the authenticated mode ------------------------------------------------------------------------------------
def test_a_keyed_run_carries_a_mac_and_its_verdict_says_authenticated(keyed, with_key, capsys):
    mac = json.loads((keyed / manifest.NAME).read_text())["mac"]
    assert mac["algorithm"] == "hmac-sha256" and len(mac["value"]) == 64 and KEY not in json.dumps(mac)
    code, out, err = check(capsys, keyed)
    assert code == 1 and out.startswith("VIOLATED"), err
    assert "integrity: authenticated (manifest HMAC-SHA256 verified with integrity key" in out
    recorded = json.loads((keyed / "check.json").read_text())
    assert recorded["integrity"] == "hmac-sha256" and recorded["integrity_key_id"] == mac["key_id"]


def test_without_a_key_the_verdict_says_hashes_only(plain, capsys):
    code, out, err = check(capsys, plain)
    assert code == 1 and "integrity: hashes only" in out and "not caught" in out, err
    assert json.loads((plain / "check.json").read_text())["integrity"] == "sha256"


@pytest.mark.parametrize("forger", ["no key", "another key"])
def test_a_forger_who_recomputes_every_hash_is_caught_with_the_key(keyed, with_key, monkeypatch, capsys, forger):
    """What the hashes alone cannot stop: shuffled coins, every hash recomputed (a forged VIOLATED/NO SIGNAL)."""
    shuffle_coins(keyed)
    forge_manifest(keyed, monkeypatch, "off" if forger == "no key" else OTHER_KEY)
    code, out, err = check(capsys, keyed)
    assert code == 2 and not out and err.count("\n") == 1, err
    assert "manifest.json" in err and "new directory" in err
    assert ("carries no MAC" in err) if forger == "no key" else ("MAC does not verify" in err and "names the key" in err)
    assert not (keyed / "check.json").exists()


def test_a_forger_who_keeps_the_old_mac_over_new_hashes_is_caught(keyed, with_key, capsys):
    shuffle_coins(keyed)
    path = keyed / manifest.NAME
    data = json.loads(path.read_text())
    data["files"]["canaries.npz"] = file_sha256(keyed / "canaries.npz")
    path.write_text(json.dumps(data))
    code, out, err = check(capsys, keyed)
    assert code == 2 and "MAC does not verify" in err and not out, err


def test_the_same_forgery_without_a_key_is_read_as_the_docs_say(keyed, monkeypatch, capsys):
    """The limit of the unkeyed mode, stated in docs/run-directory.md: a consistent forgery reads as a run."""
    shuffle_coins(keyed)
    forge_manifest(keyed, monkeypatch)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    code, out, err = check(capsys, keyed)
    assert code in (0, 1) and "integrity: hashes only" in out, err


def test_the_pre_manifest_layout_is_refused_when_a_key_is_configured(keyed, with_key, capsys):
    (keyed / manifest.NAME).unlink()
    results = json.loads((keyed / "results.json").read_text())
    del results[manifest.MARK]
    (keyed / "results.json").write_text(json.dumps(results))
    config = keyed / "config.toml"
    config.write_text(re.sub(r"^manifest = .*\n", "", config.read_text(), flags=re.M))
    shutil.rmtree(keyed / "models")
    code, out, err = check(capsys, keyed)
    assert code == 2 and "cannot be authenticated" in err and "TOPICAUDIT_INTEGRITY_KEY=off" in err, err


def test_an_unkeyed_run_is_refused_by_check_and_report_when_a_key_is_configured(plain, with_key, capsys, tmp_path):
    code, out, err = check(capsys, plain)
    assert code == 2 and "carries no MAC" in err and "TOPICAUDIT_INTEGRITY_KEY=off" in err, err
    assert main(["report", str(plain), "-o", str(tmp_path / "report"), "--quiet"]) == 2
    assert "carries no MAC" in capsys.readouterr().err and not (tmp_path / "report").exists()


def test_the_report_card_names_the_mode(keyed, with_key, tmp_path, capsys):
    assert main(["report", str(keyed), "-o", str(tmp_path / "report"), "--quiet"]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "authenticated (manifest HMAC-SHA256" in text


def test_the_api_check_reports_the_mode(keyed, with_key):
    import topicaudit

    result = topicaudit.check(keyed, epsilon=float(CLAIM))
    assert result.violated and result.integrity == "hmac-sha256" and result.integrity_key_id


def test_resuming_keeps_the_mode_it_was_started_in(keyed, plain, monkeypatch, capsys):
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    assert canary_run(keyed) == 2  # a resume without the key would drop the MAC
    assert "authenticated with an integrity key" in capsys.readouterr().err
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    assert canary_run(plain) == 2  # nothing of it can be authenticated
    assert "carries no MAC" in capsys.readouterr().err
    assert canary_run(keyed) == 0  # with its key, it resumes (nothing to redo) and stays authenticated
    assert "mac" in json.loads((keyed / manifest.NAME).read_text())


def test_the_run_summary_names_the_mode(tmp_path, with_key, capsys):
    assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(tmp_path / "r")]) == 0
    assert "authenticated (HMAC-SHA256, integrity key" in capsys.readouterr().out


# -- the key itself: where it comes from, and what is refused ---------------------------------------------------
def write_key_file(home: Path, content: str, mode: int = 0o600) -> Path:
    path = home / "topicaudit" / "integrity.key"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    path.chmod(mode)
    return path


def test_the_key_file_in_the_config_directory_is_used_when_the_variable_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv(integrity_key.ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert integrity_key.integrity_key() is None  # no file: no key
    path = write_key_file(tmp_path, KEY + "\n")
    key = integrity_key.integrity_key()
    assert key is not None and key.source == str(path) and key.secret == KEY.encode()
    assert KEY not in repr(key)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")  # off: the file is not read
    assert integrity_key.integrity_key() is None


@pytest.mark.parametrize("case, message", [
    ("short variable", "at least 32"), ("short file", "at least 32"), ("readable by others", "chmod 600"),
    ("a link", "symbolic link"), ("a directory", "not a regular file"), ("a FIFO", "not a regular file"),
])
def test_an_unusable_key_is_exit_2_naming_it(tmp_path, monkeypatch, capsys, case, message):
    monkeypatch.delenv(integrity_key.ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "topicaudit" / "integrity.key"
    path.parent.mkdir()
    if case == "short variable":
        monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "secret")
    elif case == "short file":
        write_key_file(tmp_path, "secret")
    elif case == "readable by others":
        write_key_file(tmp_path, KEY, 0o644)
    elif case == "a link":
        (tmp_path / "elsewhere").write_text(KEY)
        path.symlink_to(tmp_path / "elsewhere")
    elif case == "a directory":
        path.mkdir()
    else:
        os.mkfifo(path, 0o600)
    assert canary_run(tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "integrity key" in err, err
    assert not (tmp_path / "run").exists()


# -- 1b. the corpus cache, with a key: a forged entry is discarded and rebuilt -------------------------------------
TEXTS = ["The running dogs were barking at the cats", "Cats sleep; dogs run and bark loudly",
         "Mice are running from the sleeping cats", "A dog, two cats and the mice ran home"] * 5


def poison(entry: Path, key: str | None = None) -> None:
    """Double the entry's counts and recompute its digest with the module's own function (issue 32, item 7);
    with ``key``, also its MAC under that key (a forger holding another key)."""
    from topicaudit.inputs import cache

    with np.load(entry, allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    stored_key = arrays.pop("key")
    arrays.pop("digest")
    arrays.pop("mac", None)
    arrays["data"] = arrays["data"] * 2
    digest = cache._digest(arrays)
    arrays.update(key=stored_key, digest=np.frombuffer(digest.encode(), dtype=np.uint8))
    if key is not None:
        forged = integrity_key.Key(key.encode(), "forger")
        mac = forged.mac(cache.MAC_DOMAIN, cache._mac_payload(stored_key.tobytes().decode(), digest))
        arrays["mac"] = np.frombuffer(mac.encode(), dtype=np.uint8)
    with open(entry, "wb") as handle:
        np.savez(handle, **arrays)


@pytest.mark.parametrize("forgery", ["no MAC", "a MAC under another key"])
def test_a_poisoned_cache_entry_is_discarded_with_a_key(tmp_path, monkeypatch, forgery):
    from topicaudit.engine.configuration.config import Config
    from topicaudit.engine.storage.run_corpus import load_audit_corpus
    from topicaudit.inputs import cache

    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    corpus_file = tmp_path / "docs.json"
    corpus_file.write_text(json.dumps({"text": TEXTS}))
    config = Config()
    config.corpus.path = str(corpus_file)
    real = load_audit_corpus(config)
    (entry,) = (tmp_path / "cache" / "corpora").glob("*.npz")
    with np.load(entry, allow_pickle=False) as z:
        assert "mac" in z.files
    poison(entry, None if forgery == "no MAC" else OTHER_KEY)
    with pytest.warns(UserWarning, match="does not verify") if forgery != "no MAC" else _no_warning():
        again = load_audit_corpus(config)
    assert again.X.sum() == real.X.sum()  # the file's counts, not the entry's doubled ones
    with np.load(entry, allow_pickle=False) as z:  # rebuilt: the forged entry is gone
        assert np.array_equal(z["data"], real.X.data)
    # Without the key, the same poisoning is used: the limit docs/corpora.md#cache states.
    poison(entry)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    assert load_audit_corpus(config).X.sum() == 2 * real.X.sum()


class _no_warning:
    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        assert not [w for w in self.caught if "does not verify" in str(w.message)]


# -- 3. the hostile pass: a file of the run replaced by a directory, a FIFO, a device or a link ---------------------
def resume(run_dir: Path) -> int:
    return canary_run(run_dir)


@pytest.mark.parametrize("name", ["results.json", "canaries.npz", "canary_scores.npz", "models/canary-target.npz"])
def test_a_directory_in_place_of_a_run_file_is_exit_2_on_resume(plain, capsys, name):
    """A resume replaced the file by a rename, which fails on a directory: IsADirectoryError, exit 3."""
    path = plain / name
    path.unlink()
    path.mkdir()
    (path / "mine.txt").write_text("kept")
    assert resume(plain) == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error:") and name in err and "directory" in err and err.count("\n") == 1, err
    assert (path / "mine.txt").read_text() == "kept"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dotted-key"])
def test_a_config_toml_that_is_no_small_regular_file_is_exit_2_on_resume(plain, capsys, kind):
    """A FIFO blocked the resume forever; /dev/zero (through a link) read until the kernel killed the process."""
    config = plain / "config.toml"
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "dev-zero":
        config.symlink_to("/dev/zero")
    else:  # what grew past 7 GB in tomllib (issue 32, item 6), here in the run's own config.toml
        config.write_text("[provenance]\n" + ".".join(["a"] * 100_000) + " = 1\n")
    assert resume(plain) == 2
    err = capsys.readouterr().err
    assert "config.toml" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("kind", ["a file", "a FIFO", "a link to a folder of yours"])
def test_a_models_folder_that_is_no_folder_of_the_run_is_refused_untouched(plain, tmp_path, capsys, kind):
    """models/ linked to a user's folder: the resume deleted the user's canary-target.npz (unreadable, so
    'refitted') and wrote a model there; a file or FIFO there was FileExistsError, exit 3."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "canary-target.npz").write_text("my data")
    shutil.rmtree(plain / "models")
    if kind == "a file":
        (plain / "models").write_text("x")
    elif kind == "a FIFO":
        os.mkfifo(plain / "models")
    else:
        (plain / "models").symlink_to(mine)
    assert resume(plain) == 2
    err = capsys.readouterr().err
    assert "models" in err and err.count("\n") == 1, err
    assert sorted(os.listdir(mine)) == ["canary-target.npz"] and (mine / "canary-target.npz").read_text() == "my data"


# -- results.json recorded fields of the wrong kind, every hash recomputed (the unkeyed mode's forger) --------------
def forge_results(run_dir: Path, monkeypatch, edit) -> None:
    path = run_dir / "results.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    manifest.record(run_dir, "results.json", write_text=atomic_write_text)


@pytest.mark.parametrize("edit, named", [
    (lambda d: d.update(target=None), "'target' must be an object"),
    (lambda d: d["target"].update(guarantee=None), "target.guarantee must be an object"),
    (lambda d: d["target"]["guarantee"].update(adjacency="x"), "target.guarantee.adjacency must be one of"),
    (lambda d: d["canaries"].update(observe="x"), "canaries.observe must be one of"),
    (lambda d: d["canaries"]["epsilon_lower_bounds"]["by_test"]["zeta:one-run"].update(epsilon="x"),
     "zeta:one-run.epsilon must be a number"),
])
def test_a_recorded_field_of_the_wrong_kind_is_exit_2_naming_it(plain, monkeypatch, capsys, edit, named):
    """Each was an internal error (exit 3: AttributeError, ValueError, KeyError) found by a fuzz of every
    results.json field with a string, null, list, object, -1, 1e308 and true."""
    forge_results(plain, monkeypatch, edit)
    for extra in ((), ("--epsilon", CLAIM)):
        assert main(["check", str(plain), *extra]) == 2
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1, err


@pytest.fixture(scope="module")
def mechanism_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h5") / "dp"
    assert canary_run(out, "--learner", "dp-cgs") == 0
    return out


@pytest.mark.parametrize("edit, named", [
    (lambda d: d["target"]["guarantee"].update(parameters=-1), "target.guarantee.parameters must be an object"),
    (lambda d: d["target"]["guarantee"]["event"].update(class_name="x"), "target.guarantee is not a claim"),
    (lambda d: d["target"]["guarantee"].update(event="x"), "target.guarantee is not a claim"),
    (lambda d: d["target"]["guarantee"].update(basis="x"), "unknown basis"),
    (lambda d: d["target"]["guarantee"].update(basis=None), "sets no basis"),
    (lambda d: d["target"]["guarantee"].update(delta=None), "target.guarantee.delta must be a number"),
    (lambda d: d["canaries"].update(observe=[]), "canaries.observe must be one of"),
    (lambda d: d["canaries"]["mechanism"].update(kind=7), "canaries.mechanism.kind must be a string"),
    (lambda d: d["canaries"]["mechanism"].update(parameters={}), "canaries.mechanism.parameters lacks scale"),
    (lambda d: d["canaries"]["mechanism"].update(tokens=None), "canaries.mechanism.tokens must be an integer"),
    (lambda d: d["canaries"]["mechanism"].update(topics=None), "canaries.mechanism.topics must be an integer"),
])
def test_a_recorded_mechanism_or_claim_of_the_wrong_kind_is_exit_2_naming_it(mechanism_run, tmp_path, monkeypatch,
                                                                            capsys, edit, named):
    """The same fuzz on a dp-cgs run: each was exit 3 (TypeError, ValueError, KeyError in the event decoder or the
    power simulation)."""
    run_dir = copy_of(mechanism_run, tmp_path)
    forge_results(run_dir, monkeypatch, edit)
    for extra in ((), ("--epsilon", CLAIM)):
        assert main(["check", str(run_dir), *extra]) == 2
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1, err


# -- sweep.json that is garbage, a list, a FIFO, or points outside the sweep ----------------------------------------
@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h5")
    (tmp / "sweep.toml").write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 30\n")
    assert main(sweep_args(tmp / "sweep")) == 0
    return tmp / "sweep"


def sweep_args(output: Path, config: Path | None = None) -> list[str]:
    config = config or output.parent / "sweep.toml"
    return ["sweep", str(config), "--param", "target.k", "--values", "2,3", "--output", str(output), "--quiet"]


@pytest.mark.parametrize("content, named", [
    (b"\xff\xfe garbage", "sweep.json is unreadable"), (b"[]", "sweep.json does not hold a JSON object"),
    (b"[" * 100_000, "sweep.json is unreadable"), ("fifo", "not a regular file"),
    ("path", "run entry 0 needs value, replicate"),
])
def test_a_damaged_sweep_index_is_exit_2_for_report_and_a_resumed_sweep(finished_sweep, tmp_path, capsys, content,
                                                                          named):
    sweep = tmp_path / "sweep"
    shutil.copytree(finished_sweep, sweep)
    index = sweep / "sweep.json"
    if content == "fifo":
        index.unlink()
        os.mkfifo(index)
    elif content == "path":
        data = json.loads(index.read_text())
        data["runs"][0]["path"] = 7
        index.write_text(json.dumps(data))
    else:
        index.write_bytes(content)
    assert main(["report", str(sweep), "-o", str(tmp_path / "report"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1, err
    if content != "path":  # a resumed sweep reads the index too (its runs' paths come from the plan, not the index)
        assert main(sweep_args(sweep, finished_sweep.parent / "sweep.toml")) == 2
        err = capsys.readouterr().err
        assert "sweep.json" in err and err.count("\n") == 1, err


# -- a FIFO or a device where a file is written is never replaced -------------------------------------------------
@pytest.mark.parametrize("flag", ["--json", "--junit"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_check_never_replaces_a_fifo_or_a_device_given_as_its_report(plain, tmp_path, capsys, flag, kind):
    """`check RUN --junit /dev/null` run as root replaced the system's /dev/null with a regular file (the report
    is written by a rename). Here a FIFO, and a copy of /dev/null's device node where one can be made."""
    target = tmp_path / "target"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        try:
            os.mknod(target, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        except (PermissionError, AttributeError):
            pytest.skip("making a device node needs root")
    code = main(["check", str(plain), "--epsilon", CLAIM, flag, str(target)])
    err = capsys.readouterr().err
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1, err
    mode = os.lstat(target).st_mode
    assert (stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode))


@pytest.mark.parametrize("name", ["check.json", "canaries.npz", "results.json"])
def test_a_fifo_in_place_of_a_file_the_run_writes_is_refused_untouched(plain, capsys, name):
    (plain / name).unlink(missing_ok=True)
    os.mkfifo(plain / name)
    code = main(["check", str(plain), "--epsilon", CLAIM]) if name == "check.json" else resume(plain)
    err = capsys.readouterr().err
    assert code == 2 and name in err and err.count("\n") == 1, err
    assert stat.S_ISFIFO(os.lstat(plain / name).st_mode)


# -- paths the operating system cannot take: a NUL character, a name over 255 bytes --------------------------------
LONG = "a" * 300


@pytest.mark.parametrize("argv", [
    ["run", "--shadows", "0", "--canaries", "40", "--k", "3", "--output", "{tmp}/" + LONG, "--quiet"],
    ["check", "{tmp}/" + LONG, "--epsilon", "1"],
    ["check", "{plain}", "--epsilon", "1", "--json", "{tmp}/" + LONG],
    ["report", "{plain}", "-o", "{tmp}/" + LONG, "--quiet"],
    ["run", "{tmp}/nul.toml", "--quiet"],
    ["check", "{tmp}/nul.toml", "--epsilon", "1", "--quiet"],
])
def test_a_path_with_a_nul_or_a_name_too_long_is_exit_2(plain, tmp_path, capsys, argv):
    """Each was exit 3: OSError ENAMETOOLONG, or ValueError "embedded null byte" (`output = "a\\u0000b"`)."""
    (tmp_path / "nul.toml").write_text('output = "nul\\u0000x"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 40\n')
    assert main([a.format(tmp=tmp_path, plain=plain) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error:") and ("NUL" in err or "long" in err) and err.count("\n") == 1, err
    assert not [p for p in tmp_path.iterdir() if p.name not in ("nul.toml", "plain")]


# -- signals: a hang-up, Ctrl-\, SIGUSR1 or SIGALRM stop the command (130), never orphan it ------------------------
def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize("signame", ["SIGHUP", "SIGQUIT", "SIGUSR1", "SIGALRM"])
def test_a_terminating_signal_to_the_command_stops_it_with_130_and_leaves_no_child(tmp_path, signame):
    """Sent to the command's PID, these killed the supervising parent alone (exit 128 + N, nothing printed) and
    left the command running in the background, orphaned (a run kept fitting and writing)."""
    import signal
    import subprocess
    import sys
    import time

    script = Path(sys.executable).parent / "topicaudit"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "topicaudit.cli.supervisor"]
    process = subprocess.Popen([*command, "run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output",
                                str(tmp_path / "run"), "--quiet"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (children := _children(process.pid)):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(process.pid, getattr(signal, signame))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130 and err.count("interrupted") == 1 and "Traceback" not in err, (out, err)
    time.sleep(0.2)
    assert not any(Path(f"/proc/{child}").exists() for child in children)


@pytest.mark.parametrize("call, named", [
    (lambda topicaudit, tmp: topicaudit.check("a\0b", epsilon=1), "run_dir 'a\\x00b' contains a NUL"),
    (lambda topicaudit, tmp: topicaudit.check(tmp / LONG, epsilon=1), "a name in it is 300 bytes"),
    (lambda topicaudit, tmp: topicaudit.report(tmp, output=tmp / LONG), "a name in it is 300 bytes"),
    (lambda topicaudit, tmp: topicaudit.load_config(b"c.toml"), "load_config takes the path of a TOML file"),
    (lambda topicaudit, tmp: topicaudit.load_config("c\0.toml"), "contains a NUL"),
])
def test_the_api_refuses_the_paths_the_flags_refuse(tmp_path, call, named):
    """The API raised OSError (ENAMETOOLONG), ValueError (embedded null byte) or TypeError (bytes) for these."""
    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError, match=re.escape(named)):
        call(topicaudit, tmp_path)


# -- the corpus cache: an entry that is a link is never read; a cache that cannot be looked in is skipped ---------
def test_a_cache_entry_that_is_a_link_is_neither_read_nor_written_through(tmp_path, monkeypatch):
    from topicaudit.engine.configuration.config import Config
    from topicaudit.engine.storage.run_corpus import load_audit_corpus
    from topicaudit.inputs import cache

    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    corpus_file = tmp_path / "docs.json"
    corpus_file.write_text(json.dumps({"text": TEXTS}))
    config = Config()
    config.corpus.path = str(corpus_file)
    real = load_audit_corpus(config)
    (entry,) = (tmp_path / "cache" / "corpora").glob("*.npz")
    poisoned = tmp_path / "elsewhere.npz"
    shutil.move(entry, poisoned)
    poison(poisoned)  # a forged entry with a matching digest, reached through a link in the cache
    entry.symlink_to(poisoned)
    before = poisoned.read_bytes()
    assert load_audit_corpus(config).X.sum() == real.X.sum()  # not read through the link
    assert poisoned.read_bytes() == before and not entry.is_symlink()  # the link replaced, its target untouched


def test_a_cache_directory_whose_name_is_too_long_is_skipped(tmp_path, monkeypatch):
    """A cache directory the file system cannot look in (ENAMETOOLONG) stopped the run with exit 3."""
    from topicaudit.engine.configuration.config import Config
    from topicaudit.engine.storage.run_corpus import load_audit_corpus
    from topicaudit.inputs import cache

    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / LONG))
    corpus_file = tmp_path / "docs.json"
    corpus_file.write_text(json.dumps({"text": TEXTS}))
    config = Config()
    config.corpus.path = str(corpus_file)
    assert load_audit_corpus(config).n_docs == len(TEXTS)


def test_the_integrity_key_never_reaches_the_child_that_parses_untrusted_files(tmp_path, monkeypatch):
    """The isolated reader of tomotopy files (native code on an untrusted file) inherited the whole environment."""
    import subprocess

    from topicaudit.inputs import isolation

    seen = {}

    def fake_run(command, **kwargs):
        seen.update(kwargs["env"])
        raise subprocess.TimeoutExpired(command, 1)

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    monkeypatch.setattr(isolation.subprocess, "run", fake_run)
    with pytest.raises(isolation.Damaged):
        isolation.run_isolated("topicaudit.inputs.tomotopy_reader", tmp_path / "m.bin", isolation.Limits(1.0, 2**30))
    assert seen and integrity_key.ENVIRONMENT_VARIABLE not in seen


# -- a file name is anyone's to choose: messages naming one stay one visible line ---------------------------------
def test_a_file_name_cannot_print_a_second_line_or_colours_in_a_message(plain, capsys):
    """A file dropped into models/ (no hash recomputed: it works in the keyed mode too) made the refusal print a
    line reading CONSISTENT, in red, under exit 2."""
    (plain / "models" / "x\nCONSISTENT: not refuted\x1b[31m\u202e.npz").write_bytes(b"")
    code, out, err = check(capsys, plain)
    assert code == 2 and not out and err.count("\n") == 1 and "\x1b" not in err and "\u202e" not in err, err
    assert "x\\x0aCONSISTENT" in err and "\\x1b[31m" in err and "\\u202e" in err


def test_printable_leaves_ordinary_text_alone():
    from topicaudit.cli.main import printable

    text = "runs/pheme-lda-k5 — ε ≥ 2.1, δ = 1e-05, «données» 日本語\ttab"
    assert printable(text) == text


def test_a_sweep_of_a_billion_replicates_is_refused_before_it_is_planned(tmp_path, capsys):
    """Every run is planned (a configuration each) before any is written: --replicates 1000000000 ran for minutes."""
    (tmp_path / "sweep.toml").write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 30\n")
    argv = sweep_args(tmp_path / "sweep")
    assert main([*argv, "--replicates", "1000000000"]) == 2
    err = capsys.readouterr().err
    assert "at most 10,000" in err and err.count("\n") == 1 and not (tmp_path / "sweep").exists()
