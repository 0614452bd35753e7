import subprocess
import sys


def run(*args):
    return subprocess.run([sys.executable, "-m", "specnotes", *args], capture_output=True, text=True)


def test_fetch_is_idempotent_on_a_sound_cache(real):
    out = run("fetch")
    assert out.returncode == 0 and "ready" in out.stdout


def test_fetch_of_an_unknown_name_fails_with_the_known_names():
    out = run("fetch", "gpt-9")
    assert out.returncode == 1 and "smollm2-135m" in out.stderr
