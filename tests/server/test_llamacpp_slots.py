"""llama-server's /props and /slots over loopback: slots are the scheduler's sequences, a slot's prompt cache is
the named context `slot-{id}`, saved to and restored from snapshot files named by `filename`."""

from __future__ import annotations

import pytest

from tests.server.conftest import STORIES_ID

pytestmark = pytest.mark.native_only

PROMPT = "Once upon a time, in a slot of its own, a little cache waited to be saved and restored."


def test_props(server, client):
    p = client.get("/props").json()
    assert p["total_slots"] == 4 and p["model_alias"] == STORIES_ID
    assert p["model_path"].endswith("stories260K-f32.gguf")
    d = p["default_generation_settings"]
    assert d["n_ctx"] == 512 and d["is_processing"] is False
    assert d["params"]["temperature"] == pytest.approx(0.8) and d["params"]["top_k"] == 40
    assert d["params"]["n_predict"] == -1 and d["params"]["seed"] == 4294967295  # llama.cpp's "random"
    assert p["bos_token"] == server.service.tokenizer.token_text(server.service.tokenizer.bos_id)
    r = client.post("/props", json={"default_generation_settings": {"temperature": 0.1}})
    assert r.status_code == 501  # read-only: llama-server's answer without --props
    err = r.json()["error"]
    assert err["type"] == "not_supported_error" and "POST /props" in err["message"]
    assert client.get("/props").json()["default_generation_settings"]["params"]["temperature"] == pytest.approx(0.8)


def test_slot_cache_save_restore_erase(server, client):
    slot = 2
    client.post(f"/slots/{slot}?action=erase")
    r = client.post("/completion", json={"prompt": PROMPT, "n_predict": 4, "id_slot": slot, "temperature": 0,
                                         "return_tokens": True})  # fmt: skip
    assert r.status_code == 200, r.text
    first = r.json()
    assert first["id_slot"] == slot
    slots = client.get("/slots").json()
    assert [s["id"] for s in slots] == [0, 1, 2, 3]
    n_cached = first["tokens_evaluated"] + first["tokens_predicted"]
    assert slots[slot]["n_cached"] == n_cached and slots[slot]["params"]["n_predict"] == 4
    assert slots[slot]["is_processing"] is False

    saved = client.post(f"/slots/{slot}?action=save", json={"filename": "slot_save_file.bin"}).json()
    assert saved["id_slot"] == slot and saved["filename"] == "slot_save_file.bin"
    assert saved["n_saved"] == n_cached and saved["n_written"] > 0 and saved["timings"]["save_ms"] >= 0
    listed = client.get("/llamay/snapshots").json()["data"]
    assert any(s["context"] == "slot_save_file.bin" and s["n_tokens"] == n_cached for s in listed)

    erased = client.post(f"/slots/{slot}?action=erase").json()
    assert erased == {"id_slot": slot, "n_erased": n_cached}
    assert client.get("/slots").json()[slot]["n_cached"] == 0

    restored = client.post("/slots/1?action=restore", json={"filename": "slot_save_file.bin"}).json()
    assert restored["n_restored"] == n_cached and restored["n_read"] == saved["n_written"]
    assert client.get("/slots").json()[1]["n_cached"] == n_cached
    # the restored KV is the saved one: continuing it gives what the prompt and reply, computed afresh, give
    ids = client.post("/tokenize", json={"content": PROMPT, "add_special": True}).json()["tokens"]
    fresh = client.post("/completion", json={"prompt": ids + first["tokens"], "n_predict": 6, "temperature": 0,
                                             "cache_prompt": False}).json()  # fmt: skip
    cont = client.post("/llamay/contexts/slot-1/completions", json={"max_tokens": 6, "temperature": 0,
                                                                     "update": False}).json()  # fmt: skip
    assert cont["choices"][0]["text"] == fresh["content"] and fresh["content"]
    again = client.post("/completion", json={"prompt": PROMPT, "n_predict": 4, "id_slot": 1, "temperature": 0})
    assert again.json()["content"] == first["content"] and again.json()["timings"]["cache_n"] > 0
    for i in (1, 2):
        client.post(f"/slots/{i}?action=erase")


@pytest.mark.parametrize(
    ("url", "body", "status", "param"),
    [
        ("/slots/0?action=save", {"filename": "../escape.bin"}, 400, "filename"),
        ("/slots/0?action=save", {"filename": "a/b"}, 400, "filename"),
        ("/slots/0?action=save", {"filename": "x" * 200}, 400, "filename"),
        ("/slots/0?action=save", {"filename": "empty.bin"}, 400, "id_slot"),  # nothing cached in slot 0
        ("/slots/0?action=restore", {"filename": "never-saved.bin"}, 404, "filename"),
        ("/slots/0?action=restore", None, 400, "filename"),
        ("/slots/0?action=save", {}, 400, "filename"),
        ("/slots/9?action=erase", None, 400, "id_slot"),
        ("/slots/0?action=explode", None, 400, "action"),
        ("/slots/0", None, 400, "action"),
    ],
)
def test_slot_actions_refused_clearly(client, url, body, status, param):
    client.post("/slots/0?action=erase")
    r = client.post(url, json=body) if body is not None else client.post(url)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert param in (err["param"] or "") or param in err["message"], err


def test_slot_erase_takes_an_empty_body(client):
    # llama-server's erase reads no body; clients that always send JSON send `{}`
    r = client.post("/slots/0?action=erase", json={})
    assert r.status_code == 200, r.text
    assert r.json()["id_slot"] == 0


def test_slots_fail_on_no_slot(client):
    assert client.get("/slots?fail_on_no_slot=1").status_code == 200  # idle: every slot is free
