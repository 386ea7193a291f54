"""The line that holds the op (issue 24.4): the innermost model-code frame (a Hugging Face
model's modeling file, the user's own frame listed too), and for ops inside torch.cond branches
the branch function's line, the cond's module path and the `GRAPH.NAME` backend.fault.node takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.analyze.link.source_frames import (
    model_source_line,
    owner_source_line,
    user_source_line,
)
from stages.handover.exported_program import load_exported_program
from tests.helpers.analyze_runs import RunTiny, read_summary

SITE = "/usr/lib/python3.11/site-packages"
HF_TRACE = f"""  File "/home/me/project/run_model.py", line 12, in forward
    out = self.m(*args)
  File "{SITE}/transformers/utils/generic.py", line 880, in wrapper
    output = func(self, *args, **kwargs)
  File "{SITE}/transformers/models/gpt2/modeling_gpt2.py", line 310, in forward
    query_states, key_states, value_states = self.c_attn(hidden_states).split(self.split_size, dim=2)
  File "{SITE}/transformers/pytorch_utils.py", line 120, in forward
    x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
  File "{SITE}/torch/nn/modules/module.py", line 1780, in _call_impl
    return forward_call(*args, **kwargs)
  File "/usr/lib/python3.11/contextlib.py", line 81, in inner
    return func(*args, **kwds)
  File "<eval_with_key>.7", line 6, in forward
    addmm = torch.ops.aten.addmm.default(b, x, w)
"""


def test_the_innermost_model_frame_wins_and_the_users_frame_is_listed() -> None:
    assert model_source_line(HF_TRACE) == (
        "transformers/pytorch_utils.py:120 in forward: "
        "x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)"
    )
    assert user_source_line(HF_TRACE) == "project/run_model.py:12 in forward: out = self.m(*args)"
    own = '  File "/home/me/m.py", line 3, in forward\n    return self.fc(x)\n'
    assert model_source_line(own) == "me/m.py:3 in forward: return self.fc(x)"
    assert user_source_line(own) == ""  # the same line: not listed twice
    generated = '  File "<eval_with_key>.7", line 6, in forward\n    relu = torch.relu(x)\n'
    assert model_source_line(generated).startswith("<eval_with_key>.7:6")  # nothing better


def test_a_generic_library_layer_also_lists_the_modeling_files_call_of_it() -> None:
    """GPT-2's c_attn is transformers' Conv1D: its line is every model's; the reader of the
    model looks for modeling_gpt2.py's `self.c_attn(...)`."""
    assert owner_source_line(HF_TRACE) == (
        "gpt2/modeling_gpt2.py:310 in forward: query_states, key_states, value_states = "
        "self.c_attn(hidden_states).split(self.split_size, dim=2)"
    )
    linear = (
        '  File "/home/me/m.py", line 3, in forward\n    return self.fc(x)\n'
        f'  File "{SITE}/torch/nn/modules/linear.py", line 134, in forward\n'
        "    return F.linear(input, self.weight, self.bias)\n"
    )
    assert model_source_line(linear) == "me/m.py:3 in forward: return self.fc(x)"
    assert owner_source_line(linear) == ""  # the model line is already the module's call
    assert owner_source_line('  File "/home/me/m.py", line 3, in forward\n    x\n') == ""


def _cond_fault_target(run_tiny: RunTiny) -> tuple[str, str]:
    clean = read_summary(run_tiny("lines-cond-clean", "cond_model", "backend=portable"))
    taken = clean["control_flow"][0]["runtime_branch"][0]
    return ("true_graph_0.mul", "positive") if taken else ("false_graph_0.sub", "negative")


def test_a_branch_op_shows_its_function_line_module_and_fault_name(run_tiny: RunTiny) -> None:
    target, function = _cond_fault_target(run_tiny)
    run_dir = run_tiny(
        "lines-cond-fault", "cond_model", "backend=portable", f"backend.fault.node={target}"
    )
    first = read_summary(run_dir)["first_divergence"]
    assert first["fault_nodes"] == [target]
    assert (
        "edge_cases.py:" in first["source_line"]
        and f" in {function}: return torch." in (first["source_line"])
    )
    assert "eval_with_key" not in first["source_line"]
    assert first["module_hierarchy"] == ""  # the cond is called in the root module's forward
    program = load_exported_program(run_dir / "exported.pt2")
    branch = getattr(program.graph_module, target.split(".")[0])
    node = next(n for n in branch.graph.nodes if n.name == target.split(".")[1])
    assert "L__self__" in str(node.meta["nn_module_stack"])  # the cond's module stack


@pytest.mark.e2e
def test_a_hugging_face_op_points_into_the_modeling_file(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from omegaconf import open_dict

    from pipeline.runner import run_pipeline
    from tests.helpers.configs import compose_config

    cfg = compose_config(
        tmp_path,
        [
            "model=custom",
            "model._target_=stages.export.zoo.hf.make",
            "model.kwargs.arch=gpt2",
            "model.inputs=[{shape:[1,8],dtype:int64,high:128}]",
            "tracking=none",
            "stages=[export]",
        ],
    )
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    run_pipeline(cfg, print_summary=False)
    program = load_exported_program(tmp_path / "run" / "exported.pt2")
    traces = [
        str(n.meta.get("stack_trace") or "")
        for n in program.graph_module.graph.nodes
        if n.op == "call_function" and "addmm" in n.name
    ]
    assert traces
    assert all("transformers/" in model_source_line(t) for t in traces)
    assert all("zoo/hf.py" in user_source_line(t) for t in traces)  # the wrapper calling it
    owners = [owner_source_line(t) for t in traces]
    assert any("modeling_gpt2.py" in o and "self.c_attn(" in o for o in owners), owners


@pytest.mark.parametrize(
    "backend",
    ["xnnpack", pytest.param("executorch_xnnpack", marks=pytest.mark.executorch)],
)
def test_an_op_a_helper_method_holds_points_at_its_own_line(backend: str, tmp_path: Path) -> None:
    """torchvision's shape (`forward` returns `self._forward_impl(x)`): torch.export kept only
    the `forward` frame, so a conv was shown at `return self._forward_impl(x)` (issue 44, a whole
    MobileNet partition on ExecuTorch). The conv's own line is shown, for an op compared alone
    (emulated) and for a partition compared whole and blamed at its first op (ExecuTorch)."""
    if backend.startswith("executorch"):
        pytest.importorskip("executorch.exir", reason="needs the executorch extra")
    from omegaconf import open_dict

    from pipeline.runner import run_pipeline
    from tests.helpers.configs import compose_config
    from tests.helpers.user_models import IMPL_WRAPPED, IMPL_WRAPPED_INPUTS

    overrides = ["model=custom", *IMPL_WRAPPED, IMPL_WRAPPED_INPUTS, "tracking=none"]
    overrides += [f"backend={backend}", "backend.fault.node=conv2d", "runtime.iterations=1"]
    cfg = compose_config(tmp_path, [*overrides, "analyze.fail_exit_code=false"])
    with open_dict(cfg):
        cfg.run_dir = str(tmp_path / "run")
    first = read_summary(run_pipeline(cfg, print_summary=False).run_dir)["first_divergence"]
    assert first["op_names"][0] == "conv2d"
    assert first["source_line"].endswith("in _forward_impl: x = self.conv(x)"), first
