"""Repo-wide pytest hooks: time each notebook that nbval runs and hold it to the quick-mode budget, and mark
the tests that `make check` leaves out (`-m "not slow"`); `make test` runs them all."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

NOTEBOOK_BUDGET_S = float(os.environ.get("SPECNOTES_NOTEBOOK_BUDGET", "120"))
_seconds: dict[str, float] = defaultdict(float)

# Whole files that need a network, apt, a browser or a throwaway virtual environment.
SLOW_FILES = {
    "tests/course/test_browser.py": "JupyterLab in Debian's Chromium (apt, a browser)",
    "tests/course/test_colab.py": "builds a Colab-like venv and pip-installs into it (network)",
    "tests/course/test_install.py": "builds a venv without pip and downloads the model wheel (network)",
}
# Test functions (every parameter of each) that take 8 s or more on 2 cores: seconds measured, all
# parameters together, in a full run that shared the cores with another test run (an idle machine takes
# about half), the last three in `make check` on an idle machine. Keep a cheap test of the same property in
# `make check` where one exists.
SLOW_TESTS = {
    "tests/test_live.py::test_the_report_has_every_mode_on_both_prompt_kinds_on_the_real_model": 256,
    "tests/test_device.py::test_every_path_runs_in_16_bits_on_the_cpu": 246,
    "tests/test_device.py::test_every_path_runs_on_a_second_device_and_matches_the_cpu_token_for_token": 132,
    "tests/test_device.py::test_fp32_greedy_paths_equal_plain_greedy_on_the_cpu": 80,
    "tests/test_device.py::test_16_bit_greedy_may_leave_plain_greedy_only_at_a_near_tie": 42,
    "tests/test_models.py::test_truncated_real_cache_is_rebuilt_and_loads_the_same_model": 30,
    "tests/test_store_faults.py::test_as_root_the_read_only_tests_run_with_roots_override_dropped": 22,
    "tests/test_widgets.py::test_view_is_consistent_over_the_full_slider_grid": 12,
    "tests/test_adaptive.py::test_adaptive_drafting_stays_exact": 9,
    "tests/test_gpu_smoke.py::test_the_gpu_smoke_run_covers_every_section_on_the_cpu": 16,
    "tests/test_device.py::test_the_timing_suite_runs_on_a_second_device_and_in_16_bits": 13,
    "tests/test_device.py::test_each_drafter_trains_on_a_second_device_and_in_16_bits": 10,
    "tests/test_drafters.py::test_sampled_tokens_follow_the_targets_exact_distribution": 45,
    "tests/test_drafters.py::test_a_planted_wrong_q_fails_the_same_test": 90,
    "tests/test_drafters.py::test_greedy_equals_transformers_greedy_on_the_real_model": 60,
    "tests/test_drafters.py::test_sampling_with_temperature_and_top_k_keeps_the_processed_distribution": 15,
    "tests/test_drafters.py::test_the_trained_drafters_beat_their_untrained_starting_points": 30,
    "tests/test_drafters.py::test_the_eagle_confidence_gate_keeps_identity_and_drafts_only_when_sure": 12,
    "tests/test_drafters.py::test_medusa_and_eagle_training_lower_their_loss_and_leave_the_target_alone": 10,
    "tests/test_mtp.py::test_mtp_module_learns_only_when_trained_with_the_model_and_then_drafts": 115,
    "tests/test_tree.py::test_typical_acceptance_is_flagged_as_not_lossless": 30,
    "tests/test_sampling.py::test_the_target_residual_bug_fails_the_same_test": 15,
    "tests/test_engine.py::test_greedy_equals_generate_on_the_real_model": 31,
    "tests/test_block.py::test_every_lossy_knob_through_the_engine_is_flagged": 22,
    "tests/test_block.py::test_a_planted_block_mistake_through_the_engine_is_flagged": 8,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        path, _, name = item.nodeid.partition("::")
        if path in SLOW_FILES or f"{path}::{name.split('[')[0]}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _seconds[path] += report.duration  # setup (kernel start) + call of every cell


def pytest_sessionfinish(session, exitstatus):
    if not _seconds:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    over = {p: s for p, s in _seconds.items() if s > NOTEBOOK_BUDGET_S}
    lines = [f"notebook wall time (budget {NOTEBOOK_BUDGET_S:.0f} s each):"]
    lines += [f"  {s:6.1f} s  {p}{'  OVER BUDGET' if p in over else ''}" for p, s in sorted(_seconds.items())]
    if reporter is not None:
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)
    if over and session.exitstatus == 0:
        session.exitstatus = 1
