"""The simulated container's ``sh -c`` language: a script parsed into commands joined by ``;``,
``&&``, ``||`` or newlines, with quoting and ``>&2``/``2>&1``/``>/dev/null`` redirections, and
each command's words expanded (``$NAME``, ``${NAME}``, ``$?``) once the status before it is
known. What it does not emulate (pipes, input redirections, background jobs) is refused by name.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping


class UnsupportedError(Exception):
    pass


class ShellSyntaxError(Exception):
    pass


# A word is a list of (kind, text) pieces: "lit" (quoted, never expanded), "dq" (double-quoted:
# expanded, never split), "bare" (expanded and split). Expansion waits until ``$?`` is known.
Word = list[tuple[str, str]]
# (fd, target): target "&1", "&2" or "null" (/dev/null).
Redirection = tuple[int, str]
_UNSUPPORTED = {"|": "pipes", "<": "input redirections", "&": "background jobs"}


def parse(script: str) -> list[tuple[list[Word], str, list[Redirection]]]:
    """Commands with the operator that joins each to the one before (";", "&&" or "||"), and
    their redirections."""
    commands: list[tuple[list[Word], str, list[Redirection]]] = []
    redirections: list[Redirection] = []
    words: list[Word] = []
    word: Word = []
    joiner = ";"
    i, n = 0, len(script)
    in_word = False

    def end_word() -> None:
        nonlocal word, in_word
        if in_word:
            words.append(word)
        word, in_word = [], False

    def end_command(next_joiner: str) -> None:
        nonlocal words, joiner, redirections
        end_word()
        if words:
            commands.append((words, joiner, redirections))
        elif next_joiner in ("&&", "||"):
            raise ShellSyntaxError(f'"{next_joiner}" unexpected')
        words, joiner, redirections = [], next_joiner, []

    def redirect(at: int) -> int:
        """Parse ``[N]>[>]&M`` or ``[N]>[>] /dev/null`` at the ``>``; returns where it ends."""
        nonlocal word, in_word
        fd = 1
        if in_word and word in ([("bare", "1")], [("bare", "2")]):
            fd, word, in_word = int(word[0][1]), [], False
        else:
            end_word()
        at += 1
        if script.startswith(">", at):
            at += 1
        if script.startswith("&", at):
            target = script[at + 1 : at + 2]
            if target not in ("1", "2"):
                raise UnsupportedError("redirections other than >&1, >&2 and >/dev/null")
            redirections.append((fd, f"&{target}"))
            return at + 2
        while at < n and script[at] in " \t":
            at += 1
        end = at
        while end < n and script[end] not in " \t;\n|&<>":
            end += 1
        if script[at:end] != "/dev/null":
            raise UnsupportedError("redirections to files")
        redirections.append((fd, "null"))
        return end

    while i < n:
        ch = script[i]
        if ch == "#" and not in_word:
            while i < n and script[i] != "\n":
                i += 1
            continue
        if ch in " \t":
            end_word()
            i += 1
        elif ch in ";\n":
            end_command(";")
            i += 1
        elif script.startswith("&&", i) or script.startswith("||", i):
            end_command(script[i : i + 2])
            i += 2
        elif ch == ">":
            i = redirect(i)
        elif ch in _UNSUPPORTED:
            raise UnsupportedError(_UNSUPPORTED[ch])
        elif ch == "`" or script.startswith("$(", i):
            raise UnsupportedError("command substitution")
        elif ch == "'":
            end = script.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("Unterminated quoted string")
            word.append(("lit", script[i + 1 : end]))
            in_word, i = True, end + 1
        elif ch == '"':
            j, text = i + 1, []
            while j < n and script[j] != '"':
                if script[j] == "\\" and j + 1 < n and script[j + 1] in '"\\$`':
                    text.append(script[j + 1])
                    j += 2
                    continue
                if script[j] == "`" or script.startswith("$(", j):
                    raise UnsupportedError("command substitution")
                text.append(script[j])
                j += 1
            if j >= n:
                raise ShellSyntaxError("Unterminated quoted string")
            word.append(("dq", "".join(text)))
            in_word, i = True, j + 1
        elif ch == "\\" and i + 1 < n:
            word.append(("lit", script[i + 1]))
            in_word, i = True, i + 2
        else:
            j = i
            while j < n and script[j] not in " \t;\n'\"\\|&<>`" and not script.startswith("$(", j):
                j += 1
            word.append(("bare", script[i:j]))
            in_word, i = True, j
    if words or in_word or redirections:
        end_command(";")
    elif joiner in ("&&", "||"):
        raise ShellSyntaxError("end of file unexpected")
    return commands


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|(\?))")


def expand(words: list[Word], env: Mapping[str, str], status: int) -> list[str]:
    """Parameter expansion, then field splitting of what unquoted expansions produced."""

    def value(match: re.Match[str]) -> str:
        if match.group(3):
            return str(status)
        return env.get(match.group(1) or match.group(2), "")

    argv: list[str] = []
    for word in words:
        fields: list[str] = [""]
        quoted = False
        for kind, text in word:
            if kind == "lit":
                fields[-1] += text
                quoted = True
            elif kind == "dq":
                fields[-1] += _VAR.sub(value, text)
                quoted = True
            else:
                pos = 0
                for match in _VAR.finditer(text):
                    fields[-1] += text[pos : match.start()]
                    parts = value(match).split()
                    expanded = value(match)
                    if parts:
                        if expanded[:1].isspace() and fields[-1]:
                            fields.append("")
                        fields[-1] += parts[0]
                        fields.extend(parts[1:])
                        if expanded[-1:].isspace():
                            fields.append("")
                    pos = match.end()
                fields[-1] += text[pos:]
        argv.extend(f for f in fields if f or quoted)
    return argv


__all__ = ["Redirection", "ShellSyntaxError", "UnsupportedError", "Word", "expand", "parse"]
