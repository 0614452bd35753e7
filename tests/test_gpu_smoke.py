"""tools/gpu_smoke.py, run as CI runs it (on the CPU, tiny models, tiny sizes), so the GPU check cannot rot:
every section of its report is there, labelled with the dtype that ran, and fp32 greedy is identical."""

import json

from specnotes.drafters import registry
from tests.notebook_utils import tool

SECTIONS = {"decode", "divergence", "drafter_table", "live_timings", "batch_grid", "verify_vs_steps"}


def test_the_gpu_smoke_run_covers_every_section_on_the_cpu(tmp_path):
    smoke = tool("gpu_smoke")
    out = tmp_path / "smoke.json"
    assert smoke.main(["--device", "cpu", "--tiny", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["versions"]["torch"]
    assert set(report["runs"]) == {"float32", "float16", "bfloat16"}
    assert report["fp32_greedy_identical"] is True
    fp32 = report["runs"]["float32"]["decode"]
    for kind, rows in fp32.items():
        greedy = {k: r for k, r in rows.items() if "identical" in r}
        assert len(greedy) == len(registry.FAMILIES), kind  # every family
        assert all(r["identical"] for r in greedy.values()), kind
        assert all(len(r["tokens"]) == report["new_tokens"] for r in rows.values())
    for dtype in ("float16", "bfloat16"):
        run = report["runs"][dtype]
        assert run["model"]["dtype"] == dtype and run["model"]["device"] == "cpu"
        assert set(run["sections"]) == SECTIONS and set(run["section_seconds"]) == SECTIONS
        assert {r["dtype"] for r in run["sections"]["divergence"]} == {dtype}
        assert {r["drafter"] for r in run["sections"]["drafter_table"]} >= {"medusa", "eagle-lite"}
        assert run["sections"]["verify_vs_steps"]["dtype"] == dtype
