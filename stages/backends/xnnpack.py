"""Emulated XNNPACK: CPU-style kernels, generated int identifiers, real-time event logging."""

from __future__ import annotations

from stages.backends.delegate_mapping_builder import DelegateMappingBuilder
from stages.backends.kernel.delegate import KernelDelegate
from stages.backends.kernel.plan import KernelPlan
from stages.backends.op_support import CPU_STYLE_OPS, xnnpack_kernel_name
from stages.handles.debug_handles import DelegateIdentifier


class XnnpackBackend(KernelDelegate):
    """Every kernel it runs is mapped: fused kernels register all the handles they cover."""

    name = "xnnpack"
    supported_ops = frozenset(CPU_STYLE_OPS)
    generated_identifiers = True

    def kernel_name(self, op: str) -> str:
        return xnnpack_kernel_name(op, self.precision)

    def make_identifier(
        self, builder: DelegateMappingBuilder, plan: KernelPlan
    ) -> DelegateIdentifier:
        return builder.insert_delegate_mapping_entry(nodes=plan.nodes)
