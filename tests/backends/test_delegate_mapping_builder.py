import pytest
import torch

from stages.backends.delegate_mapping_builder import DelegateMappingBuilder, DelegateMappingError
from stages.export.debug_handle_pass import assign_debug_handles


@pytest.fixture
def nodes() -> list[torch.fx.Node]:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    program = torch.export.export(model, (torch.randn(1, 4),))
    assign_debug_handles(program)
    return [n for n in program.graph.nodes if n.op == "call_function"]


def test_generated_identifiers_count_up_and_cover_fused_nodes(nodes: list[torch.fx.Node]) -> None:
    builder = DelegateMappingBuilder(generated_identifiers=True)
    assert builder.insert_delegate_mapping_entry(nodes=nodes[:2]) == 0
    assert builder.insert_delegate_mapping_entry(nodes=nodes[2]) == 1
    assert builder.get_delegate_mapping() == {0: (1, 2), 1: (3,)}


def test_manual_int_and_str_identifiers_with_handles(nodes: list[torch.fx.Node]) -> None:
    builder = DelegateMappingBuilder()
    assert (
        builder.insert_delegate_mapping_entry(handles=[3, 1], identifier="fused_op_1_3")
        == "fused_op_1_3"
    )
    assert builder.insert_delegate_mapping_entry(handles=2, identifier=7) == 7
    assert builder.get_delegate_mapping() == {"fused_op_1_3": (1, 3), 7: (2,)}


def test_nodes_without_handles_are_skipped(nodes: list[torch.fx.Node]) -> None:
    placeholder = next(iter(nodes[0].graph.nodes))
    builder = DelegateMappingBuilder(generated_identifiers=True)
    builder.insert_delegate_mapping_entry(nodes=[placeholder, nodes[1]])
    assert builder.get_delegate_mapping() == {0: (2,)}


def test_upsert_appends_to_an_existing_identifier(nodes: list[torch.fx.Node]) -> None:
    builder = DelegateMappingBuilder()
    builder.upsert_delegate_mapping_entry(nodes[0], identifier="k")
    assert builder.upsert_delegate_mapping_entry([nodes[2]], identifier="k") == "k"
    generated = DelegateMappingBuilder(generated_identifiers=True)
    first = generated.upsert_delegate_mapping_entry(nodes[0])
    generated.upsert_delegate_mapping_entry(nodes[1], identifier=first)
    assert builder.get_delegate_mapping() == {"k": (1, 3)}
    assert generated.get_delegate_mapping() == {0: (1, 2)}


@pytest.mark.parametrize(
    ("generated", "kwargs", "message"),
    [
        (False, {"handles": [1], "identifier": None}, "no identifier given"),
        (True, {"handles": [1], "identifier": 5}, "generated_identifiers=True"),
        (False, {"identifier": 1}, "exactly one of nodes= or handles="),
        (
            False,
            {"handles": [1], "nodes": "x", "identifier": 1},
            "exactly one of nodes= or handles=",
        ),
        (False, {"handles": [None], "identifier": 1}, "carries a debug handle"),
        (False, {"handles": [1], "identifier": 1.5}, "must be an int or a str"),
        (False, {"handles": [], "identifier": 1}, "handles= is empty"),
        (False, {"handles": [1, "2"], "identifier": 1}, "'2' \\(str\\) is not a debug handle"),
        (False, {"handles": [1.0], "identifier": 1}, "is not a debug handle"),
        (False, {"handles": [True], "identifier": 1}, "is not a debug handle"),
        (False, {"handles": [0], "identifier": 1}, "handle 0 < 1"),
        (False, {"handles": [-3], "identifier": "k"}, "handle -3 < 1"),
        (False, {"handles": [1], "identifier": -1}, "reserved"),
        (False, {"handles": [1], "identifier": ""}, "reserved"),
        (False, {"nodes": ["not a node"], "identifier": 1}, "is not an fx node"),
    ],
)
def test_misuse_raises_a_clear_error(generated: bool, kwargs: dict, message: str) -> None:
    builder = DelegateMappingBuilder(generated_identifiers=generated)
    with pytest.raises(DelegateMappingError, match=message):
        builder.insert_delegate_mapping_entry(**kwargs)


def test_duplicate_identifier_on_insert(nodes: list[torch.fx.Node]) -> None:
    builder = DelegateMappingBuilder()
    builder.insert_delegate_mapping_entry(nodes=nodes[0], identifier="a")
    with pytest.raises(DelegateMappingError, match="already mapped to \\[1\\]; use upsert"):
        builder.insert_delegate_mapping_entry(nodes=nodes[1], identifier="a")


def test_an_op_node_without_a_handle_is_refused(nodes: list[torch.fx.Node]) -> None:
    """An op node the debug-handle pass did not reach would silently drop out of the map."""
    del nodes[1].meta["debug_handle"]
    builder = DelegateMappingBuilder(generated_identifiers=True)
    with pytest.raises(DelegateMappingError, match="carries no debug handle; run the debug-handle"):
        builder.insert_delegate_mapping_entry(nodes=nodes[:2])
    with pytest.raises(DelegateMappingError, match="carries no debug handle"):
        builder.upsert_delegate_mapping_entry(nodes[1])
    assert builder.get_delegate_mapping() == {}


def test_manual_and_generated_identifiers_do_not_mix(nodes: list[torch.fx.Node]) -> None:
    generated = DelegateMappingBuilder(generated_identifiers=True)
    with pytest.raises(DelegateMappingError, match="not in this generated-identifier map"):
        generated.upsert_delegate_mapping_entry(nodes[0], identifier="mine")
    manual = DelegateMappingBuilder()
    with pytest.raises(DelegateMappingError, match="no identifier given"):
        manual.upsert_delegate_mapping_entry(nodes[0])
    assert generated.get_delegate_mapping() == {} and manual.get_delegate_mapping() == {}
