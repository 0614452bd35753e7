import pytest

import specnotes
from specnotes import env


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("on", True),
                                             ("0", False), ("", False), ("no", False)])
def test_quick_mode_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("SPECNOTES_QUICK", value)
    assert specnotes.quick_mode() is expected


def test_setup_prints_every_fact_a_timing_needs(capsys):
    facts = specnotes.setup()
    out = capsys.readouterr().out
    for word in ("torch", "device", "dtype", "threads", "quick mode", "model cache"):
        assert word in out
    assert facts.threads >= 1 and facts.device in {"cpu", "cuda"}


def test_colab_without_gpu_is_told_how_to_get_one(monkeypatch, capsys):
    monkeypatch.setattr(env, "in_colab", lambda: True)
    monkeypatch.setattr(env, "default_device", lambda: "cpu")
    specnotes.setup()
    assert "Change runtime type" in capsys.readouterr().out


def test_import_specnotes_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, specnotes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
