"""Build the trimmed WordNet 3.0 data that ``topicaudit.inputs.preprocess`` ships.

The lemmatiser is nltk's ``WordNetLemmatizer().lemmatize(token)`` (pos "n"),
which only asks WordNet two questions: which lemmas exist per part of speech
(the ``index.*`` files) and which irregular forms map to which lemmas (the
``*.exc`` files). This script keeps exactly what nltk's ``WordNetCorpusReader``
needs to answer those questions for every token the pre-processing can produce
(lower-case ASCII letters only, ``[a-z]+``), and writes it as a small zip that
the reader loads offline:

``wordnet/index.{noun,verb,adj,adv}``
    one line per lemma that is all letters ``[a-z]+`` (any length) or is the
    target of a kept exception, as ``lemma pos 1 0 1 0 0``: nltk parses it and
    keeps the lemma with a dummy synset offset. Synset counts, pointers and
    offsets are dropped (the lemmatiser never reads them).
``wordnet/{noun,verb,adj,adv}.exc``
    the exception lines whose inflected form is all letters ``[a-z]+``,
    unchanged (a form with any other character can never be looked up).
``wordnet/lexnames``
    the 45 lexicographer file names of WordNet 3.0 (from the lexnames(5WN)
    manual page; Debian does not ship the file, nltk's reader requires it).
``wordnet/data.adj``
    only the licence header: nltk's reader scans it for adjective satellites
    and for the version line; the lemmatiser does not use satellites (the
    ``s`` key exists for every adjective lemma either way).
``wordnet/LICENSE``, ``wordnet/README``
    Princeton's WordNet 3.0 licence (taken verbatim from the data files'
    header) and a note on where the data came from and how it was trimmed.

Source: Debian's ``wordnet-base`` package (WordNet 3.0), which installs the
dict files in /usr/share/wordnet::

    apt-get install -y --no-install-recommends wordnet-base
    python benchmarks/build_wordnet_data.py            # writes audit/inputs/_data/
    python benchmarks/build_wordnet_data.py --check    # verify, do not write

The output is deterministic (sorted lines, fixed zip timestamps), so a rebuild
from the same Debian files gives the same files (and, with the same zlib, the
same zip bytes).
"""

from __future__ import annotations

import argparse
import gzip
import io
import re
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = Path("/usr/share/wordnet")
DEFAULT_OUT = REPO / "audit" / "inputs" / "_data"
ZIP_NAME = "wordnet-3.0-lemmatizer.zip"
LICENSE_NAME = "WORDNET-LICENSE.txt"

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
LETTERS = re.compile(r"[a-z]+")
ZIP_DATE = (2006, 12, 6, 0, 0, 0)  # WordNet 3.0's release month, fixed for reproducibility

