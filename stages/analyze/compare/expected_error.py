"""What the run's precision alone should cost at each op, and how far the observed error exceeds it.

A group's reference ops are re-run on the runtime's own inputs twice: at fp32 (the local
reference) and emulated at the run's precision (`PrecisionEmulation`: inputs and constants
stored at the precision, weights of int8 anchor ops quantized per channel, every op output
rounded; int8 scales calibrated on the ETRecord's representative inputs, as a backend
calibrates, or, for a PT2E program, the scale and zero point its own calibration chose). The verdict then asks whether the observed local error exceeds that expected
error (plus a floor of the precision's resolution at the output's scale) by a margin in dB.
Errors are shown against the output's variation (not its whole power), so a constant level
does not hide an error; the floor keeps tiny, near-cancelling outputs from failing on noise.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.backends.op_support import ANCHORS
from stages.backends.precision_emulation import (
    INT8_MAX,
    grouped_int4,
    per_token_int8,
    quantize_per_channel,
    round_to_precision,
)
from stages.closed_sets import Precision
from stages.formats.float_reference import (
    FOLDED_INTO_META,
    FOLDS_NEXT_META,
    WEIGHT_GROUP_META,
    QParams,
    plain_qparams,
)
from stages.op_encoding import op_name

# The relative step of each precision: one ulp at 1.0 (fp32, fp16), one int8 step of max |x|.
RESOLUTION: dict[str, float] = {
    Precision.fp32: 2.0**-23,
    Precision.fp16: 2.0**-10,
    Precision.int8: 1.0 / INT8_MAX,
    Precision["8da4w"]: 1.0 / INT8_MAX,  # the activations' step (the weights' is in the emulation)
}
# Precisions whose rounding the expected error emulates (fp32 costs nothing to emulate).
_EMULATED = (Precision.fp16, Precision.int8, Precision["8da4w"])
# Keys a GapRow's `budget` holds (numeric_gap.csv and summary.json columns).
OBSERVED_DB, EXPECTED_DB, EXCESS_DB = "observed_snr_db", "expected_snr_db", "excess_db"
# The accumulated error (runtime vs the reference on the ETRecord's inputs) against variation.
ACCUMULATED_DB = "accumulated_snr_db"
# lowering_info key: node name → [scale, zero point, qmin, qmax] of a PT2E program's quantize ops.
ACTIVATION_QPARAMS = "activation_qparams"


class ExpectedErrorConfigError(ValueError):
    """analyze.margins or analyze.floor_units lack the run's precision."""


def per_precision(values: Mapping[Any, float], precision: str, option: str) -> float:
    """A per-precision option's value (keys are Precision members or strings)."""
    by_name = {str(k): float(v) for k, v in values.items()}
    if precision not in by_name:
        raise ExpectedErrorConfigError(
            f"{option} has no entry for precision {precision!r} (has {sorted(by_name)}); "
            f"add {option}.{precision}=VALUE"
        )
    return by_name[precision]


def _weight_arg(node: torch.fx.Node) -> Any:
    """The weight operand of an int8 anchor op (what a backend quantizes per channel); None for
    other ops, Python callables among them (the `getitem` that picks a BatchNorm's output)."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return None
    name = op_name(node.target)
    if name not in ANCHORS:
        return None
    index = 2 if name == "aten.addmm.default" else 1
    return node.args[index] if len(node.args) > index else None


def constant_placeholders(program: ExportedProgram) -> frozenset[str]:
    """Names of the placeholders that hold parameters, buffers and lifted constants."""
    return frozenset(
        spec.arg.name
        for spec in program.graph_signature.input_specs
        if spec.kind.name != "USER_INPUT" and hasattr(spec.arg, "name")
    )


def max_abs_ranges(env: Mapping[torch.fx.Node, Any], ranges: dict[torch.fx.Node, float]) -> None:
    """Fold one sample's reference values into per-node max |finite value| (int8 calibration)."""
    for node, value in env.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            finite = value.detach()[torch.isfinite(value)]
            if finite.numel():
                ranges[node] = max(ranges.get(node, 0.0), float(finite.abs().max()))


def qparams_from(lowering_info: Mapping[str, Any]) -> dict[str, QParams]:
    """The quantize parameters a reader recorded under ACTIVATION_QPARAMS (malformed entries
    skipped: the calibrated range then stands in)."""
    recorded = lowering_info.get(ACTIVATION_QPARAMS)
    if not isinstance(recorded, Mapping):
        return {}
    found = {}
    for name, values in recorded.items():
        if isinstance(name, str) and isinstance(values, list | tuple) and len(values) == 4:
            params = plain_qparams(*values)
            if params is not None:
                found[name] = params
    return found


