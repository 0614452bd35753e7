"""Solutions for notebook 05: expected tokens per pass and the best k."""


def expected_tokens(alpha, k):
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def best_k(alpha, c, k_max=20):
    best = max(range(1, k_max + 1), key=lambda k: expected_tokens(alpha, k) / (k * c + 1))
    return best, expected_tokens(alpha, best) / (best * c + 1)


SOLUTIONS = {"05.1": expected_tokens, "05.2": best_k}
