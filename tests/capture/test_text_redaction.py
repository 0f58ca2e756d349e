"""Secrets on command lines and in free text (capture/text_redaction.py). Table-driven."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from acp_bridge.capture.redaction import REDACTED
from acp_bridge.capture.text_redaction import PROMPT_IN_TEXT, mask_argv, mask_text_secrets


@pytest.mark.parametrize(("argv", "masked"), [
    (["agent", "-H", "Authorization: Bearer X1"], ["agent", "-H", f"Authorization: Bearer {REDACTED}"]),
    (["agent", "--header=Authorization: Bearer X1"], ["agent", f"--header=Authorization: Bearer {REDACTED}"]),
    (["agent", "--header", "Authorization:Bearer X1"], ["agent", "--header", f"Authorization:Bearer {REDACTED}"]),
    (["agent", "--header", "Authorization:Bearer", "X1"], ["agent", "--header", "Authorization:Bearer", REDACTED]),
    (["agent", "-H", "Authorization:", "X1"], ["agent", "-H", "Authorization:", REDACTED]),
    (["agent", "-H", "Authorization: Basic dXNlcjpwYXNz"], ["agent", "-H", f"Authorization: Basic {REDACTED}"]),
    (["agent", "-H", "X-Api-Key: k1"], ["agent", "-H", f"X-Api-Key: {REDACTED}"]),
    (["agent", "-H", "Cookie: a=1; b=2"], ["agent", "-H", f"Cookie: {REDACTED}"]),
    (["agent", "https://user:pass@host/p"], ["agent", f"https://{REDACTED}@host/p"]),
    (["agent", "--url=https://tok@host:8080/p?q=1"], ["agent", f"--url=https://{REDACTED}@host:8080/p?q=1"]),
    (["agent", "postgres://u:p@ss@db/x"], ["agent", f"postgres://{REDACTED}@db/x"]),
    (["agent", "https://host/a@b"], ["agent", "https://host/a@b"]),  # an @ in the path is no user
    (["agent", "--env=OPENAI_API_KEY=sk-1"], ["agent", f"--env=OPENAI_API_KEY={REDACTED}"]),
    (["agent", "--config", '{"apiKey": "k1", "model": "m"}'],
     ["agent", "--config", f'{{"apiKey": "{REDACTED}", "model": "m"}}']),
    (["agent", "https://h/cb?access_token=t1&x=1"], ["agent", f"https://h/cb?access_token={REDACTED}&x=1"]),
    (["run", "--token", "t0k", "x"], ["run", "--token", REDACTED, "x"]),
    (["run", "--capture", "c.jsonl", "--", "agent", "--model", "m", "-H", "Accept: text/plain"],
     ["run", "--capture", "c.jsonl", "--", "agent", "--model", "m", "-H", "Accept: text/plain"]),
    # A command line in one argument (`sh -c`, a terminal's command): its words are masked
    # as arguments are, each replaced whole (quotes and all), the spaces kept.
    (["sh", "-c", "agent --token t0k  --model m"], ["sh", "-c", f"agent --token {REDACTED}  --model m"]),
    (["sh", "-c", "git commit --author=bob -m 'fix it'"], ["sh", "-c", f"git commit --author={REDACTED} -m 'fix it'"]),
    (["sh", "-c", 'curl --token "a b" -o x'], ["sh", "-c", f"curl --token {REDACTED} -o x"]),
    (["sh", "-c", "curl --password='p w' x"], ["sh", "-c", f"curl --password={REDACTED} x"]),
    (["sh", "-c", r"curl --token a\ b x --key 'open"], ["sh", "-c", f"curl --token {REDACTED} x --key {REDACTED}"]),
    (["sh", "-c", "echo keys and tokens"], ["sh", "-c", "echo keys and tokens"]),
    # ... also when it starts with the secret option: it was kept whole, and the next hidden
    (["agent", "--token t0k", "--model"], ["agent", f"--token {REDACTED}", "--model"]),
    (["agent", "--user bob --api-key  k1"], ["agent", f"--user bob --api-key  {REDACTED}"]),
    (["agent", "--token ", "t0k"], ["agent", "--token ", REDACTED]),  # one word: the value comes next
    # ... a value with an `=` in it (base64's padding) too: it was cut at the `=`, shown in clear
    (["agent", "--token dG9rZW4=", "x"], ["agent", f"--token {REDACTED}", "x"]),
    (["agent", "--api-key a=b c"], ["agent", f"--api-key {REDACTED} c"]),
])
def test_mask_argv(argv: list[str], masked: list[str]) -> None:
    assert mask_argv(argv) == masked


@pytest.mark.parametrize(("text", "masked"), [
    ('"Authorization": "Bearer abc"', f'"Authorization": "Bearer {REDACTED}"'),
    ("Authorization: Basic dXNlcjpwYXNz\n", f"Authorization: Basic {REDACTED}\n"),
    ("fetching https://bot:hunter2@git.example/r.git failed", f"fetching https://{REDACTED}@git.example/r.git failed"),
    ("Set-Cookie: sid=abc; Path=/\nnext", f"Set-Cookie: {REDACTED}\nnext"),
    ("a tokenizer error, no secret", "a tokenizer error, no secret"),
    ("POST http://u:PASSWORD@h:4318/v1/traces?sig=S1&x=1&key=K1#f",
     f"POST http://{REDACTED}@h:4318/v1/traces?sig={REDACTED}&x=1&key={REDACTED}#f"),
    ("with url: /v1/traces?auth=A1 (Caused by", f"with url: /v1/traces?auth={REDACTED} (Caused by"),
    ("https://b.s3/o?X-Amz-Signature=ab12&X-Amz-Credential=c%2F1", f"https://b.s3/o?X-Amz-Signature={REDACTED}"
     f"&X-Amz-Credential={REDACTED}"),
    ("https://h/p?q=1&page=2", "https://h/p?q=1&page=2"),
])
def test_mask_text_secrets(text: str, masked: str) -> None:
    assert mask_text_secrets(text) == masked


@pytest.mark.parametrize("logged", [
    'TOP "SECRET" café',  # as it is
    json.dumps('TOP "SECRET" café', ensure_ascii=False)[1:-1],  # as orjson and JavaScript write it
    json.dumps('TOP "SECRET" café')[1:-1],  # as Python's json writes it: \u00e9
])
def test_mask_text_secrets_masks_the_system_prompt_in_each_spelling(logged: str) -> None:
    """The agent's stderr tail: the prompt as the capture finds it, named `<system prompt>`."""
    assert mask_text_secrets(f"got {logged} token=abc", 'TOP "SECRET" café') == \
        f"got {PROMPT_IN_TEXT} token={REDACTED}"
    assert mask_text_secrets(f"got {logged}", None) == f"got {logged}"


