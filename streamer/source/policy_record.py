"""How an agent's policies are recorded in the topic (PROGRESS records): a JSON list of their texts.

Policy texts contain commas and quotes, so they are kept as a list, not joined; a restart compares
the recorded list with its own to detect a policy change (``streamer.source.replace``).
"""

from __future__ import annotations

import json

from streamer.source.policy import PolicySet


def policy_record(policies: PolicySet) -> str:
    return json.dumps([p.text for p in policies.policies])


def parse_policy_record(text: str) -> PolicySet:
    texts = json.loads(text)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"not a recorded policy list: {text!r}")
    return PolicySet.parse(texts)
