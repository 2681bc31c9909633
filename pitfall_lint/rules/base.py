"""The rule contract: a rule subscribes to node types and reports; it never walks, reads or prints."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, ClassVar

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import FixPlan, Related, RuleInfo

if TYPE_CHECKING:
    from pitfall_lint.analysis.evidence import WrapperKind
    from pitfall_lint.project.model import ProjectView


class Rule:
    """One pitfall. A fresh instance checks each file, so it may keep per-file state."""

    info: ClassVar[RuleInfo]
    # Source substrings that must appear for the rule to apply: every group must have one of its
    # words in the file. A file that no enabled rule could apply to is not parsed at all.
    triggers: ClassVar[tuple[tuple[str, ...], ...]]
    # The kinds of file the pitfall exists in: a notebook-only rule never costs a .py file its parse. Any file that is
    # not a notebook is of the kind `.py`, whatever its name (a script named `launch` with a python shebang).
    suffixes: ClassVar[tuple[str, ...]] = (".py", ".ipynb")
    # Node types passed to `visit`, in source order, during the engine's one traversal (an instance may narrow them
    # to what its file can hold).
    subscriptions: tuple[type[ast.AST], ...] = ()
    # A pitfall that only `verify` can see (no static check): the engine never runs it.
    runtime_only: ClassVar[bool] = False

    @classmethod
    def load(cls) -> type[Rule]:
        """The class itself: a Rule class stands for itself wherever a registry entry may (registry.RuleSpec)."""
        return cls

    @classmethod
    def may_apply(cls, data: bytes) -> bool:
        """A finer look at the bytes of a file that holds the trigger words (a test no list of words can say, such
        as a word in any case): False only where the rule cannot report anything, and the file is then not parsed
        for it."""
        return True

    @classmethod
    def may_apply_in(cls, project: ProjectView) -> bool:
        """A look at the project around a file that may_apply let through (a fact of other files, such as whether
        anything can wrap its modules): False only where the rule cannot report anything, and the file is then not
        parsed for it. Asked through `project`, so that a cached result is checked again when the answer changes."""
        return True

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def visit(self, node: ast.AST) -> None:
        """Called for each subscribed node; `self.ctx.ancestors` holds its enclosing nodes."""

    def finish(self) -> None:
        """Called once after the traversal, for rules that decide with the whole file in view."""

    def report(
        self, node: ast.AST, message: str, fix: dict[str, str] | None = None, related: tuple[Related, ...] = ()
    ) -> None:
        """`fix`: the facts the rule's rewrite in pitfall_lint/fix/ needs, when it could work them out.
        `related`: the places in the project the finding rests on (a wrap site, a caller)."""
        self.ctx.report(self.info, node, message, FixPlan(tuple(fix.items())) if fix else None, related)


class WrappedModuleRule(Rule):
    """A pitfall of a module that a wrapper runs, reported only where a wrap of that kind can run one of the file's
    classes: in a file where none can (DataParallel in a project that trains with DDP alone), the file is not
    parsed for it."""

    wrapper: ClassVar[WrapperKind] = "DataParallel"

    @classmethod
    def may_apply_in(cls, project: ProjectView) -> bool:
        return project.wrapper_reaches_file(cls.wrapper)
