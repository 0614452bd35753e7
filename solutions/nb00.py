"""Solutions for notebook 00: greedy next token and softmax with temperature."""

import numpy as np


def greedy_next_token(logits):
    return int(np.argmax(logits))


def softmax_with_temperature(logits, temperature):
    z = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[np.argmax(z)] = 1.0
        return probs
    z = z / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


SOLUTIONS = {"00.1": greedy_next_token, "00.2": softmax_with_temperature}
