"""PFL601: two modules that share a parameter (a tied embedding and output head) put in different FSDP2 groups."""

from __future__ import annotations

import ast

from pitfall_lint.analysis.fsdp import ShardSite, shard_sites
from pitfall_lint.analysis.scopes import FUNCTIONS
from pitfall_lint.analysis.training import dotted
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


def _ties(tree: ast.Module) -> set[tuple[str, str]]:
    """(module, module) attribute names for every `x.lm_head.weight = x.embed.weight` in the file, both ways."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = dotted(node.targets[0]), dotted(node.value)
            if target is None or value is None:
                continue
            *owner_t, module_t, attribute_t = ["", *target.split(".")]
            *owner_v, module_v, attribute_v = ["", *value.split(".")]
            if attribute_t == attribute_v and module_t and module_v and module_t != module_v and len(owner_t) > 1 and len(owner_v) > 1:
                found |= {(module_t, module_v), (module_v, module_t)}
    return found


def _last(target: str) -> str:
    return target.rpartition(".")[2]


class TiedWeightsInSeparateShards(Rule):
    info = RuleInfo(
        code="PFL601",
        name="tied-weights-in-separate-shards",
        summary="Two modules that share a parameter (`lm_head.weight = embed.weight`) put in different `fully_shard` groups: a ValueError from torch 2.12, a weight that silently never updates before.",
        severity="error",
        preview=True,
        verifiable=True,
        hint="shard the modules that share the parameter in one call: `fully_shard([model.embed, model.lm_head])`",
    )
    triggers = (("fully_shard",),)
    subscriptions = ()

    def finish(self) -> None:
        ties = _ties(self.ctx.tree)
        if not ties:
            return
        scopes = [self.ctx.tree, *(n for n in ast.walk(self.ctx.tree) if isinstance(n, FUNCTIONS))]
        for scope in scopes:
            sites = shard_sites(self.ctx, scope)
            reported: set[int] = set()
            for site in sites:
                for target in site.targets:
                    for first, second in ties:
                        if _last(target) != first or any(_last(t) == second for t in site.targets):
                            continue
                        other = self._other_group(sites, site, target, second)
                        later = max(site, other, key=lambda s: s.line) if other is not None else None
                        if other is not None and later is not None and id(later.call) not in reported:
                            reported.add(id(later.call))
                            both = f"{target}, {target.rpartition('.')[0] + '.' if '.' in target else ''}{second}"
                            self.report(
                                later.call,
                                f"`{first}` and `{second}` share a parameter (a tie in this file), but `fully_shard` puts "
                                f"`{target}` in a group of its own at line {site.line} and `{second}` in another (line "
                                f"{other.line}): torch 2.12 raises `ValueError: Parameter ... is shared with a parameter "
                                "already managed by another FSDP group`, and older releases never update the weight on "
                                f"some ranks; shard both in one call: `fully_shard([{both}])`",
                            )

    @staticmethod
    def _other_group(sites: list[ShardSite], site: ShardSite, target: str, second: str) -> ShardSite | None:
        """The call that shards the tie's other module, by name, or the module that holds both (the root, which
        takes every parameter that no earlier call took)."""
        owner = target.rpartition(".")[0]
        for other in sites:
            if other is site:
                continue
            if any(_last(t) == second for t in other.targets):
                return other
            if owner and owner in other.targets and other.line > site.line:
                return other
        return None
