"""roc.png: the log-log ROC of a run's attacks, which the run leaves in its directory.

The same drawing is the report's per-run ROC (``topicaudit.reports.figures``
reads a finished run into :func:`roc_data` and draws it with :func:`draw_roc`);
both draw the same attacks (:func:`drawn_attacks`: every attack the run scored),
the recommended one and the paper's online LiRA bold, the others faded; the
chance line, and the region the target's claimed (ε, δ) excludes when it
claims one. :func:`render` turns any figure into deterministic SVG or palette
PNG bytes.
"""
from __future__ import annotations

import atexit
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.metrics import roc_curve
from topicaudit.attacks.registry import recommended_attack  # the rule of docs/attacks.md
from topicaudit.bounds.dp_region import Claim, claim_of, dp_tpr_bound
from topicaudit.engine.storage.results import RunResults
from topicaudit.folder_anchors import planted_link, planted_once_made, temporary_folder  # noqa: F401 (tests wrap it)

REGION_COLOR, REGION_EDGE = "#d62728", "#7a0f10"  # the region a DP claim excludes, and its boundary
SVG_SALT = "topicaudit"


def drawn_attacks(results: RunResults, scores: Mapping[str, np.ndarray]) -> list[str]:
    """The attacks a run's ROC draws, in roc.png and in the report alike: every attack with a results.json entry
    and stored scores, in results.json order."""
    return [name for name in results.attacks if name in scores]


def roc_floor(is_member: np.ndarray) -> float:
    """The smallest non-zero FPR (1 / #non-members), where a ROC's log axes start."""
    return 1.0 / max(int((~is_member).sum()), 1)


def format_percent(x: float) -> str:
    return f"{100 * x:.2f}%"


def emphasised_attacks(n_shadows: int, names) -> list[str]:
    """The attacks a ROC draws boldly: the one recommended for the run's shadows, and the paper's online LiRA."""
    wanted = ([recommended_attack(n_shadows)] if n_shadows >= 1 else []) + ["lira_online"]
    return [name for name in dict.fromkeys(wanted) if name in names]


def roc_data(title: str, scores: Mapping[str, np.ndarray], results: RunResults, attacks: list[str]) -> dict[str, Any]:
    """What a run's ROC draws, from its scores (scores.npz's arrays) and its results.

    Returns a dict with ``curves`` {attack: (fpr, tpr)} (exactly
    ``topicaudit.attacks.metrics.roc_curve`` of the stored scores), ``metrics`` {attack:
    results.json entry}, ``floor`` (1 / #non-members: the smallest non-zero
    FPR, where the log axes start), ``claim`` (a :class:`Claim` or None) and
    ``boundary`` (fpr grid, largest TPR the claim allows) when the claim bounds
    document membership, else None.
    """
    labels = np.asarray(scores["is_member"], dtype=bool)
    curves = {name: roc_curve(scores[name], labels)[:2] for name in attacks}
    floor = roc_floor(labels)
    claim = claim_of(results.to_json())
    boundary = None
    if claim is not None and claim.document_level:
        grid = np.logspace(np.log10(floor), 0, 400)
        boundary = (grid, dp_tpr_bound(grid, claim.epsilon, claim.delta))
    n_shadows = results.n_shadows
    metrics = {name: results.attacks[name].to_json() if name in results.attacks else {} for name in attacks}
    return {"title": title, "curves": curves, "metrics": metrics, "floor": floor, "claim": claim,
            "boundary": boundary, "emphasised": emphasised_attacks(n_shadows, attacks),
            "recommended": recommended_attack(n_shadows) if n_shadows >= 1 else None}


def write_roc_figure(path: Path, title: str, scores: Mapping[str, np.ndarray], results: RunResults,
                     write_bytes) -> Path:
    """Draw ``path`` (roc.png: log-log, down to 1/#non-members) of the attacks a run scored (``drawn_attacks``).

    ``write_bytes(path, writer)``: the run directory's atomic writer.
    """
    data = roc_data(title, scores, results, drawn_attacks(results, scores))
    with matplotlib_defaults():
        png = render(draw_roc(data), "png")
    write_bytes(path, lambda handle: handle.write(png))
    return path


def warm_up() -> None:
    """Import matplotlib and load its fonts by rendering an empty figure: a run does this while Ray starts, so
    drawing roc.png at the end costs only the drawing."""
    with matplotlib_defaults():
        render(new_figure(1, 1), "png")


