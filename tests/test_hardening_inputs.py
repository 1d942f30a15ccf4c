"""Hostile input files (issue 21): damaged model files, memory bombs, FIFOs, text no file can hold, bidi tricks.

Each test names the defect it guards against; every refusal is a UserError
(exit 2) naming the file, raised before anything large is allocated and
before any fit.
"""
import importlib.util
import json
import math
import os
import struct
import sys
import threading
import time
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.errors import UserError, user_message
from topicaudit.inputs.corpus import load_corpus
from topicaudit.inputs.isolation import Damaged, Limits, run_isolated
from topicaudit.inputs.phi_io import read_phi
from topicaudit.inputs.user_model import load_user_model

REPO = Path(__file__).resolve().parents[1]
GiB = 2**30


@pytest.fixture
def little_memory(monkeypatch):
    """The machine has 4 GiB available, whatever it really has."""
    import topicaudit.memory as memory

    monkeypatch.setattr(memory, "available_memory", lambda: 4 * GiB)
    return 4 * GiB


def finishes(function, seconds: float = 20.0):
    """Call ``function`` in a thread; fail (instead of hanging the suite) when it has not returned in time."""
    outcome = {}

    def target():
        try:
            outcome["value"] = function()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# --------------------------------------------------------------------------- #
# 7. Damaged tomotopy files: parsed in a child process with limits
# --------------------------------------------------------------------------- #
@pytest.fixture
def reader_module(tmp_path, monkeypatch):
    """A reader module (importable by the child) whose ``read`` is the given body."""
    def make(body: str) -> str:
        name = f"fake_reader_{abs(hash(body)) % 10**8}"
        (tmp_path / f"{name}.py").write_text(
            "import os, signal, sys, time\n"
            "from topicaudit.inputs.isolation import serve\n"
            f"def read(path):\n{body}\n"
            "if __name__ == '__main__':\n    serve(read)\n")
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
        return name
    return make


def test_a_reader_killed_by_a_signal_is_a_message(reader_module, tmp_path):
    module = reader_module("    os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(Damaged, match="crashed \\(SIGSEGV\\)"):
        run_isolated(module, tmp_path / "f", Limits(20, 2 * GiB))


def test_a_reader_that_ignores_sigterm_and_loops_is_stopped_at_the_limit(reader_module, tmp_path):
    module = reader_module("    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "    while True:\n        time.sleep(0.01)")
    started = time.monotonic()
    with pytest.raises(Damaged, match="took longer than 1.5 s"):
        run_isolated(module, tmp_path / "f", Limits(1.5, 2 * GiB))
    assert time.monotonic() - started < 10


def test_a_reader_that_blows_up_its_memory_hits_the_limit(reader_module, tmp_path):
    module = reader_module("    return {'n': len(bytearray(8 * 2**30))}, b''")
    with pytest.raises(Damaged, match="more than the 1.0 GiB of memory allowed"):
        run_isolated(module, tmp_path / "f", Limits(20, GiB))


def test_a_reader_answers_with_plain_data(reader_module, tmp_path):
    module = reader_module("    return {'path': path, 'x': [1, 2.5]}, bytes(range(5))")
    header, payload = run_isolated(module, tmp_path / "f", Limits(20, 2 * GiB))
    assert header == {"path": str(tmp_path / "f"), "x": [1, 2.5]} and payload == bytes(range(5))


def saved_model(tmp_path: Path, name: str = "model.bin", **init) -> Path:
    """A small trained tomotopy LDAModel; ``init`` overwrites saved constructor arguments (as a damaged file)."""
    tp = pytest.importorskip("tomotopy")
    model = tp.LDAModel(k=3, seed=1)
    words = [f"w{i}" for i in range(30)]
    for d in range(30):
        model.add_doc([words[(d * 7 + j * 3) % 30] for j in range(20)])
    model.train(10, workers=1)
    model.init_params.update(init)
    path = tmp_path / name
    model.save(str(path))
    return path


def test_an_intact_model_is_read_under_a_lower_inherited_memory_limit(tmp_path):
    """``ulimit -v 1500000`` (below the reader's own 2 GiB): the child keeps the stricter limit instead of failing."""
    import subprocess

    path = saved_model(tmp_path)
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1500000 * 1024, 1500000 * 1024)); "
            "from pathlib import Path; from topicaudit.inputs.user_model import load_user_model; "
            f"print(load_user_model(Path({str(path)!r})).phi.shape)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and done.stdout.strip() == "(3, 30)", done.stderr[-2000:]