def _fake_quantized(value: torch.Tensor, params: QParams) -> torch.Tensor:
    """`value` through an affine int8 quantize/dequantize pair (masks of -inf kept)."""
    scale, zero, low, high = params
    q = torch.clamp(torch.round(value / scale) + zero, low, high)
    return torch.where(torch.isfinite(value), (q - zero) * scale, value)


@dataclass
class PrecisionEmulation:
    """Rounds a group's inputs, constants and op outputs as a backend at `precision` stores them."""

    precision: str
    constants: frozenset[str] = frozenset()
    ranges: dict[torch.fx.Node, float] = field(default_factory=dict)
    # int8: the program's own quantize parameters by node name (PT2E), before `ranges`.
    qparams: Mapping[str, QParams] = field(default_factory=dict)
    # The debug handles the lowered program delegated (the delegate maps'): an unlogged op among
    # them ran at the precision, whoever reads its value (see local_rerun.emulated_upstream).
    delegated: frozenset[int] = frozenset()

    @property
    def active(self) -> bool:
        """fp32 costs nothing to emulate: its expected error is zero (the floor remains)."""
        return self.precision in _EMULATED

    def weights(self, members: Iterable[torch.fx.Node]) -> set[torch.fx.Node]:
        """Constant weights of the int8 anchor ops among `members` (quantized per channel), or
        at 8da4w of the linears the lowered program quantized in groups."""
        if self.precision == Precision["8da4w"]:
            grouped = (n.args[1] for n in members if n.meta.get(WEIGHT_GROUP_META))
            return {w for w in grouped if isinstance(w, torch.fx.Node) and w.name in self.constants}
        if self.precision != Precision.int8:
            return set()
        found = {_weight_arg(n) for n in members if n.op == "call_function"}
        return {w for w in found if isinstance(w, torch.fx.Node) and w.name in self.constants}

    def stored(self, node: torch.fx.Node, value: Any, weights: Collection[torch.fx.Node]) -> Any:
        """A value from outside the group as the backend holds it."""
        if self.precision == Precision["8da4w"]:
            return _grouped(node, value) if node in weights else value
        if node in weights and isinstance(value, torch.Tensor) and value.dim() >= 2:
            q, scales = quantize_per_channel(value.float())
            shape = [-1] + [1] * (value.dim() - 1)
            return (q.to(torch.float32) * scales.reshape(shape)).to(value.dtype)
        if node.name in self.constants and self.precision == Precision.int8:
            return value  # biases and other constants stay wide in int8 backends
        return self.rounded(node, value)

    def rounded(self, node: torch.fx.Node, value: Any) -> Any:
        """An op output (or input) rounded to the precision (int8: its calibrated scale)."""
        if isinstance(value, list | tuple):
            return type(value)(self.rounded(node, v) for v in value)
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            return value
        if self.precision == Precision["8da4w"]:
            return value  # op outputs stay float; only a grouped linear's input is quantized
        scale = None
        if self.precision == Precision.int8:
            if node.meta.get(FOLDS_NEXT_META):
                return value  # folded with the op after it: the backend never stores this value
            name = str(node.meta.get(FOLDED_INTO_META) or node.name)
            if name in self.qparams:  # a folded op's value is quantized as its kernel's output
                return _fake_quantized(value.float(), self.qparams[name]).to(value.dtype)
            top = self.ranges.get(node)
            if top is None:
                finite = value.detach()[torch.isfinite(value)]
                top = float(finite.abs().max()) if finite.numel() else 0.0
            if not top:
                return value
            scale = top / INT8_MAX
        return round_to_precision(value, self.precision, scale).to(value.dtype)

    def operands(self, node: torch.fx.Node, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """An op's arguments as its kernel reads them: at 8da4w a grouped linear's input is
        quantized per token at run time."""
        if self.precision != Precision["8da4w"] or not node.meta.get(WEIGHT_GROUP_META):
            return args
        first = args[0] if args else None
        if not isinstance(first, torch.Tensor) or not first.is_floating_point():
            return args
        return (per_token_int8(first), *args[1:])


def _grouped(node: torch.fx.Node, value: Any) -> Any:
    """A linear's weight as 8da4w stores it: int4 in the group size its linear was given."""
    groups = [u.meta.get(WEIGHT_GROUP_META) for u in node.users]
    size = next((g for g in groups if isinstance(g, int) and g > 0), 0)
    if not isinstance(value, torch.Tensor) or value.dim() != 2 or not size:
        return value
    if value.shape[-1] % size:
        return value
    return grouped_int4(value, size)


# Elements per float64 slice (8 MiB): statistics are reduced slice by slice, so a large output
# costs a few slices of float64, not whole float64 copies of it and its reference; slices much
# smaller made the per-slice calls cost more than the arithmetic (ViT-B: 1.6 s at 64 Ki).
_CHUNK = 1 << 20


def _slices(*sequences: Sequence[torch.Tensor]) -> Iterator[tuple[torch.Tensor, ...]]:
    """Aligned float64 slices of same-shaped tensors (one sequence per side, sample by sample)."""
    for parts in zip(*sequences, strict=True):
        flat = [t.detach().reshape(-1) for t in parts]
        for start in range(0, flat[0].numel(), _CHUNK):
            yield tuple(f[start : start + _CHUNK].double() for f in flat)


def _mean_square_error(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Mean (a − b)² where the same ±inf/NaN on both sides counts as equal."""
    if bit_identical(a, b):
        return 0.0
    total, count = 0.0, 0
    for x, y in _slices(a, b):
        d = x - y
        square = float(torch.dot(d, d))
        if not math.isfinite(square):  # an inf/NaN in d (a finite sum never hides one)
            same = (x == y) | (torch.isnan(x) & torch.isnan(y))
            d = torch.where(same, torch.zeros_like(d), d)
            square = float(torch.dot(d, d))
        total += square
        count += d.numel()
    return total / count if count else 0.0


def bit_identical(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    """Same dtypes, shapes and bits on both sides (a NaN makes it False): no error to measure,
    found without float64 copies (exact runs, as fp32 delegates often are, are the common case)."""
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        for x, y in zip(a, b, strict=True)
    )


def _spread(values: Sequence[torch.Tensor]) -> tuple[float, float]:
    """Max |finite value| and the variance of the finite values (slices combined exactly as a
    parallel variance: Chan et al.), 0.0 for fewer than two."""
    count, mean, m2, top = 0, 0.0, 0.0, 0.0
    for (x,) in _slices(values):
        # A finite sum means every value is finite: one reduction instead of a mask per slice.
        finite = x if math.isfinite(float(x.sum())) else x[torch.isfinite(x)]
        n = finite.numel()
        if not n:
            continue
        low, high = torch.aminmax(finite)
        top = max(top, -float(low), float(high))
        # Two passes (mean, then the squared deviations as one dot product): the textbook
        # accurate method, and a tenth of torch.var_mean's time on one thread.
        chunk = finite.mean()
        deviation = finite - chunk
        chunk_mean, chunk_m2 = float(chunk), float(torch.dot(deviation, deviation))
        delta, total = chunk_mean - mean, count + n
        mean += delta * n / total
        m2 += chunk_m2 + delta * delta * count * n / total
        count = total
    return top, (m2 / count if count > 1 else 0.0)


def _db(signal: float, noise: float) -> float:
    if noise == 0.0 or math.isnan(noise):
        return math.inf if noise == 0.0 else -math.inf
    if math.isinf(noise):
        return -math.inf
    return 10.0 * math.log10(signal / noise) if signal > 0 else -math.inf


def error_budget(
    runtime: Sequence[torch.Tensor],
    local: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor] | None,
    precision: str,
    floor_units: float,
) -> dict[str, float]:
    """Observed and expected local error as SNR against the output's variation, and the excess.

    excess_db = 10·log10(observed MSE / (expected MSE + floor²)); floor = floor_units × the
    precision's resolution × max |local reference|. Non-finite runtime values give +inf."""
    observed = _mean_square_error(runtime, local)
    expected_mse = _mean_square_error(expected, local) if expected else 0.0
    scale, variation = _spread(local)
    signal = variation if variation > 0 else scale * scale
    floor = (floor_units * RESOLUTION.get(precision, RESOLUTION[Precision.fp32]) * scale) ** 2
    allowed = expected_mse + floor
    if observed == 0.0:
        excess = -math.inf
    elif math.isnan(observed) or math.isinf(observed) or allowed == 0.0:
        excess = math.inf
    else:
        excess = 10.0 * math.log10(observed / allowed)
    return {
        OBSERVED_DB: _db(signal, observed),
        EXPECTED_DB: _db(signal, allowed),
        EXCESS_DB: excess,
    }


def variation_snr(runtime: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]) -> float:
    """Error against the reference's variation in dB (its max |value| when it is constant)."""
    noise = _mean_square_error(runtime, reference)
    if noise == 0.0:
        return math.inf  # whatever the variation
    scale, variation = _spread(reference)
    return _db(variation if variation > 0 else scale * scale, noise)
