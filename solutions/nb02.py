"""Solutions for notebook 02: greedy verification and a prompt-lookup draft."""


def verify_greedy(drafted, target_argmax):
    n = 0
    while n < len(drafted) and drafted[n] == target_argmax[n]:
        n += 1
    return n, target_argmax[n]


def lookup(tokens, ngram, limit):
    tail = tokens[-ngram:]
    for start in range(len(tokens) - ngram - 1, -1, -1):  # most recent first, never the tail itself
        if tokens[start:start + ngram] == tail:
            follow = start + ngram
            return tokens[follow:follow + limit]
    return []


SOLUTIONS = {"02.1": verify_greedy, "02.2": lookup}
