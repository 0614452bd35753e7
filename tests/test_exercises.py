import importlib.util

import pytest

from specnotes import exercises
from tests.notebook_utils import NOTEBOOKS, ROOT, source, tagged


def load_solutions() -> dict:
    solutions = {}
    for path in sorted((ROOT / "solutions").glob("nb*.py")):
        spec = importlib.util.spec_from_file_location(f"solutions_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        solutions.update(module.SOLUTIONS)
    return solutions


def notebook_stubs() -> dict:
    """Run each exercise cell as a learner would, but record (id, fn) instead of checking."""
    stubs = {}
    for nb in NOTEBOOKS:
        for cell in tagged(nb, "exercise"):
            calls = []
            code = source(cell).replace("from specnotes.exercises import check", "")
            namespace = {"check": lambda ex_id, fn, calls=calls: calls.append((ex_id, fn))}
            exec(compile(code, f"{nb.name}:exercise", "exec"), namespace)
            assert len(calls) == 1, f"{nb.name}: an exercise cell must call check() once"
            stubs[calls[0][0]] = calls[0][1]
    return stubs


SOLUTIONS = load_solutions()
STUBS = notebook_stubs()
REGISTERED = sorted(exercises.registry())


def test_every_exercise_has_a_solution_and_a_stub():
    assert set(SOLUTIONS) == set(REGISTERED)
    assert set(STUBS) == set(REGISTERED)


@pytest.mark.parametrize("ex_id", REGISTERED)
def test_solution_passes(ex_id, capsys):
    assert exercises.check(ex_id, SOLUTIONS[ex_id]).passed
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("ex_id", REGISTERED)
def test_blank_stub_fails_with_a_hint(ex_id, capsys):
    result = exercises.check(ex_id, STUBS[ex_id])
    assert not result.passed
    assert "Hint:" in capsys.readouterr().out


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_has_at_least_two_exercises(nb):
    assert len(tagged(nb, "exercise")) >= 2


def test_a_plausible_wrong_answer_fails():
    # softmax that forgets to subtract the max overflows at logits of 1000
    import numpy as np

    def naive(logits, temperature):
        e = np.exp(np.asarray(logits) / max(temperature, 1e-12))
        return e / e.sum()

    with np.errstate(over="ignore", invalid="ignore"):
        result = exercises.check("00.2", naive, verbose=False)
    assert not result.passed and any("overflow" in f for f in result.failures)


def test_unknown_exercise_and_non_callable_are_clear_errors():
    with pytest.raises(ValueError, match="known"):
        exercises.check("99.9", lambda x: x)
    with pytest.raises(TypeError, match="function"):
        exercises.check("00.1", 3)


def test_forgetting_return_is_named(capsys):
    def forgot(logits, temperature):
        np.abs(logits)  # computes, returns nothing

    import numpy as np

    result = exercises.check("00.2", forgot)
    assert not result.passed and "returned None" in capsys.readouterr().out


def test_an_exception_points_at_the_learners_line():
    def broken(logits):
        return int(logits.argmax()) + undefined_name  # noqa: F821

    result = exercises.check("00.1", broken, verbose=False)
    assert any("NameError" in f and "of your function" in f for f in result.failures)


def test_an_error_raised_inside_the_learners_function_is_reported_as_theirs():
    """A StopIteration from their code reaches the checker's generator as a RuntimeError, and a partial or a
    callable object has no __code__: both used to be blamed on the returned value's shape."""
    import functools

    def stops(*args):
        return next(iter([]))

    def divides(*args):
        return 1 / 0

    for fn, kind in ((stops, "StopIteration"), (functools.partial(divides), "ZeroDivisionError")):
        result = exercises.check("06.1", fn, verbose=False)
        assert not result.passed
        assert result.failures[0].startswith(f"your function raised {kind}"), result.failures
