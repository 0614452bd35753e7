"""The course as a learner receives it: the committed notebooks (names that resolve, headers, committed
outputs, Colab metadata), how it installs (package data, a fresh venv, the Colab mimic), and how it runs in
JupyterLab in a browser. The package's own tests sit one folder up, one file per module."""
