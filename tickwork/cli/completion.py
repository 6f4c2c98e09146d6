"""Shell completion: ``tickwork completion bash|zsh|fish`` and kubectl's plugin protocol.

The script asks ``tickwork __complete WORDS... CURRENT`` for candidates, the
protocol kubectl (>= 1.26) speaks to ``kubectl_complete-tickwork`` for
``kubectl tickwork <TAB>``: one candidate per line, then ``:4`` (cobra's "no file
completion"). Candidates come from the parser itself, so a new command or flag
completes without touching this module; job names and run IDs are read with the
user's own kubeconfig.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

#: cobra's ShellCompDirectiveNoFileComp: the shell offers no file names.
NO_FILES = ":4"

BASH = r"""# tickwork completion for bash: source <(tickwork completion bash)
_tickwork() {
    local IFS=$'\n' line
    COMPREPLY=()
    while read -r line; do
        [[ $line == :* ]] || COMPREPLY+=("$line")
    done < <(tickwork __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" \
        "${COMP_WORDS[COMP_CWORD]}" 2>/dev/null)
}
complete -F _tickwork tickwork kubectl-tickwork
"""

ZSH = r"""#compdef tickwork kubectl-tickwork
# tickwork completion for zsh, after compinit: source <(tickwork completion zsh)
_tickwork() {
    local -a offered
    offered=("${(@f)$(tickwork __complete "${(@)words[2,CURRENT-1]}" \
        "${words[CURRENT]}" 2>/dev/null)}")
    offered=(${offered:#:*})
    compadd -- "${offered[@]}"
}
compdef _tickwork tickwork kubectl-tickwork
"""

FISH = r"""# tickwork completion for fish: tickwork completion fish | source
function __tickwork_complete
    set -l words (commandline -opc)
    set -e words[1]
    tickwork __complete $words (commandline -ct) 2>/dev/null | string match -v -r '^:'
end
complete -c tickwork -f -a '(__tickwork_complete)'
complete -c kubectl-tickwork -f -a '(__tickwork_complete)'
"""

#: Shells with a script; each asks ``tickwork __complete`` as the bash one does.
SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk of its tree
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        flag: action
        for action in parser._actions  # noqa: SLF001
        for flag in action.option_strings
    }


def _positional(
    level: argparse.ArgumentParser,
    taken: int,
    *,
    names: Callable[[], list[str]],
    run_ids: Callable[[], list[str]],
) -> list[str]:
    """Candidates for a command's first positional argument (none after it)."""
    wanted = {a.dest for a in level._actions if not a.option_strings}  # noqa: SLF001
    if taken:
        return []
    if "name" in wanted:
        return names()
    if "run_id" in wanted:
        return run_ids()
    if "target" in wanted:  # describe: a job, or a run
        return [*names(), *run_ids()]
    if "shell" in wanted:
        return sorted(SCRIPTS)
    return []


def candidates(
    parser: argparse.ArgumentParser,
    words: Sequence[str],
    current: str,
    *,
    names: Callable[[], list[str]],
    run_ids: Callable[[], list[str]],
) -> list[str]:
    """What may come at ``current``, after ``words``. ``names`` and ``run_ids`` read
    the cluster; they are called only when a job name or a run ID fits there."""
    level, positionals, expecting = parser, 0, None
    for word in words:
        if expecting is not None:
            expecting = None
            continue
        option = _options(level).get(word.split("=", 1)[0])
        if option is not None:
            expecting = option if option.nargs != 0 and "=" not in word else None
            continue
        children = _subparsers(level)
        if word in children:
            level, positionals = children[word], 0
        else:
            positionals += 1
    if expecting is not None:
        offered = list(expecting.choices or [])
    elif current.startswith("-"):
        offered = sorted(_options(level))
    elif children := _subparsers(level):
        offered = [name for name in children if not name.startswith("_")]
    else:
        offered = _positional(level, positionals, names=names, run_ids=run_ids)
    return [word for word in offered if word.startswith(current)]
