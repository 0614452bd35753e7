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


CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\n"
           "model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\nflags\t\t: fpu vme\n\n"
           "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\n")


def test_a_linux_cpu_is_named_by_its_model_not_by_the_word_cpu(monkeypatch):
    """platform.processor() is empty on Linux; the old fallback named every CPU "cpu", so every 2-thread
    CPU machine shared the fingerprint cpu-cpu-2t-float32 and --save-reference replaced the committed one."""
    import platform

    from specnotes import references

    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(env, "_read_cpuinfo", lambda: CPUINFO)
    assert env.device_name("cpu") == "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
    machine = {"device": "cpu", "device_name": env.device_name("cpu"), "threads": 2, "dtype": "float32"}
    assert references.fingerprint(machine) == "cpu-intel-r-xeon-r-platinum-8375c-cpu-2-90ghz-2t-float32"


def test_a_cpu_the_os_does_not_name_falls_back_to_its_architecture(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(env, "_read_cpuinfo", lambda: "processor\t: 0\nCPU part\t: 0xd0c\n")  # ARM boards
    assert env.device_name("cpu") == "aarch64"
    monkeypatch.setattr(env, "_read_cpuinfo", lambda: "")  # no /proc (a sandbox)
    assert env.device_name("cpu") == "aarch64"


def test_macos_and_windows_cpus_are_named_by_their_model(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    monkeypatch.setattr(env, "_sysctl_brand", lambda: "Apple M2 Pro")
    assert env.device_name("cpu") == env.device_name("mps") == "Apple M2 Pro"
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    monkeypatch.setattr(platform, "processor", lambda: "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel")
    assert env.device_name("cpu") == "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel"


def test_this_machine_is_not_named_cpu():
    assert env.device_name("cpu").strip().lower() not in {"", "cpu"}
