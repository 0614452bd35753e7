"""Solutions for notebook 08: the serving speedup from pass times, and transformers' k schedule."""


def serving_speedup(step, verify, alpha, k, c):
    expected = sum(alpha ** i for i in range(k + 1))
    return expected * step / (k * c * step + verify)


def next_k(k, drafted, accepted):
    if drafted == 0:
        return k
    return min(20, k + 2) if accepted == drafted else max(1, k - 1)


SOLUTIONS = {"08.1": serving_speedup, "08.2": next_k}
