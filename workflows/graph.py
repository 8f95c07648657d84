"""A workflow's graph: its validation, the templates of its nodes and its CONDITION nodes' test.

A graph is JSON::

    {"nodes": [{"id": "start", "type": "start"},
               {"id": "check", "type": "agent", "agent": 3, "input": "Check {{ input }}"},
               {"id": "ok", "type": "condition", "source": "check", "operator": "contains",
                "value": "approved"},
               {"id": "pay", "type": "connector", "action": 7,
                "arguments": {"purchase_id": "{{ input }}"}},
               {"id": "end", "type": "end"}],
     "edges": [{"from": "start", "to": "check"}, {"from": "check", "to": "ok"},
               {"from": "ok", "to": "pay", "when": true}, {"from": "ok", "to": "end", "when": false},
               {"from": "pay", "to": "end"}]}

Rules: one START, at least one END, unique ids; START, AGENT and CONNECTOR nodes have exactly one
outgoing edge, a CONDITION node exactly two (``when`` true and false), an END none; no cycles and
every node reachable from START, so a run always ends. Templates may use ``{{ input }}`` (the
workflow run's input) and ``{{ nodes.<id>.output }}`` (an earlier node's output).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from fimone.parsers import loads as json_loads

START, AGENT, CONNECTOR, CONDITION, END = "start", "agent", "connector", "condition", "end"
NODE_TYPES = (START, AGENT, CONNECTOR, CONDITION, END)
OPERATORS = ("contains", "regex", "equals")
MAX_NODES = 100

_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_NODE_OUTPUT = re.compile(r"^nodes\.([A-Za-z0-9_-]{1,40})\.output$")


class GraphError(ValueError):
    """The graph cannot run; ``problems`` lists why, each naming the node or edge."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def nodes_by_id(graph: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["id"]: node for node in graph["nodes"]}


def outgoing(graph: Mapping[str, Any], node_id: str) -> list[dict[str, Any]]:
    return [edge for edge in graph["edges"] if edge["from"] == node_id]


def next_node(graph: Mapping[str, Any], node_id: str, *, when: bool | None = None) -> str | None:
    """The node after ``node_id`` (for a CONDITION node, the branch ``when`` chose)."""
    for edge in outgoing(graph, node_id):
        if when is None or edge.get("when") is when:
            return edge["to"]
    return None


def start_node(graph: Mapping[str, Any]) -> str:
    return next(node["id"] for node in graph["nodes"] if node["type"] == START)


def template_references(template: str) -> list[str]:
    """The placeholders of ``template`` that are neither ``input`` nor a node's output."""
    bad = []
    for expression in _PLACEHOLDER.findall(template):
        if expression != "input" and not _NODE_OUTPUT.match(expression):
            bad.append(expression)
    return bad


def referenced_nodes(template: str) -> list[str]:
    return [m.group(1) for e in _PLACEHOLDER.findall(template) if (m := _NODE_OUTPUT.match(e))]


