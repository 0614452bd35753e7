"""tools/run_notebooks.py commits what a reader should see: text progress bars at their final state."""

from tests.notebook_utils import tool

run_notebooks = tool("run_notebooks")


def test_a_text_bar_is_committed_at_its_final_state():
    text = ("teacher pass:   0%|   | 0/4\rteacher pass:  50%|#  | 2/4\rteacher pass: 100%|###| 4/4\n"
            "next line\r\n")
    assert run_notebooks.final_text(text) == "teacher pass: 100%|###| 4/4\nnext line\n"
    assert run_notebooks.final_text("plain\ntext\n") == "plain\ntext\n"


def test_headless_runs_get_text_bars_and_live_ones_the_widget(monkeypatch):
    import tqdm.auto
    import tqdm.std

    from specnotes.env import progress_bar

    monkeypatch.delenv("SPECNOTES_TEXT_PROGRESS", raising=False)
    assert progress_bar() is tqdm.auto.tqdm
    monkeypatch.setenv("SPECNOTES_TEXT_PROGRESS", "1")
    assert progress_bar() is tqdm.std.tqdm


def test_clean_keeps_the_final_text_of_stream_outputs():
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text="a 0%\ra 100%\n")]
    nb.cells = [cell]
    run_notebooks.clean(nb)
    assert nb.cells[0].outputs[0]["text"] == "a 100%\n"


def test_every_progress_bar_comes_from_env_progress_bar():
    # a module that imports tqdm.auto itself would commit a widget, shown on GitHub at 0%
    import pathlib

    import specnotes

    direct = [p.name for p in pathlib.Path(specnotes.__file__).parent.rglob("*.py")
              if p.name != "env.py" and "tqdm.auto" in p.read_text()]
    assert direct == []
