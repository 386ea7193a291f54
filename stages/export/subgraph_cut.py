"""Cut a window of ops out of an exported program into a program of its own (a reduce search).

The window's ops (those of `ops[start..end]` that the last one depends on) are copied into a
new graph: values they read from outside the window become inputs, taken from the reference's
captured values on every representative sample; weights stay weights. The new graph is
exported with debug handles and written as the export stage writes its files, so the lower,
run and analyze stages take it as they take any model.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

from stages.export.exporter import export_model
from stages.export.reference_capture import capture_node_outputs, program_outputs
from stages.formats.artifacts import ArtifactName
from stages.formats.exported_program import save_exported_program
from stages.formats.samples import Samples
from stages.handover.samples import save_samples


class SubgraphCutError(ValueError):
    """The window cannot become a program of its own (the message says why)."""


@dataclass(frozen=True)
class CutProgram:
    """The written program and, per original op name in it, its name in the new program."""

    directory: Path
    names: dict[str, str]
    ops: int


def cut_ops(program: ExportedProgram) -> list[torch.fx.Node]:
    """The top-level operator nodes a window is cut from, in graph order (no getitems)."""
    return [
        n
        for n in program.graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and not isinstance(n.target, torch._ops.HigherOrderOperator)
    ]


def _window(ops: list[torch.fx.Node], start: int, end: int) -> list[torch.fx.Node]:
    """ops[start..end] that ops[end] depends on (and their getitems), in graph order."""
    allowed = set(ops[start : end + 1])
    needed: set[torch.fx.Node] = set()
    pending = [ops[end]]
    while pending:
        node = pending.pop()
        if node in needed:
            continue
        needed.add(node)
        for arg in node.all_input_nodes:
            source = arg.args[0] if arg.target is operator.getitem else arg
            if isinstance(source, torch.fx.Node) and source in allowed:
                if arg is not source:
                    needed.add(arg)  # the getitem that reads a multi-output op
                pending.append(source)
    order = {n: i for i, n in enumerate(ops[end].graph.nodes)}
    return sorted(needed, key=order.__getitem__)


def _constants(program: ExportedProgram) -> dict[str, torch.Tensor]:
    """Placeholder name → the program's weight, buffer or constant tensor; weights as
    `nn.Parameter`s (no gradient), so the cut keeps them parameters."""
    found: dict[str, torch.Tensor] = {}
    for spec in program.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT" or spec.target is None:
            continue
        value = program.state_dict.get(spec.target, program.constants.get(spec.target))
        if isinstance(value, torch.Tensor):
            plain = value.detach()
            is_weight = spec.kind.name == "PARAMETER"
            found[spec.arg.name] = torch.nn.Parameter(plain, False) if is_weight else plain
    return found


def _register(root: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    """A constant on the cut's module as the program held it: a weight stays a parameter.
    torchao's conv-BatchNorm folding (PT2E at int8) writes the folded weight back as a
    parameter of the conv weight's name, which a buffer of that name refuses ("attribute
    'c_1' already exists")."""
    if isinstance(value, torch.nn.Parameter):
        root.register_parameter(name, torch.nn.Parameter(value.detach().clone(), False))
    else:
        root.register_buffer(name, value.clone())


def cut_graph_module(
    window: list[torch.fx.Node],
    constants: dict[str, torch.Tensor],
    outputs: list[torch.fx.Node] | None = None,
) -> tuple[torch.fx.GraphModule, list[str]]:
    """A GraphModule computing the window's last op (or the tuple of `outputs`); the names of
    the outside values it reads, which become its inputs."""
    root = torch.nn.Module()
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[str] = []
    members = set(window)
    for node in window:
        for arg in node.all_input_nodes:
            if arg in members or arg in env:
                continue
            if arg.op == "placeholder" and arg.name in constants:
                attr = f"c_{len(env)}"
                _register(root, attr, constants[arg.name])
                env[arg] = graph.get_attr(attr)
            else:
                env[arg] = graph.placeholder(f"in_{len(inputs)}")
                inputs.append(arg.name)
        env[node] = graph.node_copy(node, env.__getitem__)
    graph.output(env[window[-1]] if outputs is None else tuple(env[n] for n in outputs))
    return torch.fx.GraphModule(root, graph), inputs


def _samples(program: ExportedProgram, samples: Samples, names: list[str]) -> Samples:
    """Per sample, the reference's values of `names` (the window's inputs)."""
    # By position: a loaded program's placeholders may be named apart from its signature
    # (`input_1` for a signature's `input`), and the window reads the placeholders.
    placeholders = [n.name for n in program.graph.nodes if n.op == "placeholder"]
    specs = program.graph_signature.input_specs
    user = [n for n, s in zip(placeholders, specs, strict=False) if s.kind.name == "USER_INPUT"]
    found = []
    for sample in samples:
        values, _ = capture_node_outputs(program, sample)
        values |= dict(zip(user, sample, strict=False))
        missing = [n for n in names if not isinstance(values.get(n), torch.Tensor)]
        if missing:
            raise SubgraphCutError(f"the window reads non-tensor values {missing}")
        found.append(tuple(values[n].detach().clone() for n in names))
    return found


def _name_map(window: list[torch.fx.Node], cut: ExportedProgram) -> dict[str, str]:
    """Original op name → its name in the cut program (same ops, same order)."""
    new = cut_ops(cut)
    old = [n for n in window if n.target is not operator.getitem]
    if [str(n.target) for n in old] != [str(n.target) for n in new]:
        raise SubgraphCutError("re-exporting the window changed its ops")
    return {o.name: n.name for o, n in zip(old, new, strict=True)}


def export_cut(
    module: torch.fx.GraphModule,
    cut_samples: Samples,
    nodes: list[torch.fx.Node],
    directory: Path,
    model_name: str,
) -> dict[str, str]:
    """Export the cut module on its samples and write exported.pt2, inputs.pt and
    reference_outputs.pt into `directory`; original op name → its name in the cut."""
    directory.mkdir(parents=True, exist_ok=True)
    cut = export_model(
        module,
        cut_samples[0],
        strict=False,
        decompose=False,
        model_name=model_name,
        error_log=directory / "export_error.log",
    )
    references = [program_outputs(cut, sample) for sample in cut_samples]
    save_exported_program(cut, directory / ArtifactName.EXPORTED_PROGRAM)
    save_samples(cut_samples, directory / ArtifactName.INPUTS)
    save_samples(references, directory / ArtifactName.REFERENCE_OUTPUTS)
    return _name_map(nodes, cut)


def write_cut(
    program: ExportedProgram, samples: Samples, start: int, end: int, directory: Path
) -> CutProgram:
    """Write exported.pt2, inputs.pt and reference_outputs.pt of the window into `directory`."""
    ops = cut_ops(program)
    if not 0 <= start <= end < len(ops):
        raise SubgraphCutError(f"window [{start}, {end}] is outside the {len(ops)} ops")
    window = _window(ops, start, end)
    module, inputs = cut_graph_module(window, _constants(program))
    names = export_cut(module, _samples(program, samples, inputs), window, directory, "reduced")
    return CutProgram(directory, names, len(names))


def op_index(program: ExportedProgram, names: list[str]) -> int | None:
    """The index (in `cut_ops`) of the last of `names` in graph order, or None."""
    ops = cut_ops(program)
    found = [i for i, n in enumerate(ops) if n.name in set(names)]
    return found[-1] if found else None


def load_for_cut(path: Path) -> Any:
    """The exported program a search cuts from (the project's safe loader)."""
    from stages.handover.exported_program import load_exported_program

    return load_exported_program(path)
