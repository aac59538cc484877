"""The cost model (docs/design.md, "The cost model"): the classes of a
trace's events, each a set of categories with its W per event (median and
95% interval) and delta, the part of W inside the event's own interval.
The C correction takes it as osk_cost_class_t entries (at most
MAX_CLASSES); the counting pass, the per-event pricing and the verdict take
the model, not named W and W_py pairs.

Which classes a torch.profiler trace has is data (CLASSES): a class priced
with another (`with_class`: its cost cannot be told apart in a run) is
corrected as part of that one, and the report says so (`not_separable`);
a class with a price of its own is a class of the C correction. A new
class is a row of CLASSES, its price where the model is built, and a test.
No torch."""

from __future__ import annotations

import dataclasses
import math

MAX_CLASSES = 4  # OSK_MAX_COST_CLASSES

# The classes of a torch.profiler trace's corrected events. `with_class`: the
# class whose W it is priced at (its cost is not measured apart), and why.
CLASSES = (
    {"name": "operator", "categories": ("cpu_op",), "python": False},
    {"name": "annotation", "categories": ("user_annotation",), "python": False, "with_class": "operator",
     "why": "a record_function range takes the operators' RecordFunction path; not measured apart"},
    {"name": "python", "categories": ("python_function",), "python": True},
)

ZERO = {"median": 0.0, "ci95": [0.0, 0.0]}

# How opskew's documents name the default model's prices (a calibration,
# report.json's reports, a job's ranks, correct's, check's and the verdict's
# --json): per priced class, the fields of its W and of its delta. The
# documents keep these names (their schemas, read by earlier versions too);
# code reads and writes them through `prices` and `fields`, here alone.
FIELDS = {"operator": ("w_ns", "delta_ns"), "python": ("w_py_ns", "delta_py_ns")}


def prices(doc: dict) -> dict:
    """{class: (its W, its delta)} as the document `doc` holds them (a
    dict, a number, or None where absent), by FIELDS."""
    return {name: (doc.get(w), doc.get(d)) for name, (w, d) in FIELDS.items()}


def fields(priced: dict) -> dict:
    """A document's named fields (FIELDS) of {class: (W, delta)}: the
    inverse of `prices`; a class not in `priced` has no fields."""
    return {k: v for name, pair in priced.items() for k, v in zip(FIELDS[name], pair)}


def _w(w) -> dict:
    """{"median", "ci95"} from a W given as a dict (its interval, or the
    median at both ends; its other keys kept) or a number."""
    if w is None:
        return dict(ZERO)
    if isinstance(w, dict):
        m = float(w["median"])
        ci = w.get("ci95") or [m, m]
        return {**w, "median": m, "ci95": [float(ci[0]), float(ci[1])]}  # with its coverage, source, ...
    return {"median": float(w), "ci95": [float(w), float(w)]}


@dataclasses.dataclass(frozen=True)
class CostClass:
    """One class: its events' categories, W per event (median and 95%
    interval, ns) and delta (ns, clamped into [0, W] at each end), and
    whether it is the Python tracer's (its events nest inside an operator
    they outlive, and their self time runs Python code)."""
    name: str
    categories: tuple
    w: dict
    delta_ns: float = 0.0
    python: bool = False

    def at(self, k: int, delta_ns: float | None = None) -> dict:
        """The C correction's class (its binding's dict) at W's median (k
        0), its lower end (1) or its upper end (2), delta clamped into
        [0, W] there (`delta_ns`: another delta for this end)."""
        w = max(float(self.w["median"] if k == 0 else self.w["ci95"][k - 1]), 0.0)
        d = self.delta_ns if delta_ns is None else delta_ns
        return {"name": self.name, "categories": list(self.categories), "w_ns": w,
                "delta_ns": min(max(float(d), 0.0), w), "python": self.python}