@pytest.mark.parametrize(("argv", "masked"), [
    (["run", "--token", "t0k", "x"], ["run", "--token", REDACTED, "x"]),
    (["run", "--system-prompt=hi"], ["run", f"--system-prompt={REDACTED}"]),
    (["--", "env", "OPENAI_API_KEY=sk-1", "agent"], ["--", "env", f"OPENAI_API_KEY={REDACTED}", "agent"]),
    (["run", "--capture", "c.jsonl", "--", "agent", "--model", "m"],
     ["run", "--capture", "c.jsonl", "--", "agent", "--model", "m"]),
])
def test_mask_argv_the_bridges_options(argv: list[str], masked: list[str]) -> None:
    assert mask_argv(argv) == masked


# -- the shortcuts: the patterns cost about 0.3 s a MiB, and a terminal's command can be a script

class _Refused:
    def sub(self, *args: object) -> str:
        raise AssertionError("the pattern ran")

    def search(self, *args: object) -> None:
        raise AssertionError("the pattern ran")


def test_a_command_line_that_names_no_secret_is_not_searched_by_the_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.capture import text_redaction

    for name in ("_SECRET_VALUE", "_DANGLING", "_COOKIE", "_URL_USERINFO", "_QUERY_SECRET", "_QUOTING"):
        monkeypatch.setattr(text_redaction, name, _Refused())
    script = "cat > a.js <<EOF\nfor (const key of Object.keys(o)) { m[key] = o[key]; }\nEOF"
    assert mask_argv(["sh", "-c", script, "--model", "m"]) == ["sh", "-c", script, "--model", "m"]