@contextmanager
def matplotlib_defaults() -> Iterator[None]:
    """Draw with matplotlib's own defaults, whatever the environment configures: topicaudit's figures need no
    backend and no user style. An unknown ``MPLBACKEND`` made the import of matplotlib raise (exit 3 from
    `report`, and from `run` with shadows before any fit), and a ``matplotlibrc`` in the working directory with
    ``text.usetex: True`` made every figure need LaTeX (exit 3); any other rc setting changed the figures that
    are meant to be the same for the same run. ``MPLBACKEND`` is put back for the caller's own pyplot."""
    _no_planted_matplotlib_folders()  # before matplotlib's first import, which reads and writes those folders
    if "matplotlib" not in sys.modules:
        backend = os.environ.pop("MPLBACKEND", None)
        try:
            import matplotlib  # see new_figure
        finally:
            if backend is not None:
                os.environ["MPLBACKEND"] = backend
        if backend is not None:
            try:
                matplotlib.rcParams["backend"] = backend   # as the import would have set it, when it is valid
            except ValueError:
                pass
    import matplotlib.style  # see new_figure

    with matplotlib.style.context("default"):
        yield


def new_figure(width: float, height: float):
    _no_planted_matplotlib_folders()
    from matplotlib.figure import Figure  # matplotlib: ~0.5 s to import, only when a figure is drawn

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _no_planted_matplotlib_folders() -> None:
    """Before matplotlib's first import: when the folders it keeps its settings and font list in
    (``$XDG_CONFIG_HOME``/``$XDG_CACHE_HOME``, else ``~/.config``/``~/.cache``) lie behind another user's link in a
    shared sticky folder, it gets a temporary folder of its own instead (``MPLCONFIGDIR``, removed at exit as
    matplotlib's own is: by ``atexit`` in a Python session, by the supervisor after the command's ``os._exit``):
    it wrote ``matplotlib/fontlist-….json`` into the user's folder that link named. ``MPLCONFIGDIR`` itself, when
    set, is matplotlib's only folder, and is held to the same rule (hostile pass XIX-q: ``MPLCONFIGDIR=/tmp/L`` had
    the font list written into the folder L named). And where matplotlib would make a temporary folder itself (its
    folder is a file, or not writable), it is given this one: it made its own with ``tempfile``, through
    ``TMPDIR=/tmp/L`` into the folder L named (hostile pass XIX-q, with ``MPLCONFIGDIR`` naming a file)."""
    if "matplotlib" in sys.modules:
        return
    home = os.path.expanduser("~")
    chosen = os.environ.get("MPLCONFIGDIR")
    places = (chosen,) if chosen else (os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                                                    "matplotlib"),
                                       os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"),
                                                    "matplotlib"))
    temporary = temporary_folder()  # never through another user's link ($TMPDIR=/tmp/L)
    # MPLCONFIGDIR made now if missing: absent here, another user's link a moment later was followed (XIX-w)
    # Each made now if missing, never through a link: absent here, another user's link a moment later was followed
    # (XIX-w for MPLCONFIGDIR; XIX-y for the default folders below a HOME or XDG_* folder that did not exist yet)
    if temporary is not None and any(planted_once_made(place) or _falls_back(place) for place in places):
        os.environ["MPLCONFIGDIR"] = made = tempfile.mkdtemp(prefix="matplotlib-", dir=temporary)
        atexit.register(shutil.rmtree, made, True)


def _falls_back(place: str) -> bool:
    """Whether matplotlib, given ``place`` for its folder, would make a temporary folder instead: ``place`` is not
    a writable folder and cannot be made (matplotlib makes it with its missing parents)."""
    if os.path.lexists(place):
        return not (os.path.isdir(place) and os.access(place, os.W_OK | os.X_OK))
    above = os.path.dirname(place)
    while not os.path.lexists(above) and above != os.path.dirname(above):
        above = os.path.dirname(above)
    return not (os.path.isdir(above) and os.access(above, os.W_OK | os.X_OK))


def loglog(ax, floor: float, title: str):
    ax.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1.05),
           xlabel="false positive rate", ylabel="true positive rate", title=title)
    ax.grid(True, which="major", color="0.9", lw=0.6)


def chance(ax, floor: float):
    grid = np.logspace(np.log10(floor), 0, 50)
    ax.plot(grid, grid, color="0.55", lw=1, ls="--", label="chance")


def draw_claim(ax, claim: Claim | None, boundary, floor: float):
    if boundary is not None:
        assert claim is not None, "a boundary is the claim's (roc data sets one only with a claim)"
        grid, bound = boundary
        ax.fill_between(grid, np.maximum(bound, floor), 1.05, color=REGION_COLOR, alpha=0.12, lw=0,
                        label=claim.label())
        ax.plot(grid, np.maximum(bound, floor), color=REGION_EDGE, lw=1.1, ls="-.")