@dataclasses.dataclass(frozen=True)
class CostModel:
    """The classes of a trace's events, each with its cost (CostClass)."""
    classes: tuple

    def __post_init__(self):
        if not 1 <= len(self.classes) <= MAX_CLASSES:
            raise ValueError(f"a cost model has 1 to {MAX_CLASSES} classes, not {len(self.classes)}")
        seen = [c for k in self.classes for c in k.categories]
        if len(seen) != len(set(seen)):
            raise ValueError(f"a category is in two classes: {sorted(seen)}")
        for k in self.classes:
            w = k.w
            if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in (w["median"], *w["ci95"])):
                raise ValueError(f"class {k.name}: W must be finite, not {w!r}")

    @classmethod
    def of(cls, prices: dict, deltas: dict | None = None, table=CLASSES) -> "CostModel":
        """The model of a torch.profiler trace: each row of `table` priced
        by `prices[name]` (W as a dict or a number), delta `deltas[name]`;
        a row priced `with_class` another (and not in `prices`) is corrected
        as part of it. A class with no price costs 0."""
        deltas = deltas or {}
        cats = {r["name"]: list(r["categories"]) for r in table}
        own = [r for r in table if r["name"] in prices or not r.get("with_class")]
        for r in table:
            if r not in own:
                cats[r["with_class"]] += cats[r["name"]]
        return cls(tuple(CostClass(r["name"], tuple(cats[r["name"]]), _w(prices.get(r["name"])),
                                   float(deltas.get(r["name"], 0.0)), bool(r.get("python")))
                         for r in own))

    @classmethod
    def default(cls, w, delta_ns: float = 0.0, w_py=None, delta_py_ns: float = 0.0) -> "CostModel":
        """The default model: operators and record_function ranges at W
        (delta inside), Python calls at W_py (delta_py inside)."""
        return cls.of({"operator": w, "python": w_py}, {"operator": delta_ns, "python": delta_py_ns})

    def named(self, name: str) -> CostClass | None:
        return next((k for k in self.classes if k.name == name), None)

    @property
    def operator(self) -> CostClass:
        """The first class that is not Python's (the operators')."""
        return next((k for k in self.classes if not k.python), self.classes[0])

    @property
    def python(self) -> CostClass | None:
        return next((k for k in self.classes if k.python), None)

    def default_shape(self) -> bool:
        """Operators then Python, as the C correction's default (its header
        and args then say no more than the two classes' W and delta)."""
        return len(self.classes) == 2 and not self.classes[0].python and self.classes[1].python

    def for_c(self, k: int, delta_ns: dict | None = None) -> list:
        """The C correction's classes at W's median (k 0), lower (1) or
        upper end (2); `delta_ns` {class name: delta} for this end."""
        return [c.at(k, (delta_ns or {}).get(c.name)) for c in self.classes]

    def step_cost(self, op_events, py_events, op_factor: float = 1.0, op_w: float | None = None) -> float:
        """The instrument time of a step's events (its operators' at
        `op_factor` x W, or x `op_w` in W's place, its Python calls' at W_py;
        medians, at 0 or above): what opskew.profile prices a step's own
        level, its position and its cold first step against."""
        w = max(self.operator.w["median"], 0.0) if op_w is None else op_w
        wp = max(self.python.w["median"], 0.0) if self.python is not None else 0.0
        return op_factor * w * op_events + wp * py_events

    def added(self, counts, k: int = 0) -> float:
        """sum over classes of W (at end k) x counts[class index]."""
        return sum(c.at(k)["w_ns"] * n for c, n in zip(self.classes, counts))

    def to_dict(self) -> dict:
        """The model as a report gives it: per class its categories, W and delta."""
        return {"classes": [{"name": c.name, "categories": list(c.categories), "w_ns": c.w,
                             "delta_ns": c.delta_ns, "python": c.python} for c in self.classes]}


def separability(options: dict, w_py) -> dict:
    """What each class of the trace's events is priced at, and where a
    class's cost cannot be told apart from another's in this run (the
    report's and the corrected trace's `cost_classes`; docs/profile-reference.md,
    "The report"), from CLASSES and the run's options: W is fitted per
    operator event, so whatever the configuration records per operator
    (shapes, modules, flops) is in it; W_py is measured apart, on Python
    calls alone (`w_py`: its figure, with its `source`, or None)."""
    out = {"cpu_op": "W per event, from this run's pairs of active and wait steps"}
    for r in CLASSES:
        if r.get("with_class") == "operator":
            for cat in r["categories"]:
                out[cat] = "W per event, as an operator: " + r["why"]
    if options.get("with_stack"):
        out["python_function"] = ("W_py per event, measured apart on Python calls (" + w_py["source"] + ")"
                                  if w_py else "not measured here: its cost is in W per operator event")
    folded = [k for k in ("record_shapes", "with_modules", "with_flops") if options.get(k)]
    if folded:
        out["per_operator_extras"] = ", ".join(folded) + ": no events of their own; what they cost per operator is in W"
    if options.get("profile_memory"):
        out["memory"] = ("[memory] instant events: not separable in this run; what recording them costs "
                         "is in W per operator event (an operator that allocates pays for one that does not)")
    apart = {c for r in CLASSES if r.get("with_class") for c in r["categories"]}
    out["not_separable"] = sorted(k for k in out if k in apart or k in ("memory", "per_operator_extras")
                                  or (k == "python_function" and not w_py))
    return out
