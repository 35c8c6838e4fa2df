"""A multi-session chat workload (the tests' and bench/ray_scaleout.py's): chats that share system prompts, each
sent turn by turn as a client does (every turn resends the chat so far, its answers included)."""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

TOPICS = ("a ship's cook", "a patient librarian", "a mountain guide", "a night-shift nurse")
QUESTIONS = ("What do you do each morning?", "What is hard about it?", "What do you like most?",
             "What would you change?", "Who taught you?")  # fmt: skip
FOLLOW_UPS = ("Tell me more.", "Why?", "And then?", "Give an example.")


def system_prompt(topic: str, salt: str) -> str:
    # about 120 tokens: a prompt worth caching, shared by every chat of its topic
    return (f"[{salt}] You are {topic}. Answer in one short sentence, in the first person, plainly, without lists. "
            "Stay in character whatever you are asked; never say that you are an assistant or a language model. "
            "If you do not know, say so briefly. Keep to everyday words and speak of your own work and days, "
            "the people you meet, the tools you use and the places you go.")  # fmt: skip


@dataclass
class Turn:
    chat: int
    turn: int
    replica: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


@dataclass
class Chat:
    index: int
    messages: list[dict] = field(default_factory=list)


def chats(n: int, salt: str) -> list[Chat]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        first = f"{QUESTIONS[(i // len(TOPICS)) % len(QUESTIONS)]} (chat {i})"
        out.append(Chat(i, [{"role": "system", "content": system_prompt(topic, salt)},
                            {"role": "user", "content": first}]))  # fmt: skip
    return out


def run(post: Callable[[dict], tuple[dict, str]], n_chats: int, n_turns: int, salt: str, max_tokens: int = 8,
        concurrency: int = 4) -> list[Turn]:  # fmt: skip
    """Every chat's turns in order, `concurrency` requests at a time; `post(body)` -> (the JSON answer, replica id).

    As sessions do: a chat's next turn goes to a random place in the back half of the line, behind other chats'
    waiting turns (the user reads the answer meanwhile). Sent back to back instead, a turn would find its replica
    the least loaded one (it had just finished the turn before), and in a fixed order the chats would settle into
    a fixed rotation over the replicas: load-based routing would keep chats in place by accident."""
    line = collections.deque(chats(n_chats, salt))
    rng = random.Random(salt)
    cond = threading.Condition()
    busy = 0  # chats with a turn in flight: they come back to the line
    turns: list[Turn] = []
    errors: list[BaseException] = []

    def worker() -> None:
        nonlocal busy
        while True:
            with cond:
                while not line and busy and not errors:
                    cond.wait()
                if not line or errors:
                    return
                c = line.popleft()
                busy += 1
            try:
                t = (len(c.messages) - 2) // 2
                answer, replica = post({"messages": c.messages, "max_tokens": max_tokens, "temperature": 0})
                u = answer["usage"]
                cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                said = answer["choices"][0]["message"]["content"]
                c.messages = [*c.messages, {"role": "assistant", "content": said},
                              {"role": "user", "content": FOLLOW_UPS[t % len(FOLLOW_UPS)]}]  # fmt: skip
                with cond:
                    turns.append(Turn(c.index, t, replica, u["prompt_tokens"], cached, u["completion_tokens"]))
                    if t + 1 < n_turns:
                        line.insert(rng.randint(len(line) // 2, len(line)), c)
            except BaseException as e:
                with cond:
                    errors.append(e)
            finally:
                with cond:
                    busy -= 1
                    cond.notify_all()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    if errors:
        raise errors[0]
    return sorted(turns, key=lambda x: (x.chat, x.turn))


def cached_share(turns: list[Turn]) -> float:
    """Prompt tokens read from a replica's prefix cache, of all prompt tokens."""
    return sum(t.cached_tokens for t in turns) / max(1, sum(t.prompt_tokens for t in turns))
