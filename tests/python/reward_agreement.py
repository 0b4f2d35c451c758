"""Scores the fixture set through the installed keyslice_reward wheel the way verl and
ms-swift call it, and checks malformed ground truth is refused.

Usage: python3 reward_agreement.py PREDICTIONS.jsonl TRUTH.jsonl
Prints one JSON line per case: {"case_id", "verl": compute_score's dict, "swift": the
plugin's reward}. verl and ms-swift are not installed: the verl function is loaded from its
file as verl's custom-reward loader does, and the plugin class is called directly.
"""

import importlib.util
import json
import sys

import keyslice_reward
from keyslice_reward import swift_plugin


def load_verl_function():
    path = keyslice_reward.__path__[0] + "/verl_reward.py"
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


def expect_value_error(call, words):
    try:
        call()
    except ValueError as error:
        assert words in str(error), "%r does not say %r" % (str(error), words)
        return
    raise AssertionError("no ValueError for a case that must be refused (%s)" % words)


def main():
    predictions = [json.loads(line) for line in open(sys.argv[1])]
    truth = {record["case_id"]: record for record in map(json.loads, open(sys.argv[2]))}
    compute_score = load_verl_function()
    plugin = swift_plugin.KeysliceReward()
    for prediction in predictions:
        record = truth[prediction["case_id"]]
        extra = {"index": 0}
        if "local_description" in prediction:
            extra["local_description"] = prediction["local_description"]
        verl = compute_score("keyslice", prediction["report"], json.dumps(record), extra)
        swift = plugin(
            [prediction["report"]],
            findings=[record],
            local_description=[prediction.get("local_description")],
        )
        print(json.dumps({"case_id": prediction["case_id"], "verl": verl, "swift": swift[0]}))

    good = {"version": 1, "organs": {"liver": {"tumor": "no"}}}
    expect_value_error(lambda: compute_score("keyslice", "x", "{not json", None), "not JSON")
    expect_value_error(
        lambda: compute_score("keyslice", "x", json.dumps({"organs": []}), None), "findings"
    )
    # ms-swift fills the keys a row lacks with nulls: they are absent keys, not errors.
    filled = {"case_id": "a", "findings": {"version": 1, "organs": {"liver": {"tumor": "yes",
              "lesions": None}}, "box": None, "key_slice": None}, "report": None,
              "lesion_extents": None, "slice_size": None}
    assert plugin(["Liver: 2 cm mass. Pancreas: no tumor. Left kidney: no tumor. Right kidney: "
                   "no tumor. Key slice: 4."], truth=[filled])[0] > 0.5
    expect_value_error(
        lambda: compute_score(
            "keyslice", "x", json.dumps({"version": 1, "organs": {"liver": {"tumor": "maybe"}}}), None
        ),
        "maybe",
    )
    expect_value_error(
        lambda: compute_score("keyslice", "x", json.dumps({"case_id": "a"}), None),
        "neither",
    )
    expect_value_error(lambda: compute_score("keyslice", "x", 17, None), "int")
    expect_value_error(
        lambda: compute_score("keyslice", "x", good, {"reward_weights": {"format": -1}}),
        "weights",
    )
    expect_value_error(lambda: plugin(["a", "b"], findings=[good]), "2 completions")
    # A garbled answer is a low reward, not an error.
    garbled = compute_score("keyslice", "\x00\ufffd garbage", good, None)
    assert garbled["format"] == 0.0 and garbled["score"] <= 0.1, garbled


if __name__ == "__main__":
    main()
