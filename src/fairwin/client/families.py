"""Prompt families from local text, and their frozen order files.

Two families exist on every machine with Python, so nothing is downloaded: ``prose``
(docstrings of the standard library) and ``code`` (its source). A user brings their
own from JSONL (``{"id", "text"}`` per line), text files, or directories of them.
Each prompt is at least ``min_chars`` long (neighbouring texts are joined until it
is), because a cell cuts prompts *down* to its token length at window time.
"""

from __future__ import annotations

import ast
import json
import random
import sysconfig
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from fairwin.client.prepare import LocalTokenizer, TokenCounter, TokenizeClient, cut_to_tokens
from fairwin.errors import InputError, PromptError
from fairwin.files import sha256_file, write_text_atomic
from fairwin.plan.order import PromptOrder, write_order

BUILTIN = ("prose", "code")


SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "__pycache__"})


def _stdlib_files() -> list[Path]:
    """The standard library's public modules, packages included, tests and installed packages left out."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        if any(part in SKIPPED_DIRS for part in parts[:-1]):
            continue
        files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _docstrings(source: str) -> Iterator[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    # ast.walk's breadth-first order, over the nodes a definition can sit in: a definition is never inside an
    # expression, and expressions are nearly all of a tree's nodes (walking them was half this command's time).
    queue = deque[ast.AST]([tree])
    while queue:
        node = queue.popleft()
        queue.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 80:
                yield doc


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _builtin_texts(family: str) -> Iterator[tuple[str, str]]:
    for path in _stdlib_files():
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        name = path.with_suffix("").name if path.name != "__init__.py" else path.parent.name
        if family == "code":
            yield name, source
        else:
            text = "\n\n".join(_docstrings(source))
            if text:
                yield name, text


def _user_texts(source: Path) -> Iterator[tuple[str, str]]:
    if source.is_dir():
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            yield from _user_texts(path)
    elif source.suffix == ".jsonl":
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    yield str(row["id"]), str(row["text"])
                except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
                    raise InputError(f"{source}:{number}: expected a JSON object with 'id' and 'text'") from None
    elif source.is_file():
        try:
            yield source.stem, source.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{source}: not UTF-8 text; convert it or leave it out") from None
    else:
        raise InputError(f"{source}: no such file or directory")


@dataclass(frozen=True)
class BuiltFamily:
    name: str
    prompts_path: Path
    order_path: Path
    prompts_sha256: str
    order_sha256: str
    count: int
    chars: tuple[int, ...] = ()  # each prompt's characters, in the file's order
    tokens: tuple[int, ...] = ()  # each prompt's tokens, where a tokenizer counted them

    def sizes(self) -> str:
        """``12 prompts, 20011 to 24750 characters (median 21302); 4096 to 4096 tokens``."""
        parts = [f"{self.count} prompts"]
        for unit, values in (("characters", self.chars), ("tokens", self.tokens)):
            if values:
                ordered = sorted(values)
                parts.append(f"{ordered[0]} to {ordered[-1]} {unit} (median {ordered[len(ordered) // 2]})")
        return ", ".join(parts)

    def plan_snippet(self, base: Path) -> str:
        def rel(path: Path) -> str:
            try:
                return str(path.resolve().relative_to(base.resolve()))
            except ValueError:
                return str(path.resolve())

        return (
            f"[families.{self.name}]\n"
            f'prompts = "{rel(self.prompts_path)}"\n'
            f'prompts_sha256 = "{self.prompts_sha256}"\n'
            f'order = "{rel(self.order_path)}"\n'
            f'order_sha256 = "{self.order_sha256}"\n'
        )


async def family_prompts(
    name: str,
    source: str | Path,
    *,
    count: int,
    min_chars: int,
    counter: TokenCounter | None = None,
    tokens: int | None = None,
) -> list[dict[str, str | int]]:
    """Join texts until each prompt has ``min_chars`` (a user's text of twice that or more is first split at its
    paragraphs, so one large file makes many prompts); nothing is written.

    With ``counter``, each prompt's tokens are counted; with ``tokens`` too, every prompt is cut to exactly that
    many as the counter counts them (a server's /tokenize or a local tokenizer.json).
    """
    if str(source) in BUILTIN:
        texts = _builtin_texts(str(source))
    else:
        texts = (piece for text_id, text in _user_texts(Path(source)) for piece in _split(text_id, text, min_chars))
    prompts = []
    for prompt in _joined(name, texts, min_chars):
        if counter is not None and tokens is not None:
            await _cut(name, prompt, counter, tokens)
        elif counter is not None:
            prompt["tokens"] = await counter.count(str(prompt["text"]))
        prompts.append(prompt)
        if len(prompts) == count:
            break
    if len(prompts) < count:
        raise InputError(
            f"family {name}: only {len(prompts)} prompts of >= {min_chars} characters could be made from "
            f"{source}; lower --count or --min-chars, or add text"
        )
    return prompts


def _split(text_id: str, text: str, min_chars: int) -> Iterator[tuple[str, str]]:
    """A text of at least twice ``min_chars`` as pieces of about ``min_chars``, cut between paragraphs (or lines,
    where it has no blank lines); a shorter text whole."""
    if len(text) < 2 * min_chars:
        yield text_id, text
        return
    separator = "\n\n" if "\n\n" in text else "\n"
    piece: list[str] = []
    number = size = 0
    for paragraph in text.split(separator):
        piece.append(paragraph)
        size += len(paragraph) + len(separator)
        if size >= min_chars:
            yield f"{text_id}#{number}", separator.join(piece)
            number, piece, size = number + 1, [], 0
    if piece:
        yield f"{text_id}#{number}", separator.join(piece)


def _joined(name: str, texts: Iterator[tuple[str, str]], min_chars: int) -> Iterator[dict[str, str | int]]:
    """Prompts of at least ``min_chars``, each from neighbouring texts joined in order."""
    ids: list[str] = []
    pieces: list[str] = []
    number = size = 0
    for text_id, text in texts:
        pieces.append(text)
        ids.append(text_id)
        size += len(text)
        if size >= min_chars:
            yield {"id": f"{name}-{number:03d}", "source": "+".join(ids), "text": "\n\n".join(pieces)}
            number += 1
            pieces, ids, size = [], [], 0


async def _cut(name: str, prompt: dict[str, str | int], counter: TokenCounter, tokens: int) -> None:
    try:
        prompt["text"], prompt["tokens"] = await cut_to_tokens(counter, str(prompt["text"]), tokens)
    except PromptError as exc:  # no window here: the tokenizer given on the command line is wrong
        raise InputError(f"family {name}: {exc}") from None
    if prompt["tokens"] != tokens:
        raise InputError(
            f"family {name}: prompt {prompt['id']} has only {prompt['tokens']} tokens, not {tokens}; raise --min-chars"
        )


def write_family(name: str, out_dir: Path, prompts: list[dict[str, str | int]], seed: int) -> BuiltFamily:
    out_dir.mkdir(parents=True, exist_ok=True)
    prompts_path = out_dir / f"{name}.jsonl"
    order_path = out_dir / f"{name}.order.json"
    write_text_atomic(prompts_path, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts))
    order = [str(p["id"]) for p in prompts]
    random.Random(seed).shuffle(order)
    write_order(order_path, PromptOrder(family=name, seed=seed, ids=order))
    return BuiltFamily(
        name=name,
        prompts_path=prompts_path,
        order_path=order_path,
        prompts_sha256=sha256_file(prompts_path),
        order_sha256=sha256_file(order_path),
        count=len(prompts),
        chars=tuple(len(str(p["text"])) for p in prompts),
        tokens=tuple(int(p["tokens"]) for p in prompts if "tokens" in p),
    )


@dataclass(frozen=True)
class Tokenization:
    """How ``fairwin prompts`` counts tokens (and cuts prompts to a length): a server or a local file."""

    tokens: int | None  # None: count each prompt's tokens, cut none
    tokenize_url: str | None = None  # a server's base URL (its /tokenize)
    model: str = ""
    tokenizer: Path | None = None  # a local tokenizer.json


async def build_families(
    specs: Sequence[str], out_dir: Path, *, count: int, min_chars: int, seed: int, cut: Tokenization | None
) -> list[BuiltFamily]:
    """Each ``NAME`` or ``NAME=SOURCE`` of ``specs`` built into ``out_dir``, counted (and cut to ``cut.tokens``)
    when a tokenizer is given. All or nothing: every family is built before any file is written, so one that
    cannot be built leaves no other family's files behind."""
    async with aiohttp.ClientSession() as session:
        counter: TokenCounter | None = None
        if cut is not None and cut.tokenize_url:
            counter = TokenizeClient(session, cut.tokenize_url.rstrip("/"), cut.model, "completions")
        elif cut is not None and cut.tokenizer is not None:
            counter = LocalTokenizer(cut.tokenizer)
        made: list[tuple[str, list[dict[str, str | int]]]] = []
        for spec in specs:
            name, _, source = spec.partition("=")
            tokens = cut.tokens if cut else None
            prompts = await family_prompts(
                name, source or name, count=count, min_chars=min_chars, counter=counter, tokens=tokens
            )
            made.append((name, prompts))
    return [write_family(name, out_dir, prompts, seed) for name, prompts in made]
