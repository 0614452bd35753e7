"""Solutions for notebook 01: decode step memory time and the ridge point."""


def decode_step_ms(n_params, bytes_per_param, bandwidth_gbps):
    return n_params * bytes_per_param / (bandwidth_gbps * 1e9) * 1e3


def ridge_tokens(peak_tflops, bandwidth_gbps, bytes_per_param):
    # compute 2*N*T/peak == memory N*b/bw  =>  T = peak*b / (2*bw)
    return peak_tflops * 1e12 * bytes_per_param / (2 * bandwidth_gbps * 1e9)


SOLUTIONS = {"01.1": decode_step_ms, "01.2": ridge_tokens}