@pytest.mark.parametrize("cut", [16, 24, 40])
def test_a_truncated_tomotopy_file_is_a_damaged_model_file(tmp_path, cut, monkeypatch):
    import topicaudit.inputs.library_models as library_models

    monkeypatch.setattr(library_models, "TOMOTOPY_SECONDS", 3.0)
    data = saved_model(tmp_path).read_bytes()
    damaged = tmp_path / "cut.bin"
    damaged.write_bytes(data[:cut])  # 16, 24: the loader crashes; 40: it loops forever
    started = time.monotonic()
    with pytest.raises(UserError, match=f"damaged model file {damaged}: .*save the model again"):
        load_user_model(damaged)
    assert time.monotonic() - started < 15


def test_tptk_in_the_first_bytes_of_noise_is_a_damaged_model_file(tmp_path):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(b"\x00" * 9 + b"TPTK" + bytes(range(256)) * 4)
    with pytest.raises(UserError, match="noise.bin"):
        load_user_model(noise)


@pytest.mark.parametrize("setting, value, expected", [
    ("eta", "x", "its saved setting eta is 'x', not a number"),
    ("eta", 10**400, "its saved setting eta is 1000.*, not a finite number"),
    ("min_cf", math.inf, "its saved setting min_cf is inf, not a whole number"),
    ("alpha", math.nan, "its saved setting alpha is nan, not a finite number > 0"),
])
def test_saved_settings_of_the_wrong_type_name_the_setting(tmp_path, setting, value, expected):
    path = saved_model(tmp_path, **{setting: value})
    with pytest.raises(UserError, match=expected) as caught:
        load_user_model(path)
    assert "--param" not in str(caught.value) and str(path) in str(caught.value)


