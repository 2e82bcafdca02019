"""`fairwin prompts`: built-in and user families, pins a plan accepts, cutting to a token count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairwin.cli import main
from fairwin.files import sha256_file
from fairwin.sim.model import tokenize
from tests.integration.helpers import SimProcess


def _unknownless_tokenizer(directory: Path) -> Path:
    """A word-level tokenizer.json with no unknown token: it cannot encode a word it was not trained on."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordLevel())
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(["only these words"], trainers.WordLevelTrainer())
    path = directory / "unknownless-tokenizer.json"
    tokenizer.save(str(path))
    return path


#: Stands for the path of :func:`_unknownless_tokenizer`'s file, written in the test's own directory.
UNKNOWNLESS = "<a tokenizer with no unknown token>"


def rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_builtin_families_and_their_pins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prompts"
    code = main(
        [
            "prompts",
            "--family",
            "prose",
            "--family",
            "code",
            "--out",
            str(out),
            "--count",
            "3",
            "--min-chars",
            "5000",
            "--plan-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("prose", "code"):
        prompts = rows(out / f"{name}.jsonl")
        assert len(prompts) == 3 and all(len(str(p["text"])) >= 5000 for p in prompts)
        order = json.loads((out / f"{name}.order.json").read_text())
        assert order["format"] == "fairwin.order/1" and sorted(order["ids"]) == [p["id"] for p in prompts]
        assert f'order_sha256 = "{sha256_file(out / f"{name}.order.json")}"' in printed
        assert f'prompts = "prompts/{name}.jsonl"' in printed
    code, prose = str(rows(out / "code.jsonl")[0]["text"]), str(rows(out / "prose.jsonl")[0]["text"])
    # Source carries its docstrings' quotes; the docstrings themselves do not.
    assert code.count('"""') > 5 and prose.count('"""') <= 1


def test_same_inputs_same_files(tmp_path: Path) -> None:
    for run in ("a", "b"):
        assert (
            main(["prompts", "--family", "prose", "--out", str(tmp_path / run), "--count", "2", "--min-chars", "3000"])
            == 0
        )
    assert sha256_file(tmp_path / "a" / "prose.jsonl") == sha256_file(tmp_path / "b" / "prose.jsonl")
    assert sha256_file(tmp_path / "a" / "prose.order.json") == sha256_file(tmp_path / "b" / "prose.order.json")


def test_user_directory_and_jsonl_sources(tmp_path: Path) -> None:
    corpus = tmp_path / "opinions"
    corpus.mkdir()
    for i in range(4):
        (corpus / f"case{i}.txt").write_text(f"Opinion {i}. " * 200)
    filings = tmp_path / "filings.jsonl"
    filings.write_text("".join(json.dumps({"id": f"f{i}", "text": f"Filing {i}. " * 300}) + "\n" for i in range(3)))
    out = tmp_path / "out"
    assert (
        main(
            [
                "prompts",
                "--family",
                f"opinions={corpus}",
                "--family",
                f"filings={filings}",
                "--out",
                str(out),
                "--count",
                "2",
                "--min-chars",
                "2000",
            ]
        )
        == 0
    )
    assert [p["source"] for p in rows(out / "opinions.jsonl")] == ["case0", "case1"]
    assert [p["source"] for p in rows(out / "filings.jsonl")] == ["f0", "f1"]


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    server = SimProcess("--model", "tok")
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def test_cut_to_tokens_with_the_servers_tokenize(tmp_path: Path, sim: SimProcess) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "prompts",
                "--family",
                "code",
                "--out",
                str(out),
                "--count",
                "3",
                "--min-chars",
                "4000",
                "--tokens",
                "300",
                "--tokenize-url",
                sim.url,
                "--model",
                "tok",
            ]
        )
        == 0
    )
    for prompt in rows(out / "code.jsonl"):
        assert prompt["tokens"] == 300 == len(tokenize(str(prompt["text"])))