def render(template: str, *, input: str, outputs: Mapping[str, str]) -> str:
    """``template`` with ``{{ input }}`` and ``{{ nodes.<id>.output }}`` filled in (a node that
    did not run, on a branch not taken, gives an empty text)."""

    def fill(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression == "input":
            return input
        node = _NODE_OUTPUT.match(expression)
        return outputs.get(node.group(1), "") if node else match.group(0)

    return _PLACEHOLDER.sub(fill, template)


def render_arguments(value: Any, *, input: str, outputs: Mapping[str, str]) -> Any:
    """A CONNECTOR node's arguments with every string templated."""
    if isinstance(value, str):
        return render(value, input=input, outputs=outputs)
    if isinstance(value, dict):
        return {k: render_arguments(v, input=input, outputs=outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [render_arguments(v, input=input, outputs=outputs) for v in value]
    return value


def condition_holds(node: Mapping[str, Any], output: str) -> bool:
    """Whether a CONDITION node's test holds on its source node's output."""
    operator, value = node["operator"], str(node.get("value", ""))
    if operator == "contains":
        return value in output
    if operator == "regex":
        return re.search(value, output) is not None
    try:  # equals: JSON equality when both sides are JSON, else the same text
        return json_loads(output) == json_loads(value)
    except ValueError:  # InvalidJSON: not JSON, or nested too deep
        return output.strip() == value.strip()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def check_graph(graph: Any) -> None:
    """Raise :class:`GraphError` unless ``graph`` has the shape and the rules above.

    What the nodes point at (agents, connector actions of the organisation) is checked by the
    caller, which knows the organisation."""
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise GraphError(['the graph must be an object with a "nodes" list and an "edges" list'])
    if not isinstance(graph.get("edges"), list):
        raise GraphError(['the graph must be an object with a "nodes" list and an "edges" list'])
    problems: list[str] = []
    nodes: dict[str, dict[str, Any]] = {}
    if len(graph["nodes"]) > MAX_NODES:
        raise GraphError([f"a workflow has at most {MAX_NODES} nodes"])
    for index, node in enumerate(graph["nodes"]):
        if not isinstance(node, dict) or not isinstance(node.get("id"), str) or not _ID.match(node["id"]):
            problems.append(f"node #{index + 1} needs an id of letters, digits, '-' or '_'")
            continue
        if node["id"] in nodes:
            problems.append(f"two nodes are named {node['id']!r}")
            continue
        if node.get("type") not in NODE_TYPES:
            problems.append(f"node {node['id']!r}: type must be one of {', '.join(NODE_TYPES)}")
            continue
        nodes[node["id"]] = node
    if problems:
        raise GraphError(problems)
    kinds = [n["type"] for n in nodes.values()]
    if kinds.count(START) != 1:
        problems.append("a workflow has exactly one start node")
    if END not in kinds:
        problems.append("a workflow has at least one end node")

    edges = graph["edges"]
    for index, edge in enumerate(edges):
        if not isinstance(edge, dict) or edge.get("from") not in nodes or edge.get("to") not in nodes:
            problems.append(f"edge #{index + 1} must go from a known node to a known node")
        elif "when" in edge and not isinstance(edge["when"], bool):
            problems.append(f"edge #{index + 1}: when must be true or false")
    if problems:
        raise GraphError(problems)

    for node_id, node in nodes.items():
        out = [e for e in edges if e["from"] == node_id]
        kind = node["type"]
        if kind == END and out:
            problems.append(f"end node {node_id!r} cannot have outgoing edges")
        elif kind == CONDITION:
            whens = sorted(str(e.get("when")) for e in out)
            if whens != ["False", "True"]:
                problems.append(
                    f"condition node {node_id!r} needs two outgoing edges, one when true, one when false"
                )
        elif kind != END and (len(out) != 1 or "when" in out[0]):
            problems.append(f"node {node_id!r} needs exactly one outgoing edge (without when)")
        if kind == START and any(e["to"] == node_id for e in edges):
            problems.append("no edge may lead to the start node")
        problems.extend(_node_problems(node, nodes))
    if problems:
        raise GraphError(problems)

    # No cycles, everything reachable from START.
    order = _topological(nodes, edges)
    if order is None:
        raise GraphError(["the graph has a cycle: a workflow must always reach an end"])
    reached = _reachable(start_node(graph), edges)
    unreached = [n for n in nodes if n not in reached]
    if unreached:
        problems.append(f"nodes not reachable from the start: {', '.join(sorted(unreached))}")
    for node_id, node in nodes.items():
        ancestors = _ancestors(node_id, edges)
        for used in _used_nodes(node):
            if used not in ancestors:
                problems.append(f"node {node_id!r} uses node {used!r}, which does not run before it")
    if problems:
        raise GraphError(problems)


def _node_problems(node: Mapping[str, Any], nodes: Mapping[str, Any]) -> list[str]:
    node_id, kind = node["id"], node["type"]
    problems: list[str] = []
    if kind == AGENT:
        if not isinstance(node.get("agent"), int) or isinstance(node.get("agent"), bool):
            problems.append(f"agent node {node_id!r} needs an agent id")
        if not isinstance(node.get("input", "{{ input }}"), str):
            problems.append(f"agent node {node_id!r}: input must be a text template")
    elif kind == CONNECTOR:
        if not isinstance(node.get("action"), int) or isinstance(node.get("action"), bool):
            problems.append(f"connector node {node_id!r} needs a connector action id")
        if not isinstance(node.get("arguments", {}), dict):
            problems.append(f"connector node {node_id!r}: arguments must be an object")
    elif kind == CONDITION:
        if node.get("source") not in nodes:
            problems.append(f"condition node {node_id!r} needs a source node")
        if node.get("operator") not in OPERATORS:
            problems.append(f"condition node {node_id!r}: operator must be one of {', '.join(OPERATORS)}")
        if not isinstance(node.get("value", ""), str):
            problems.append(f"condition node {node_id!r}: value must be a text")
        elif node.get("operator") == "regex":
            try:
                re.compile(node.get("value", ""))
            except re.error as exc:
                problems.append(f"condition node {node_id!r}: bad regular expression ({exc})")
    for text in _templates(node):
        for bad in template_references(text):
            problems.append(f"node {node_id!r}: unknown placeholder {{{{ {bad} }}}}")
    return problems


def _templates(node: Mapping[str, Any]) -> list[str]:
    if node["type"] == AGENT and isinstance(node.get("input", ""), str):
        return [node.get("input", "{{ input }}")]
    if node["type"] == CONNECTOR:
        return list(_strings(node.get("arguments", {})))
    return []


def _used_nodes(node: Mapping[str, Any]) -> set[str]:
    used = {ref for text in _templates(node) for ref in referenced_nodes(text)}
    if node["type"] == CONDITION:
        used.add(node["source"])
    return used


def _topological(nodes: Mapping[str, Any], edges: list[dict[str, Any]]) -> list[str] | None:
    incoming = {n: 0 for n in nodes}
    for edge in edges:
        incoming[edge["to"]] += 1
    ready = [n for n, count in incoming.items() if count == 0]
    order: list[str] = []
    while ready:
        current = ready.pop()
        order.append(current)
        for edge in edges:
            if edge["from"] == current:
                incoming[edge["to"]] -= 1
                if incoming[edge["to"]] == 0:
                    ready.append(edge["to"])
    return order if len(order) == len(nodes) else None


def _walk(start: str, edges: list[dict[str, Any]], *, along: str, to: str) -> set[str]:
    """The nodes reached from ``start`` following edges from their ``along`` end to their ``to``
    end (``start`` itself not included unless a cycle leads back to it)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        current = todo.pop()
        for edge in edges:
            if edge[along] == current and edge[to] not in seen:
                seen.add(edge[to])
                todo.append(edge[to])
    return seen


def _reachable(start: str, edges: list[dict[str, Any]]) -> set[str]:
    return {start} | _walk(start, edges, along="from", to="to")


def _ancestors(node_id: str, edges: list[dict[str, Any]]) -> set[str]:
    return _walk(node_id, edges, along="to", to="from")