def corners(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The polyline without the interior points of its horizontal and vertical runs.

    A ROC over thousands of documents is mostly such runs; dropping their
    interior points draws the very same lines (axis-parallel segments stay
    straight on log axes) with a fraction of the points, so the SVGs and the
    report page stay small. Diagonal runs (tied scores) are kept whole: on
    log axes they are curves.
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.size <= 2:
        return x, y
    same_x = (x[1:-1] == x[:-2]) & (x[1:-1] == x[2:])
    same_y = (y[1:-1] == y[:-2]) & (y[1:-1] == y[2:])
    keep = np.r_[True, ~(same_x | same_y), True]
    return x[keep], y[keep]


def draw_roc(data: dict[str, Any]):
    """Log-log ROC: the emphasised attacks bold and labelled, every other one faded grey; chance; DP region."""
    fig = new_figure(6.4, 5.4)
    ax = fig.add_subplot()
    floor = data["floor"]
    chance(ax, floor)
    draw_claim(ax, data["claim"], data["boundary"], floor)
    bold = data.get("emphasised") or list(data["curves"])
    faded = [name for name in data["curves"] if name not in bold]
    for i, name in enumerate(faded):
        fpr, tpr = data["curves"][name]
        ax.plot(*corners(np.maximum(fpr, floor), np.maximum(tpr, floor)), lw=0.8, color="0.62", alpha=0.55,
                label=f"{len(faded)} other attacks (faded; metrics in results.json)" if i == 0 else None)
    for color, name in zip(("#b00020", "#1f4e9c", "#2e7d32", "#6a1b9a"), bold):
        fpr, tpr = data["curves"][name]
        m = data["metrics"].get(name, {})
        label = name + (" (recommended)" if name == data.get("recommended") else "") + \
            (" (the paper's LiRA)" if name == "lira_online" else "")
        if "auc" in m:
            label += f": AUC {m['auc']:.3f}, TPR@0.1% {format_percent(m['tpr_at_fpr_0.001'])}"
        ax.plot(*corners(np.maximum(fpr, floor), np.maximum(tpr, floor)), lw=2.0, color=color, label=label)
    title = data["title"]
    if data["claim"] is not None and data["boundary"] is None:
        title += f"\n(claimed ε = {data['claim'].epsilon:g} is {data['claim'].adjacency}-level: no document bound)"
    loglog(ax, floor, title)
    ax.legend(fontsize=6.8, loc="lower right")
    return fig


def render(fig, fmt: str) -> bytes:
    """The figure as SVG bytes (deterministic: fixed hash salt, no date) or palette PNG bytes."""
    import matplotlib  # see new_figure

    buffer = io.BytesIO()
    _plain_text(fig)
    with matplotlib.rc_context({"svg.hashsalt": SVG_SALT, "svg.fonttype": "path"}):
        _fix_layout(fig)
        if fmt == "svg":
            fig.savefig(buffer, format="svg", metadata={"Date": None})
        else:
            fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue() if fmt == "svg" else palette_png(buffer.getvalue())


def _plain_text(fig) -> None:
    """Draw every text of ours as written: a run or corpus name with ``$`` (``cost_$5_$``) is not mathtext.

    Only the axes' own tick and offset labels (``10^{-2}``) keep matplotlib's math rendering.
    """
    from matplotlib.text import Text  # see new_figure

    axes_own = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            axes_own.add(axis.offsetText)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                axes_own.update((tick.label1, tick.label2))
    for text in fig.findobj(Text):
        if text not in axes_own:
            text.set_parse_math(False)


def palette_png(png: bytes) -> bytes:
    """The PNG re-encoded with at most 256 colours.

    A plot has few colours, so it looks the same (mean channel difference
    ~0.15/255) at a third of the bytes; report.html embeds every figure, and
    this keeps a report small enough to mail or keep in a repository.
    """
    from PIL import Image  # comes with matplotlib; see new_figure

    with Image.open(io.BytesIO(png)) as image:
        palette = image.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    palette.save(out, format="png", optimize=True)
    return out.getvalue()


def _fix_layout(fig) -> None:
    """Run the constrained layout once and keep its result (every later save skips the costly solve)."""
    if fig.get_layout_engine() is not None and not isinstance(fig.get_layout_engine(),
                                                              _placeholder_engine()):
        fig.draw_without_rendering()
        fig.set_layout_engine("none")


def _placeholder_engine():
    from matplotlib.layout_engine import PlaceHolderLayoutEngine  # see new_figure

    return PlaceHolderLayoutEngine