def test_cut_to_tokens_with_a_local_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(["alpha beta gamma delta " * 50], trainers.BpeTrainer(special_tokens=["<unk>"]))
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    out = tmp_path / "out"
    assert (
        main(
            [
                "prompts",
                "--family",
                "prose",
                "--out",
                str(out),
                "--count",
                "2",
                "--min-chars",
                "3000",
                "--tokens",
                "200",
                "--tokenizer",
                str(path),
            ]
        )
        == 0
    )
    for prompt in rows(out / "prose.jsonl"):
        assert prompt["tokens"] == 200 == len(tokenizer.encode(str(prompt["text"])).ids)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tokens", "10"], "--tokens needs --tokenize-url URL"),
        (["--tokenizer", "x.json"], "x.json: not a tokenizer.json"),  # alone it counts: the file must load
        (["--count", "500", "--min-chars", "100000"], "lower --count or --min-chars"),
        (["--tokens", "10", "--tokenizer", "missing.json"], "not a tokenizer.json"),
        (["--tokenizer", UNKNOWNLESS], "this tokenizer cannot encode the prompts' text"),
    ],
)
def test_bad_prompt_requests_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    extra = [str(_unknownless_tokenizer(tmp_path)) if arg == UNKNOWNLESS else arg for arg in extra]
    code = main(["prompts", "--family", "prose", "--out", str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_one_large_file_makes_many_prompts_with_their_sizes_said_and_a_bad_family_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"paragraph {n}: " + "words of the team's own text " * 20 for n in range(100)))
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(["words of the"], trainers.WordLevelTrainer(special_tokens=["<unk>"]))
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    out = tmp_path / "out"
    given = ["--out", str(out), "--count", "8", "--min-chars", "6000", "--tokenizer", str(tmp_path / "tokenizer.json")]
    assert main(["prompts", "--family", f"mine={corpus}", *given]) == 0
    made = rows(out / "mine.jsonl")
    assert len(made) == 8 and [p["source"] for p in made[:2]] == ["corpus#0", "corpus#1"]  # one file, split
    assert all(6000 <= len(str(p["text"])) < 7000 for p in made)
    assert all(p["tokens"] == len(tokenizer.encode(str(p["text"])).ids) for p in made)
    said = capsys.readouterr().out
    chars = sorted(len(str(p["text"])) for p in made)
    tokens = sorted(int(str(p["tokens"])) for p in made)
    assert f"# 8 prompts, {chars[0]} to {chars[-1]} characters (median {chars[4]}), " in said
    assert f"{tokens[0]} to {tokens[-1]} tokens (median {tokens[4]}) -> {out / 'mine.jsonl'}" in said
    # All or nothing: a family that cannot be built leaves no other family's files behind.
    fresh = tmp_path / "fresh"
    families = ["--family", f"mine={corpus}", "--family", f"theirs={tmp_path / 'none'}"]
    code = main(["prompts", *families, "--out", str(fresh), "--count", "8", "--min-chars", "6000"])
    assert code == 2 and "no such file or directory" in capsys.readouterr().err
    assert not fresh.exists()


def test_a_frozen_order_a_team_has_is_imported_pinned_and_never_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = tmp_path / "built"
    assert main(["prompts", "--family", "prose", "--out", str(built), "--count", "4", "--min-chars", "2000"]) == 0
    capsys.readouterr()
    ids = [str(p["id"]) for p in rows(built / "prose.jsonl")]
    theirs = tmp_path / "ORDERS.json"
    theirs.write_text(json.dumps({"prose": ids[::-1]}))
    out = tmp_path / "orders"
    imported = ["prompts", "import", str(theirs), "--family", f"prose={built / 'prose.jsonl'}", "--out", str(out)]
    assert main([*imported, "--plan-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    order = json.loads((out / "prose.order.json").read_text())
    assert order == {"format": "fairwin.order/1", "family": "prose", "seed": None, "ids": ids[::-1]}
    assert f'order_sha256 = "{sha256_file(out / "prose.order.json")}"' in printed
    assert f'prompts_sha256 = "{sha256_file(built / "prose.jsonl")}"' in printed and 'order = "orders/' in printed
    pinned = sha256_file(out / "prose.order.json")
    assert main(imported) == 0 and sha256_file(out / "prose.order.json") == pinned  # the same order: left as it is
    capsys.readouterr()
    theirs.write_text(json.dumps({"prose": ids}))
    assert main(imported) == 2 and sha256_file(out / "prose.order.json") == pinned
    assert "exists with another order; a pinned order is never rewritten" in capsys.readouterr().err
    theirs.write_text(json.dumps({"prose": [*ids, "p-nope"]}))
    elsewhere = tmp_path / "elsewhere"
    assert main([*imported[:-1], str(elsewhere)]) == 2 and not elsewhere.exists()
    assert "family prose: ids ['p-nope'] are not in" in capsys.readouterr().err