# lexnames(5WN), WordNet 3.0: file number, name, syntactic category.
LEXNAMES = """\
adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact
noun.attribute noun.body noun.cognition noun.communication noun.event
noun.feeling noun.food noun.group noun.location noun.motive noun.object
noun.person noun.phenomenon noun.plant noun.possession noun.process
noun.quantity noun.relation noun.shape noun.state noun.substance noun.time
verb.body verb.change verb.cognition verb.communication verb.competition
verb.consumption verb.contact verb.creation verb.emotion verb.motion
verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl
""".split()
CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The ``lexnames`` file of WordNet 3.0: number, name, category, tab-separated."""
    return "".join(
        f"{i:02d}\t{lex}\t{CATEGORY[lex.split('.')[0]]}\n" for i, lex in enumerate(LEXNAMES)
    )


def _read(path: Path) -> str:
    if not path.exists() and path.with_suffix(path.suffix + ".gz").exists():
        return gzip.open(path.with_suffix(path.suffix + ".gz"), "rt", encoding="utf-8").read()
    return path.read_text(encoding="utf-8")


def licence_header(index_noun: str) -> list[str]:
    """The licence block at the top of every WordNet data/index file."""
    header = []
    for line in index_noun.splitlines():
        if not line.startswith("  "):
            break
        header.append(line)
    if not any("WordNet 3.0 Copyright" in line for line in header):
        raise SystemExit("index.noun has no 'WordNet 3.0 Copyright' header: not WordNet 3.0?")
    return header


def licence_text(header: list[str]) -> str:
    """The header without its line numbers, as a plain LICENSE file."""
    out = []
    for line in header:
        text = line.strip()
        text = re.sub(r"^\d+\s?", "", text).rstrip()
        out.append(text)
    return "\n".join(out).strip() + "\n"


def build(source: Path) -> dict[str, bytes]:
    """Return {name inside the zip: bytes} for the trimmed data."""
    files: dict[str, bytes] = {}
    header = licence_header(_read(source / "index.noun"))
    kept_exc_targets: dict[str, set[str]] = {}
    for pos, name in POS_FILES.items():
        kept, targets = [], set()
        for line in _read(source / f"{name}.exc").splitlines():
            terms = line.split()
            if terms and LETTERS.fullmatch(terms[0]):
                kept.append(" ".join(terms))
                targets.update(terms[1:])
        kept_exc_targets[pos] = targets
        files[f"wordnet/{name}.exc"] = ("\n".join(sorted(kept)) + "\n").encode()
    for pos, name in POS_FILES.items():
        lemmas = set()
        for line in _read(source / f"index.{name}").splitlines():
            if line.startswith(" "):
                continue
            lemma, line_pos = line.split(maxsplit=2)[:2]
            if line_pos != pos:
                raise SystemExit(f"index.{name}: unexpected pos {line_pos!r} in {line[:60]!r}")
            if LETTERS.fullmatch(lemma) or lemma in kept_exc_targets[pos]:
                lemmas.add(lemma)
        lines = [f"{lemma} {pos} 1 0 1 0 0" for lemma in sorted(lemmas)]
        files[f"wordnet/index.{name}"] = ("\n".join(lines) + "\n").encode()
    files["wordnet/lexnames"] = lexnames_text().encode()
    files["wordnet/data.adj"] = ("\n".join(header) + "\n").encode()
    licence = licence_text(header)
    files["wordnet/LICENSE"] = licence.encode()
    files["wordnet/README"] = README.encode()
    return dict(sorted(files.items()))


README = """\
Trimmed WordNet 3.0 for nltk's WordNetLemmatizer (topicaudit).

Source: Debian package wordnet-base 1:3.0 (Princeton WordNet 3.0 dict files),
rebuilt by benchmarks/build_wordnet_data.py in the topicaudit repository.
Kept: index.* lemmas made of letters a-z only (plus lemmas named by kept
exceptions), exception lines whose form is letters a-z only, lexnames, and the
licence header as data.adj. Synset data, glosses and pointers are removed.
nltk's WordNetCorpusReader loads it; for any token of letters a-z,
WordNetLemmatizer gives the same lemma as with the full WordNet 3.0.
See LICENSE for Princeton University's licence, which applies to this data.
"""


def to_zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in ["wordnet/"] + list(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.external_attr = (0o40755 << 16) | 0x10 if name.endswith("/") else 0o644 << 16
            if name.endswith("/"):
                zf.writestr(info, b"")
            else:
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, files[name], compresslevel=9)
    return buf.getvalue()


def zip_contents(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="WordNet 3.0 dict directory (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output directory (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="only verify that the shipped files match a fresh build")
    args = parser.parse_args(argv)
    if not (args.source / "index.noun").exists():
        print(f"{args.source}/index.noun not found: install WordNet 3.0, e.g. "
              "'apt-get install -y --no-install-recommends wordnet-base'", file=sys.stderr)
        return 2
    files = build(args.source)
    blob = to_zip(files)
    licence = files["wordnet/LICENSE"]
    zip_path, lic_path = args.out / ZIP_NAME, args.out / LICENSE_NAME
    if args.check:
        # compare contents, not bytes: deflate output may differ between zlib builds
        ok = (zip_path.exists() and zip_contents(zip_path.read_bytes()) == zip_contents(blob)
              and lic_path.exists() and lic_path.read_bytes() == licence)
        print("shipped WordNet data is up to date" if ok else "shipped WordNet data differs from a fresh build")
        return 0 if ok else 1
    args.out.mkdir(parents=True, exist_ok=True)
    zip_path.write_bytes(blob)
    lic_path.write_bytes(licence)
    for name, data in files.items():
        print(f"{name:24s} {len(data):9d} bytes")
    print(f"wrote {zip_path} ({len(blob)} bytes) and {lic_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