def test_a_script_with_quotes_and_no_secret_word_is_not_split_into_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A script has quotes in most lines, and often a letter that is not ASCII: either sent
    every word of it through the loop (10 MiB: 8 s, 36 s not ASCII) and the patterns."""
    from acp_bridge.capture import text_redaction

    for name in ("_SECRET_VALUE", "_DANGLING", "_COOKIE", "_URL_USERINFO", "_QUERY_SECRET", "_QUOTING", "_WORD"):
        monkeypatch.setattr(text_redaction, name, _Refused())
    script = "for f in *.txt; do\n  echo 'déjà vu' \"$f\" > \"${f%.txt}.md\" # Größe\ndone"
    assert mask_argv(["sh", "-c", script]) == ["sh", "-c", script]


def test_only_the_words_that_hold_a_secret_word_are_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quotes and `=` elsewhere do not make a word worth a look; the secret word spelled with
    quotes (`--to''ken`) does."""
    from acp_bridge.capture import text_redaction

    seen: list[str] = []
    secret_name = text_redaction._secret_name
    def looked_at(name: str) -> bool:
        seen.append(name)
        return secret_name(name)

    monkeypatch.setattr(text_redaction, "_secret_name", looked_at)
    script = "echo 'a' \"b\" x=1 --model=m 'c d' --to''ken T ok 'é' --keep=1 e"
    assert text_redaction._mask_words(script) == "echo 'a' \"b\" x=1 --model=m 'c d' --to''ken <redacted> ok 'é' --keep=1 e"
    assert seen == ["--token", "--token"]


def test_an_argument_that_does_not_end_in_a_separator_is_not_searched_as_dangling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`_DANGLING` (a name whose value is the next argument) can only match a text that ends
    in `:` or `=`, a quote or an auth scheme after the last of them; searched, it costs
    about 0.2 s a MiB of a script that merely mentions a token."""
    from acp_bridge.capture import text_redaction

    monkeypatch.setattr(text_redaction, "_DANGLING", _Refused())
    assert mask_argv(["sh", "-c", "curl -H \"$token\" x=1 https://h/a:b"]) == [
        "sh", "-c", "curl -H \"$token\" x=1 https://h/a:b"]


_VOCABULARY = ["x", "--token", "--token=t", "--model", "m", "'a b'", '"c d"', "API_KEY=k", "--author=bob", "-H",
               "Authorization: Bearer z", "https://u:p@h/?sig=s", "Cookie: c=1", "key", "o[key]", "--to''ken",
               "ſecret=s", "credent\u0130al=c", "--to\u212aen", "\u0131", "--ApiKey", "\\ ", "'open", "=", "passwd:", "p", "x&sig=s", "token='", "Bearer"]


@given(st.lists(st.sampled_from(_VOCABULARY), max_size=12), st.sampled_from([" ", "  ", "\n", "\t"]))
@example(_VOCABULARY, " ")  # each word once, followed by another
@example(list(reversed(_VOCABULARY)), " ")
@example(["passwd:", "p"], " ")  # one name alone, that each search must find
@example(["x&sig=s"], " ")
@example(["Cookie: c=1"], " ")
@example(["ſecret=s"], " ")
@example(["--to''ken", "x"], " ")
def test_the_shortcuts_mask_as_the_patterns_do(words: list[str], space: str) -> None:
    """With the searches that skip the patterns, the same text as with every pattern run and
    every word looked at."""
    from acp_bridge.capture import text_redaction as t

    text = space.join(words)
    every = t._URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    every = t._QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, every)
    every = t._COOKIE.sub(lambda m: m.group(1) + REDACTED, every)
    every = t._SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, every)
    assert mask_text_secrets(text) == every
    assert t._mask_words(every) == t._mask_words(every, every_word=True)
    assert t._dangling(text) is (t._DANGLING.search(text) is not None)
