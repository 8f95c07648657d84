"""An import-linter contract that no module of the project is part of an import circle.

``acyclic_siblings`` (import-linter's own) judges packages as wholes; this one follows modules: a
module that imports another which, by any chain, imports it back is a circle, whether the imports
sit at module level or inside functions (grimp reads both; ``TYPE_CHECKING`` blocks are excluded
by the configuration). Registered in ``pyproject.toml`` (``contract_types``) and run by
``lint-imports`` in ``make lint`` and CI.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicModulesContract(Contract):
    """No import circle among the modules of each of ``containers`` (their submodules included).

    Configuration: ``containers`` — the packages to check."""

    type_name = "acyclic_modules"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        circles: list[list[str]] = []
        seen: set[frozenset[str]] = set()
        for container in self.containers:  # type: ignore[attr-defined]
            modules = graph.find_descendants(container) | {container}
            for module in sorted(modules):
                for imported in sorted(graph.find_modules_directly_imported_by(module) & modules):
                    back = graph.find_shortest_chain(importer=imported, imported=module)
                    if back is None:
                        continue
                    circle = [module, *back]
                    key = frozenset(circle)
                    if key not in seen:
                        seen.add(key)
                        circles.append(circle)
        return ContractCheck(kept=not circles, warnings=[], metadata={"circles": circles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        circles = check.metadata["circles"]
        output.print_error(f"{len(circles)} import circle(s):", bold=True)
        for circle in circles:
            output.print_error("  " + " -> ".join(circle))