def test_a_bad_saved_setting_is_not_blamed_on_param(tmp_path, monkeypatch):
    """The learner's own range check names the saved model, not a --param the user never passed."""
    from topicaudit.engine.audit_inputs import audit_config, load_audit_inputs
    from topicaudit.inputs import library_models

    real = library_models.load_tomotopy

    def with_negative_burn_in(path, limits=None):
        saved = real(path, limits)
        saved.settings["burn_in"] = -3
        return saved

    monkeypatch.setattr("topicaudit.inputs.user_model.load_tomotopy", with_negative_burn_in)
    path = saved_model(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps({"text": [["w1", "w2"], ["w3", "w4"]]}))
    config = audit_config(path, candidates=tmp_path / "c.json", reference=tmp_path / "c.json",
                          output=str(tmp_path / "out"))
    with pytest.raises(UserError) as caught:
        load_audit_inputs(config)
    assert "--param" not in str(caught.value) and f"the settings saved in {path}" in str(caught.value)


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("tomotopy_fuzz", REPO / "benchmarks" / "tomotopy_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fuzzed_tomotopy_files_never_kill_hang_or_crash_the_reader(tmp_path):
    """A small seeded version of benchmarks/tomotopy_fuzz.py (1,000 files there, in benchmarks/RESULTS.md).

    A third of these files keep the reader busy until its limit: 1 s (a reader that answers takes ~0.3 s).
    """
    pytest.importorskip("tomotopy")
    limit = 1.0
    result = _fuzz_module().fuzz(n_files=12, seed=21, limit=limit, folder=tmp_path)
    counts = result["counts"]
    assert set(counts) <= {"exit 2", "accepted"}, result  # no signal death, hang or exit 3
    assert counts.get("exit 2", 0) >= 6, result  # most mutations are refused
    assert result["slowest_seconds"] < limit + 10, result


# --------------------------------------------------------------------------- #
# 8. Text that no UTF-8 file can hold
# --------------------------------------------------------------------------- #
def test_a_lone_surrogate_in_a_json_corpus_becomes_a_replacement_character(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"text": ["first document about cats", "bad \\ud800 escape about dogs"]}')
    with pytest.warns(UserWarning, match="1 lone surrogate.*document 1.*U\\+FFFD"):
        corpus = load_corpus(path, preprocess=False)
    assert corpus.texts[1] == "bad \ufffd escape about dogs"
    "\n".join(corpus.texts).encode("utf-8")  # what report --show-text and scores.csv write


def test_lone_surrogates_in_token_lists_are_replaced_too(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"text": [["ok", "t\\udfff"], ["ok"]]}')
    with pytest.warns(UserWarning, match="lone surrogate"):
        corpus = load_corpus(path)
    assert "t\ufffd" in list(corpus.vocabulary)


def test_a_latin1_file_name_in_a_folder_corpus_is_a_printable_id(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "plain.txt").write_text("cats and dogs")
    os.close(os.open(os.fsencode(folder) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    with open(os.fsencode(folder) + b"/caf\xe9.txt", "w") as handle:
        handle.write("mice and birds")
    corpus = load_corpus(folder, preprocess=False)
    assert corpus.doc_ids == ["caf\\xe9.txt", "plain.txt"]
    "\n".join(corpus.doc_ids).encode("utf-8")


def test_scores_csv_of_a_surrogate_corpus_is_utf8(tmp_path):
    from topicaudit.attacks.ranking import SCORE_COLUMNS
    from topicaudit.engine.storage.scores_csv import scores_csv

    path = tmp_path / "c.json"
    path.write_text('{"text": ["cats \\ud800 dogs"]}')
    with pytest.warns(UserWarning):
        corpus = load_corpus(path, preprocess=False)
    row = {c: 0.5 for c in SCORE_COLUMNS}
    row.update(id=corpus.doc_ids[0], text=corpus.texts[0])
    scores_csv([row], SCORE_COLUMNS + ("text",)).encode("utf-8")


def test_reports_show_a_lone_surrogate_as_an_escape():
    from topicaudit.reports.html import esc
    from topicaudit.reports.markdown import md_text

    assert esc("a\ud800b") == "a\\ud800b" and md_text("a\ud800b") == "a\\\\ud800b"
    esc("a\ud800b").encode("utf-8")


# --------------------------------------------------------------------------- #
# 9. Memory bombs: sizes checked before allocating
# --------------------------------------------------------------------------- #
def test_a_uci_header_declaring_a_billion_documents_is_refused_before_allocating(tmp_path, little_memory):
    docword = tmp_path / "docword.bomb.txt"
    docword.write_text("1000000000\n3\n1\n1 1 1\n")
    (tmp_path / "vocab.bomb.txt").write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="D = 1000000000 documents.*needs about .* GiB of memory, more than"):
        load_corpus(docword)


def test_an_mm_header_declaring_3e9_rows_is_refused_before_allocating(tmp_path, little_memory):
    mm = tmp_path / "c.mm"
    mm.write_text("%%MatrixMarket matrix coordinate integer general\n3000000000 3 1\n1 1 1\n")
    (tmp_path / "dict.txt").write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="3000000000 documents.*more than the 4.0 GiB available"):
        load_corpus(mm, dictionary=str(tmp_path / "dict.txt"))


def npy_header(shape, dtype="<f8") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode("latin-1")
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_a_tiny_npy_declaring_73_tib_is_refused_from_its_header(tmp_path):
    path = tmp_path / "phi.npy"
    path.write_bytes(npy_header((10_000_000, 1_000_000)) + b"\x00" * 16)
    assert path.stat().st_size < 200
    with pytest.raises(UserError, match=r"shape \(10000000, 1000000\).*needs about 2\d\d\.\d TiB of memory"):
        read_phi(path)


def test_a_truncated_npy_is_refused_without_reading_past_it(tmp_path):
    path = tmp_path / "phi.npy"
    path.write_bytes(npy_header((2, 3)) + b"\x00" * 16)
    with pytest.raises(UserError, match="declares 48 bytes of data but it holds only 16"):
        read_phi(path)


def deflate_bomb(path: Path, declared: tuple, real_bytes: int) -> None:
    """A .npz whose one member's header declares ``declared`` but which inflates to ``real_bytes`` of zeros."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("phi.npy", "w", force_zip64=True) as member:
            member.write(npy_header(declared))
            block = b"\x00" * (1 << 20)
            for _ in range(real_bytes >> 20):
                member.write(block)


def test_an_npz_member_is_never_inflated_past_its_declared_size(tmp_path):
    path = tmp_path / "bomb.npz"
    deflate_bomb(path, (2, 4), 64 << 20)  # 64 bytes declared, 64 MiB inside
    assert path.stat().st_size < 1 << 20
    with pytest.raises(UserError, match="declares 64 bytes of data but it holds more"):
        read_phi(path)


def test_an_npz_member_too_large_for_memory_is_refused_before_inflating(tmp_path, little_memory):
    path = tmp_path / "bomb.npz"
    deflate_bomb(path, (40_000, 40_000), 2 << 20)  # 12 GiB declared
    with pytest.raises(UserError, match=r"array 'phi'.*needs about .* GiB of memory, more than the 4.0 GiB"):
        read_phi(path)


def test_a_gzip_bomb_is_stopped_at_its_cap():
    from topicaudit.inputs.sizes import gunzip

    bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    data = bomb.compress(b"\x00" * (32 << 20)) + bomb.flush()
    with pytest.raises(UserError, match="decompresses to more than 1.0 MiB"):
        gunzip(data, "bomb.gz", cap=1 << 20)
    assert gunzip(data, "ok.gz") == b"\x00" * (32 << 20)


def test_run_directory_arrays_are_read_with_their_sizes_checked(tmp_path):
    from topicaudit.engine.storage.bounded_read import read_arrays

    path = tmp_path / "scores.npz"
    deflate_bomb(path, (2, 4), 16 << 20)
    with pytest.raises(UserError, match="scores.npz"):
        read_arrays(path)
    np.savez(path, a=np.arange(3), b=np.str_("x"))
    arrays = read_arrays(path)
    assert arrays["a"].tolist() == [0, 1, 2] and str(arrays["b"]) == "x"


# --------------------------------------------------------------------------- #
# 10. FIFOs: regular files only, checked before the blocking open
# --------------------------------------------------------------------------- #
@pytest.fixture
def fifo(tmp_path):
    def make(path: Path) -> Path:
        os.mkfifo(path)
        return path
    return make


def test_a_fifo_as_the_corpus_is_refused_at_once(tmp_path, fifo):
    path = fifo(tmp_path / "corpus.json")
    with pytest.raises(UserError, match="corpus.json: not a regular file \\(a FIFO\\)"):
        finishes(lambda: load_corpus(path))


def test_a_fifo_inside_a_folder_corpus_is_refused_at_once(tmp_path, fifo):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("cats and dogs")
    fifo(folder / "b.txt")
    with pytest.raises(UserError, match="b.txt: not a regular file"):
        finishes(lambda: load_corpus(folder))


def test_a_fifo_as_phi_is_refused_at_once(tmp_path, fifo):
    path = fifo(tmp_path / "phi.npy")
    with pytest.raises(UserError, match="phi.npy: not a regular file"):
        finishes(lambda: load_user_model(path))


def test_a_fifo_as_results_json_is_refused_at_once(tmp_path, fifo):
    from topicaudit.engine.storage.bounded_read import read_json
    from topicaudit.reports.collect import read_run

    run = tmp_path / "run"
    run.mkdir()
    fifo(run / "results.json")
    (run / "config.toml").write_text("")
    with pytest.raises(UserError, match=r"results.json:? (is )?not a regular file"):
        finishes(lambda: read_json(run / "results.json"))
    with pytest.raises(UserError, match=r"results.json:? (is )?not a regular file"):
        finishes(lambda: read_run(run))


# --------------------------------------------------------------------------- #
# 17. A reloaded model with NaN or negative Φ: one line naming the file
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("bad", [np.nan, -0.5])
def test_a_reloaded_model_with_bad_phi_names_the_file(tmp_path, bad):
    from topicaudit.engine.storage.rundir import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.models.mkdir(parents=True)
    phi = np.full((2, 3), 1 / 3, dtype=np.float32)
    phi[1, 2] = bad
    np.savez(run.model_path(0), phi=phi, vocabulary=np.arange(3), config_hash=np.str_("h"),
             fit_seconds=np.float64(1.0))
    with pytest.raises(UserError) as caught:
        run.load_model(0, "h")
    message = str(caught.value)
    assert str(run.model_path(0)) in message and "\n" not in message and "delete it" in message


def test_a_user_error_raised_in_a_ray_task_is_one_line():
    class FakeRayTaskError(UserError):  # what ray.get raises: the traceback as text, the exception as cause
        def __init__(self, cause):
            super().__init__("ray::task()\n\x1b[36mTraceback (most recent call last)\x1b[0m\n  ...\n" + str(cause))
            self.cause = cause

    error = FakeRayTaskError(UserError("models/shadow-0001.npz: Φ holds 1 NaN value(s)"))
    assert user_message(error) == "models/shadow-0001.npz: Φ holds 1 NaN value(s)"
    assert user_message(UserError("plain")) == "plain"


# --------------------------------------------------------------------------- #
# 18. Other crashes that were exit 3
# --------------------------------------------------------------------------- #
def test_a_gensim_model_without_its_state_file_names_the_file(tmp_path):
    gensim = pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    docs = [["a", "b", "c"], ["b", "c", "d"], ["a", "d", "e"]] * 5
    dictionary = Dictionary(docs)
    model = LdaModel([dictionary.doc2bow(d) for d in docs], id2word=dictionary, num_topics=2, passes=1,
                     random_state=0)
    model.save(str(tmp_path / "g.model"))
    (tmp_path / "g.model.state").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserError, match=r"g.model: the gensim model's state is missing \(the file g.model.state"):
            load_user_model(tmp_path / "g.model", trust_pickle=True)
    assert gensim


def test_an_mm_count_beyond_64_bits_is_a_user_error(tmp_path):
    mm = tmp_path / "c.mm"
    mm.write_text("%%MatrixMarket matrix coordinate integer general\n2 3 2\n1 1 5\n2 3 99999999999999999999\n")
    (tmp_path / "dict.txt").write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="c.mm: a count too large for a 64-bit integer"):
        load_corpus(mm, dictionary=str(tmp_path / "dict.txt"))


# --------------------------------------------------------------------------- #
# 19. Matrix Market headers a corpus cannot have
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("field, symmetry, entry, expected", [
    ("integer", "symmetric", "2 1 5", "declares a symmetric matrix, which the reader would mirror"),
    ("integer", "skew-symmetric", "2 1 5", "declares a skew-symmetric matrix"),
    ("complex", "general", "2 1 5 1", "declares complex values, but a corpus holds word counts"),
    ("pattern", "general", "2 1", "declares pattern values"),
])
def test_mm_headers_a_corpus_cannot_have_are_refused(tmp_path, field, symmetry, entry, expected):
    mm = tmp_path / "c.mm"
    mm.write_text(f"%%MatrixMarket matrix coordinate {field} {symmetry}\n3 3 1\n{entry}\n")
    (tmp_path / "dict.txt").write_text("a\nb\nc\n")
    with pytest.raises(UserError, match=expected):
        load_corpus(mm, dictionary=str(tmp_path / "dict.txt"))


# --------------------------------------------------------------------------- #
# 20. Bidi controls and line separators
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("char", ["\u200f", "\u061c", "\u200e", "\u2028", "\u2029", "\ufeff"])
def test_bidi_marks_and_separators_are_shown_as_code_points(char):
    from topicaudit.reports.html import esc
    from topicaudit.reports.markdown import md_text

    code = f"\\u{ord(char):04x}"
    assert esc(f"doc{char}1.txt") == f"doc{code}1.txt"
    assert char not in md_text(f"doc{char}1.txt") and code.replace("\\", "\\\\") in md_text(f"doc{char}1.txt")


@pytest.mark.parametrize("lead", ["\x0b", "\x0c", "\u2028", "\u2029", "\x85", "\u00a0", " \u200b", "\ufeff"])
def test_a_formula_after_any_kind_of_leading_space_gets_the_quote_prefix(lead):
    from topicaudit.engine.storage.scores_csv import csv_cell

    cell = csv_cell(f"{lead}=HYPERLINK(\"http://x\")")
    # the quote comes first, or right after a leading break (which the break rule quotes after)
    assert cell.startswith("'") or cell == f"{lead}'=HYPERLINK(\"http://x\")", repr(cell)
    assert cell.lstrip(" \x0b\x0c\x85\u00a0\u2028\u2029\u200b\ufeff").startswith("'"), repr(cell)


@pytest.mark.parametrize("separator", ["\x0b", "\u2028", "\u2029", "\x85"])
def test_a_formula_after_any_kind_of_line_break_inside_a_cell_is_quoted(separator):
    from topicaudit.engine.storage.scores_csv import csv_cell

    assert csv_cell(f"id{separator}=1+1") == f"id{separator}'=1+1"
    assert csv_cell("a-b") == "a-b"


def test_a_fifo_as_the_configuration_file_is_refused_at_once(tmp_path, fifo):
    from topicaudit.engine.configuration.loading import load_config

    path = fifo(tmp_path / "audit.toml")
    with pytest.raises(UserError, match="audit.toml: not a regular file"):
        finishes(lambda: load_config(path))


def test_audit_of_a_damaged_tomotopy_file_is_one_line_and_exit_2(tmp_path, capsys):
    data = saved_model(tmp_path).read_bytes()
    damaged = tmp_path / "damaged.bin"
    damaged.write_bytes(data[:24])
    (tmp_path / "c.json").write_text(json.dumps({"text": [["w1", "w2"], ["w3", "w4"]]}))
    code = main(["audit", str(damaged), "--candidates", str(tmp_path / "c.json"), "--reference",
                 str(tmp_path / "c.json"), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"topicaudit: error: damaged model file {damaged}: the reader crashed"), err
    assert err.strip().count("\n") == 0 and not (tmp_path / "out").exists()


def test_a_fifo_as_sweep_json_is_refused_at_once(tmp_path, fifo):
    from topicaudit.engine.sweep import load_sweep

    (tmp_path / "sweep").mkdir()
    fifo(tmp_path / "sweep" / "sweep.json")
    with pytest.raises(UserError, match="sweep.json: not a regular file"):
        finishes(lambda: load_sweep(tmp_path / "sweep"))
