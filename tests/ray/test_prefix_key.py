"""The routing key: one per chat across its turns, distinct between chats, bounded reading."""

from llamay.native.ray.prefix_key import PREFIX_CHARS, prefix_key, prefix_text

SYSTEM = {"role": "system", "content": "You are a terse assistant."}


def turns(first: str, n: int) -> list[list[dict]]:
    """The message lists a client sends for turns 1..n of one chat."""
    out, msgs = [], [SYSTEM, {"role": "user", "content": first}]
    for i in range(n):
        out.append(list(msgs))
        msgs += [{"role": "assistant", "content": f"answer {i}"}, {"role": "user", "content": f"follow-up {i}"}]
    return out


def test_every_turn_of_a_chat_has_the_chats_key():
    keys = {prefix_key("/v1/chat/completions", {"model": "m", "messages": m}) for m in turns("hello", 4)}
    assert len(keys) == 1 and None not in keys
    assert prefix_key("/api/chat", {"model": "m", "messages": turns("hello", 1)[0]}) in keys  # Ollama's route too


def test_chats_with_other_openings_or_models_get_other_keys():
    a = prefix_key("/v1/chat/completions", {"model": "m", "messages": turns("hello", 1)[0]})
    b = prefix_key("/v1/chat/completions", {"model": "m", "messages": turns("goodbye", 1)[0]})
    c = prefix_key("/v1/chat/completions", {"model": "other", "messages": turns("hello", 1)[0]})
    assert len({a, b, c}) == 3


def test_prompts_are_keyed_by_their_start_only():
    long = "x" * PREFIX_CHARS
    assert prefix_key("/v1/completions", {"prompt": long + "tail one"}) == prefix_key(
        "/v1/completions", {"prompt": long + "tail two"}
    )
    assert prefix_key("/completion", {"prompt": "a"}) != prefix_key("/completion", {"prompt": "b"})
    # Ollama's generate: its system prompt is part of what the model reads first
    assert prefix_key("/api/generate", {"prompt": "a", "system": "s1"}) != prefix_key(
        "/api/generate", {"prompt": "a", "system": "s2"}
    )


def test_reading_is_bounded_whatever_the_body_holds():
    huge = {"messages": [{"role": "system", "content": "s" * 10_000_000}] * 1000, "model": "m"}
    text = prefix_text("/v1/chat/completions", huge)
    assert text is not None and len(text) <= PREFIX_CHARS + 2


def test_nothing_to_route_by_is_no_key():
    assert prefix_key("/v1/chat/completions", {"messages": ["not a message"]}) is None
    assert prefix_key("/v1/completions", {"prompt": 12}) is None
    assert prefix_key("/tokenize", [1, 2]) is None
