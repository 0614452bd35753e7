"""Solutions for notebook 09: the crossover concurrency, and inter-token latency per token and per chunk."""


def crossover(levels, plain, spec):
    for level, a, b in zip(levels, plain, spec, strict=True):
        if b < a:
            return level
    return None


def itl(chunk_times, chunk_tokens):
    span = chunk_times[-1] - chunk_times[0]
    return span / (sum(chunk_tokens) - chunk_tokens[0]), span / (len(chunk_times) - 1)


SOLUTIONS = {"09.1": crossover, "09.2": itl}
