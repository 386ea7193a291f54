"""apply_output_fault on outputs of any layout (issue 14.5: a NaN fault crashed on a view)."""

from __future__ import annotations

import torch

from stages.backends.fault_injection import apply_output_fault


def test_a_nan_fault_on_a_non_contiguous_output_breaks_one_element() -> None:
    output = torch.arange(12.0).reshape(3, 4).t()  # strides (1, 4): view(-1) is impossible
    broken = apply_output_fault(output, {"kind": "nan"})
    assert broken.shape == output.shape and int(torch.isnan(broken).sum()) == 1
    assert torch.isnan(broken[0, 0]) and torch.equal(broken[1:], output[1:])
    assert not torch.isnan(output).any()  # the kernel's own output is left as it was
    scalar = apply_output_fault(torch.tensor(2.0), {"kind": "nan"})
    assert torch.isnan(scalar)
