"""Exercise checker: `check("00.1", fn)` runs hidden cases against a learner's function.

Every notebook's exercises register here (one module per notebook); solutions/ holds answers.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module


@dataclass(frozen=True)
class Exercise:
    id: str  # "NN.k": notebook number, exercise number
    title: str
    hint: str
    cases: Callable  # fn -> iterable of (case name, passed, message on failure)
    none_is_an_answer: bool = False  # True where None is a correct return value for some cases


@dataclass
class CheckResult:
    id: str
    passed: bool
    n_cases: int
    failures: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        pass  # check() already printed the verdict; don't echo the object in the notebook


_REGISTRY: dict[str, Exercise] = {}
# one module per notebook with exercises
_BANKS = ("nb00", "nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07", "nb08", "nb09")


def register(ex: Exercise) -> Exercise:
    if ex.id in _REGISTRY:
        raise ValueError(f"exercise {ex.id} registered twice")
    _REGISTRY[ex.id] = ex
    return ex


def registry() -> dict[str, Exercise]:
    for bank in _BANKS:
        import_module(f"specnotes.exercises.{bank}")
    return dict(_REGISTRY)


def check(exercise_id: str, fn: Callable, verbose: bool = True) -> CheckResult:
    """Run the hidden cases of one exercise against fn; print pass, or the first failures and a hint."""
    exercises = registry()
    if exercise_id not in exercises:
        raise ValueError(f"unknown exercise {exercise_id!r}; known: {', '.join(sorted(exercises))}")
    if not callable(fn):
        raise TypeError(f"pass your function itself, e.g. check({exercise_id!r}, my_fn); got {fn!r}")
    ex = exercises[exercise_id]
    failures, n = [], 0
    returned_none, raised = [], []

    def watched(*args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except Exception as exc:  # remembered: a StopIteration would reach the checker as a RuntimeError
            raised.append(exc)
            raise
        if out is None:
            returned_none.append(True)
        return out

    try:
        for name, ok, message in ex.cases(watched):
            n += 1
            if not ok:
                failures.append(f"{name}: {message}")
    except NotImplementedError:
        failures.append("not implemented yet: replace the `raise NotImplementedError` with your code")
    except Exception as exc:
        case = f" on hidden case {n + 1}" if n else " on the first hidden case"
        if raised:  # the learner's code raised: show where in *their* code, briefly
            own = raised[-1]
            theirs = getattr(getattr(fn, "__code__", None), "co_filename", None)
            frames = [f for f in traceback.extract_tb(own.__traceback__) if f.filename == theirs]
            where = f" (line {frames[-1].lineno} of your function)" if frames else ""
            failures.append(f"your function raised {type(own).__name__}{case}: {own}{where}")
        else:  # the checker could not use what came back
            failures.append(f"the value your function returned{case} has the wrong type or shape "
                            f"({type(exc).__name__}: {exc}); check what the exercise asks you to return")
    if returned_none and not ex.none_is_an_answer:
        failures.insert(0, "your function returned None: did you forget `return`?")
    result = CheckResult(exercise_id, not failures and n > 0, n, failures)
    if verbose:
        if result.passed:
            print(f"✅ {ex.id} {ex.title}: all {n} hidden cases pass.")
        else:
            print(f"❌ {ex.id} {ex.title}: not yet.")
            for f in failures[:3]:
                print(f"   - {f}")
            print(f"   Hint: {ex.hint}")
    return result
